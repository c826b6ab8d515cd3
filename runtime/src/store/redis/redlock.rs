//! RedLock: one lock over N independent Redis masters. Each call goes to every node in
//! parallel (each bounded by the per-node timeout); the lock is held while a majority agrees.
//!
//! Fencing across a quorum takes a second round. Each granting node returns its own counter;
//! the token is the highest of them, and before the lock is handed out every granting node's
//! counter is raised to it. The granting nodes are a majority, and any two majorities share a
//! node, so every later acquisition meets at least one node whose counter is already at the
//! token and increments past it: tokens increase strictly even though the nodes' counters
//! differ. Without the raise, a later majority could consist only of nodes whose counters lag
//! and hand out a smaller token.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::RedisStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::Session;
use crate::store::{
    join_all, AcquireRequest, Attempt, Renewal, Renewed, Settings, Store, StoreFuture,
    WakeSubscription,
};

pub(crate) struct RedLock {
    nodes: Vec<RedisStore>,
}

impl RedLock {
    /// Connects every node (an odd number, at least three, checked by the deployment); nodes
    /// that are down now are connected on first use, as long as a majority answers now.
    pub(crate) async fn connect(urls: &[String], settings: &Settings) -> Result<Self, LockError> {
        let n = urls.len();
        let nodes = join_all(
            urls.iter()
                .map(|url| RedisStore::connect(url, settings, true)),
        )
        .await;
        let mut nodes = nodes.into_iter().collect::<Result<Vec<_>, _>>()?;
        let down: Vec<String> = nodes
            .iter_mut()
            .filter_map(|n| n.down_at_connect.take().map(|e| e.to_string()))
            .collect();
        if n - down.len() < n / 2 + 1 {
            return Err(LockError::unavailable(
                format!(
                    "redlock: only {} of {n} nodes answered, a majority is needed: {}",
                    n - down.len(),
                    down.join("; ")
                ),
                None,
            ));
        }
        Ok(RedLock { nodes })
    }

    /// How many nodes make a majority.
    pub(crate) fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Takes the lock on a majority of the nodes. When contenders split the nodes between
    /// them (each got some, none a majority: all give theirs back), it tries again after a
    /// random pause, up to [`SPLIT_RETRIES`] times: otherwise contenders that came at the same
    /// moment could all fail although the lock is free (three `try_acquire`s of a singleton
    /// job on three nodes, and the job would run nowhere).
    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let mut split_retries = SPLIT_RETRIES;
        loop {
            let (attempt, split) = self.acquire_once(req).await;
            if !split || split_retries == 0 || attempt.is_err() {
                return attempt;
            }
            split_retries -= 1;
            tracing::debug!("redlock: the nodes were split between contenders; trying again");
            tokio::time::sleep(split_pause()).await;
        }
    }

    /// One round of [`acquire`](Self::acquire); true with it when the nodes were split.
    async fn acquire_once(&self, req: &AcquireRequest<'_>) -> (Result<Attempt, LockError>, bool) {
        let start = req.sent;
        let answers = join_all(self.nodes.iter().map(|n| n.acquire(req))).await;
        let mut granted = Vec::new();
        let mut remaining = Vec::new();
        let mut failures = Vec::new();
        for (node, answer) in self.nodes.iter().zip(answers) {
            match answer {
                Ok(Attempt::Granted { top }) => granted.push((node, top)),
                Ok(Attempt::Held { remaining: r }) => remaining.push(r),
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        let in_time = |at: Instant| at - start < req.validity;
        if granted.len() >= quorum && in_time(Instant::now()) {
            let top = granted.iter().map(|&(_, top)| top).max().expect("a quorum");
            // Only nodes that lag need the second round; in steady state every node
            // returns the same counter and the lock costs one round trip.
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
                return (Ok(Attempt::Granted { top }), false);
            }
            tracing::debug!(raised_ok, quorum, "redlock: fence round missed the quorum");
        } else if granted.len() >= quorum {
            tracing::debug!("redlock: quorum reached too late for a positive validity");
        }
        // No quorum, or not in time: give back what was granted, on every node (a node that
        // did not answer may have granted it all the same).
        self.release_everywhere(req.keys, req.token).await;
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

    async fn release_everywhere(&self, keys: &LockKeys, token: &OwnerToken) {
        let _ = join_all(self.nodes.iter().map(|n| n.release(keys, token))).await;
    }

    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let answers = join_all(self.nodes.iter().map(|n| n.release(keys, token))).await;
        let (mut released, mut refused, mut failures) = (0, 0, Vec::new());
        for answer in answers {
            match answer {
                Ok(true) => released += 1,
                Ok(false) => refused += 1,
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        if released >= quorum {
            Ok(true)
        } else if refused > self.nodes.len() - quorum || released + failures.len() < quorum {
            Ok(false)
        } else {
            Err(no_quorum("release", released, self.nodes.len(), failures))
        }
    }

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

    /// Listens on every node's wake channel; a release seen on any of them wakes the waiter.
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

fn no_quorum(what: &str, ok: usize, of: usize, failures: Vec<LockError>) -> LockError {
    let detail: Vec<String> = failures.iter().map(|e| e.to_string()).collect();
    LockError::unavailable(
        format!(
            "redlock {what}: no majority ({ok} of {of} nodes agreed); failed nodes: {}",
            detail.join("; ")
        ),
        failures
            .into_iter()
            .next()
            .map(|e| Box::new(e) as crate::error::BoxError),
    )
}

impl Store for RedLock {
    fn capabilities(&self) -> crate::store::Capabilities {
        crate::store::Engine::RedLock.capabilities(Duration::ZERO)
    }

    fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.endpoint().to_string())
            .collect();
        format!("redlock over {}", nodes.join(", "))
    }

    /// None: RedLock tolerates a minority of nodes losing their data.
    fn session(&self) -> Option<Session> {
        None
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(RedLock::acquire(self, req))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(RedLock::release(self, keys, token))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(async move { Ok(RedLock::renew(self, batch).await) })
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(RedLock::subscribe(self, keys))
    }

    /// Every node's queue: the process may be in line on any of them.
    fn withdraw(&self, keys: &LockKeys) {
        for node in &self.nodes {
            node.withdraw(keys);
        }
    }

    fn admin(&self) -> Result<&dyn crate::store::Admin, LockError> {
        Err(LockError::config(
            "inspecting locks needs a locker on one Redis server, a Sentinel master or a \
             cluster; for RedLock, inspect each node with a locker of its own",
        ))
    }
}
