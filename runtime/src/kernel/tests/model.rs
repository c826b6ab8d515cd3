//! A model test of the in-process machinery (local queue, handover, re-entry, cancellation,
//! releases racing renewals): proptest writes schedules of operations, each run on Tokio's
//! paused clock against a scripted store, and after every step the model checks that
//! (a) a key has at most one holding with a guard that says `is_held()`, re-entered guards
//! included, (b) the fences handed to holders of a key strictly increase, and (c) every
//! acquire ends by its deadline, give or take what slow answers cost.
//!
//! Two lockers on one store stand for two processes. The test drives the clock itself and
//! never sleeps: after each operation it yields until every task that can run has run, so
//! the runtime never auto-advances, and a schedule plays out the same way on every run (but
//! for `tokio::select!`'s random branch order and the runtime's jitter of a few ms).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::store::scripted::ScriptedStore;
use crate::{LockError, LockGuard, Locker};

const KEYS: [&str; 2] = ["k0", "k1"];
/// The lease most requests ask for: a handover needs the next waiter to ask for the same.
const LEASE: Duration = Duration::from_secs(1);
const SHORT_LEASE: Duration = Duration::from_millis(200);
/// The longest a scripted answer is late.
const MAX_DELAY: Duration = Duration::from_millis(300);
/// How long after its deadline an acquire may still end: a call started before the deadline
/// (a subscribe) and one more attempt after it may each be answered late.
const SLACK: Duration = MAX_DELAY
    .saturating_mul(2)
    .saturating_add(Duration::from_millis(100));
/// The clock moves in steps this long, with every task run in between, so renewals keep up
/// as they would on a live runtime ([`Op::Pause`] jumps instead).
const STEP: Duration = Duration::from_millis(20);
/// Re-entries inside a scope ask for this wait (they should never need it).
const SCOPE_WAIT: Duration = Duration::from_millis(300);
/// Long enough for every acquire of a schedule to end, and then for every lease to run out.
const DRAIN: Duration = Duration::from_secs(4);

/// One step of a schedule. Indices pick among the live guards, pending acquires or stored
/// scope futures, modulo their number; a step with nothing to pick does nothing.
#[derive(Clone, Debug)]
enum Op {
    /// `tasks` tasks of process `process` start acquiring `KEYS[key]`, one after the other,
    /// each asking for the same.
    Acquire {
        tasks: usize,
        process: usize,
        key: usize,
        lease: Duration,
        wait: Duration,
        watchdog: bool,
    },
    /// `guard.release().await`, in a task of its own.
    Release(usize),
    /// The guard is dropped: the background task releases it.
    Drop(usize),
    /// A pending acquire is cancelled (its task aborted).
    Cancel(usize),
    /// Inside the guard's `scope`, its locker acquires the same key again; the model keeps
    /// the inner guard.
    Reenter(usize),
    /// Builds a scope future of the guard that re-enters when it runs, without running it.
    ScopeLater(usize),
    /// Runs a stored scope future, whatever became of its guard meanwhile.
    RunScope(usize),
    /// The clock moves on in small steps.
    Advance(Duration),
    /// The clock jumps at once: the process was paused and nothing of it ran.
    Pause(Duration),
    /// The store misbehaves.
    Fault(Fault),
}

#[derive(Clone, Debug)]
enum Fault {
    Fail(u32),
    LoseAnswers(u32),
    Delay(u32, Duration),
    RefuseRenewals(u32),
    DropConnection,
}

fn acquire_op() -> impl Strategy<Value = Op> {
    // Biased towards one process, one key, one lease and the watchdog on: that is where the
    // in-process queue and its handovers do their work.
    (
        prop_oneof![2 => Just(1), 1 => Just(2), 1 => Just(3)],
        prop_oneof![4 => Just(0), 1 => Just(1)],
        prop_oneof![4 => Just(0), 1 => Just(1)],
        prop_oneof![4 => Just(LEASE), 1 => Just(SHORT_LEASE)],
        prop_oneof![
            1 => Just(Duration::ZERO),
            1 => Just(Duration::from_millis(300)),
            4 => Just(Duration::from_secs(3)),
        ],
        prop_oneof![5 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(tasks, process, key, lease, wait, watchdog)| Op::Acquire {
            tasks,
            process,
            key,
            lease,
            wait,
            watchdog,
        })
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        (1..3u32).prop_map(Fault::Fail),
        (1..3u32).prop_map(Fault::LoseAnswers),
        (
            1..4u32,
            prop_oneof![
                Just(Duration::from_millis(5)),
                Just(Duration::from_millis(50)),
                Just(MAX_DELAY),
            ]
        )
            .prop_map(|(calls, by)| Fault::Delay(calls, by)),
        (1..3u32).prop_map(Fault::RefuseRenewals),
        Just(Fault::DropConnection),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let pick = || 0..4usize;
    // Proptest shrinks a step it cannot delete towards the first choice: a short advance
    // of the clock, which changes next to nothing.
    prop_oneof![
        4 => prop_oneof![
            Just(Duration::from_millis(1)),
            Just(Duration::from_millis(10)),
            Just(Duration::from_millis(100)),
            Just(Duration::from_millis(400)),
            Just(Duration::from_millis(1500)),
        ]
        .prop_map(Op::Advance),
        6 => acquire_op(),
        4 => pick().prop_map(Op::Release),
        2 => pick().prop_map(Op::Drop),
        1 => pick().prop_map(Op::Cancel),
        3 => pick().prop_map(Op::Reenter),
        1 => pick().prop_map(Op::ScopeLater),
        1 => pick().prop_map(Op::RunScope),
        1 => prop_oneof![
            Just(Duration::from_millis(500)),
            Just(Duration::from_secs(2)),
        ]
        .prop_map(Op::Pause),
        1 => fault().prop_map(Op::Fault),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn schedules_keep_one_holder_rising_fences_and_deadlines(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        run(ops)?;
    }
}

/// Runs one schedule on a fresh paused runtime, then lets everything end and checks that
/// nothing was left behind.
fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut model = Model::new();
        for op in ops {
            model.step(op).await?;
        }
        model.finish().await
    })
}

type Acquisition = Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send>>;

struct Model {
    store: ScriptedStore,
    lockers: [Locker; 2],
    pending: Vec<Pending>,
    guards: Vec<Held>,
    scopes: Vec<LaterScope>,
    /// `(key, fence)` of every guard that became a holder (not a re-entry), in the order the
    /// acquisitions ended: pushed by the acquiring task itself, so that two acquisitions that
    /// end in one step are still seen in their order.
    handed: Arc<Mutex<Vec<(usize, u64)>>>,
    last_fence: [Option<u64>; 2],
    next_holding: u64,
}

struct Pending {
    key: usize,
    process: usize,
    /// The holding whose scope this acquire runs in, if any.
    scope_of: Option<u64>,
    task: JoinHandle<Result<LockGuard, LockError>>,
    /// When it must have ended.
    due: Instant,
}

/// A live guard. `holding` names who holds: an owner guard starts a holding, a re-entered
/// guard belongs to the holding whose scope it was taken in (also after that one ended).
struct Held {
    key: usize,
    process: usize,
    holding: u64,
    guard: LockGuard,
}

struct LaterScope {
    key: usize,
    process: usize,
    holding: u64,
    acquisition: Acquisition,
}

impl Model {
    fn new() -> Model {
        let store = ScriptedStore::new();
        let lockers = [
            Locker::scripted(store.clone()),
            Locker::scripted(store.clone()),
        ];
        Model {
            store,
            lockers,
            pending: Vec::new(),
            guards: Vec::new(),
            scopes: Vec::new(),
            handed: Arc::default(),
            last_fence: [None; 2],
            next_holding: 0,
        }
    }

    async fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Acquire {
                tasks,
                process,
                key,
                lease,
                wait,
                watchdog,
            } => {
                for task in 0..tasks {
                    if task > 0 {
                        // Each one queues behind the one before.
                        settle().await;
                    }
                    let locker = self.lockers[process].clone();
                    let acquisition = Box::pin(async move {
                        locker
                            .lock(KEYS[key])
                            .lease(lease)
                            .wait(wait)
                            .watchdog(watchdog)
                            .acquire()
                            .await
                    });
                    self.spawn(key, process, None, wait, acquisition);
                }
            }
            Op::Release(i) => {
                if let Some(held) = take(&mut self.guards, i) {
                    // The outcome is the store's business (lost, unavailable); what the
                    // model checks is who holds afterwards.
                    tokio::spawn(held.guard.release());
                }
            }
            Op::Drop(i) => drop(take(&mut self.guards, i)),
            Op::Cancel(i) => {
                if let Some(pending) = take(&mut self.pending, i) {
                    pending.task.abort();
                }
            }
            Op::Reenter(i) => {
                if let Some(later) = self.reentry(i) {
                    self.spawn(
                        later.key,
                        later.process,
                        Some(later.holding),
                        SCOPE_WAIT,
                        later.acquisition,
                    );
                }
            }
            Op::ScopeLater(i) => {
                if let Some(later) = self.reentry(i) {
                    self.scopes.push(later);
                }
            }
            Op::RunScope(i) => {
                if let Some(later) = take(&mut self.scopes, i) {
                    self.spawn(
                        later.key,
                        later.process,
                        Some(later.holding),
                        SCOPE_WAIT,
                        later.acquisition,
                    );
                }
            }
            Op::Advance(by) => return self.advance(by).await,
            Op::Pause(by) => {
                tokio::time::advance(by).await;
                // Nothing ran during the pause: deadlines that passed meanwhile count from
                // its end.
                let earliest = Instant::now() + SLACK;
                for pending in &mut self.pending {
                    pending.due = pending.due.max(earliest);
                }
            }
            Op::Fault(fault) => match fault {
                Fault::Fail(calls) => self.store.fail_next(calls),
                Fault::LoseAnswers(calls) => self.store.lose_answers(calls),
                Fault::Delay(calls, by) => self.store.delay_next(calls, by),
                Fault::RefuseRenewals(calls) => self.store.refuse_renewals(calls),
                Fault::DropConnection => self.store.drop_connection(),
            },
        }
        settle().await;
        self.check()
    }

    /// A future that, inside the scope of the `i`-th guard, acquires its key again through
    /// its locker.
    fn reentry(&self, i: usize) -> Option<LaterScope> {
        let held = pick(&self.guards, i)?;
        let (key, locker) = (held.key, self.lockers[held.process].clone());
        let acquisition = held.guard.scope(async move {
            locker
                .lock(KEYS[key])
                .lease(LEASE)
                .wait(SCOPE_WAIT)
                .acquire()
                .await
        });
        Some(LaterScope {
            key,
            process: held.process,
            holding: held.holding,
            acquisition: Box::pin(acquisition),
        })
    }

    fn spawn(
        &mut self,
        key: usize,
        process: usize,
        scope_of: Option<u64>,
        wait: Duration,
        acquisition: Acquisition,
    ) {
        let handed = self.handed.clone();
        let task = tokio::spawn(async move {
            let result = acquisition.await;
            if let Ok(guard) = &result {
                if !guard.is_reentrant() {
                    handed.lock().unwrap().push((key, guard.fence()));
                }
            }
            result
        });
        self.pending.push(Pending {
            key,
            process,
            scope_of,
            task,
            due: Instant::now() + wait + SLACK,
        });
    }

    async fn advance(&mut self, by: Duration) -> Result<(), TestCaseError> {
        let mut left = by;
        while !left.is_zero() {
            let step = left.min(STEP);
            tokio::time::advance(step).await;
            settle().await;
            self.check()?;
            left -= step;
        }
        Ok(())
    }

    /// Moves the guards of ended acquisitions into the model, then checks the invariants.
    fn check(&mut self) -> Result<(), TestCaseError> {
        let mut still = Vec::new();
        for mut pending in std::mem::take(&mut self.pending) {
            let Some(ended) = ready(&mut pending.task) else {
                still.push(pending);
                continue;
            };
            let result = ended.map_err(|e| TestCaseError::fail(format!("task failed: {e}")))?;
            match result {
                Ok(guard) => {
                    let holding = if guard.is_reentrant() {
                        pending.scope_of.ok_or_else(|| {
                            TestCaseError::fail("a guard re-entered outside of any scope")
                        })?
                    } else {
                        self.next_holding += 1;
                        self.next_holding
                    };
                    self.guards.push(Held {
                        key: pending.key,
                        process: pending.process,
                        holding,
                        guard,
                    });
                }
                Err(
                    LockError::Busy { .. } | LockError::Unavailable { .. } | LockError::Lost { .. },
                ) => {}
                Err(e) => return Err(TestCaseError::fail(format!("unexpected error: {e}"))),
            }
        }
        self.pending = still;

        // (a) One holding per key: guards that say they hold, grouped by holding.
        for (key, name) in KEYS.iter().enumerate() {
            let mut holdings: Vec<&Held> = Vec::new();
            for held in self.guards.iter().filter(|h| h.key == key) {
                if held.guard.is_held() && holdings.iter().all(|h| h.holding != held.holding) {
                    holdings.push(held);
                }
            }
            prop_assert!(
                holdings.len() <= 1,
                "{} holdings of {name} report is_held() at once: {}",
                holdings.len(),
                describe(&holdings)
            );
        }

        // (b) Fences strictly increase per key, in the order holders got them.
        for (key, fence) in self.handed.lock().unwrap().drain(..) {
            if let Some(last) = self.last_fence[key] {
                prop_assert!(
                    fence > last,
                    "{} was handed fence {fence} after fence {last}",
                    KEYS[key]
                );
            }
            self.last_fence[key] = Some(fence);
        }

        // (c) Every acquire ends by its deadline.
        let now = Instant::now();
        for pending in &self.pending {
            prop_assert!(
                now <= pending.due,
                "an acquire of {} by process {} is still pending {:?} after its deadline",
                KEYS[pending.key],
                pending.process,
                now - pending.due + SLACK
            );
        }
        Ok(())
    }

    /// Lets every acquire end, drops everything, waits for the leases to run out, and
    /// checks that each process can take each key at once: no turn or lock was left behind.
    async fn finish(mut self) -> Result<(), TestCaseError> {
        self.store.heal();
        self.advance(DRAIN).await?;
        prop_assert!(self.pending.is_empty(), "acquires still pending at the end");
        self.guards.clear();
        self.scopes.clear();
        settle().await;
        self.advance(DRAIN).await?;
        for (process, locker) in self.lockers.iter().enumerate() {
            for key in KEYS {
                let guard = locker.lock(key).try_acquire().await;
                let guard = guard.map_err(|e| TestCaseError::fail(e.to_string()))?;
                let guard = guard.ok_or_else(|| {
                    TestCaseError::fail(format!(
                        "{key} is still taken for process {process} after everything ended"
                    ))
                })?;
                guard
                    .release()
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
        Ok(())
    }
}

fn describe(holdings: &[&Held]) -> String {
    let shown: Vec<String> = holdings
        .iter()
        .map(|h| {
            format!(
                "holding {} of process {} (fence {}, re-entered: {})",
                h.holding,
                h.process,
                h.guard.fence(),
                h.guard.is_reentrant()
            )
        })
        .collect();
    shown.join("; ")
}

fn pick<T>(items: &[T], i: usize) -> Option<&T> {
    (!items.is_empty()).then(|| &items[i % items.len()])
}

fn take<T>(items: &mut Vec<T>, i: usize) -> Option<T> {
    (!items.is_empty()).then(|| items.remove(i % items.len()))
}

/// Lets every task that can run, run: a release wakes a job, the job a waiter, the waiter
/// its caller, one scheduler pass each. Yielding (unlike sleeping) keeps the runtime busy,
/// so the paused clock never jumps ahead on its own.
async fn settle() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

/// The output of a task that ended, without waiting for one that did not.
fn ready<T>(task: &mut JoinHandle<T>) -> Option<Result<T, tokio::task::JoinError>> {
    if !task.is_finished() {
        return None;
    }
    match Pin::new(task).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Bug 3 of issue 12, step by step: re-entry follows the lease, and the lease outlives an
/// in-process handover.
mod handover_after_reentry {
    use super::*;

    const KEY: &str = "k";

    fn acquire(locker: &Locker) -> JoinHandle<Result<LockGuard, LockError>> {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .lock(KEY)
                .lease(LEASE)
                .wait(Duration::from_secs(3))
                .acquire()
                .await
        })
    }

    /// X holds; A and then B queue; X releases, and A takes the lock in the store (reserving
    /// a fence for B, queued behind it). Returns A's guard and B's pending acquire.
    async fn a_holds_with_b_queued(
        locker: &Locker,
    ) -> (LockGuard, JoinHandle<Result<LockGuard, LockError>>) {
        let x = locker.lock(KEY).lease(LEASE).acquire().await.unwrap();
        let a = acquire(locker);
        settle().await;
        let b = acquire(locker);
        settle().await;
        x.release().await.unwrap();
        settle().await;
        let a = a.await.unwrap().unwrap();
        assert!(a.is_held());
        (a, b)
    }

    #[tokio::test(start_paused = true)]
    async fn a_reentered_guard_is_not_held_once_its_holder_handed_the_lease_on() {
        let locker = Locker::scripted(ScriptedStore::new());
        let (a, b) = a_holds_with_b_queued(&locker).await;
        let inner = a.scope(locker.lock(KEY).lease(LEASE).acquire()).await;
        let inner = inner.unwrap();
        assert!(inner.is_reentrant() && inner.is_held());
        a.release().await.unwrap();
        settle().await;
        let b = b.await.unwrap().unwrap();
        assert!(b.is_held());
        assert!(
            !inner.is_held(),
            "A released and B holds the lease now, but A's re-entered guard still holds too"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_scope_future_run_after_its_holder_released_does_not_reenter() {
        let locker = Locker::scripted(ScriptedStore::new());
        let (a, b) = a_holds_with_b_queued(&locker).await;
        let late = a.scope(async {
            let inner = locker.lock(KEY).lease(LEASE).wait(Duration::ZERO);
            inner.acquire().await
        });
        a.release().await.unwrap();
        settle().await;
        let b = b.await.unwrap().unwrap();
        assert!(b.is_held());
        if let Ok(inner) = late.await {
            assert!(
                !inner.is_held(),
                "a scope future of A, run after A released, re-entered while B holds"
            );
        }
    }
}

/// Finding 14 of RELIABILITY.md: the local turn could be passed twice. A holder releases
/// through the store (no handover: the watchdog is off) and the answer comes late; meanwhile
/// its validity ends, the next waiter forfeits the holder's turn and takes the lock. When the
/// late release then passed "the" turn on again, it took it from the new holder and gave it to
/// the waiter behind: two tasks of one process with the turn, and a holder without it.
mod turn_passed_once {
    use super::*;
    use crate::store::keys::LockKeys;

    const KEY: &str = "k";

    fn waiter(locker: &Locker) -> JoinHandle<Result<LockGuard, LockError>> {
        let locker = locker.clone();
        tokio::spawn(async move {
            let request = locker.lock(KEY).lease(LEASE).watchdog(false);
            request.wait(Duration::from_secs(5)).acquire().await
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_release_does_not_pass_a_forfeited_turn_again() {
        let store = ScriptedStore::new();
        let locker = Locker::scripted(store.clone());
        let holder = locker.lock(KEY).lease(LEASE).watchdog(false);
        let holder = holder.acquire().await.unwrap();
        let first = waiter(&locker);
        settle().await;
        let second = waiter(&locker);
        settle().await;

        // The release leaves just before the validity ends, and its answer comes late.
        tokio::time::advance(Duration::from_millis(900)).await;
        // The waiters' own calls due by now (their subscriptions to the lock's releases) go
        // first: the delay is the release's.
        settle().await;
        store.delay_next(1, Duration::from_millis(300));
        let release = tokio::spawn(holder.release());
        settle().await;
        // The validity ends: the first waiter forfeits the holder's turn and takes the lock.
        for _ in 0..10 {
            tokio::time::advance(STEP).await;
            settle().await;
        }
        let first = first.await.unwrap().unwrap();
        assert!(first.is_held());

        // The late release answers (not ours any more) and ends its turn: a stale one.
        tokio::time::advance(Duration::from_millis(200)).await;
        settle().await;
        assert!(release.await.unwrap().is_err());
        let lock_key = LockKeys::new(crate::DEFAULT_PREFIX, KEY).lock().to_owned();
        assert!(
            locker.inner.queues.turn_holder(&lock_key).is_some(),
            "the late release passed the turn again: the holder lost it to the waiter behind"
        );
        assert!(!second.is_finished(), "the second waiter still waits");
        first.release().await.unwrap();
        let second = second.await.unwrap().unwrap();
        assert!(second.is_held());
    }
}

/// Finding 14 of RELIABILITY.md: an acquire could return a guard already past its validity,
/// when the grant's answer came later than the validity counted from the send time. Such a
/// grant is given back and the wait goes on.
#[tokio::test(start_paused = true)]
async fn a_grant_that_arrives_after_its_validity_is_not_handed_out() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    // 100 ms leases count as held for 97 ms; the first answer takes 150 ms.
    store.delay_next(1, Duration::from_millis(150));
    let request = locker.lock("late").lease(Duration::from_millis(100));
    let guard = request
        .wait(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    assert!(
        guard.is_held(),
        "the guard was past its validity when handed out"
    );
    guard.release().await.unwrap();
}

/// Regressions from the conformance suite: what a lost lease leaves behind in its own locker.
mod lost_lease_in_its_own_locker {
    use std::time::Duration;

    use crate::{LockError, Locker};

    /// A holder whose lease ran out kept the local turn until a *queued* waiter noticed, so
    /// `try_acquire` on the same locker said busy while the lock was free everywhere else.
    #[tokio::test(start_paused = true)]
    async fn try_acquire_takes_a_lock_whose_local_holder_lost_its_lease() {
        let locker = Locker::in_memory();
        let guard = locker
            .lock("k")
            .lease(Duration::from_millis(300))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        guard.lost().await;
        // Past the store's own expiry too (the client stops trusting a lease a little early).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let again = locker.lock("k").try_acquire().await.unwrap();
        assert!(again.is_some(), "a free lock refused to its own locker");
        assert!(again.unwrap().fence() > guard.fence());
    }

    /// A guard that was told its lease is lost hears `Lost` at release, not whatever the store
    /// answers (here: not ours any more, or nothing at all).
    #[tokio::test(start_paused = true)]
    async fn releasing_a_guard_told_of_its_loss_says_lost() {
        let store = crate::store::scripted::ScriptedStore::new();
        let locker = Locker::scripted(store.clone());
        let guard = locker
            .lock("k")
            .lease(Duration::from_millis(300))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        guard.lost().await;
        store.fail_next(10);
        let err = guard.release().await.unwrap_err();
        assert!(matches!(err, LockError::Lost { .. }), "{err}");
    }
}

/// Found by the fault suite (RedLock, masters restarted one at a time): when renewals keep
/// failing, the watchdog gives the lease up a little before its validity ends and gives the
/// lock back; the holder must stop believing in it *before* the lock can go, or the next
/// holder overlaps with it.
#[tokio::test(start_paused = true)]
async fn a_lease_given_up_after_failed_renewals_is_not_believed_once_its_lock_is_gone() {
    let store = crate::store::scripted::ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    let guard = locker
        .lock("k")
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    let lock = crate::store::keys::LockKeys::new(locker.prefix(), "k")
        .lock()
        .to_owned();
    // Every renewal fails (the store does not answer); the release that gives the lock back
    // then goes through.
    store.fail_next(7);
    let mut freed_at = None;
    for step in 0..1500u64 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        if !store.is_locked(&lock) {
            assert!(
                !guard.is_held(),
                "the lock is gone from the store at {step} ms while its holder still believes it"
            );
            freed_at.get_or_insert(step);
        }
    }
    assert!(freed_at.is_some(), "the lock was never given back");
}
