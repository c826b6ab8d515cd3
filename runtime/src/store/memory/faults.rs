//! Faults on demand for the in-memory store (feature `testkit`): what a real engine does to its
//! holders (a lease that ends early, a holder paused past its lease, an outage, a failover that
//! forgets the leases but not the fences), done to the store's state at once, so that a test
//! under Tokio's paused clock sees it happen at a point it chose.

use std::collections::HashSet;
use std::sync::Mutex;

use tokio::time::Instant;

use super::MemoryStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;

/// The faults in force: an outage, and the holders whose renewals go unanswered.
#[derive(Default)]
pub(crate) struct Faults {
    /// The engine is out: until this instant, or (`Some(None)`) until it is brought back.
    down: Mutex<Option<Option<Instant>>>,
    /// Holders paused past their lease: their renewals are never answered, as a paused
    /// process sends none.
    paused: Mutex<HashSet<OwnerToken>>,
}

impl Faults {
    /// The error of every call while the engine is out; `None` while it answers.
    pub(crate) fn outage(&self) -> Option<LockError> {
        let mut down = self.down.lock().unwrap();
        match *down {
            Some(Some(until)) if until <= Instant::now() => {
                *down = None;
                None
            }
            Some(_) => Some(LockError::unavailable(
                "the in-memory engine is out (a fault of the test kit)",
                None,
            )),
            None => None,
        }
    }

    /// Whether `token`'s holder is paused: its renewals go unanswered.
    pub(crate) fn is_paused(&self, token: &OwnerToken) -> bool {
        self.paused.lock().unwrap().contains(token)
    }

    /// Takes the engine out until `until` (`None`: until [`Faults::restore`]).
    pub(crate) fn take_down(&self, until: Option<Instant>) {
        *self.down.lock().unwrap() = Some(until);
    }

    /// Ends an outage.
    pub(crate) fn restore(&self) {
        *self.down.lock().unwrap() = None;
    }
}

impl MemoryStore {
    /// The faults of this store.
    pub(crate) fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Ends every lease on `keys`' lock now (the writer's and each reader's), as if it had
    /// expired: waiters are not woken (an expiry publishes nothing), and the holders learn it
    /// at their next renewal. Whether anyone held it.
    pub(crate) fn end_leases(&self, keys: &LockKeys) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let writer = state
            .locks
            .remove(keys.lock())
            .is_some_and(|held| held.expires > now);
        let readers = state
            .readers
            .remove(keys.lock())
            .is_some_and(|readers| readers.values().any(|&until| until > now));
        writer || readers
    }

    /// Ends the writer's lease on `keys`' lock now and leaves its renewals unanswered, as for
    /// a holder paused past its lease: it still believes it holds the lock until its own
    /// count of the lease runs out, while another contender may take it. Whether anyone held
    /// it.
    pub(crate) fn pause_writer(&self, keys: &LockKeys) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(held) = state.locks.remove(keys.lock()) else {
            return false;
        };
        if held.expires <= now {
            return false;
        }
        self.faults.paused.lock().unwrap().insert(held.token);
        true
    }

    /// Releases `keys`' lock as an operator would: its holders lose it and its waiters are
    /// woken at once. Whether anyone held it.
    pub(crate) fn force_release(&self, keys: &LockKeys) -> bool {
        let held = self.end_leases(keys);
        self.state.lock().unwrap().wake(keys.wake());
        held
    }

    /// Ends the lease of the permit holder of semaphore `keys` whose lease would end first,
    /// waking the semaphore's waiters. Whether there was one.
    pub(crate) fn expire_permit(&self, keys: &LockKeys) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(sem) = state.semaphores.get_mut(keys.lock()) else {
            return false;
        };
        let first = sem
            .holders
            .iter()
            .filter(|(_, (_, until))| *until > now)
            .min_by_key(|(_, (_, until))| *until)
            .map(|(token, _)| token.clone());
        let Some(token) = first else {
            return false;
        };
        sem.holders.remove(&token);
        state.wake(keys.wake());
        true
    }

    /// Deposes the leader of the election whose lock is `keys`: its lease ends and its
    /// record is cleared, so observers see no leader until a candidate wins the next term.
    /// Whether there was one.
    pub(crate) fn depose(&self, keys: &LockKeys) -> bool {
        let held = self.end_leases(keys);
        let mut state = self.state.lock().unwrap();
        let recorded = state.leaders.remove(keys.lock()).is_some();
        state.wake(keys.wake());
        held || recorded
    }

    /// A failover to a replica that had not seen the latest writes: every lease, reader,
    /// permit and leader record is forgotten, while the fence counters go on (every fence
    /// handed out after is above every one before). Waiters are woken.
    pub(crate) fn fail_over(&self) {
        let mut state = self.state.lock().unwrap();
        state.locks.clear();
        state.readers.clear();
        state.writer_waits.clear();
        state.semaphores.clear();
        state.leaders.clear();
        for tx in state.channels.values() {
            tx.send_modify(|n| *n += 1);
        }
    }

    /// Whether a writer holds `keys`' lock now, and a different one than `token` when given.
    pub(crate) fn writer_other_than(&self, keys: &LockKeys, token: Option<&OwnerToken>) -> bool {
        let state = self.state.lock().unwrap();
        state.locks.get(keys.lock()).is_some_and(|held| {
            held.expires > Instant::now() && token.is_none_or(|t| held.token != *t)
        })
    }

    /// The writer holding `keys`' lock now, if any.
    pub(crate) fn writer(&self, keys: &LockKeys) -> Option<OwnerToken> {
        let state = self.state.lock().unwrap();
        state
            .locks
            .get(keys.lock())
            .filter(|held| held.expires > Instant::now())
            .map(|held| held.token.clone())
    }
}
