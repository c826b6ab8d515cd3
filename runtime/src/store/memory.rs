//! Process memory as the lock store: the same protocol as Redis (leases that expire, owner
//! tokens, fences seeded from the clock, wake-ups on release), for tests and one-process use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{
    AcquireRequest, Attempt, LeaderRecord, PermitState, PermitWaiter, Renewal, Renewed, Store,
    StoreFuture, WakeSubscription, PERMIT_INTEREST,
};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

/// After how many operations expired entries are swept, so memory stays bounded.
const SWEEP_EVERY: u64 = 1024;

pub(crate) struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    locks: HashMap<String, Held>,
    fences: HashMap<String, Fence>,
    channels: HashMap<String, watch::Sender<u64>>,
    /// The read holders of each lock, with the end of each one's lease.
    readers: HashMap<String, HashMap<OwnerToken, Instant>>,
    /// Until when a writer waits for each lock's readers: new readers wait behind it.
    writer_waits: HashMap<String, Instant>,
    /// The recorded leader of each election, by the election's lock key: it counts only
    /// while its owner token holds that lock.
    leaders: HashMap<String, Recorded>,
    /// The permit holders of each semaphore.
    semaphores: HashMap<String, Semaphore>,
    ops: u64,
}

struct Recorded {
    owner: OwnerToken,
    leader: LeaderRecord,
}

/// One semaphore: the limit its holders agreed on, each holder's permits and lease end, and
/// the waiters for several permits by arrival (name, permits, waits until), as on Redis
/// (sem_acquire.lua).
struct Semaphore {
    limit: u32,
    holders: HashMap<OwnerToken, (u32, Instant)>,
    waiters: Vec<(u128, u32, Instant)>,
}

impl Semaphore {
    /// Forgets holders whose lease ended; the permits in use by the others.
    fn used(&mut self, now: Instant) -> u64 {
        self.holders.retain(|_, (_, until)| *until > now);
        self.holders.values().map(|&(n, _)| u64::from(n)).sum()
    }

    /// Forgets waiters that stopped asking; whether anyone holds or waits.
    fn in_use(&mut self, now: Instant) -> bool {
        self.waiters.retain(|&(_, _, until)| until > now);
        self.used(now) > 0 || !self.waiters.is_empty()
    }
}

struct Held {
    token: OwnerToken,
    expires: Instant,
}

struct Fence {
    last: u64,
    expires: Instant,
}

impl MemoryStore {
    pub(crate) fn new() -> Self {
        MemoryStore {
            state: Mutex::new(State::default()),
        }
    }

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
        Attempt::Granted {
            top: state.reserve_fences(req.keys.fence(), req.fences, now, req.fence_ttl),
        }
    }

    pub(crate) fn acquire_shared(&self, req: &AcquireRequest<'_>) -> Attempt {
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
        if let Some(&until) = state.writer_waits.get(req.keys.lock()) {
            if until > now {
                return Attempt::Held { remaining: None };
            }
        }
        state
            .readers
            .entry(req.keys.lock().to_owned())
            .or_default()
            .insert(req.token.clone(), now + req.lease);
        Attempt::Granted {
            top: state.current_fence(req.keys.fence(), now),
        }
    }

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
            return Err(super::disagreement(sem.limit, limit));
        }
        // Turns (see `Store::acquire_permits`): the permits the waiters ahead of this request
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
        Ok(Attempt::Granted {
            top: state.reserve_fences(req.keys.fence(), 1, now, req.fence_ttl),
        })
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
        let mut holders: Vec<(u32, Duration)> = sem
            .holders
            .values()
            .map(|&(n, until)| (n, until - now))
            .collect();
        holders.sort_by_key(|&(_, remaining)| remaining);
        PermitState {
            limit: Some(sem.limit),
            holders,
        }
    }

    pub(crate) fn release_shared(&self, keys: &LockKeys, token: &OwnerToken) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(readers) = state.readers.get_mut(keys.lock()) else {
            return false;
        };
        let was_held = readers.remove(token).is_some_and(|until| until > now);
        readers.retain(|_, until| *until > now);
        if readers.is_empty() {
            state.readers.remove(keys.lock());
            if let Some(tx) = state.channels.get(keys.wake()) {
                tx.send_modify(|n| *n += 1);
            }
        }
        was_held
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

    pub(crate) fn publish_leader(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> bool {
        let mut state = self.state.lock().unwrap();
        if !state.owns(keys.lock(), token, Instant::now()) {
            return false;
        }
        if let Some(r) = state.leaders.get(keys.lock()) {
            if r.leader.term > leader.term {
                return false;
            }
        }
        let recorded = Recorded {
            owner: token.clone(),
            leader: leader.clone(),
        };
        state.leaders.insert(keys.lock().to_owned(), recorded);
        state.wake(keys.wake());
        true
    }

    pub(crate) fn clear_leader(&self, keys: &LockKeys, term: u64) {
        let mut state = self.state.lock().unwrap();
        if state
            .leaders
            .get(keys.lock())
            .is_some_and(|r| r.leader.term == term)
        {
            state.leaders.remove(keys.lock());
            state.wake(keys.wake());
        }
    }

    pub(crate) fn read_leader(&self, keys: &LockKeys) -> Option<LeaderRecord> {
        let state = self.state.lock().unwrap();
        let r = state.leaders.get(keys.lock())?;
        state
            .owns(keys.lock(), &r.owner, Instant::now())
            .then(|| r.leader.clone())
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

impl Store for MemoryStore {
    fn capabilities(&self) -> super::Capabilities {
        super::Engine::Memory.capabilities(Duration::ZERO)
    }

    fn describe(&self) -> String {
        "in memory".to_owned()
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(std::future::ready(Ok(MemoryStore::acquire(self, req))))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(MemoryStore::release(
            self, keys, token,
        ))))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(std::future::ready(Ok(yes_no(MemoryStore::renew(
            self, batch,
        )))))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(std::future::ready(Ok(MemoryStore::subscribe(self, keys))))
    }

    fn withdraw(&self, keys: &LockKeys) {
        MemoryStore::withdraw(self, keys);
    }

    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(std::future::ready(Ok(MemoryStore::acquire_shared(
            self, req,
        ))))
    }

    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(MemoryStore::release_shared(
            self, keys, token,
        ))))
    }

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

    fn acquire_permits<'a>(
        &'a self,
        req: &'a AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> StoreFuture<'a, Attempt> {
        Box::pin(std::future::ready(MemoryStore::acquire_permits(
            self, req, limit, count, waiter,
        )))
    }

    fn withdraw_permits(&self, keys: &LockKeys, waiter: u128, _count: u32) {
        MemoryStore::withdraw_permits(self, keys, waiter);
    }

    fn release_permits<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        _count: u32,
    ) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(MemoryStore::release_permits(
            self, keys, token,
        ))))
    }

    fn inspect_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(std::future::ready(Ok(MemoryStore::inspect_permits(
            self, keys,
        ))))
    }

    fn admin(&self) -> Result<&dyn super::Admin, LockError> {
        Err(LockError::config(
            "inspecting locks needs a locker on a shared engine; an in-memory locker's locks \
             are visible to its own process only",
        ))
    }
}

/// A store that can only say yes or no.
pub(crate) fn yes_no(flags: Vec<bool>) -> Vec<Renewed> {
    flags
        .into_iter()
        .map(|ok| if ok { Renewed::Yes } else { Renewed::No })
        .collect()
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

impl State {
    /// When the last live reader's lease of `lock` ends; `None` without readers.
    fn last_reader_end(&mut self, lock: &str, now: Instant) -> Option<Instant> {
        let readers = self.readers.get_mut(lock)?;
        readers.retain(|_, until| *until > now);
        let last = readers.values().max().copied();
        if last.is_none() {
            self.readers.remove(lock);
        }
        last
    }

    /// Wakes the subscribers of `channel`.
    fn wake(&self, channel: &str) {
        if let Some(tx) = self.channels.get(channel) {
            tx.send_modify(|n| *n += 1);
        }
    }

    fn owns(&self, lock: &str, token: &OwnerToken, now: Instant) -> bool {
        self.locks
            .get(lock)
            .is_some_and(|held| held.expires > now && held.token == *token)
    }

    /// Reserves `count` fences and returns the highest. Like the Redis script, every
    /// reservation lifts the counter to the wall clock in microseconds first, so fences never
    /// go back, also after a counter expired.
    fn reserve_fences(&mut self, fence_key: &str, count: u64, now: Instant, ttl: Duration) -> u64 {
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
    fn current_fence(&self, fence_key: &str, now: Instant) -> u64 {
        let counter = self
            .fences
            .get(fence_key)
            .filter(|f| f.expires > now)
            .map_or(0, |f| f.last);
        counter.max(clock_us()).max(1)
    }

    /// Every so often, forget expired locks and fences and channels nobody listens to.
    fn tick(&mut self, now: Instant) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &str) -> LockKeys {
        LockKeys::new("t", k)
    }

    fn request<'a>(keys: &'a LockKeys, token: &'a OwnerToken, fences: u64) -> AcquireRequest<'a> {
        AcquireRequest {
            keys,
            token,
            lease: Duration::from_secs(1),
            validity: Duration::from_millis(980),
            sent: Instant::now(),
            fence_ttl: Duration::from_secs(60),
            fences,
            interest: Duration::ZERO,
            queued: false,
            contender: None,
            fenced: true,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expires_and_fences_increase_past_reservations() {
        let b = MemoryStore::new();
        let (a, c) = (OwnerToken::generate(), OwnerToken::generate());
        let k = keys("x");
        let Attempt::Granted { top: t1 } = b.acquire(&request(&k, &a, 5)) else {
            panic!("free lock not granted")
        };
        assert!(matches!(
            b.acquire(&request(&k, &c, 1)),
            Attempt::Held { remaining: Some(_) }
        ));
        tokio::time::advance(Duration::from_millis(1001)).await;
        let Attempt::Granted { top: t2 } = b.acquire(&request(&k, &c, 1)) else {
            panic!("expired lock not granted")
        };
        assert!(
            t2 > t1,
            "the next holder starts above the whole reservation"
        );
        assert!(!b.release(&k, &a), "stale owner must not release");
        assert!(b.release(&k, &c));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_counter_never_goes_back() {
        let b = MemoryStore::new();
        let a = OwnerToken::generate();
        let k = keys("x");
        let Attempt::Granted { top: t1 } = b.acquire(&request(&k, &a, 1)) else {
            panic!()
        };
        b.release(&k, &a);
        tokio::time::advance(Duration::from_secs(120)).await;
        let Attempt::Granted { top: t2 } = b.acquire(&request(&k, &a, 1)) else {
            panic!()
        };
        assert!(t2 > t1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_fence_never_goes_back_after_the_counter_expired() {
        let b = MemoryStore::new();
        let (w, r, w2) = (
            OwnerToken::generate(),
            OwnerToken::generate(),
            OwnerToken::generate(),
        );
        let k = keys("x");
        let Attempt::Granted { top: written } = b.acquire(&request(&k, &w, 1)) else {
            panic!("free lock not granted")
        };
        b.release(&k, &w);
        tokio::time::advance(Duration::from_secs(120)).await;
        let Attempt::Granted { top: read } = b.acquire_shared(&request(&k, &r, 1)) else {
            panic!("reader not admitted")
        };
        assert!(read >= written, "reader's fence {read} below {written}");
        b.release_shared(&k, &r);
        let Attempt::Granted { top: later } = b.acquire(&request(&k, &w2, 1)) else {
            panic!("free lock not granted")
        };
        assert!(
            later > read,
            "writer's fence {later} not above the reader's {read}"
        );
    }
}
