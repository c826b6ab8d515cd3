//! Semaphores: permits under a limit their holders agree on, each holder with its own lease
//! and fence, and the turns of waiters for several permits.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::MemoryStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, AdminParts, Attempt, PermitState, PermitWaiter, StoreFuture, PERMIT_INTEREST,
};

/// One semaphore: the limit its holders agreed on, each holder's permits and lease end, and
/// the waiters for several permits by arrival (name, permits, waits until), as on Redis
/// (sem_acquire.lua).
pub(super) struct Semaphore {
    pub(super) limit: u32,
    pub(super) holders: HashMap<OwnerToken, (u32, Instant)>,
    pub(super) waiters: Vec<(u128, u32, Instant)>,
}

impl Semaphore {
    /// Forgets holders whose lease ended; the permits in use by the others.
    fn used(&mut self, now: Instant) -> u64 {
        self.holders.retain(|_, (_, until)| *until > now);
        self.holders.values().map(|&(n, _)| u64::from(n)).sum()
    }

    /// Forgets waiters that stopped asking; whether anyone holds or waits.
    pub(super) fn in_use(&mut self, now: Instant) -> bool {
        self.waiters.retain(|&(_, _, until)| until > now);
        self.used(now) > 0 || !self.waiters.is_empty()
    }
}

impl MemoryStore {
    pub(crate) fn acquire_permits(
        &self,
        req: &AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> Result<Attempt, LockError> {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        state.tick(now);
        let sem = state
            .semaphores
            .entry(req.keys.lock().to_owned())
            .or_insert_with(|| Semaphore {
                limit,
                holders: HashMap::new(),
                waiters: Vec::new(),
            });
        sem.in_use(now);
        let used = sem.used(now);
        if used == 0 {
            // Nobody holds a permit: the limit is the caller's to set.
            sem.limit = limit;
        } else if sem.limit != limit {
            return Err(crate::store::disagreement(sem.limit, limit));
        }
        // Turns (see `Store::acquire` of permits): the permits the waiters ahead of this request
        // need are kept for them.
        let me = waiter.map(|w| w.name);
        let ahead: u64 = sem
            .waiters
            .iter()
            .take_while(|&&(name, _, _)| Some(name) != me)
            .map(|&(_, n, _)| u64::from(n))
            .sum();
        if used + u64::from(count) + ahead > u64::from(limit) {
            if let Some(w) = waiter.filter(|w| w.until > now) {
                let until = now + (w.until - now).min(PERMIT_INTEREST);
                match sem.waiters.iter_mut().find(|(name, _, _)| *name == w.name) {
                    Some(place) => place.2 = until,
                    None => sem.waiters.push((w.name, count, until)),
                }
            }
            let first = sem.holders.values().map(|&(_, until)| until).min();
            return Ok(Attempt::Held {
                remaining: first.map(|until| until - now),
            });
        }
        sem.waiters.retain(|&(name, _, _)| Some(name) != me);
        sem.holders
            .insert(req.token.clone(), (count, now + req.lease));
        // One token per holder, whatever its permits, by the writers' rule: above every token
        // of this semaphore handed out before, also after the counter expired.
        Ok(Attempt::granted(state.reserve_fences(
            req.keys.fence(),
            1,
            now,
            req.fence_ttl,
        )))
    }

    pub(crate) fn release_permits(&self, keys: &LockKeys, token: &OwnerToken) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(sem) = state.semaphores.get_mut(keys.lock()) else {
            return false;
        };
        let held = sem
            .holders
            .remove(token)
            .is_some_and(|(_, until)| until > now);
        if !sem.in_use(now) {
            state.semaphores.remove(keys.lock());
        }
        if let Some(tx) = state.channels.get(keys.wake()) {
            tx.send_modify(|n| *n += 1);
        }
        held
    }

    /// A waiter for several permits leaves the queue, waking the others.
    pub(crate) fn withdraw_permits(&self, keys: &LockKeys, waiter: u128) {
        let mut state = self.state.lock().unwrap();
        let Some(sem) = state.semaphores.get_mut(keys.lock()) else {
            return;
        };
        sem.waiters.retain(|&(name, _, _)| name != waiter);
        if !sem.in_use(Instant::now()) {
            state.semaphores.remove(keys.lock());
        }
        state.wake(keys.wake());
    }

    pub(crate) fn inspect_permits(&self, keys: &LockKeys) -> PermitState {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(sem) = state.semaphores.get_mut(keys.lock()) else {
            return PermitState::default();
        };
        if sem.used(now) == 0 {
            return PermitState::default();
        }
        // The tokens say who holds the permits (no description: the lockers are in this
        // process, and memory stores none).
        let mut holders: Vec<(u32, Duration, crate::inspect::Holder)> = sem
            .holders
            .iter()
            .map(|(token, &(n, until))| {
                let stamp = crate::store::identity::Stamp::of_stored(token.as_bytes());
                (
                    n,
                    until - now,
                    crate::store::identity::holder(stamp, |_| None),
                )
            })
            .collect();
        holders.sort_by_key(|h| h.1);
        PermitState {
            limit: Some(sem.limit),
            holders,
        }
    }
}

/// A semaphore's holders, answered at once; no inspection of locks (they are visible to this
/// process only), so the other calls keep their refusals.
impl AdminParts for MemoryStore {
    fn admin_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(std::future::ready(Ok(self.inspect_permits(keys))))
    }
}
