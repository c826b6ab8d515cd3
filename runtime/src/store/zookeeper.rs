//! The ZooKeeper engine: the lock recipe of ephemeral sequential znodes.
//!
//! A lock `K` is a container znode `/leasehold/<K encoded>`; each acquisition creates an
//! ephemeral sequential child `n-<seq>` under it, and the lowest sequence holds the lock.
//! Every other contender watches only its predecessor (no herd), so the order is first come,
//! first served across processes by construction. Inside one process, waiters of a key queue
//! locally as on every engine, and only the one at the front has a znode.
//!
//! **The session is the lease.** Ephemeral znodes vanish when the ZooKeeper session expires,
//! so a crashed holder frees its locks after the session timeout. While connected, a renewal
//! proves the session and the znode alive; while disconnected it cannot, and the lease is
//! judged on this process's monotonic clock like every lease: lost once its validity passed
//! without a successful renewal. A lease is therefore never longer than the session timeout
//! (see [`Store::lease_bound`]): the server cannot expire the session before the client
//! stops trusting it. An expired session bumps [`Session`], which every lease granted over it
//! reads as lost at once, and the next call opens a new session.
//!
//! **The session timeout is the server's.** A server grants the timeout asked for only within
//! its `minSessionTimeout ..= maxSessionTimeout` (by default 2 to 20 ticks), so the timeout
//! every bound is taken from is the one each session negotiated, read again on every new
//! session: the lease bound, the disconnected give-up time, and the check that refuses an
//! acquire asking for a longer lease than the session it would go over (see
//! [`ZooKeeperStore::fits_session`]).
//!
//! **Fences.** A znode's creation zxid (`czxid`) is global, strictly increasing across every
//! write of the ensemble, and survives restarts and leader changes; sequence numbers do not
//! (they restart when a container is deleted and created again). The fence of a holder is
//! `czxid × 32 + n`, where `n ≤ 17` numbers the holders of this process that the lease is
//! handed to in a row: the next holder's znode is created after ours, so its `czxid` is larger
//! and its fences are above all of ours.
//!
//! **Read locks.** A reader's znode is `r-<tag>-<sequence>` in the same queue (sequence numbers
//! are the container's, shared by both kinds). A reader holds the lock when no writer's znode
//! (`n-`) is ahead of its own; a writer only when its znode is the first of all, readers
//! included. So readers share, a writer waits for the readers ahead of it, and a waiting
//! writer holds back every reader that comes after it (no writer starvation). A reader that
//! cannot get in deletes its znode at once and waits, without a znode, for the deletion of
//! the last writer's znode ahead: a reader never stands in the queue while it waits, so a
//! reader that stops waiting leaves nothing behind. Each reader's znode is its own lease: it
//! goes with its release, with the locker giving a lapsed lease back, or with the session.
//! Each writer's znode is created in one transaction with a record of its fences in the
//! container's data; a reader's fence is the top of the fences of the last writer before it,
//! taken from that record (see [`reader_fence`] for when it is not): at or above every fence a
//! writer of the key was given before the reader, below every fence of the writers after.
//!
//! **Cleanup.** Lock znodes are containers (the server deletes them once their last child is
//! gone); a contender that stops waiting deletes its znode (see [`Store::withdraw`]); a
//! crashed client's znodes vanish with its session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::{
    join_all, AcquireRequest, Admin, Attempt, LockState, Renewal, Renewed, Settings, Store,
    StoreFuture, WakeSubscription,
};
use crate::error::LockError;
use crate::store::keys::{unescape, LockKeys};
use crate::store::token::OwnerToken;
use crate::store::Session;

/// The parent of every lock znode.
const ROOT: &str = "/leasehold";

/// Fences of one znode: `czxid × FENCE_SLOTS + n`.
const FENCE_SLOTS: u64 = 32;

/// The name prefix of contenders' znodes: `n-<tag>-<sequence>`, the tag being the first 16
/// hex digits of the owner token of the attempt that created it, so that an attempt cancelled
/// before its answer arrived can still find and delete its znode.
const CHILD: &str = "n-";

/// The name prefix of readers' znodes: `r-<tag>-<sequence>`, in the same queue.
const READER: &str = "r-";

/// The tag of an attempt's znode name.
fn tag(token: &OwnerToken) -> &str {
    std::str::from_utf8(&token.as_bytes()[..16]).unwrap_or("")
}

/// One znode of this process: a contender's or a holder's.
#[derive(Clone)]
struct Node {
    path: String,
    czxid: i64,
    /// The session it was created in, and its client (a cheap handle).
    session: u64,
    client: zk::Client,
}

#[derive(Default)]
struct Nodes {
    /// The znode of the contender at the front of a key's local queue, by lock key.
    waiting: HashMap<String, Node>,
    /// The znodes of held leases, by owner token.
    held: HashMap<OwnerToken, Node>,
}

/// The client of the current session, and the count of sessions that ended.
struct Connection {
    client: zk::Client,
    session: u64,
}

pub(crate) struct ZooKeeperStore {
    hosts: String,
    /// The session timeout asked for; the server may grant another (see `granted`).
    session_timeout: Duration,
    /// The session timeout the server granted the latest session, in milliseconds (the unit
    /// ZooKeeper negotiates in): the lease bound. The asked one until a first session opened.
    granted: AtomicU64,
    settings: Settings,
    current: Arc<tokio::sync::Mutex<Option<Connection>>>,
    /// Bumped each time a session ends (expired, closed): its ephemeral znodes are gone.
    epoch: Arc<watch::Sender<u64>>,
    nodes: Arc<Mutex<Nodes>>,
}

impl ZooKeeperStore {
    /// Connects a first session; fails with `Unavailable` when no server answers within the
    /// connect timeout.
    pub(crate) async fn connect(
        hosts: &str,
        session_timeout: Duration,
        settings: &Settings,
    ) -> Result<Self, LockError> {
        let store = ZooKeeperStore {
            hosts: hosts.to_owned(),
            session_timeout,
            granted: AtomicU64::new(millis(session_timeout)),
            settings: settings.clone(),
            current: Arc::default(),
            epoch: Arc::new(watch::channel(0).0),
            nodes: Arc::default(),
        };
        store.client().await?;
        Ok(store)
    }

    fn unavailable(&self, what: &str, e: impl std::fmt::Display) -> LockError {
        LockError::unavailable(format!("zookeeper at {} {what}: {e}", self.hosts), None)
    }

    fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!(
                "zookeeper at {} did not answer within {limit:?}",
                self.hosts
            ),
            None,
        )
    }

    /// Runs one call with the operation timeout.
    async fn bounded<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, zk::Error>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.settings.op_timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.unavailable(what, e)),
            Err(_) => Err(self.late(self.settings.op_timeout)),
        }
    }

    /// The client of the live session, opening a new session when there is none (first use,
    /// or the last one ended).
    async fn client(&self) -> Result<(zk::Client, u64), LockError> {
        let limit = self.settings.connect_timeout;
        let mut current = match tokio::time::timeout(limit, self.current.lock()).await {
            Ok(current) => current,
            Err(_) => return Err(self.late(limit)),
        };
        if let Some(c) = current.as_ref() {
            if !c.client.state().is_terminated() {
                return Ok((c.client.clone(), c.session));
            }
        }
        let connect = zk::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(limit)
            .connect(&self.hosts);
        let client = match tokio::time::timeout(limit, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(self.unavailable("could not be reached", e)),
            Err(_) => return Err(self.late(limit)),
        };
        let session = *self.epoch.borrow();
        let granted = client.session_timeout();
        let before = self.granted.swap(millis(granted), Ordering::AcqRel);
        // Said once per change, not per session: a server's limits rarely change.
        if millis(granted) != before && granted < self.session_timeout {
            tracing::warn!(
                asked = ?self.session_timeout,
                granted = ?granted,
                "the zookeeper server granted a session timeout of {granted:?}, below the \
                 {:?} asked (its maxSessionTimeout): leases are bounded by {granted:?}",
                self.session_timeout
            );
        } else if millis(granted) != before && granted > self.session_timeout {
            tracing::info!(
                asked = ?self.session_timeout,
                granted = ?granted,
                "the zookeeper server granted a session timeout of {granted:?}, above the \
                 {:?} asked (its minSessionTimeout): a crashed process's locks are freed only \
                 after {granted:?}",
                self.session_timeout
            );
        }
        tokio::spawn(watch_session(
            client.state_watcher(),
            Ended {
                epoch: Arc::downgrade(&self.epoch),
                nodes: Arc::downgrade(&self.nodes),
                current: Arc::downgrade(&self.current),
                session,
            },
            granted,
        ));
        *current = Some(Connection {
            client: client.clone(),
            session,
        });
        Ok((client, session))
    }

    /// Creates the lock's container (and the root) if missing.
    async fn ensure_parent(&self, client: &zk::Client, parent: &str) -> Result<(), LockError> {
        let acls = zk::Acls::anyone_all();
        for (path, mode) in [
            (ROOT, zk::CreateMode::Persistent),
            (parent, zk::CreateMode::Container),
        ] {
            match self
                .bounded(
                    "refused a create",
                    client.create(path, &[], &mode.with_acls(acls)),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.to_string().contains("node already exists") => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Creates this contender's znode under `parent`, named `<kind><tag>-<sequence>`. A
    /// writer's (`fences` given) is created in one transaction with the fence record in the
    /// container's data (see [`reader_fence`]).
    async fn create_child(
        &self,
        client: &zk::Client,
        session: u64,
        parent: &str,
        token: &OwnerToken,
        kind: &str,
        fences: Option<u64>,
    ) -> Result<Node, LockError> {
        let path = format!("{parent}/{kind}{}-", tag(token));
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let limit = self.settings.op_timeout;
        // The container may be deleted between its creation and ours (its last child went):
        // create it again, a bounded number of times.
        for _ in 0..3 {
            let created = match fences {
                None => match tokio::time::timeout(
                    limit,
                    client.create(&path, token.as_bytes(), &options),
                )
                .await
                {
                    Ok(Ok((stat, seq))) => Ok((format!("{path}{seq}"), stat.czxid)),
                    Ok(Err(e)) => Err(e),
                    Err(_) => return Err(self.late(limit)),
                },
                Some(fences) => {
                    let record = format!("+{fences}");
                    let mut multi = client.new_multi_writer();
                    let commit = multi
                        .add_create(&path, token.as_bytes(), &options)
                        .and_then(|()| multi.add_set_data(parent, record.as_bytes(), None))
                        .map(|()| multi.commit());
                    let commit = match commit {
                        Ok(commit) => commit,
                        Err(e) => return Err(self.unavailable("refused a create", e)),
                    };
                    match tokio::time::timeout(limit, commit).await {
                        Ok(Ok(results)) => created_by(results).ok_or_else(|| {
                            zk::Error::UnexpectedError("a create without its path".into())
                        }),
                        Ok(Err(e)) => Err(zk::Error::from(e)),
                        Err(_) => return Err(self.late(limit)),
                    }
                }
            };
            match created {
                Ok((path, czxid)) => {
                    return Ok(Node {
                        path,
                        czxid,
                        session,
                        client: client.clone(),
                    })
                }
                Err(zk::Error::NoNode) => self.ensure_parent(client, parent).await?,
                Err(e) => return Err(self.unavailable("refused a create", e)),
            }
        }
        Err(self.unavailable("kept deleting the lock's znode", "giving up"))
    }

    /// The children of `parent` in queue order (by sequence number).
    async fn queue(&self, client: &zk::Client, parent: &str) -> Result<Vec<String>, LockError> {
        let children = match tokio::time::timeout(
            self.settings.op_timeout,
            client.list_children(parent),
        )
        .await
        {
            Ok(Ok(children)) => children,
            Ok(Err(zk::Error::NoNode)) => Vec::new(),
            Ok(Err(e)) => return Err(self.unavailable("refused a read", e)),
            Err(_) => return Err(self.late(self.settings.op_timeout)),
        };
        Ok(in_order(children))
    }

    /// Refuses an acquire whose lease is longer than the session it would go over. The lease
    /// was bounded by [`Store::lease_bound`] when the request was made, but a session that
    /// opened since may have been granted a shorter timeout (another server, a changed
    /// `maxSessionTimeout`): the server could then expire the session, and give the lock to
    /// another, while the client still counts on the lease. Nothing is created; the next
    /// request made is bounded by this session's timeout.
    fn fits_session(&self, client: &zk::Client, lease: Duration) -> Result<(), LockError> {
        let granted = client.session_timeout();
        if lease <= granted {
            return Ok(());
        }
        Err(LockError::unavailable(
            format!(
                "zookeeper at {} granted this session a timeout of {granted:?}, shorter than \
                 the lease of {lease:?} this request was made for; try again (a new request is \
                 bounded by the session)",
                self.hosts
            ),
            None,
        ))
    }

    fn forget_waiting(&self, lock: &str) -> Option<Node> {
        self.nodes.lock().unwrap().waiting.remove(lock)
    }

    /// Deletes a znode of ours in the background (a contender that gave up).
    fn delete_later(&self, node: Node) {
        clean_up(node.client, Cleanup::Path(node.path));
    }

    async fn acquire_once(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        debug_assert!(req.fences < FENCE_SLOTS, "fences of one znode overflow");
        let (client, session) = self.client().await?;
        self.fits_session(&client, req.lease)?;
        let parent = parent_of(req.keys);
        let existing = self
            .nodes
            .lock()
            .unwrap()
            .waiting
            .get(req.keys.lock())
            .cloned();
        let mine = match existing {
            Some(node) if req.queued && node.session == session => node,
            stale => {
                if let Some(node) = stale {
                    self.forget_waiting(req.keys.lock());
                    self.delete_later(node);
                }
                // The container is made only when the create finds it missing: in steady state
                // a cycle is one create, one listing and one delete.
                let node = self
                    .create_child(
                        &client,
                        session,
                        &parent,
                        req.token,
                        CHILD,
                        Some(req.fences),
                    )
                    .await?;
                // Recorded at once: if this attempt is cancelled from here on, the turn's
                // withdrawal finds the znode and deletes it.
                self.nodes
                    .lock()
                    .unwrap()
                    .waiting
                    .insert(req.keys.lock().to_owned(), node.clone());
                node
            }
        };
        let queue = self.queue(&client, &parent).await?;
        let name = child_name(&mine.path);
        match queue.iter().position(|c| c == name) {
            Some(0) => {
                let top = (mine.czxid as u64) * FENCE_SLOTS + req.fences;
                let mut nodes = self.nodes.lock().unwrap();
                nodes.waiting.remove(req.keys.lock());
                nodes.held.insert(req.token.clone(), mine);
                Ok(Attempt::Granted { top })
            }
            Some(_) if !req.interest.is_zero() => Ok(Attempt::Held { remaining: None }),
            Some(_) => {
                // Not waiting: leave the queue at once.
                self.forget_waiting(req.keys.lock());
                self.bounded("refused a delete", client.delete(&mine.path, None))
                    .await?;
                Ok(Attempt::Held { remaining: None })
            }
            // Our znode is gone (the session ended, or an operator deleted it): queue anew.
            None => {
                self.forget_waiting(req.keys.lock());
                Err(LockError::unavailable(
                    format!(
                        "zookeeper at {}: this contender's znode vanished; try again",
                        self.hosts
                    ),
                    None,
                ))
            }
        }
    }

    /// Deletes the znode of a held lease (a writer's, or a reader's: `kind`).
    async fn release_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        kind: &str,
    ) -> Result<bool, LockError> {
        let node = self.nodes.lock().unwrap().held.remove(token);
        let Some(node) = node else {
            // Not held by us: a lease lost meanwhile, or an attempt abandoned before its
            // answer came. Delete what that attempt may have created (its tag names it), until
            // ZooKeeper answers: a znode left behind would stand in the queue for good.
            let (client, _) = self.client().await?;
            clean_up(
                client,
                Cleanup::Tagged {
                    parent: parent_of(keys),
                    prefix: format!("{kind}{}-", tag(token)),
                },
            );
            return Ok(false);
        };
        let (client, session) = self.client().await?;
        if node.session != session {
            return Ok(false); // its session ended: the znode is gone
        }
        match tokio::time::timeout(self.settings.op_timeout, client.delete(&node.path, None)).await
        {
            Ok(Ok(())) => Ok(true),
            Ok(Err(zk::Error::NoNode)) => Ok(false),
            // Unknown outcome (a failover, a partition): the caller hears it, and the znode is
            // deleted in the background as soon as ZooKeeper answers. Unlike a Redis key it
            // has no TTL: left behind, it would hold the lock as long as the session lives.
            Ok(Err(e)) => {
                clean_up(node.client, Cleanup::Path(node.path));
                Err(self.unavailable("refused a delete", e))
            }
            Err(_) => {
                clean_up(node.client, Cleanup::Path(node.path));
                Err(self.late(self.settings.op_timeout))
            }
        }
    }

    /// One reader's attempt: its znode goes in the queue, and stays if no writer's znode is
    /// ahead of it; otherwise it leaves again at once (readers do not wait in the queue).
    async fn acquire_shared_once(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let (client, session) = self.client().await?;
        self.fits_session(&client, req.lease)?;
        let parent = parent_of(req.keys);
        let mine = self
            .create_child(&client, session, &parent, req.token, READER, None)
            .await?;
        // Recorded at once: if this attempt is cancelled from here on, the release of its
        // token finds the znode and deletes it.
        self.nodes
            .lock()
            .unwrap()
            .held
            .insert(req.token.clone(), mine.clone());
        // Both sent now, in this order: the session's requests are answered in order, so the
        // record read is at least as recent as the queue listed.
        let listing = client.list_children(&parent);
        let record = client.get_data(&parent);
        let limit = self.settings.op_timeout;
        let (listing, record) = tokio::join!(
            tokio::time::timeout(limit, listing),
            tokio::time::timeout(limit, record)
        );
        // On an error the znode stays recorded: the locker's clean-up of a failed attempt
        // releases its token, which deletes it.
        let (queue, record) = match (listing, record) {
            (Ok(Ok(children)), Ok(record)) => (in_order(children), record.ok()),
            (Ok(Err(e)), _) => return Err(self.unavailable("refused a read", e)),
            _ => return Err(self.late(limit)),
        };
        let name = child_name(&mine.path);
        let Some(at) = queue.iter().position(|c| c == name) else {
            self.nodes.lock().unwrap().held.remove(req.token);
            return Err(LockError::unavailable(
                format!(
                    "zookeeper at {}: this reader's znode vanished; try again",
                    self.hosts
                ),
                None,
            ));
        };
        if queue[..at].iter().any(|c| c.starts_with(CHILD)) {
            // A writer holds the lock or waits for it: leave the queue, and wait without a
            // znode for the writers ahead to go.
            self.nodes.lock().unwrap().held.remove(req.token);
            match tokio::time::timeout(limit, client.delete(&mine.path, None)).await {
                Ok(Ok(()) | Err(zk::Error::NoNode)) => {}
                _ => self.delete_later(mine),
            }
            return Ok(Attempt::Held { remaining: None });
        }
        Ok(Attempt::Granted {
            top: reader_fence(record, mine.czxid),
        })
    }

    async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let (client, session) = self.client().await?;
        let nodes: Vec<Option<Node>> = {
            let nodes = self.nodes.lock().unwrap();
            batch
                .iter()
                .map(|r| nodes.held.get(r.token).cloned())
                .collect()
        };
        let session_id = client.session_id().0;
        let limit = self.settings.op_timeout;
        let checks = nodes.iter().map(|node| {
            let client = &client;
            async move {
                let Some(node) = node else {
                    return Renewed::No;
                };
                if node.session != session {
                    return Renewed::No;
                }
                match tokio::time::timeout(limit, client.check_stat(&node.path)).await {
                    Ok(Ok(Some(stat))) if stat.ephemeral_owner == session_id => Renewed::Yes,
                    Ok(Ok(_)) => Renewed::No,
                    Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => Renewed::No,
                    Ok(Err(_)) | Err(_) => Renewed::Unknown,
                }
            }
        });
        Ok(join_all(checks).await)
    }

    async fn subscribe_once(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        let (client, _) = self.client().await?;
        let parent = parent_of(keys);
        let mine = self
            .nodes
            .lock()
            .unwrap()
            .waiting
            .get(keys.lock())
            .map(|n| child_name(&n.path).to_owned());
        let (tx, rx) = watch::channel(0u64);
        // The first watch is set before this returns: a release after it is never missed.
        let first = self
            .watch_predecessor(&client, &parent, mine.as_deref())
            .await?;
        let limit = self.settings.op_timeout;
        tokio::spawn(async move {
            let mut next = first;
            let mut mine = mine;
            loop {
                // No predecessor (we are first, or gone): wake the waiter to look at once.
                if let Some(watcher) = next {
                    tokio::select! {
                        _ = watcher.changed() => {}
                        _ = tx.closed() => return,
                    }
                }
                tx.send_modify(|n| *n += 1);
                if tx.is_closed() {
                    return;
                }
                next = match watch_predecessor(&client, &parent, mine.as_deref(), limit).await {
                    Ok(Some(w)) => Some(w),
                    // This process's znode is first or gone: a reader of this process that
                    // subscribed alongside it still waits, now for the writers' znodes.
                    Ok(None) if mine.is_some() => {
                        mine = None;
                        match watch_predecessor(&client, &parent, None, limit).await {
                            Ok(Some(w)) => Some(w),
                            _ => return,
                        }
                    }
                    // Nothing to wait for, or the server did not answer: the waiter's own
                    // attempts (at least every second) take it from here.
                    _ => return,
                };
            }
        });
        Ok(WakeSubscription::new(rx, None))
    }

    async fn watch_predecessor(
        &self,
        client: &zk::Client,
        parent: &str,
        mine: Option<&str>,
    ) -> Result<Option<zk::OneshotWatcher>, LockError> {
        watch_predecessor(client, parent, mine, self.settings.op_timeout)
            .await
            .map_err(|e| self.unavailable("refused a watch", e))
    }
}

/// A znode of ours to delete in the background.
enum Cleanup {
    Path(String),
    /// Every child of `parent` whose name starts with `prefix` (an attempt's tag).
    Tagged {
        parent: String,
        prefix: String,
    },
}

/// How long a background deletion keeps trying, at most.
const CLEAN_UP_FOR: Duration = Duration::from_secs(60);

/// Whether a deletion is settled: done, or nothing left to do (the znode or its session is
/// gone, and the server deletes a session's znodes with it).
fn settled(result: &Result<(), zk::Error>) -> bool {
    matches!(
        result,
        Ok(()) | Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed)
    )
}

/// Deletes `what` in the background, trying again while ZooKeeper does not answer (a
/// failover, a partition), until it is gone or its session ended. A znode of ours left
/// behind would stand in the lock's queue as long as the session lives, and everyone behind
/// it would wait.
fn clean_up(client: zk::Client, what: Cleanup) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: the znode goes with the session
    };
    runtime.spawn(async move {
        let until = tokio::time::Instant::now() + CLEAN_UP_FOR;
        let mut pause = Duration::from_millis(50);
        while tokio::time::Instant::now() < until {
            if settled(&delete_once(&client, &what).await) {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
}

async fn delete_once(client: &zk::Client, what: &Cleanup) -> Result<(), zk::Error> {
    let limit = Duration::from_secs(2);
    let delete = |path: String| async move {
        tokio::time::timeout(limit, client.delete(&path, None))
            .await
            .unwrap_or(Err(zk::Error::Timeout))
    };
    match what {
        Cleanup::Path(path) => delete(path.clone()).await,
        Cleanup::Tagged { parent, prefix } => {
            let children = tokio::time::timeout(limit, client.list_children(parent))
                .await
                .unwrap_or(Err(zk::Error::Timeout))?;
            let mut outcome = Ok(());
            for child in children.iter().filter(|c| c.starts_with(prefix.as_str())) {
                let result = delete(format!("{parent}/{child}")).await;
                if !settled(&result) {
                    outcome = result;
                }
            }
            outcome
        }
    }
}

/// Sets a watch on the znode just ahead of `mine` in `parent`'s queue (when this process has
/// no znode there, as a waiting reader, on the last writer's znode, or on the queue itself
/// when no writer is in it). `None` when there is nothing to wait for.
async fn watch_predecessor(
    client: &zk::Client,
    parent: &str,
    mine: Option<&str>,
    limit: Duration,
) -> Result<Option<zk::OneshotWatcher>, String> {
    fn bounded<T>(
        answer: Result<T, tokio::time::error::Elapsed>,
        limit: Duration,
    ) -> Result<T, String> {
        answer.map_err(|_| format!("no answer within {limit:?}"))
    }
    loop {
        let Some(mine) = mine else {
            // No znode of this process waits here: a reader waits (it holds no place in the
            // queue) for the last writer's znode to go, or, with no writer there, for any
            // change of the queue (a writer may be coming).
            let children = bounded(
                tokio::time::timeout(limit, client.list_children(parent)).await,
                limit,
            )?;
            let queue = match children {
                Ok(children) => in_order(children),
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            if let Some(writer) = queue.iter().rev().find(|c| c.starts_with(CHILD)) {
                let watched = bounded(
                    tokio::time::timeout(
                        limit,
                        client.check_and_watch_stat(&format!("{parent}/{writer}")),
                    )
                    .await,
                    limit,
                )?;
                match watched {
                    Ok((Some(_), watcher)) => return Ok(Some(watcher)),
                    Ok((None, _)) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            let listed = bounded(
                tokio::time::timeout(limit, client.get_and_watch_children(parent)).await,
                limit,
            )?;
            return match listed {
                Ok((_, _, watcher)) => Ok(Some(watcher)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e.to_string()),
            };
        };
        let children = bounded(
            tokio::time::timeout(limit, client.list_children(parent)).await,
            limit,
        )?;
        let queue = match children {
            Ok(children) => in_order(children),
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let Some(at) = queue.iter().position(|c| c == mine) else {
            return Ok(None);
        };
        if at == 0 {
            return Ok(None);
        }
        let ahead = format!("{parent}/{}", queue[at - 1]);
        let watched = bounded(
            tokio::time::timeout(limit, client.check_and_watch_stat(&ahead)).await,
            limit,
        )?;
        match watched {
            Ok((Some(_), watcher)) => return Ok(Some(watcher)),
            // Gone between the listing and the watch: look again.
            Ok((None, _)) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// What to clear when a session ends.
struct Ended {
    epoch: std::sync::Weak<watch::Sender<u64>>,
    nodes: std::sync::Weak<Mutex<Nodes>>,
    current: std::sync::Weak<tokio::sync::Mutex<Option<Connection>>>,
    session: u64,
}

impl Ended {
    /// The session is over for us: every lease granted over it reads as lost, its znodes
    /// are forgotten, and its client is dropped. Dropping the last handle stops the client
    /// from reconnecting, so a session we gave up on cannot come back to life and keep its
    /// znodes: the server expires it and deletes them.
    async fn end(&self, why: &str) {
        let mut gone = Vec::new();
        if let Some(nodes) = self.nodes.upgrade() {
            let mut nodes = nodes.lock().unwrap();
            let session = self.session;
            let mut take = |n: &Node| {
                let ours = n.session == session;
                if ours {
                    gone.push(n.clone());
                }
                !ours
            };
            nodes.held.retain(|_, n| take(n));
            nodes.waiting.retain(|_, n| take(n));
        }
        // Deleted all the same, in case a handle still held elsewhere (a subscription's
        // task) revives the session: a znode we gave up on must not stay in the queue.
        for node in gone {
            clean_up(node.client, Cleanup::Path(node.path));
        }
        if let Some(epoch) = self.epoch.upgrade() {
            epoch.send_modify(|n| *n = (*n).max(self.session + 1));
        }
        if let Some(current) = self.current.upgrade() {
            let mut current = current.lock().await;
            if current.as_ref().is_some_and(|c| c.session == self.session) {
                *current = None;
            }
        }
        tracing::warn!("the zookeeper session ended ({why}): leases granted over it count as lost");
    }
}

/// Ends the session's leases when it expires or closes, or when it stayed disconnected for
/// the whole session timeout (the one the server granted it): the server may have expired it
/// by then, and every lease over it has run out on this process's clock anyway.
async fn watch_session(mut states: zk::StateWatcher, ended: Ended, session_timeout: Duration) {
    let mut disconnected_since: Option<tokio::time::Instant> = None;
    loop {
        let give_up = async {
            match disconnected_since {
                Some(t) => tokio::time::sleep_until(t + session_timeout).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            state = states.changed() => {
                if state.is_terminated() {
                    ended.end(&format!("{state:?}")).await;
                    return;
                }
                if state == zk::SessionState::Disconnected {
                    tracing::debug!("disconnected from zookeeper; leases are at risk");
                    disconnected_since.get_or_insert_with(tokio::time::Instant::now);
                } else {
                    disconnected_since = None;
                }
            }
            () = give_up => {
                ended.end("disconnected for the whole session timeout").await;
                return;
            }
        }
    }
}

/// A duration in whole milliseconds, the unit ZooKeeper negotiates timeouts in.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The lock's container znode: the lock key with every byte that ZooKeeper paths do not take
/// as they are percent-encoded (so the name is one path segment, and never `.` or `..`).
fn parent_of(keys: &LockKeys) -> String {
    let mut name = String::with_capacity(keys.lock().len() + 8);
    for b in keys.lock().bytes() {
        if b.is_ascii_alphanumeric() || b"-_:{}".contains(&b) {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{ROOT}/{name}")
}

/// The lock key of a container znode's name (the inverse of [`parent_of`]).
fn lock_key_of(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The sequence number the server appended to a child's name (its last ten digits).
fn sequence(child: &str) -> i64 {
    child
        .rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(i64::MAX)
}

fn child_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Children in queue order, writers' and readers' alike: by the sequence number the server
/// appended.
fn in_order(mut children: Vec<String>) -> Vec<String> {
    children.retain(|c| c.starts_with(CHILD) || c.starts_with(READER));
    children.sort_by_key(|c| sequence(c));
    children
}

/// The path and creation zxid of the znode a writer's transaction created. The transaction
/// has one zxid: the record's `mzxid` stands in for the `czxid` some servers leave out of a
/// create's answer inside a transaction (ZOOKEEPER-4026).
fn created_by(results: Vec<zk::MultiWriteResult>) -> Option<(String, i64)> {
    let mut path = None;
    let mut zxid = None;
    for result in results {
        match result {
            zk::MultiWriteResult::Create { path: p, stat } => {
                path = Some(p);
                if !stat.is_invalid() {
                    zxid = Some(stat.czxid);
                }
            }
            zk::MultiWriteResult::SetData { stat } => {
                zxid = zxid.or(Some(stat.mzxid));
            }
            _ => {}
        }
    }
    Some((path?, zxid?))
}

/// A reader's fence, from the container's data and stat read once the reader's znode (created
/// at `mine`) was in. Every writer's znode is created in one transaction with `+n` in the
/// container's data, so the record's `mzxid` is that writer's `czxid` and its fences top is
/// `mzxid × 32 + n`. When the record is older than the reader's znode, it is the last writer
/// that came before the reader: the reader got in, so that writer held the lock and left (or
/// gave up waiting, or its session ended) and its top is the fence the reader sees. When a
/// writer came after the reader and overwrote the record, or there is none, the reader's fence
/// is `mine × 32` (or, with no record at all, the container's `czxid × 32`, the same for
/// every reader): either way at or above every fence of the writers before the reader, below
/// every fence of the writers after.
fn reader_fence(record: Option<(Vec<u8>, zk::Stat)>, mine: i64) -> u64 {
    let mine_floor = (mine.max(0) as u64) * FENCE_SLOTS;
    let Some((data, stat)) = record else {
        return mine_floor.max(1);
    };
    let recorded = std::str::from_utf8(&data)
        .ok()
        .and_then(|text| text.strip_prefix('+')?.parse::<u64>().ok());
    let top = match recorded {
        Some(n) if stat.mzxid < mine => (stat.mzxid.max(0) as u64) * FENCE_SLOTS + n,
        Some(_) => mine_floor,
        None => (stat.czxid.max(0) as u64) * FENCE_SLOTS,
    };
    top.max(1)
}

impl Store for ZooKeeperStore {
    fn describe(&self) -> String {
        format!("zookeeper at {}", self.hosts)
    }

    fn session(&self) -> Option<Session> {
        Some(Session::current(&self.epoch))
    }

    /// Leases are bounded by the session timeout the server granted the latest session: a
    /// lease no longer than it ends, on this process's clock, before the server can expire
    /// the session.
    fn capabilities(&self) -> super::Capabilities {
        let granted = Duration::from_millis(self.granted.load(Ordering::Acquire));
        super::Engine::ZooKeeper.capabilities(granted)
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_once(req))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, CHILD))
    }

    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_shared_once(req))
    }

    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, READER))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    fn withdraw(&self, keys: &LockKeys) {
        if let Some(node) = self.forget_waiting(keys.lock()) {
            self.delete_later(node);
        }
    }

    fn admin(&self) -> Result<&dyn Admin, LockError> {
        Ok(self)
    }
}

impl Admin for ZooKeeperStore {
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let parent = parent_of(keys);
            let queue = self.queue(&client, &parent).await?;
            let Some(first) = queue.first() else {
                return Ok(LockState::default());
            };
            let stat = self
                .bounded(
                    "refused a read",
                    client.check_stat(&format!("{parent}/{first}")),
                )
                .await?;
            // The holders: the first writer, or every reader ahead of the first writer.
            let holders = if first.starts_with(CHILD) {
                1
            } else {
                queue.iter().take_while(|c| c.starts_with(READER)).count()
            };
            let waiting = (queue.len() - holders) as u64;
            Ok(LockState {
                held: true,
                // The session, not a TTL, ends a ZooKeeper lock.
                remaining: None,
                waiters: waiting > 0,
                waiting_processes: waiting,
                last_fence: stat.map(|s| s.czxid as u64 * FENCE_SLOTS),
            })
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let names =
                match tokio::time::timeout(self.settings.op_timeout, client.list_children(ROOT))
                    .await
                {
                    Ok(Ok(names)) => names,
                    Ok(Err(zk::Error::NoNode)) => Vec::new(),
                    Ok(Err(e)) => return Err(self.unavailable("refused a read", e)),
                    Err(_) => return Err(self.late(self.settings.op_timeout)),
                };
            let lock_prefix = format!("{prefix}:lock:{{");
            Ok(names
                .iter()
                .filter_map(|name| {
                    let lock = lock_key_of(name)?;
                    let escaped = lock.strip_prefix(&lock_prefix)?.strip_suffix('}')?;
                    unescape(escaped)
                })
                .collect())
        })
    }

    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let parent = parent_of(keys);
            let queue = self.queue(&client, &parent).await?;
            // The holders: the first writer, or every reader ahead of the first writer.
            let holders: Vec<&String> = match queue.first() {
                None => return Ok(false),
                Some(first) if first.starts_with(CHILD) => vec![first],
                Some(_) => queue.iter().take_while(|c| c.starts_with(READER)).collect(),
            };
            let mut deleted = false;
            for holder in holders {
                let path = format!("{parent}/{holder}");
                match tokio::time::timeout(self.settings.op_timeout, client.delete(&path, None))
                    .await
                {
                    Ok(Ok(())) => deleted = true,
                    Ok(Err(zk::Error::NoNode)) => {}
                    Ok(Err(e)) => return Err(self.unavailable("refused a delete", e)),
                    Err(_) => return Err(self.late(self.settings.op_timeout)),
                }
            }
            Ok(deleted)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_names_round_trip_and_stay_one_segment() {
        for key in [
            "order:42",
            "a/b",
            "..",
            ".",
            "%41",
            "ünï/cødé",
            "x\ny",
            "{tag}",
        ] {
            let keys = LockKeys::new("leasehold", key);
            let parent = parent_of(&keys);
            let name = parent.strip_prefix("/leasehold/").unwrap();
            assert!(!name.contains('/') && name != "." && name != "..", "{name}");
            assert_eq!(lock_key_of(name).as_deref(), Some(keys.lock()));
        }
    }

    #[test]
    fn queue_order_is_by_sequence_not_by_name() {
        let q = in_order(vec![
            "n-aa-0000000010".into(),
            "n-ff-0000000002".into(),
            "stray".into(),
            "n-00-0000000009".into(),
        ]);
        assert_eq!(q, ["n-ff-0000000002", "n-00-0000000009", "n-aa-0000000010"]);
        let q = in_order(vec![
            "r-aa-0000000007".into(),
            "n-ff-0000000003".into(),
            "r-00-0000000001".into(),
        ]);
        assert_eq!(q, ["r-00-0000000001", "n-ff-0000000003", "r-aa-0000000007"]);
    }

    #[test]
    fn readers_take_the_last_earlier_writers_fence_or_a_floor_between_writers() {
        let stat = |czxid, mzxid| zk::Stat {
            czxid,
            mzxid,
            pzxid: mzxid,
            ctime: 0,
            mtime: 0,
            version: 1,
            cversion: 1,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 2,
            num_children: 1,
        };
        // The last writer before the reader (its znode and the record share a zxid).
        let record = Some((b"+3".to_vec(), stat(5, 40)));
        assert_eq!(reader_fence(record, 50), 40 * FENCE_SLOTS + 3);
        // A writer that came after the reader overwrote it: the reader's own floor.
        let record = Some((b"+1".to_vec(), stat(5, 60)));
        assert_eq!(reader_fence(record, 50), 50 * FENCE_SLOTS);
        // No writer since the container was made: the container's floor.
        assert_eq!(
            reader_fence(Some((Vec::new(), stat(5, 5))), 50),
            5 * FENCE_SLOTS
        );
        assert_eq!(reader_fence(None, 0), 1);
    }
}
