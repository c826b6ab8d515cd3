//! What the in-memory store holds (locks, fence counters, wake-up channels, readers, leader
//! records, semaphores), its fence rule, and the sweep that keeps it bounded.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::leader::Recorded;
use super::semaphores::Semaphore;
use crate::store::token::OwnerToken;

/// After how many operations expired entries are swept, so memory stays bounded.
const SWEEP_EVERY: u64 = 1024;

#[derive(Default)]
pub(super) struct State {
    pub(super) locks: HashMap<String, Held>,
    fences: HashMap<String, Fence>,
    pub(super) channels: HashMap<String, watch::Sender<u64>>,
    /// The read holders of each lock, with the end of each one's lease.
    pub(super) readers: HashMap<String, HashMap<OwnerToken, Instant>>,
    /// Until when a writer waits for each lock's readers: new readers wait behind it.
    pub(super) writer_waits: HashMap<String, Instant>,
    /// The recorded leader of each election, by the election's lock key: it counts only
    /// while its owner token holds that lock.
    pub(super) leaders: HashMap<String, Recorded>,
    /// The permit holders of each semaphore.
    pub(super) semaphores: HashMap<String, Semaphore>,
    ops: u64,
}

pub(super) struct Held {
    pub(super) token: OwnerToken,
    pub(super) expires: Instant,
}

struct Fence {
    last: u64,
    expires: Instant,
}

impl State {
    /// When the last live reader's lease of `lock` ends; `None` without readers.
    pub(super) fn last_reader_end(&mut self, lock: &str, now: Instant) -> Option<Instant> {
        let readers = self.readers.get_mut(lock)?;
        readers.retain(|_, until| *until > now);
        let last = readers.values().max().copied();
        if last.is_none() {
            self.readers.remove(lock);
        }
        last
    }

    /// Wakes the subscribers of `channel`.
    pub(super) fn wake(&self, channel: &str) {
        if let Some(tx) = self.channels.get(channel) {
            tx.send_modify(|n| *n += 1);
        }
    }

    pub(super) fn owns(&self, lock: &str, token: &OwnerToken, now: Instant) -> bool {
        self.locks
            .get(lock)
            .is_some_and(|held| held.expires > now && held.token == *token)
    }

    /// Reserves `count` fences and returns the highest. Like the Redis script, every
    /// reservation lifts the counter to the wall clock in microseconds first, so fences never
    /// go back, also after a counter expired.
    pub(super) fn reserve_fences(
        &mut self,
        fence_key: &str,
        count: u64,
        now: Instant,
        ttl: Duration,
    ) -> u64 {
        let fence = self.fences.entry(fence_key.to_owned()).or_insert(Fence {
            last: 0,
            expires: now,
        });
        if fence.expires <= now {
            fence.last = 0;
        }
        fence.last = fence.last.max(clock_us()) + count;
        fence.expires = now + ttl;
        fence.last
    }

    /// The fence of a reader, reserving nothing: the counter, lifted to the wall clock in
    /// microseconds, as the Redis script's `current_fence`. At or above every fence handed
    /// out before (the counter holds the highest; a counter that expired is below the clock),
    /// and below every later writer's (its reservation lifts the counter to a later clock and
    /// adds at least one).
    pub(super) fn current_fence(&self, fence_key: &str, now: Instant) -> u64 {
        let counter = self
            .fences
            .get(fence_key)
            .filter(|f| f.expires > now)
            .map_or(0, |f| f.last);
        counter.max(clock_us()).max(1)
    }

    /// Every so often, forget expired locks and fences and channels nobody listens to.
    pub(super) fn tick(&mut self, now: Instant) {
        self.ops += 1;
        if self.ops % SWEEP_EVERY != 0 {
            return;
        }
        self.locks.retain(|_, held| held.expires > now);
        self.fences.retain(|_, f| f.expires > now);
        self.readers.retain(|_, readers| {
            readers.retain(|_, until| *until > now);
            !readers.is_empty()
        });
        self.writer_waits.retain(|_, until| *until > now);
        let locks = &self.locks;
        self.leaders.retain(|lock, r| {
            locks
                .get(lock)
                .is_some_and(|held| held.expires > now && held.token == r.owner)
        });
        self.semaphores.retain(|_, sem| sem.in_use(now));
        self.channels.retain(|_, tx| tx.receiver_count() > 0);
    }
}

/// The wall clock in microseconds: the floor of every fence (0 before 1970).
fn clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}
