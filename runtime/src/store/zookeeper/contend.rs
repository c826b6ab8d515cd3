//! Contending for a lock with this process's znodes: the writer's and the reader's attempt,
//! release, renewal, and the subscription that watches the predecessor.

use std::collections::HashMap;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::names::{child_name, in_order, parent_of, tag, CHILD, FENCE_SLOTS, READER};
use super::queue::{clean_up, reader_fence, watch_predecessor, Cleanup};
use super::ZooKeeperStore;
use crate::error::LockError;
use crate::store::join_all;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Renewal, Renewed, WakeSubscription};

/// One znode of this process: a contender's or a holder's.
#[derive(Clone)]
pub(super) struct Node {
    pub(super) path: String,
    pub(super) czxid: i64,
    /// The session it was created in, and its client (a cheap handle).
    pub(super) session: u64,
    pub(super) client: zk::Client,
}

#[derive(Default)]
pub(super) struct Nodes {
    /// The znode of the contender at the front of a key's local queue, by lock key.
    pub(super) waiting: HashMap<String, Node>,
    /// The znodes of held leases, by owner token.
    pub(super) held: HashMap<OwnerToken, Node>,
}

impl ZooKeeperStore {
    pub(super) fn forget_waiting(&self, lock: &str) -> Option<Node> {
        self.nodes.lock().unwrap().waiting.remove(lock)
    }

    /// Deletes a znode of ours in the background (a contender that gave up).
    pub(super) fn delete_later(&self, node: Node) {
        clean_up(node.client, Cleanup::Path(node.path));
    }

    pub(super) async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
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
    pub(super) async fn release_once(
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
    pub(super) async fn acquire_shared_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
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

    pub(super) async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
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

    pub(super) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
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
}
