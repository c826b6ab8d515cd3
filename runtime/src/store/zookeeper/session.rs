//! The ZooKeeper session: connected on first use and again after it ended, its granted
//! timeout read each time, and its end turned into lost leases.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::cleanup::{clean_up, Cleanup};
use super::ensemble::Ensemble;
use crate::error::LockError;
use crate::store::sequenced::{Contenders, WeakContenders};
use crate::store::Settings;

/// The ZooKeeper driver of the recipe: the session its znodes live in, and how to reach the
/// ensemble.
pub(crate) struct ZooKeeper {
    /// The servers as messages name them: never a credential.
    pub(super) hosts: String,
    /// How to reach them: the servers, credentials and TLS files.
    pub(super) ensemble: Ensemble,
    /// The session timeout asked for; the server may grant another (see `granted`).
    pub(super) session_timeout: Duration,
    /// The session timeout the server granted the latest session, in milliseconds (the unit
    /// ZooKeeper negotiates in): the lease bound. The asked one until a first session opened.
    pub(super) granted: AtomicU64,
    pub(super) settings: Settings,
    pub(super) current: Arc<tokio::sync::Mutex<Option<Connection>>>,
    /// Bumped each time a session ends (expired, closed): its ephemeral znodes are gone.
    pub(super) epoch: Arc<watch::Sender<u64>>,
    /// The recipe's contenders: a session's are forgotten (and deleted) when it ends.
    pub(super) contenders: Contenders<zk::Client>,
    /// True while a session is connected to a server ([`Info::link`](crate::store::Info::link)):
    /// false from the moment it is disconnected, or ended, until it (or the next one) is
    /// connected.
    pub(super) link: Arc<watch::Sender<bool>>,
    /// The session whose ephemeral znode holds the locker's description, if one does.
    pub(super) described: std::sync::Mutex<Option<i64>>,
}

/// The client of the current session, and the count of sessions that ended.
pub(super) struct Connection {
    pub(super) client: zk::Client,
    pub(super) session: u64,
}

impl ZooKeeper {
    /// The driver for `ensemble`, with no session yet.
    pub(super) fn new(
        ensemble: Ensemble,
        session_timeout: Duration,
        settings: &Settings,
        contenders: Contenders<zk::Client>,
        epoch: Arc<watch::Sender<u64>>,
    ) -> Self {
        ZooKeeper {
            hosts: ensemble.shown.clone(),
            ensemble,
            session_timeout,
            granted: AtomicU64::new(millis(session_timeout)),
            settings: settings.clone(),
            current: Arc::default(),
            epoch,
            contenders,
            link: Arc::new(watch::channel(false).0),
            described: std::sync::Mutex::new(None),
        }
    }

    pub(super) fn unavailable(&self, what: &str, e: impl std::fmt::Display) -> LockError {
        LockError::unavailable(format!("zookeeper at {} {what}: {e}", self.hosts), None)
    }

    /// A client error as a lock call's: a refusal that retrying will not mend (credentials
    /// the server refused, an identity the znode's ACL does not name) is
    /// [`LockError::Config`], as a refused password or privilege is on every engine; anything
    /// else is [`LockError::Unavailable`].
    pub(super) fn failed(&self, what: &str, e: zk::Error) -> LockError {
        match e {
            zk::Error::AuthFailed => LockError::config(format!(
                "zookeeper at {} refused this locker's credentials (AuthFailed): check the user \
                 and password of the connect string",
                self.hosts
            )),
            zk::Error::NoAuth if self.ensemble.authenticated() => LockError::config(format!(
                "zookeeper at {} {what}: not authorized (NoAuth): the znode belongs to another \
                 identity. Every locker sharing these locks must connect with the same user \
                 and password (a wrong password is another identity), and the lock znodes of \
                 another service need a chroot of their own",
                self.hosts
            )),
            zk::Error::NoAuth => LockError::config(format!(
                "zookeeper at {} {what}: not authorized (NoAuth): the lock znodes are protected \
                 by credentials; give them as user:password@ before the servers",
                self.hosts
            )),
            e => self.unavailable(what, e),
        }
    }

    pub(super) fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!(
                "zookeeper at {} did not answer within {limit:?}",
                self.hosts
            ),
            None,
        )
    }

    /// Runs one call with the operation timeout.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, zk::Error>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.settings.op_timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failed(what, e)),
            Err(_) => Err(self.late(self.settings.op_timeout)),
        }
    }

    /// The client of the live session, opening a new session when there is none (first use,
    /// or the last one ended).
    pub(super) async fn client(&self) -> Result<(zk::Client, u64), LockError> {
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
        let connect = self.ensemble.connect(self.session_timeout, limit);
        let client = match tokio::time::timeout(limit, connect).await {
            Ok(Ok(Ok(client))) => client,
            // A TLS handshake that fails is tried again until the connect timeout: say what
            // to look at.
            Ok(Ok(Err(zk::Error::Timeout))) | Err(_) if self.ensemble.tls.is_some() => {
                return Err(LockError::unavailable(
                    format!(
                        "zookeeper at {} did not answer within {limit:?}: check that the \
                         servers' certificates are signed by the CA given (ca=, or \
                         SSL_CERT_FILE) for the names they are reached by, and that the client \
                         certificate (cert=, key=) is one they accept",
                        self.hosts
                    ),
                    None,
                ))
            }
            Ok(Ok(Err(e))) => return Err(self.failed("could not be reached", e)),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(self.late(limit)),
        };
        if self.ensemble.authenticated() {
            self.check_access(&client).await?;
        }
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
                contenders: self.contenders.downgrade(),
                current: Arc::downgrade(&self.current),
                session,
            },
            Arc::downgrade(&self.link),
            granted,
        ));
        self.link.send_replace(true);
        *current = Some(Connection {
            client: client.clone(),
            session,
        });
        Ok((client, session))
    }

    /// Refuses an acquire whose lease is longer than the session it would go over. The lease
    /// was bounded by the engine's lease bound when the request was made, but a session that
    /// opened since may have been granted a shorter timeout (another server, a changed
    /// `maxSessionTimeout`): the server could then expire the session, and give the lock to
    /// another, while the client still counts on the lease. Nothing is created; the next
    /// request made is bounded by this session's timeout.
    pub(super) fn fits_session(
        &self,
        client: &zk::Client,
        lease: Duration,
    ) -> Result<(), LockError> {
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
}

/// What to clear when a session ends.
pub(super) struct Ended {
    epoch: Weak<watch::Sender<u64>>,
    contenders: WeakContenders<zk::Client>,
    current: Weak<tokio::sync::Mutex<Option<Connection>>>,
    session: u64,
}

impl Ended {
    /// The session is over for us: every lease granted over it reads as lost, its znodes
    /// are forgotten, and its client is dropped. Dropping the last handle stops the client
    /// from reconnecting, so a session we gave up on cannot come back to life and keep its
    /// znodes: the server expires it and deletes them.
    pub(super) async fn end(&self, why: &str) {
        let gone = match self.contenders.upgrade() {
            Some(contenders) => contenders.forget_session(self.session),
            None => Vec::new(),
        };
        // Deleted all the same, in case a handle still held elsewhere (a subscription's
        // task) revives the session: a znode we gave up on must not stay in the queue.
        for node in gone {
            clean_up(node.via, Cleanup::Path(node.name));
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
pub(super) async fn watch_session(
    mut states: zk::StateWatcher,
    ended: Ended,
    link: Weak<watch::Sender<bool>>,
    session_timeout: Duration,
) {
    let connected = |up: bool| {
        if let Some(link) = link.upgrade() {
            link.send_if_modified(|now| std::mem::replace(now, up) != up);
        }
    };
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
                    connected(false);
                    ended.end(&format!("{state:?}")).await;
                    return;
                }
                if state == zk::SessionState::Disconnected {
                    tracing::debug!("disconnected from zookeeper; leases are at risk");
                    disconnected_since.get_or_insert_with(tokio::time::Instant::now);
                    connected(false);
                } else {
                    disconnected_since = None;
                    connected(true);
                }
            }
            () = give_up => {
                connected(false);
                ended.end("disconnected for the whole session timeout").await;
                return;
            }
        }
    }
}

/// A duration in whole milliseconds, the unit ZooKeeper negotiates timeouts in.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
