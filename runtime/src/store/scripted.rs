//! A lock store for tests that a script can break: the memory store's semantics (leases on the
//! Tokio clock, owner tokens, fences, wake-ups), plus failed calls, lost answers, slow calls,
//! late answers, refused renewals and dropped connections on demand, so that the core meets
//! every answer Redis can give without a server (see `model_tests`).
//!
//! Clones share one store and one script: give one clone to each [`Locker`](crate::Locker)
//! that stands for a process, and keep one to script faults.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::memory::MemoryStore;
use super::{AcquireRequest, Attempt, Renewal, WakeSubscription};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::Session;

#[derive(Clone)]
pub(crate) struct ScriptedStore {
    shared: Arc<Shared>,
}

struct Shared {
    store: MemoryStore,
    script: Mutex<Script>,
    /// Bumped when the connection drops: leases granted over the old one count as lost.
    epoch: watch::Sender<u64>,
    /// Report locks as living with the session (`Store::locks_expire` false), as ZooKeeper
    /// and etcd do; the memory store underneath still expires what nobody renews.
    session_locks: AtomicBool,
    /// The engine's own view of its connection ([`Info::link`](super::Info::link)).
    link: watch::Sender<bool>,
    /// How many lock acquires reached the store, from every locker on it.
    acquires: AtomicU32,
}

/// What the next calls will meet. Each count is of calls (acquire, release, renew or
/// subscribe, from any locker on the store), and each call consumes at most one of each.
#[derive(Default)]
struct Script {
    /// Answered late by this much: the call sleeps on the Tokio clock before it reaches the
    /// store, like a request stuck on a slow network.
    delays: Vec<(u32, Duration)>,
    /// Reach the store at once, and their answers come this much later (slept on the Tokio
    /// clock), like a reply stuck on a slow network: the call has taken effect meanwhile.
    late_answers: Vec<(u32, Duration)>,
    /// Never reach the store: `Unavailable` at once.
    fail: u32,
    /// Reach the store and take effect, but the answer is lost: `Unavailable`. (A timed-out
    /// acquire may have taken the lock.)
    lose_answer: u32,
    /// Reach the store, and their answers are the store's own, not its server's
    /// ([`heard`](super::heard)): a give-back of nothing, a renewal over a session gone.
    alone: u32,
    /// Renewals answered "not yours any more" for every lease in the batch.
    refuse_renewals: u32,
    /// Every acquire from now on is granted counted from this long before its send time
    /// (as etcd counts a lock from its lease's last acknowledged keep-alive).
    vouched_earlier: Option<Duration>,
    /// Leader records that the next reads return instead of the store's, one each, as a
    /// lagging replica or follower answers.
    stale_leader_reads: Vec<Option<super::LeaderRecord>>,
}

/// How one call goes, decided as it starts.
struct Fate {
    delay: Duration,
    answer_delay: Duration,
    fail: bool,
    lose_answer: bool,
    alone: bool,
}

impl ScriptedStore {
    pub(crate) fn new() -> Self {
        ScriptedStore {
            shared: Arc::new(Shared {
                store: MemoryStore::new(),
                script: Mutex::default(),
                epoch: watch::channel(0).0,
                session_locks: AtomicBool::new(false),
                link: watch::channel(true).0,
                acquires: AtomicU32::new(0),
            }),
        }
    }

    /// From now on, report locks as living as long as the session (as ZooKeeper and etcd
    /// do), so the locker gives them back itself rather than counting on their expiry.
    pub(crate) fn keep_locks_for_the_session(&self) {
        self.shared.session_locks.store(true, Ordering::Relaxed);
    }

    /// The next `calls` calls fail with `Unavailable` without reaching the store.
    pub(crate) fn fail_next(&self, calls: u32) {
        self.shared.script.lock().unwrap().fail += calls;
    }

    /// The next `calls` calls take effect, but their answers are lost (`Unavailable`).
    pub(crate) fn lose_answers(&self, calls: u32) {
        self.shared.script.lock().unwrap().lose_answer += calls;
    }

    /// The next `calls` calls are answered by the store alone, without its server.
    pub(crate) fn answer_alone(&self, calls: u32) {
        self.shared.script.lock().unwrap().alone += calls;
    }

    /// The next `calls` calls reach the store `by` later (slept on the Tokio clock).
    pub(crate) fn delay_next(&self, calls: u32, by: Duration) {
        if calls == 0 {
            return;
        }
        self.shared.script.lock().unwrap().delays.push((calls, by));
    }

    /// The next `calls` calls take effect at once, and their answers come `by` later (slept
    /// on the Tokio clock).
    pub(crate) fn answer_late(&self, calls: u32, by: Duration) {
        if calls == 0 {
            return;
        }
        self.shared
            .script
            .lock()
            .unwrap()
            .late_answers
            .push((calls, by));
    }

    /// Every acquire from now on is granted counted from `by` before its send time, as etcd
    /// grants a lock counted from its lease's last acknowledged keep-alive.
    pub(crate) fn vouch_from_earlier(&self, by: Duration) {
        self.shared.script.lock().unwrap().vouched_earlier = Some(by);
    }

    /// The next leader-record reads return `records`, one per read, in order, whatever the
    /// store holds: the answers of a server that lags behind.
    pub(crate) fn serve_stale_leader_reads(&self, records: Vec<Option<super::LeaderRecord>>) {
        let mut script = self.shared.script.lock().unwrap();
        script.stale_leader_reads = records.into_iter().rev().collect();
    }

    /// The next `calls` renewals find every lease of their batch gone, as if taken over.
    /// The store keeps the locks until they expire, so nobody else gets them early.
    pub(crate) fn refuse_renewals(&self, calls: u32) {
        self.shared.script.lock().unwrap().refuse_renewals += calls;
    }

    /// The connection drops and the server comes back empty: every lease granted so far
    /// counts as lost, and the locks are gone (fence counters survive, as they must for
    /// fences to keep increasing).
    pub(crate) fn drop_connection(&self) {
        self.shared.store.forget_locks();
        self.shared.epoch.send_modify(|n| *n += 1);
    }

    /// The engine reports its own connection up or down (as ZooKeeper's session events do).
    pub(crate) fn report_link(&self, up: bool) {
        self.shared.link.send_replace(up);
    }

    /// Whether someone holds `lock` in the store now, without a call (no scripted fate).
    pub(crate) fn is_locked(&self, lock: &str) -> bool {
        self.shared.store.is_locked(lock)
    }

    /// Forgets every scripted fault not consumed yet.
    pub(crate) fn heal(&self) {
        *self.shared.script.lock().unwrap() = Script::default();
    }

    /// How many lock acquires reached the store so far (a lease handed over inside a
    /// process makes none).
    pub(crate) fn acquires(&self) -> u32 {
        self.shared.acquires.load(Ordering::Relaxed)
    }

    pub(crate) fn session(&self) -> Option<Session> {
        Some(Session::current(&self.shared.epoch))
    }

    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let fate = self.fate();
        let earlier = self.shared.script.lock().unwrap().vouched_earlier;
        let attempt = self
            .call(fate, || {
                self.shared.acquires.fetch_add(1, Ordering::Relaxed);
                self.shared.store.acquire(req)
            })
            .await?;
        Ok(match (attempt, earlier) {
            (Attempt::Granted { top, .. }, Some(by)) => Attempt::Granted {
                top,
                valid_from: Some(req.sent - by),
            },
            (attempt, _) => attempt,
        })
    }

    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let fate = self.fate();
        self.call(fate, || self.shared.store.release(keys, token))
            .await
    }

    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Result<Vec<bool>, LockError> {
        let fate = self.fate();
        let refuse = {
            let mut script = self.shared.script.lock().unwrap();
            take_one(&mut script.refuse_renewals)
        };
        self.call(fate, || {
            if refuse {
                vec![false; batch.len()]
            } else {
                self.shared.store.renew(batch)
            }
        })
        .await
    }

    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        let fate = self.fate();
        self.call(fate, || self.shared.store.subscribe(keys)).await
    }

    /// Decided when the call starts, so that faults scripted while it sleeps meet later calls.
    fn fate(&self) -> Fate {
        let mut script = self.shared.script.lock().unwrap();
        let delay = take_delay(&mut script.delays);
        let answer_delay = take_delay(&mut script.late_answers);
        Fate {
            delay,
            answer_delay,
            fail: take_one(&mut script.fail),
            lose_answer: take_one(&mut script.lose_answer),
            alone: take_one(&mut script.alone),
        }
    }

    async fn call<T>(&self, fate: Fate, at_store: impl FnOnce() -> T) -> Result<T, LockError> {
        if !fate.delay.is_zero() {
            tokio::time::sleep(fate.delay).await;
        }
        if fate.fail {
            return Err(LockError::unavailable("scripted: the call failed", None));
        }
        let answer = at_store();
        if fate.alone {
            super::heard::answered_alone();
        }
        if !fate.answer_delay.is_zero() {
            tokio::time::sleep(fate.answer_delay).await;
        }
        if fate.lose_answer {
            return Err(LockError::unavailable(
                "scripted: the answer was lost",
                None,
            ));
        }
        Ok(answer)
    }
}

/// The delay of the first entry of `delays` (zero when there is none), counting one call
/// off it.
fn take_delay(delays: &mut Vec<(u32, Duration)>) -> Duration {
    let Some((calls, by)) = delays.first_mut() else {
        return Duration::ZERO;
    };
    let by = *by;
    *calls -= 1;
    if *calls == 0 {
        delays.remove(0);
    }
    by
}

fn take_one(count: &mut u32) -> bool {
    let some = *count > 0;
    *count = count.saturating_sub(1);
    some
}

impl super::Store for ScriptedStore {
    fn session(&self) -> Option<Session> {
        ScriptedStore::session(self)
    }

    /// A call like the others: the script's failures and delays apply to it.
    fn probe(&self) -> super::StoreFuture<'_, ()> {
        let fate = self.fate();
        Box::pin(self.call(fate, || ()))
    }

    /// Locks, and read locks, semaphores and leader records (which go straight to the memory
    /// store: the scripted faults are the lock calls'); locks that expire, or that live as
    /// long as the session.
    fn info(&self) -> super::Info {
        let capabilities = super::Capabilities {
            leases_expire: !self.shared.session_locks.load(Ordering::Relaxed),
            ..super::Engine::Memory.capabilities(Duration::ZERO)
        };
        super::Info {
            link: Some(self.shared.link.subscribe()),
            ..super::Info::of(super::Engine::Memory, capabilities, "scripted")
        }
    }

    /// Locks under the script; readers' shares and permits straight in the memory store.
    /// One lease at a time.
    fn acquire<'a>(
        &'a self,
        batch: &'a [AcquireRequest<'_>],
    ) -> super::StoreFuture<'a, Vec<Attempt>> {
        super::one_at_a_time(batch, |req| match req.kind {
            LeaseKind::Exclusive => Box::pin(ScriptedStore::acquire(self, req)),
            _ => (&self.shared.store as &dyn super::Store).acquire_one(req),
        })
    }

    /// Locks under the script; readers' shares and permits straight in the memory store,
    /// and so are handovers (which need nothing of it).
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: super::Ending,
    ) -> super::StoreFuture<'a, super::Ended> {
        match ending {
            super::Ending::Release {
                kind: LeaseKind::Exclusive,
                ..
            } => Box::pin(async move {
                ScriptedStore::release(self, keys, token)
                    .await
                    .map(super::Ended::Released)
            }),
            _ => super::Store::release(&self.shared.store, keys, token, ending),
        }
    }

    fn renew<'a>(
        &'a self,
        batch: &'a [Renewal<'_>],
    ) -> super::StoreFuture<'a, Vec<super::Renewed>> {
        Box::pin(async move {
            ScriptedStore::renew(self, batch)
                .await
                .map(super::memory::yes_no)
        })
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> super::StoreFuture<'a, WakeSubscription> {
        Box::pin(ScriptedStore::subscribe(self, keys))
    }

    fn leave(&self, keys: &LockKeys, place: super::Leave<'_>) {
        super::Store::leave(&self.shared.store, keys, place);
    }

    /// A semaphore's holders, as the memory store answers (the rest refused).
    fn admin<'a>(&'a self, op: super::AdminOp<'a>) -> super::StoreFuture<'a, super::AdminAnswer> {
        super::Store::admin(&self.shared.store, op)
    }

    /// Straight in the memory store, except the stale reads the script returns first.
    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: super::LeaderOp<'a>,
    ) -> super::StoreFuture<'a, super::LeaderAnswer> {
        if let super::LeaderOp::Read = op {
            if let Some(stale) = self.shared.script.lock().unwrap().stale_leader_reads.pop() {
                return Box::pin(std::future::ready(Ok(super::LeaderAnswer::Read(stale))));
            }
        }
        super::Store::leader(&self.shared.store, keys, record, op)
    }
}
