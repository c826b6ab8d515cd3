//! The outcomes of a locker's calls, fed to its [`Health`]: [`Observed`] stands between the
//! locker and its store, forwards every call, and reports each one's send time and outcome
//! (answered, or [`LockError::Unavailable`]). Written once for every engine; a call dropped
//! before its answer reports nothing, and so does one the store answered alone
//! ([`heard`](crate::store::heard)): only the server's answer moves the state towards
//! connected.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use super::Health;
use crate::error::LockError;
use crate::store::heard::heard;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Admin, Attempt, Capabilities, Engine, Feature, LeaderRecord, LeaderRecords,
    PermitState, PermitWaiter, ReadLocks, Renewal, Renewed, Semaphores, Session, Settling, Store,
    StoreFuture, WakeSubscription,
};

/// A store whose calls' outcomes feed a locker's health.
pub(crate) struct Observed {
    store: Arc<dyn Store>,
    health: Arc<Health>,
}

impl Observed {
    pub(crate) fn new(store: Arc<dyn Store>, health: Arc<Health>) -> Self {
        Observed { store, health }
    }

    /// `call`, sent now, with its outcome reported when it comes.
    fn watch<'a, T: Send + 'a>(&'a self, call: StoreFuture<'a, T>) -> StoreFuture<'a, T> {
        let sent = Instant::now();
        Box::pin(async move {
            let (outcome, heard) = heard(call).await;
            match &outcome {
                Err(e) if e.is_unavailable() => self.health.unanswered(sent, e),
                // The store's own answer (nothing held, a session that ended): no news.
                _ if !heard => {}
                _ => self.health.answered(sent),
            }
            outcome
        })
    }
}

impl Store for Observed {
    fn describe(&self) -> String {
        self.store.describe()
    }

    fn session(&self) -> Option<Session> {
        self.store.session()
    }

    fn link(&self) -> Option<watch::Receiver<bool>> {
        self.store.link()
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        self.watch(self.store.probe())
    }

    fn capabilities(&self) -> Capabilities {
        self.store.capabilities()
    }

    fn engine(&self) -> Engine {
        self.store.engine()
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        self.watch(self.store.acquire(req))
    }

    fn takes_all_at_once(&self, keys: &[&LockKeys]) -> bool {
        self.store.takes_all_at_once(keys)
    }

    fn acquire_all<'a>(
        &'a self,
        reqs: &'a [AcquireRequest<'_>],
    ) -> StoreFuture<'a, Option<Vec<u64>>> {
        self.watch(self.store.acquire_all(reqs))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        self.watch(self.store.release(keys, token))
    }

    fn release_held<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        valid_until: Instant,
    ) -> StoreFuture<'a, bool> {
        self.watch(self.store.release_held(keys, token, valid_until))
    }

    fn hand_over<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> Option<StoreFuture<'a, Option<u64>>> {
        let call = self.store.hand_over(keys, token)?;
        Some(self.watch(call))
    }

    fn withdraw_request(&self, keys: &LockKeys, contender: &str) {
        self.store.withdraw_request(keys, contender);
    }

    /// Passed on unobserved: the engine's own calls while it settles say nothing of the
    /// locker's.
    fn settle<'a>(&'a self, token: &'a OwnerToken) -> Option<Settling<'a>> {
        self.store.settle(token)
    }

    /// A batch answered with nothing but "could not tell" (no RedLock majority, no ZooKeeper
    /// server answering its checks) is an unanswered call.
    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        let sent = Instant::now();
        let call = self.store.renew(batch);
        Box::pin(async move {
            let (outcome, heard) = heard(call).await;
            match &outcome {
                Err(e) if e.is_unavailable() => self.health.unanswered(sent, e),
                Ok(renewed)
                    if !renewed.is_empty() && renewed.iter().all(|r| *r == Renewed::Unknown) =>
                {
                    let why = format!("{} could not tell whether it renewed", self.describe());
                    self.health.unanswered(sent, &why);
                }
                _ if !heard => {}
                _ => self.health.answered(sent),
            }
            outcome
        })
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        self.watch(self.store.subscribe(keys))
    }

    fn withdraw(&self, keys: &LockKeys) {
        self.store.withdraw(keys);
    }

    fn read_locks(&self) -> Option<&dyn ReadLocks> {
        self.store.read_locks().map(|_| self as &dyn ReadLocks)
    }

    fn semaphores(&self) -> Option<&dyn Semaphores> {
        self.store.semaphores().map(|_| self as &dyn Semaphores)
    }

    fn leader_records(&self) -> Option<&dyn LeaderRecords> {
        self.store
            .leader_records()
            .map(|_| self as &dyn LeaderRecords)
    }

    fn refusal_reason(&self, feature: Feature) -> Option<&'static str> {
        self.store.refusal_reason(feature)
    }

    /// In the background, unobserved like the operator's calls: not the locks' traffic.
    fn describe_locker<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a crate::store::identity::Identity,
    ) -> StoreFuture<'a, ()> {
        self.store.describe_locker(prefix, identity)
    }

    /// The operator's calls, unobserved: they are not the locks' traffic.
    fn admin(&self) -> Result<&dyn Admin, LockError> {
        self.store.admin()
    }
}

impl ReadLocks for Observed {
    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        match self.store.read_locks() {
            Some(part) => self.watch(part.acquire_shared(req)),
            None => self.store.refuse(Feature::ReadLocks),
        }
    }

    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        match self.store.read_locks() {
            Some(part) => self.watch(part.release_shared(keys, token)),
            None => self.store.refuse(Feature::ReadLocks),
        }
    }
}

impl Semaphores for Observed {
    fn acquire_permits<'a>(
        &'a self,
        req: &'a AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> StoreFuture<'a, Attempt> {
        match self.store.semaphores() {
            Some(part) => self.watch(part.acquire_permits(req, limit, count, waiter)),
            None => self.store.refuse(Feature::Semaphores),
        }
    }

    fn withdraw_permits(&self, keys: &LockKeys, waiter: u128, count: u32) {
        if let Some(part) = self.store.semaphores() {
            part.withdraw_permits(keys, waiter, count);
        }
    }

    fn release_permits<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        count: u32,
    ) -> StoreFuture<'a, bool> {
        match self.store.semaphores() {
            Some(part) => self.watch(part.release_permits(keys, token, count)),
            None => self.store.refuse(Feature::Semaphores),
        }
    }

    fn inspect_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        match self.store.semaphores() {
            Some(part) => self.watch(part.inspect_permits(keys)),
            None => self.store.refuse(Feature::Semaphores),
        }
    }
}

impl LeaderRecords for Observed {
    fn publish_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        match self.store.leader_records() {
            Some(part) => self.watch(part.publish_leader(keys, record, token, leader)),
            None => self.store.refuse(Feature::LeaderElection),
        }
    }

    fn clear_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        match self.store.leader_records() {
            Some(part) => self.watch(part.clear_leader(keys, record, term)),
            None => self.store.refuse(Feature::LeaderElection),
        }
    }

    fn read_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        match self.store.leader_records() {
            Some(part) => self.watch(part.read_leader(keys, record)),
            None => self.store.refuse(Feature::LeaderElection),
        }
    }
}
