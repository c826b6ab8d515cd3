//! The lock's own calls over the nodes: acquire (for the lock and for readers alike, with the
//! fence round of the module header), release, renew, and the wake-ups of every node.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{no_quorum, RedLock};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{join_all, AcquireRequest, Attempt, Renewal, Renewed, Store, WakeSubscription};

impl RedLock {
    /// Takes a lease of `kind` (the lock, or a reader's share) on a majority of the nodes.
    /// When contenders split the nodes between them (each got some, none a majority: all give
    /// theirs back), it tries again after a random pause, up to [`SPLIT_RETRIES`] times:
    /// otherwise contenders that came at the same moment could all fail although the lock is
    /// free (three `try_acquire`s of a singleton job on three nodes, and the job would run
    /// nowhere; a reader and two writers, one node each).
    pub(crate) async fn acquire(
        &self,
        req: &AcquireRequest<'_>,
        kind: LeaseKind,
    ) -> Result<Attempt, LockError> {
        debug_assert!(!matches!(kind, LeaseKind::Permits { .. }), "refused above");
        debug_assert_eq!(
            req.kind, kind,
            "every node takes the lease the request names"
        );
        let mut split_retries = SPLIT_RETRIES;
        loop {
            let (attempt, split) = self.acquire_once(req, kind).await;
            if !split || split_retries == 0 || attempt.is_err() {
                return attempt;
            }
            split_retries -= 1;
            tracing::debug!("redlock: the nodes were split between contenders; trying again");
            tokio::time::sleep(split_pause()).await;
        }
    }

    /// One round of [`acquire`](Self::acquire); true with it when the nodes were split.
    ///
    /// Each node takes the lease by its own rule (`acquire`: acquire.lua for the lock,
    /// read_acquire.lua for a reader) and answers its fence: a writer's reserved top, a
    /// reader's current fence. The fence round is the same for both: the token is the highest
    /// answer, and the granting nodes below it are raised to it.
    async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
        kind: LeaseKind,
    ) -> (Result<Attempt, LockError>, bool) {
        let start = req.sent;
        let answers = join_all(self.nodes.iter().map(|n| {
            let node: &dyn Store = n;
            node.acquire_one(req)
        }))
        .await;
        let mut granted = Vec::new();
        let mut remaining = Vec::new();
        let mut failures = Vec::new();
        for (node, answer) in self.nodes.iter().zip(answers) {
            match answer {
                Ok(Attempt::Granted { top, .. }) => granted.push((node, top)),
                Ok(Attempt::Held { remaining: r }) => remaining.push(r),
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        let in_time = |at: Instant| at - start < req.validity;
        if granted.len() >= quorum && in_time(Instant::now()) {
            let top = granted.iter().map(|&(_, top)| top).max().expect("a quorum");
            // Only nodes that lag need the second round; when every node answers the same
            // fence the lease costs one round trip.
            let lagging: Vec<_> = granted.iter().filter(|&&(_, t)| t < top).collect();
            let raised = join_all(
                lagging
                    .iter()
                    .map(|(node, _)| node.raise_fence(req.keys, top, req.fence_ttl)),
            )
            .await;
            let raised_ok =
                granted.len() - lagging.len() + raised.iter().filter(|r| r.is_ok()).count();
            if raised_ok >= quorum && in_time(Instant::now()) {
                return (Ok(Attempt::granted(top)), false);
            }
            tracing::debug!(raised_ok, quorum, "redlock: fence round missed the quorum");
        } else if granted.len() >= quorum {
            tracing::debug!("redlock: quorum reached too late for a positive validity");
        }
        // No quorum, or not in time: give back what was granted, on every node (a node that
        // did not answer may have granted it all the same).
        self.give_back_everywhere(req, kind).await;
        for e in &failures {
            tracing::warn!(error = %e, "redlock: node failed during acquire");
        }
        if failures.len() > self.nodes.len() - quorum {
            return (
                Err(no_quorum(
                    "acquire",
                    granted.len(),
                    self.nodes.len(),
                    failures,
                )),
                false,
            );
        }
        let split = !granted.is_empty() && granted.len() < quorum && failures.is_empty();
        remaining.sort();
        let held = Attempt::Held {
            remaining: remaining.get(remaining.len() / 2).copied().flatten(),
        };
        (Ok(held), split)
    }

    /// Gives a failed attempt's lease back on every node, answers ignored: what a node did not
    /// take back lapses with its lease.
    async fn give_back_everywhere(&self, req: &AcquireRequest<'_>, kind: LeaseKind) {
        let until = req.sent + req.validity;
        let _ = join_all(self.nodes.iter().map(|n| {
            let node: &dyn Store = n;
            node.give_back(req.keys, req.token, kind, until)
        }))
        .await;
    }

    /// Gives a lease of `kind` back on every node: released when a majority still held it.
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        kind: LeaseKind,
    ) -> Result<bool, LockError> {
        // When the caller counts the lease valid until only tells an engine's retried deletes
        // apart (PostgreSQL); Redis nodes ignore it.
        let until = Instant::now();
        let answers = join_all(self.nodes.iter().map(|n| {
            let node: &dyn Store = n;
            node.give_back(keys, token, kind, until)
        }))
        .await;
        self.agreed("release", answers)
    }

    /// Renews every lease of `batch` (locks and readers alike: each node renews each kind
    /// with its own script) on every node: renewed where a majority renewed it.
    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Vec<Renewed> {
        let answers = join_all(self.nodes.iter().map(|n| n.renew(batch))).await;
        let quorum = self.quorum();
        let n = self.nodes.len();
        (0..batch.len())
            .map(|i| {
                let mut yes = 0;
                let mut no = 0;
                for answer in &answers {
                    match answer.as_ref().map(|each| each[i]) {
                        Ok(Renewed::Yes) => yes += 1,
                        Ok(Renewed::No) => no += 1,
                        Ok(Renewed::Unknown) | Err(_) => {}
                    }
                }
                if yes >= quorum {
                    Renewed::Yes
                } else if no > n - quorum {
                    Renewed::No
                } else {
                    Renewed::Unknown
                }
            })
            .collect()
    }

    /// Listens on every node's wake channel; a message seen on any of them (a release, a
    /// leader's record written or cleared) wakes the waiter or the observer.
    /// A node that cannot confirm the subscription now is subscribed again as soon as it
    /// answers (and the waiter woken then), so a waiter that began during a node's outage
    /// still hears that node's releases once it is back. Fails only when no node confirmed.
    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        let subs = join_all(self.nodes.iter().map(|n| n.subscribe_or_later(keys))).await;
        let (merged_tx, merged_rx) = watch::channel(0u64);
        let mut failures = Vec::new();
        let mut forwards = Vec::new();
        for (mut sub, failure) in subs {
            if let Some(e) = failure {
                failures.push(e);
            }
            let tx = merged_tx.clone();
            forwards.push(async move {
                loop {
                    tokio::select! {
                        _ = sub.released() => tx.send_modify(|n| *n += 1),
                        _ = tx.closed() => return,
                    }
                }
            });
        }
        if failures.len() == self.nodes.len() {
            return Err(no_quorum("subscribe", 0, self.nodes.len(), failures));
        }
        for forward in forwards {
            tokio::spawn(forward);
        }
        Ok(WakeSubscription::new(merged_rx, None))
    }
}

/// How many times an acquire tries again after the nodes were split between contenders.
const SPLIT_RETRIES: u32 = 2;

/// A random pause of 1 to 20 ms before trying again after a split, so that the contenders
/// that split the nodes do not meet again.
fn split_pause() -> Duration {
    let mut b = [0u8; 1];
    let r = if getrandom::fill(&mut b).is_ok() {
        b[0]
    } else {
        7
    };
    Duration::from_millis(1 + u64::from(r) % 20)
}
