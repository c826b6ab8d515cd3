//! Process memory as the lock store: the same protocol as Redis (leases that expire, owner
//! tokens, fences seeded from the clock, wake-ups on release), for tests and one-process use.
//! Every call takes effect and is answered in its first poll, so no outcome is ever unknown
//! ([`Store::settle`]: nothing to settle).
//!
//! By job: [`state`] (what the store holds, its fences and its sweep), [`locks`] (exclusive
//! locks, renewals, wake-ups), [`readers`], [`semaphores`], [`leader`] (leader records).

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
    AcquireRequest, Attempt, Engine, Info, LeaderRecord, Leave, PermitState, Renewal, Renewed,
    Store, StoreFuture, WakeSubscription,
};
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

pub(crate) struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    pub(crate) fn new() -> Self {
        MemoryStore {
            state: Mutex::new(State::default()),
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

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        let attempt = match req.kind {
            LeaseKind::Exclusive => Ok(MemoryStore::acquire(self, req)),
            LeaseKind::Read => Ok(MemoryStore::acquire_shared(self, req)),
            LeaseKind::Permits { limit, count } => {
                MemoryStore::acquire_permits(self, req, limit, count, req.waiter)
            }
        };
        Box::pin(std::future::ready(attempt))
    }

    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        kind: LeaseKind,
        _: tokio::time::Instant,
    ) -> StoreFuture<'a, bool> {
        let released = match kind {
            LeaseKind::Exclusive => MemoryStore::release(self, keys, token),
            LeaseKind::Read => MemoryStore::release_shared(self, keys, token),
            LeaseKind::Permits { .. } => MemoryStore::release_permits(self, keys, token),
        };
        Box::pin(std::future::ready(Ok(released)))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(std::future::ready(Ok(yes_no(MemoryStore::renew(
            self, batch,
        )))))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
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

    fn inspect_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(std::future::ready(Ok(MemoryStore::inspect_permits(
            self, keys,
        ))))
    }

    fn leader_records(&self) -> &dyn crate::store::LeaderRecords {
        self
    }
}

/// A store that can only say yes or no.
pub(crate) fn yes_no(flags: Vec<bool>) -> Vec<Renewed> {
    flags
        .into_iter()
        .map(|ok| if ok { Renewed::Yes } else { Renewed::No })
        .collect()
}

impl crate::store::LeaderRecords for MemoryStore {
    fn publish_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        let written = MemoryStore::publish_leader(self, keys, token, leader);
        Box::pin(std::future::ready(Ok(written)))
    }

    fn clear_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        MemoryStore::clear_leader(self, keys, term);
        Box::pin(std::future::ready(Ok(())))
    }

    fn read_leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(std::future::ready(Ok(MemoryStore::read_leader(self, keys))))
    }
}
