//! Differential testing: the same generated schedule of lock operations, run on every engine,
//! judged by one model of what a lock does.
//!
//! A [`Schedule`] is a few processes (separate `Locker`s, each with its own connections and
//! local queue; in memory, clones of one locker, sharing its local queue) with two tasks each
//! (and one more per episode of an unknown-outcome schedule),
//! and operations drawn from every primitive: `acquire` and `try_acquire` of exclusive,
//! unfenced, fair, read and write
//! locks, `lock_all`, semaphore permits (1 to 3 of 3), leader campaigns, singleton jobs
//! (`hold_at_least`); each with a wait, a lease (some short enough to expire, the watchdog on
//! or off), a hold, and a way out (release, drop, a panic inside the guard's scope, or the
//! acquire cancelled after N polls); a wait that runs out gives `Busy`. Between the
//! operations come faults where the engine has them: every connection stalled or cut through
//! the harness's proxies, a snapshot, the lock server restarted empty or from its data, a
//! failover (the etcd cluster's leader restarted, so that another member leads); and calls
//! whose outcome the client cannot know ([`Fault::Late`], [`Fault::LateReply`],
//! [`Fault::LostReply`], [`Fault::LostRequest`]): the one connection that sends the first,
//! second or third call naming a key, a semaphore or an election after a given moment is
//! held past the operation timeout (with every call it carries after it), then delivered
//! (applied after its client gave up, or its reply late) or cut (its reply lost, or the
//! call never applied).
//! Schedules come in [`Family`]s: the general mix, and four bent towards the interplay that
//! hides bugs (readers and writers of one key, cancelled acquires with long leases, holds
//! around restarts, calls of unknown outcome), so that a bug needing one coincidence turns up
//! in tens of schedules.
//!
//! Each run is judged three ways:
//! - **safety**, by the history checker (`leasehold_tests::history`): no two exclusive holders,
//!   no reader with a writer, never more permits than the limit, one leader per term, fences
//!   strictly increasing per key across all kinds, calls within their bounds; and no lease
//!   lost without a fault (watchdog on, or a hold shorter than the lease);
//! - **liveness, by the model replayed over the engine's own trace**: an acquire that gave up
//!   (`Busy`, or `try_acquire` found nothing) must have had a reason during its whole wait,
//!   but for gaps of at most [`GAP`]: a conflicting holder (from the moment its grant may have
//!   happened to the moment it surely let go: its release returned, its lease ran out, its
//!   `hold_at_least` ended), a waiting writer (for readers), an earlier waiter (for fair
//!   locks, permits and campaigns, and for exclusive requests of one process, which wait in
//!   its local line: in memory, all processes are one), or a cancelled or failed call that
//!   may still have landed
//!   (for the operation timeout). So nobody waits behind a holder that has left, whatever
//!   the scheduling noise: the model judges the times the engine really produced, and [`GAP`]
//!   is the stated tolerance for a handover. Waits that overlap a fault (plus [`RECOVERY`])
//!   are not judged, but for the faults of unknown outcome: there the model accepts either
//!   outcome for every call the held connection may have carried (a call in flight while it
//!   was held may have taken what it asked for, from its invocation), and excuses everyone
//!   while it was held, until [`SETTLE`] after it was released or cut; from then on nobody
//!   may be kept out by such a call (it was settled, given back or never applied), and the
//!   waits are judged as anywhere else. Safety is judged throughout, and a lease that
//!   outlives the held connection (see `outlives_hold`) must not be lost by it (but to a cut
//!   under its holder, which a client may take for a restarted server);
//! - **the end state**: once the last lease and `hold_at_least` of the run is over, every key,
//!   semaphore and election is free at once to a new process.
//!
//! An engine that does not offer a primitive must refuse every operation of that kind with a
//! `Config` error that says so, and the generator keeps them in the schedule: the day the
//! engine offers the primitive, the same schedules cover it. In memory (the reference) nothing
//! is refused.
//!
//! In memory there is no connection to hold: its calls are answered in the caller's own
//! process, and the only call whose answer a caller can miss is one it stops polling, which
//! every family's `Exit::Cancel` covers. It runs the unknown-outcome schedules without their
//! faults, as the reference that the model finds nothing wrong with them.
//!
//! A run has two phases per engine: `DIFF_CASES=N` schedules of every family (default
//! [`DEFAULT_CASES`]), then `DIFF_UNKNOWN_CASES=N` of the unknown-outcome family alone
//! (default [`UNKNOWN_CASES`]), so that every engine meets calls of unknown outcome on every
//! run. A failing schedule is shrunk by proptest and printed as a short program; paste it
//! into [`regressions`] to replay it. `DIFF_SEED=S` for another or the same sequence of
//! schedules (every engine runs the same schedules, in the same order), `DIFF_SHRINK=N`
//! shrink steps at most (default 24), `DIFF_SURVEY=1` to run every schedule and print each
//! that fails, unshrunk (how often a bug turns up), `DIFF_TRACE=1` for each run's table.
//!
//! `cargo test -p leasehold-tests --all-features --test conformance -- differential::` (one
//! test per engine: `-- differential::single`, `-- differential::zookeeper`, ...).
//!
//! [`Fault::Late`]: fault::Fault::Late
//! [`Fault::LateReply`]: fault::Fault::LateReply
//! [`Fault::LostReply`]: fault::Fault::LostReply
//! [`Fault::LostRequest`]: fault::Fault::LostRequest
//! [`RECOVERY`]: judge::RECOVERY
//! [`SETTLE`]: judge::SETTLE

mod end_state;
mod fault;
mod generator;
mod judge;
mod model;
mod regressions;
mod run;
mod schedule;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use leasehold_tests::conformance::{Engine, EngineKind};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use self::generator::{family_strategy, schedule_strategy, Family};
use self::judge::{Figures, GAP};
use self::run::{run, PLANNED_PANIC};
use self::schedule::Schedule;

/// Schedules per engine in a default run: 9 engines × 4 schedules, about 5 s each with the
/// end-state checks (about 110 s for the whole test on two cores), fit the CI budget (the
/// run's summary prints the time per engine).
const DEFAULT_CASES: u32 = 4;

/// Schedules of the unknown-outcome family per engine in a default run, after
/// [`DEFAULT_CASES`] of every family (the run's summary prints the time of each phase).
const UNKNOWN_CASES: u32 = 4;

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
    )
}

/// The seed of the schedules: `DIFF_SEED` (default 2811). Every engine setup runs the same
/// schedules for one seed, in the same order: schedule N of one engine's run is schedule N of
/// every other's, so a schedule one engine fails replays on the others as it is.
fn seed() -> (u64, [u8; 32]) {
    let seed = env_number("DIFF_SEED").unwrap_or(2811);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    (seed, bytes)
}

/// Runs the generated schedules on one engine, in two phases (every family, then the
/// unknown-outcome family alone); panics with the shrunk schedule on a failure.
fn differential(kind: EngineKind) {
    quiet_planned_panics();
    let cases = env_number("DIFF_CASES").map_or(DEFAULT_CASES, |n| n as u32);
    let unknown_cases = env_number("DIFF_UNKNOWN_CASES").map_or(UNKNOWN_CASES, |n| n as u32);
    let (seed, bytes) = seed();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let started = std::time::Instant::now();
    let engine = rt.block_on(Engine::start(kind));
    eprintln!(
        "differential {kind}: engine started in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    // The second phase draws from a seed of its own, so that its schedules do not depend on
    // how many the first drew.
    let mut unknown_bytes = bytes;
    unknown_bytes[8] = 1;
    let phases = [
        ("every family", schedule_strategy(), cases, bytes),
        (
            "unknown outcomes",
            family_strategy(Family::UnknownOutcomes),
            unknown_cases,
            unknown_bytes,
        ),
    ];
    for (phase, strategy, cases, bytes) in phases {
        if cases > 0 {
            run_phase(&rt, &engine, phase, &strategy, cases, seed, bytes);
        }
    }
}

/// Runs `cases` schedules of `strategy` on `engine`, prints the phase's figures, and panics
/// with the shrunk schedule on a failure.
fn run_phase(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    phase: &str,
    strategy: &BoxedStrategy<Schedule>,
    cases: u32,
    seed: u64,
    bytes: [u8; 32],
) {
    let kind = engine.kind();
    let shrink = env_number("DIFF_SHRINK").map_or(24, |n| n as u32);
    let started = std::time::Instant::now();
    let config = Config {
        cases,
        max_shrink_iters: shrink,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let totals = Mutex::new(Figures::default());
    let runs = AtomicUsize::new(0);
    let first_failure = AtomicUsize::new(0);
    let first_why = Mutex::new(String::new());
    let survey = std::env::var_os("DIFF_SURVEY").is_some();
    let surveyed = Mutex::new(Vec::new());
    let result = runner.run(strategy, |schedule| {
        let run_no = runs.fetch_add(1, Ordering::Relaxed) + 1;
        let judged = rt.block_on(run(engine, &schedule));
        totals.lock().unwrap().add(&judged.figures);
        if survey {
            // Every schedule runs, and each failure is printed as it was found.
            if !judged.failures.is_empty() {
                eprintln!(
                    "differential {kind}, {phase}: schedule {run_no} failed with:\n{}\n\n{schedule}",
                    judged.failures.join("\n")
                );
                surveyed.lock().unwrap().push(run_no);
            }
            return Ok(());
        }
        if judged.failures.is_empty() {
            Ok(())
        } else {
            let why = judged.failures.join("\n");
            if first_failure
                .compare_exchange(0, run_no, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                *first_why.lock().unwrap() = format!("{why}\n\n{schedule}");
            }
            Err(TestCaseError::fail(why))
        }
    });
    let t = totals.into_inner().unwrap();
    eprintln!(
        "differential {kind}, {phase}: seed {seed}, {cases} schedules ({} runs with shrinking) \
         in {:.0} s: {} ops, {} granted, {} busy, {} cancelled, {} failed; {} calls of unknown \
         outcome held ({} ops in flight over them); {} waits judged, longest unexplained \
         stretch {} ms (tolerance {} ms); refused: {:?}",
        runs.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        t.ops,
        t.granted,
        t.busy,
        t.cancelled,
        t.failed,
        t.held,
        t.hit,
        t.judged_waits,
        t.longest_gap_ms,
        GAP.as_millis(),
        t.refused
    );
    let surveyed = surveyed.into_inner().unwrap();
    if survey {
        eprintln!(
            "differential {kind}, {phase}: {} of {cases} schedules failed: {surveyed:?}",
            surveyed.len()
        );
        assert!(surveyed.is_empty(), "the {kind} engine failed schedules {surveyed:?} of the {phase} phase (DIFF_SEED={seed}): see above");
    }
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, schedule)) => panic!(
            "the {kind} engine failed schedule {} of the {phase} phase (DIFF_SEED={seed}) \
             with:\n\
             {}\n\n\
             shrunk, it fails with:\n\
             {why}\n\nreplay it (paste into `regressions`):\n\n{schedule}",
            first_failure.load(Ordering::Relaxed),
            first_why.lock().unwrap()
        ),
        Err(TestError::Abort(why)) => panic!("the run was aborted: {why}"),
    }
}

/// Keeps the schedules' planned panics out of the output; every other panic is printed.
fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|m| m == PLANNED_PANIC);
            if !planned {
                default(info);
            }
        }));
    });
}

/// Runs one schedule on a fresh engine of `kind`; panics with what it found.
fn replay(kind: EngineKind, schedule: &Schedule) {
    quiet_planned_panics();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let engine = Engine::start(kind).await;
        let judged = run(&engine, schedule).await;
        assert!(
            judged.failures.is_empty(),
            "{kind}:\n{}\n\n{schedule}",
            judged.failures.join("\n")
        );
    });
}

macro_rules! engines {
    ($($engine:ident),+) => {$(
        #[test]
        fn $engine() {
            let kind = EngineKind::named(stringify!($engine)).expect("an engine");
            differential(kind);
        }
    )+};
}

engines!(memory, single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql);

#[test]
fn every_engine_has_a_test() {
    let listed = [
        "memory",
        "single",
        "redlock3",
        "cluster",
        "sentinel",
        "zookeeper",
        "etcd",
        "etcd3",
        "postgres",
        "mysql",
    ];
    for kind in EngineKind::ALL {
        assert!(
            listed.contains(&kind.name()),
            "no differential test for {kind}"
        );
    }
}
