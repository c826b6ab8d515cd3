//! Process memory as the lock store: the same protocol as Redis (leases that expire, owner
//! tokens, fences seeded from the clock, wake-ups on release), for tests and one-process use.
//! Every call takes effect and is answered in its first poll, so no outcome is ever unknown
//! ([`Store::settle`]: nothing to settle).
//!
//! By job: [`state`] (what the store holds, its fences and its sweep), [`locks`] (exclusive
//! locks, renewals, wake-ups), [`readers`], [`semaphores`], [`leader`] (leader records).

#[cfg(feature = "testkit")]
pub(crate) mod faults;
mod leader;
mod locks;
mod readers;
mod semaphores;
mod state;
#[cfg(test)]
mod tests;

use std::sync::Mutex;
use std::time::Duration;

use self::state::State;
use super::{
    admin_by, leader_by, one_at_a_time, AcquireRequest, AdminAnswer, AdminOp, Attempt, Ended,
    Ending, Engine, Info, LeaderAnswer, LeaderOp, Leave, Renewal, Renewed, Store, StoreFuture,
    WakeSubscription,
};
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

pub(crate) struct MemoryStore {
    state: Mutex<State>,
    /// The faults a test kit injects (feature `testkit`).
    #[cfg(feature = "testkit")]
    faults: faults::Faults,
}

impl MemoryStore {
    pub(crate) fn new() -> Self {
        MemoryStore {
            state: Mutex::new(State::default()),
            #[cfg(feature = "testkit")]
            faults: faults::Faults::default(),
        }
    }

    /// The refusal of every call while a test kit holds the engine out; `None` otherwise.
    fn outage<'a, T: Send + 'a>(&self) -> Option<StoreFuture<'a, T>> {
        #[cfg(feature = "testkit")]
        if let Some(err) = self.faults.outage() {
            return Some(Box::pin(std::future::ready(Err(err))));
        }
        None
    }

    /// Whether a test kit paused `token`'s holder: its renewals go unanswered.
    fn paused(&self, token: &OwnerToken) -> bool {
        #[cfg(feature = "testkit")]
        return self.faults.is_paused(token);
        #[cfg(not(feature = "testkit"))]
        {
            let _ = token;
            false
        }
    }
}

impl Store for MemoryStore {
    /// Every call is answered at once.
    fn info(&self) -> Info {
        Info {
            always_answers: true,
            ..Info::of(
                Engine::Memory,
                Engine::Memory.capabilities(Duration::ZERO),
                "in memory",
            )
        }
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        self.outage()
            .unwrap_or_else(|| Box::pin(std::future::ready(Ok(()))))
    }

    /// One lease at a time.
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        if let Some(out) = self.outage() {
            return out;
        }
        one_at_a_time(batch, |req| {
            let attempt = match req.kind {
                LeaseKind::Exclusive => Ok(MemoryStore::acquire(self, req)),
                LeaseKind::Read => Ok(MemoryStore::acquire_shared(self, req)),
                LeaseKind::Permits { limit, count } => {
                    MemoryStore::acquire_permits(self, req, limit, count, req.waiter)
                }
            };
            Box::pin(std::future::ready(attempt))
        })
    }

    /// A handover needs nothing of the store: the next holder takes the next reserved fence.
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended> {
        let ended = match ending {
            Ending::HandOver => return super::kept(),
            Ending::Release { kind, .. } => {
                if let Some(out) = self.outage() {
                    return out;
                }
                Ended::Released(match kind {
                    LeaseKind::Exclusive => MemoryStore::release(self, keys, token),
                    LeaseKind::Read => MemoryStore::release_shared(self, keys, token),
                    LeaseKind::Permits { .. } => MemoryStore::release_permits(self, keys, token),
                })
            }
        };
        Box::pin(std::future::ready(Ok(ended)))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        if let Some(out) = self.outage() {
            return out;
        }
        let mut renewed = yes_no(MemoryStore::renew(self, batch));
        for (answer, r) in renewed.iter_mut().zip(batch) {
            if self.paused(r.token) {
                *answer = Renewed::Unknown;
            }
        }
        Box::pin(std::future::ready(Ok(renewed)))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        if let Some(out) = self.outage() {
            return out;
        }
        Box::pin(std::future::ready(Ok(MemoryStore::subscribe(self, keys))))
    }

    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        match place {
            Leave::ProcessFront => MemoryStore::withdraw(self, keys),
            Leave::PermitLine { waiter, .. } => MemoryStore::withdraw_permits(self, keys, waiter),
            // Fair per process: no request waits alone.
            Leave::Alone(_) => {}
        }
    }

    /// Leader records in memory; the record's name is not used (the record lives with the
    /// lock).
    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        if let Some(out) = self.outage() {
            return out;
        }
        leader_by(self, keys, record, op)
    }

    /// Semaphores, but no inspection of locks (they are visible to this process only): a
    /// semaphore's holders are answered, the rest refused.
    fn admin<'a>(&'a self, op: AdminOp<'a>) -> StoreFuture<'a, AdminAnswer> {
        if let Some(out) = self.outage() {
            return out;
        }
        admin_by(self, op)
    }
}

/// A store that can only say yes or no.
pub(crate) fn yes_no(flags: Vec<bool>) -> Vec<Renewed> {
    flags
        .into_iter()
        .map(|ok| if ok { Renewed::Yes } else { Renewed::No })
        .collect()
}
