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
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Admin, Attempt, Info, LeaderRecord, LeaderRecords, Leave, PermitState, Renewal,
    Renewed, Session, Settling, Store, StoreFuture, WakeSubscription,
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
    fn info(&self) -> Info {
        self.store.info()
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

    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        kind: LeaseKind,
        valid_until: Instant,
    ) -> StoreFuture<'a, bool> {
        self.watch(self.store.release(keys, token, kind, valid_until))
    }

    fn hand_over<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> Option<StoreFuture<'a, Option<u64>>> {
        let call = self.store.hand_over(keys, token)?;
        Some(self.watch(call))
    }

    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        self.store.leave(keys, place);
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
                    let why = format!(
                        "{} could not tell whether it renewed",
                        self.store.describe()
                    );
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

    fn inspect_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        self.watch(self.store.inspect_permits(keys))
    }

    /// Watched like the lock calls, and so is a store's refusal to be asked now (a lazily
    /// connected store before it connects).
    fn leader_records(&self) -> Result<&dyn LeaderRecords, LockError> {
        Ok(self)
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

impl LeaderRecords for Observed {
    fn publish_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        self.watch(match self.store.leader_records() {
            Ok(part) => part.publish_leader(keys, record, token, leader),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        })
    }

    fn clear_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        self.watch(match self.store.leader_records() {
            Ok(part) => part.clear_leader(keys, record, term),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        })
    }

    fn read_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        self.watch(match self.store.leader_records() {
            Ok(part) => part.read_leader(keys, record),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        })
    }
}
