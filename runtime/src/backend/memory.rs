//! Process memory as the lock store: the same protocol as Redis (leases that expire, owner
//! tokens, fences seeded from the clock, wake-ups on release), for tests and one-process use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Renewal, WakeSubscription};
use crate::key::LockKeys;
use crate::token::OwnerToken;

/// After how many operations expired entries are swept, so memory stays bounded.
const SWEEP_EVERY: u64 = 1024;

pub(crate) struct MemoryBackend {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    locks: HashMap<String, Held>,
    fences: HashMap<String, Fence>,
    channels: HashMap<String, watch::Sender<u64>>,
    ops: u64,
}

struct Held {
    token: OwnerToken,
    expires: Instant,
}

struct Fence {
    last: u64,
    expires: Instant,
}

impl MemoryBackend {
    pub(crate) fn new() -> Self {
        MemoryBackend {
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn acquire(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        lease: Duration,
        fence_ttl: Duration,
    ) -> Attempt {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        state.tick(now);
        if let Some(held) = state.locks.get(&keys.lock) {
            if held.expires > now {
                return Attempt::Held {
                    remaining: Some(held.expires - now),
                };
            }
        }
        state.locks.insert(
            keys.lock.clone(),
            Held {
                token: token.clone(),
                expires: now + lease,
            },
        );
        Attempt::Granted {
            fence: state.next_fence(&keys.fence, now, fence_ttl),
        }
    }

    pub(crate) fn release(&self, keys: &LockKeys, token: &OwnerToken) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        if !state.owns(&keys.lock, token, now) {
            return false;
        }
        state.locks.remove(&keys.lock);
        if let Some(tx) = state.channels.get(&keys.wake) {
            tx.send_modify(|n| *n += 1);
        }
        true
    }

    pub(crate) fn handoff(
        &self,
        keys: &LockKeys,
        from: &OwnerToken,
        to: &OwnerToken,
        lease: Duration,
        fence_ttl: Duration,
    ) -> Option<u64> {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        if !state.owns(&keys.lock, from, now) {
            return None;
        }
        state.locks.insert(
            keys.lock.clone(),
            Held {
                token: to.clone(),
                expires: now + lease,
            },
        );
        Some(state.next_fence(&keys.fence, now, fence_ttl))
    }

    pub(crate) fn renew(&self, batch: &[Renewal<'_>]) -> Vec<bool> {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        batch
            .iter()
            .map(|r| match state.locks.get_mut(&r.keys.lock) {
                Some(held) if held.expires > now && held.token == *r.token => {
                    held.expires = now + r.lease;
                    true
                }
                _ => false,
            })
            .collect()
    }

    pub(crate) fn subscribe(&self, keys: &LockKeys) -> WakeSubscription {
        let mut state = self.state.lock().unwrap();
        let tx = state
            .channels
            .entry(keys.wake.clone())
            .or_insert_with(|| watch::channel(0).0);
        WakeSubscription::new(tx.subscribe(), None)
    }
}

impl State {
    fn owns(&self, lock: &str, token: &OwnerToken, now: Instant) -> bool {
        self.locks
            .get(lock)
            .is_some_and(|held| held.expires > now && held.token == *token)
    }

    /// The next fence of a lock: counters that expired are re-seeded from the wall clock in
    /// microseconds, like the Redis script, so fences never go backwards.
    fn next_fence(&mut self, fence_key: &str, now: Instant, ttl: Duration) -> u64 {
        let seed = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64)
        };
        let fence = match self.fences.get_mut(fence_key) {
            Some(f) if f.expires > now => {
                f.last += 1;
                f.expires = now + ttl;
                f.last
            }
            _ => {
                let last = seed() + 1;
                self.fences.insert(
                    fence_key.to_owned(),
                    Fence {
                        last,
                        expires: now + ttl,
                    },
                );
                last
            }
        };
        fence
    }

    /// Every so often, forget expired locks and fences and channels nobody listens to.
    fn tick(&mut self, now: Instant) {
        self.ops += 1;
        if self.ops % SWEEP_EVERY != 0 {
            return;
        }
        self.locks.retain(|_, held| held.expires > now);
        self.fences.retain(|_, f| f.expires > now);
        self.channels.retain(|_, tx| tx.receiver_count() > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &str) -> LockKeys {
        LockKeys::new("t", k)
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expires_and_fence_increases() {
        let b = MemoryBackend::new();
        let (a, c) = (OwnerToken::generate(), OwnerToken::generate());
        let ttl = Duration::from_secs(60);
        let Attempt::Granted { fence: f1 } = b.acquire(&keys("x"), &a, Duration::from_secs(1), ttl)
        else {
            panic!("free lock not granted")
        };
        assert!(matches!(
            b.acquire(&keys("x"), &c, Duration::from_secs(1), ttl),
            Attempt::Held { remaining: Some(_) }
        ));
        tokio::time::advance(Duration::from_millis(1001)).await;
        let Attempt::Granted { fence: f2 } = b.acquire(&keys("x"), &c, Duration::from_secs(1), ttl)
        else {
            panic!("expired lock not granted")
        };
        assert!(f2 > f1);
        assert!(!b.release(&keys("x"), &a), "stale owner must not release");
        assert!(b.release(&keys("x"), &c));
    }

    #[tokio::test(start_paused = true)]
    async fn handoff_needs_the_current_owner() {
        let b = MemoryBackend::new();
        let (a, c, d) = (
            OwnerToken::generate(),
            OwnerToken::generate(),
            OwnerToken::generate(),
        );
        let ttl = Duration::from_secs(60);
        let lease = Duration::from_secs(1);
        b.acquire(&keys("x"), &a, lease, ttl);
        assert_eq!(b.handoff(&keys("x"), &c, &d, lease, ttl), None);
        assert!(b.handoff(&keys("x"), &a, &c, lease, ttl).is_some());
        assert!(!b.release(&keys("x"), &a));
        assert!(b.release(&keys("x"), &c));
    }
}
