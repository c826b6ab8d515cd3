//! Exclusive locks (acquire, release, a waiting writer's withdrawal), the renewal of every
//! kind of lease, and the wake-up subscriptions.

use tokio::sync::watch;
use tokio::time::Instant;

use super::state::Held;
use super::MemoryStore;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Renewal, WakeSubscription};

impl MemoryStore {
    pub(crate) fn acquire(&self, req: &AcquireRequest<'_>) -> Attempt {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        state.tick(now);
        if let Some(held) = state.locks.get(req.keys.lock()) {
            if held.expires > now {
                return Attempt::Held {
                    remaining: Some(held.expires - now),
                };
            }
        }
        if let Some(last) = state.last_reader_end(req.keys.lock(), now) {
            if !req.interest.is_zero() {
                let until = now + req.interest;
                let waits = state
                    .writer_waits
                    .entry(req.keys.lock().to_owned())
                    .or_insert(until);
                *waits = (*waits).max(until);
            }
            return Attempt::Held {
                remaining: Some(last - now),
            };
        }
        state.writer_waits.remove(req.keys.lock());
        state.locks.insert(
            req.keys.lock().to_owned(),
            Held {
                token: req.token.clone(),
                expires: now + req.lease,
            },
        );
        Attempt::granted(state.reserve_fences(req.keys.fence(), req.fences, now, req.fence_ttl))
    }

    /// The process's waiting writer for `keys` left without the lock (Busy, cancelled,
    /// panicked): it holds new readers back no more, and they hear it at once. Only the
    /// front task of the process's local queue contends in the store, so it was the only
    /// writer waiting; the next task in that queue registers again at its first attempt.
    pub(crate) fn withdraw(&self, keys: &LockKeys) {
        let mut state = self.state.lock().unwrap();
        if state.writer_waits.remove(keys.lock()).is_some() {
            state.wake(keys.wake());
        }
    }

    pub(crate) fn release(&self, keys: &LockKeys, token: &OwnerToken) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        if !state.owns(keys.lock(), token, now) {
            return false;
        }
        state.locks.remove(keys.lock());
        if let Some(tx) = state.channels.get(keys.wake()) {
            tx.send_modify(|n| *n += 1);
        }
        true
    }

    pub(crate) fn renew(&self, batch: &[Renewal<'_>]) -> Vec<bool> {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        batch
            .iter()
            .map(|r| {
                if let LeaseKind::Permits { .. } = r.kind {
                    return match state
                        .semaphores
                        .get_mut(r.keys.lock())
                        .and_then(|sem| sem.holders.get_mut(r.token))
                    {
                        Some((_, until)) if *until > now => {
                            *until = now + r.lease;
                            true
                        }
                        _ => false,
                    };
                }
                if r.kind == LeaseKind::Read {
                    return match state
                        .readers
                        .get_mut(r.keys.lock())
                        .and_then(|readers| readers.get_mut(r.token))
                    {
                        Some(until) if *until > now => {
                            *until = now + r.lease;
                            true
                        }
                        _ => false,
                    };
                }
                match state.locks.get_mut(r.keys.lock()) {
                    Some(held) if held.expires > now && held.token == *r.token => {
                        held.expires = now + r.lease;
                        true
                    }
                    _ => false,
                }
            })
            .collect()
    }

    pub(crate) fn subscribe(&self, keys: &LockKeys) -> WakeSubscription {
        let mut state = self.state.lock().unwrap();
        let tx = state
            .channels
            .entry(keys.wake().to_owned())
            .or_insert_with(|| watch::channel(0).0);
        WakeSubscription::new(tx.subscribe(), None)
    }
}

#[cfg(test)]
impl MemoryStore {
    /// Whether someone holds `lock` now (for tests; no side effect).
    pub(crate) fn is_locked(&self, lock: &str) -> bool {
        let state = self.state.lock().unwrap();
        state
            .locks
            .get(lock)
            .is_some_and(|held| held.expires > Instant::now())
    }

    /// Forgets every lock, as a server that restarted empty would; fence counters stay.
    pub(crate) fn forget_locks(&self) {
        self.state.lock().unwrap().locks.clear();
    }
}
