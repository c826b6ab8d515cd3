//! RedLock: one lock over N independent Redis masters. Each call goes to every node in
//! parallel (each bounded by the per-node timeout); the lock is held while a majority agrees.
//! Every node does its own part with its own [`RedisStore`] (its scripts, its queue, its
//! wake channel); this module only counts the answers.
//!
//! By job: [`lock`] (acquire, release, renew and wake-ups, for the lock and for readers),
//! [`reads`] (read locks), [`leader`] (leader records), [`semaphores`] (why there are none).
//!
//! Fencing across a quorum takes a second round. Each granting node returns its own counter;
//! the token is the highest of them, and before the lock is handed out every granting node's
//! counter is raised to it. The granting nodes are a majority, and any two majorities share a
//! node, so every later acquisition meets at least one node whose counter is already at the
//! token and increments past it: tokens increase strictly even though the nodes' counters
//! differ. Without the raise, a later majority could consist only of nodes whose counters lag
//! and hand out a smaller token. Readers take the same two rounds ([`reads`]).
//!
//! Read locks: a reader is in when a majority of nodes let its share in within the validity,
//! the rule of the lock; a writer and a reader each need a majority, the two share a node,
//! and no node lets in both. Leader records: written on every node, counted where a majority
//! agrees ([`leader`]).
//!
//! Semaphores are refused: permits counted on each node and granted by a majority admit more
//! holders than the limit (limit 2 on 3 nodes: A on nodes 1 and 2, B on 2 and 3, C on 1 and 3,
//! and every node counts 2; in general up to `limit × N / (N/2 + 1)` holders). A semaphore
//! needs one count that every grant agrees on, which takes a consensus engine (ZooKeeper,
//! etcd, PostgreSQL), not independent masters. [`semaphores`] checks the counterexample.

mod leader;
mod lock;
mod reads;
mod semaphores;
mod together;

use std::time::Duration;

use super::RedisStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    answer, join_all, lacks, one_at_a_time, AcquireRequest, Attempt, Ended, Ending, Feature,
    LeaderAnswer, LeaderOp, Leave, Renewal, Renewed, Session, Settings, Store, StoreFuture,
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

    /// Counts the nodes' yes-or-no answers to one call on every node (a release, a leader's
    /// record): yes when a majority said yes, no when a majority cannot say yes any more
    /// (too many said no, or too few answered for the rest to make a majority), and the
    /// failures when they decide it.
    fn agreed(&self, what: &str, answers: Vec<Result<bool, LockError>>) -> Result<bool, LockError> {
        let (mut yes, mut no, mut failures) = (0, 0, Vec::new());
        for answer in answers {
            match answer {
                Ok(true) => yes += 1,
                Ok(false) => no += 1,
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        if yes >= quorum {
            Ok(true)
        } else if no > self.nodes.len() - quorum || yes + failures.len() < quorum {
            Ok(false)
        } else {
            Err(no_quorum(what, yes, self.nodes.len(), failures))
        }
    }
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
    fn info(&self) -> crate::store::Info {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.endpoint().to_string())
            .collect();
        let redlock = crate::store::Engine::RedLock;
        let mut info = crate::store::Info::of(
            redlock,
            redlock.capabilities(Duration::ZERO),
            format!("redlock over {}", nodes.join(", ")),
        );
        // Locks and readers' shares of any keys together: each node is one server that takes
        // a batch in one script call ([`RedLock::acquire_together`]).
        info.at_once = crate::store::AtOnce {
            keys: crate::store::Together::Always,
            reads: true,
        };
        info
    }

    /// None: RedLock tolerates a minority of nodes losing their data.
    fn session(&self) -> Option<Session> {
        None
    }

    /// A `PING` to every node: answered when a majority answers.
    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let answers = join_all(self.nodes.iter().map(|node| node.probe())).await;
            let ok = answers.iter().filter(|a| a.is_ok()).count();
            if ok >= self.quorum() {
                return Ok(());
            }
            let failures = answers.into_iter().filter_map(Result::err).collect();
            Err(no_quorum("probe", ok, self.nodes.len(), failures))
        })
    }

    /// Locks and readers' shares; no semaphores ([`Engine::why_not`](crate::store::Engine::why_not)).
    /// A batch of several goes to every node at once ([`RedLock::acquire_together`]).
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        if batch.len() > 1 {
            return Box::pin(self.acquire_together(batch));
        }
        one_at_a_time(batch, |req| match req.kind {
            LeaseKind::Permits { .. } => lacks(self, Feature::Semaphores),
            kind => Box::pin(RedLock::acquire(self, req, kind)),
        })
    }

    /// A handover needs nothing of the nodes: the next holder takes the next reserved fence.
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended> {
        match ending {
            Ending::HandOver => crate::store::kept(),
            Ending::Release {
                kind: LeaseKind::Permits { .. },
                ..
            } => lacks(self, Feature::Semaphores),
            Ending::Release { kind, .. } => {
                answer(RedLock::release(self, keys, token, kind), Ended::Released)
            }
        }
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(async move { Ok(RedLock::renew(self, batch).await) })
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(RedLock::subscribe(self, keys))
    }

    /// Every node's queue: the process may be in line on any of them. Fair per process: no
    /// request waits alone, and no waiter for permits.
    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        if place == Leave::ProcessFront {
            for node in &self.nodes {
                node.withdraw(keys);
            }
        }
    }

    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        crate::store::leader_by(self, keys, record, op)
    }
}
