//! The outcomes of a locker's calls, fed to its [`Health`]: [`Observed`] stands between the
//! locker and its engine's [`Connection`], takes the engine from it at each call (connected,
//! or why not yet), and reports each call's send time and outcome (answered, or
//! [`LockError::Unavailable`], a call refused because the engine is not connected yet among
//! them). Written once for every engine; a call dropped before its answer reports nothing,
//! and so does one the store answered alone ([`heard`](crate::store::heard)): only the
//! server's answer moves the state towards connected.

use std::sync::Arc;

use tokio::time::Instant;

use super::Health;
use crate::store::heard::heard;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, AdminAnswer, AdminOp, Attempt, Connection, Ended, Ending, Info, LeaderAnswer,
    LeaderOp, Leave, Renewal, Renewed, Session, Settling, Store, StoreFuture, WakeSubscription,
};

/// A store whose calls' outcomes feed a locker's health.
pub(crate) struct Observed {
    engine: Connection,
    health: Arc<Health>,
}

impl Observed {
    pub(crate) fn new(engine: Connection, health: Arc<Health>) -> Self {
        Observed { engine, health }
    }

    /// The call `send` makes to the engine, sent now, with its outcome reported when it
    /// comes; an engine not connected yet fails it at once, and that is reported too.
    fn watch<'a, T: Send + 'a>(
        &'a self,
        send: impl FnOnce(&'a Arc<dyn Store>) -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        let call = self.send(send);
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

    /// The call `send` makes to the engine, or the engine's reason why it cannot be made
    /// yet; unobserved.
    fn send<'a, T: Send + 'a>(
        &'a self,
        send: impl FnOnce(&'a Arc<dyn Store>) -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        match self.engine.store() {
            Ok(store) => send(store),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }
}

impl Store for Observed {
    fn info(&self) -> Info {
        self.engine.info()
    }

    fn session(&self) -> Option<Session> {
        self.engine.connected()?.session()
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        self.watch(|store| store.probe())
    }

    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        self.watch(|store| store.acquire(batch))
    }

    /// A handover that the engine need not take part in is answered by it alone, and so
    /// observed as nothing (as before, when no call was made for it).
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended> {
        self.watch(|store| store.release(keys, token, ending))
    }

    /// Nothing waited before the engine connected, so nothing to leave then.
    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        if let Some(store) = self.engine.connected() {
            store.leave(keys, place);
        }
    }

    /// Passed on unobserved: the engine's own calls while it settles say nothing of the
    /// locker's. Nothing was sent before the engine connected, so nothing to settle then.
    fn settle<'a>(&'a self, token: &'a OwnerToken) -> Option<Settling<'a>> {
        self.engine.connected()?.settle(token)
    }

    /// A batch answered with nothing but "could not tell" (no RedLock majority, no ZooKeeper
    /// server answering its checks) is an unanswered call.
    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        let call = self.send(|store| store.renew(batch));
        let sent = Instant::now();
        Box::pin(async move {
            let (outcome, heard) = heard(call).await;
            match &outcome {
                Err(e) if e.is_unavailable() => self.health.unanswered(sent, e),
                Ok(renewed)
                    if !renewed.is_empty() && renewed.iter().all(|r| *r == Renewed::Unknown) =>
                {
                    let why = format!(
                        "{} could not tell whether it renewed",
                        self.engine.info().description
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
        self.watch(|store| store.subscribe(keys))
    }

    /// Observed like the lock calls: the records are the election's traffic. A call before
    /// the engine connects fails with `Unavailable`, as every other call does.
    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        self.watch(|store| store.leader(keys, record, op))
    }

    /// A semaphore's holders observed like the lock calls; the operator's other calls and
    /// the locker's description unobserved: they are not the locks' traffic.
    fn admin<'a>(&'a self, op: AdminOp<'a>) -> StoreFuture<'a, AdminAnswer> {
        match op {
            AdminOp::Permits(_) => self.watch(|store| store.admin(op)),
            op => self.send(|store| store.admin(op)),
        }
    }
}
