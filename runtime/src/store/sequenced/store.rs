//! The store boundary of every sequential-contender engine, written once: the calls go to the
//! recipe, and only what differs (renewals, what the engine offers) to the engine.

use std::future::Future;

use super::{Inspection, Records, Role, Sequenced};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    admin_by, answer, leader_by, one_at_a_time, AcquireRequest, AdminAnswer, AdminOp, AdminParts,
    AtOnce, Attempt, Capabilities, Ended, Ending, LeaderAnswer, LeaderOp, Leave, Renewal, Renewed,
    Session, Store, StoreFuture, Together, WakeSubscription,
};

/// What a sequential-contender engine answers itself, beside its [`Driver`](super::Driver)
/// and that driver's [`Inspection`] and [`Records`].
pub(crate) trait Engine: Inspection + Records + AdminParts {
    /// What it offers; the lease bound is its session's.
    fn capabilities(&self) -> Capabilities;

    /// Which engine it is ([`Store::engine`]).
    fn engine(&self) -> crate::store::Engine;

    /// What it sees of its session's connection ([`Info::link`](crate::store::Info::link)).
    fn link(&self) -> Option<tokio::sync::watch::Receiver<bool>>;

    /// One round trip over its session, opening one when there is none ([`Store::probe`]).
    fn probe(&self) -> impl Future<Output = Result<(), LockError>> + Send;
}

/// Renewals, which each engine proves its own way (ZooKeeper: the contender's session is the
/// live one; etcd: an acknowledged keep-alive of the lease the contender is attached to).
pub(crate) trait Renews {
    /// Extends each lease its token still holds; one entry per renewal, in order.
    fn renew_all(
        &self,
        batch: &[Renewal<'_>],
    ) -> impl Future<Output = Result<Vec<Renewed>, LockError>> + Send;
}

impl<D: Engine> Store for Sequenced<D>
where
    Sequenced<D>: Renews,
{
    fn info(&self) -> crate::store::Info {
        crate::store::Info {
            link: self.driver.link(),
            // Any keys, locks and readers' shares alike: one write creates every contender.
            at_once: AtOnce {
                keys: Together::Always,
                reads: true,
            },
            ..crate::store::Info::of(
                self.driver.engine(),
                self.driver.capabilities(),
                self.driver.describe(),
            )
        }
    }

    fn session(&self) -> Option<Session> {
        Some(self.current_session())
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.driver.probe())
    }

    /// Readers contend as the recipe's readers (a contender of their own, first among
    /// writers), permits in its weighted queue. A batch of several (locks and readers'
    /// shares) is created by one write, all or nothing (see `together`).
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        if batch.len() > 1 {
            return Box::pin(self.acquire_together(batch));
        }
        one_at_a_time(batch, |req| match req.kind {
            LeaseKind::Exclusive => Box::pin(self.acquire_once(req)),
            LeaseKind::Read => Box::pin(self.acquire_shared_once(req)),
            LeaseKind::Permits { limit, count } => {
                Box::pin(self.acquire_permits_once(req, limit, count, req.waiter))
            }
        })
    }

    /// A handover needs nothing of the engine: the contender stays, and the next holder
    /// takes the next reserved fence.
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended> {
        let role = match ending {
            Ending::HandOver => return crate::store::kept(),
            Ending::Release { kind, .. } => match kind {
                LeaseKind::Exclusive => Role::Writer,
                LeaseKind::Read => Role::Reader,
                // The name of a permits contender does not depend on its limit (see
                // `Driver::name`).
                LeaseKind::Permits { count, .. } => Role::Permits { limit: 0, count },
            },
        };
        answer(self.release_once(keys, token, role), Ended::Released)
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    /// Fair per process: no request waits alone.
    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        match place {
            Leave::ProcessFront => self.withdraw_waiting(keys),
            Leave::PermitLine { waiter, .. } => self.withdraw_permits(keys, waiter),
            Leave::Alone(_) => {}
        }
    }

    /// A semaphore's holders from the recipe, the rest from the engine.
    fn admin<'a>(&'a self, op: AdminOp<'a>) -> StoreFuture<'a, AdminAnswer> {
        match op {
            AdminOp::Permits(keys) => answer(self.inspect_permits_once(keys), AdminAnswer::Permits),
            op => admin_by(&*self.driver, op),
        }
    }

    /// The record lives on the holder's contender: `record` is not used.
    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        leader_by(self, keys, record, op)
    }
}
