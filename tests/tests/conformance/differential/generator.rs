//! The generator: the [`Family`]s of schedules and the proptest strategies that draw them, the
//! unknown-outcome family's episodes among them.

use std::ops::RangeInclusive;

use proptest::prelude::*;

use super::fault::{Fault, FaultAt, On};
use super::schedule::{Exit, How, Op, Prim, Schedule, LIMIT, TASKS};

/// The families of schedules the generator draws from (weights in [`schedule_strategy`]).
/// Each is the general mix bent towards one kind of interplay, so that a bug that needs a
/// particular coincidence (a writer giving up while readers hold, a cancelled call landing
/// after its undo, a reader after a restart) turns up in tens of schedules, not thousands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Every primitive, every way in and out, faults in one schedule in three.
    Mixed,
    /// Readers and writers (and a few exclusive and fair locks) of mostly one key: long read
    /// holds, writers that wait briefly and give up, readers that come after them.
    ReadersAndWriters,
    /// Acquires cancelled after a few polls, with long leases, and contenders waiting long
    /// behind them: a cancelled call must not leave a hold behind beyond its undo.
    Cancellations,
    /// Short holds of every fenced kind around one or two restarts (empty or from a
    /// snapshot), stalls and cuts: fences across a restart, holders told of their loss.
    Restarts,
    /// Episodes of calls of unknown outcome, one after another (see [`episode`]): a fault
    /// aimed at a waiter's call, with `try_acquire`s that time out, acquires cancelled,
    /// waiters for several permits, waits long enough to ride out the held connection, and
    /// long leases (5 s, 8 s), so that a lock that a late call left to nobody for its lease
    /// stands out from a give-back within [`SETTLE`].
    ///
    /// [`SETTLE`]: super::judge::SETTLE
    UnknownOutcomes,
}

/// The strategies one family draws an operation's parts from.
pub struct Mix {
    pub request: BoxedStrategy<(Prim, How)>,
    pub lease: BoxedStrategy<u64>,
    pub watchdog: BoxedStrategy<bool>,
    pub hold: BoxedStrategy<u64>,
    pub exit: BoxedStrategy<Exit>,
}

impl Mix {
    pub fn of(family: Family) -> Mix {
        // Most operations on one key, so that they contend.
        let k = || prop_oneof![6 => Just(0u8), 3 => Just(1u8), 1 => Just(2u8)].boxed();
        let k0 = || prop_oneof![4 => Just(0u8), 1 => Just(1u8)].boxed();
        let waits = |weights: [u32; 4]| {
            prop_oneof![
                weights[0] => Just(How::Try),
                weights[1] => Just(How::Acquire(200)),
                weights[2] => Just(How::Acquire(800)),
                weights[3] => Just(How::Acquire(2000)),
            ]
            .boxed()
        };
        match family {
            Family::Mixed => Mix {
                request: (
                    prop_oneof![
                        3 => k().prop_map(Prim::Lock),
                        1 => k().prop_map(Prim::Unfenced),
                        1 => k().prop_map(Prim::Fair),
                        4 => k().prop_map(Prim::Read),
                        3 => k().prop_map(Prim::Write),
                        1 => proptest::sample::subsequence(vec![0u8, 1, 2], 2..=3).prop_map(Prim::All),
                        1 => prop_oneof![
                            Just(Prim::Booking(vec![0, 1], 2)),
                            Just(Prim::Booking(vec![1], 0)),
                            Just(Prim::Booking(vec![2], 1)),
                        ],
                        2 => (0u8..2, 1u32..=LIMIT).prop_map(|(s, n)| Prim::Permits(s, n)),
                        1 => Just(Prim::Leader(0)),
                        1 => (k(), prop_oneof![Just(300u64), Just(1200)])
                            .prop_map(|(k, h)| Prim::Job(k, h)),
                    ],
                    waits([4, 6, 4, 2]),
                )
                    .boxed(),
                lease: prop_oneof![Just(500u64), Just(1500), Just(3000)].boxed(),
                watchdog: any::<bool>().boxed(),
                hold: prop_oneof![
                    1 => Just(0u64),
                    2 => Just(100),
                    2 => Just(400),
                    3 => Just(1200),
                    2 => Just(2000),
                ]
                .boxed(),
                exit: prop_oneof![
                    4 => Just(Exit::Release),
                    2 => Just(Exit::Drop),
                    1 => Just(Exit::Panic),
                    2 => (1u8..=5).prop_map(Exit::Cancel),
                ]
                .boxed(),
            },
            // Readers wait long, writers mostly briefly: a writer gives up while readers
            // hold, and a reader comes after it.
            Family::ReadersAndWriters => Mix {
                request: prop_oneof![
                    5 => (k0().prop_map(Prim::Read), waits([2, 0, 2, 3])),
                    4 => (k0().prop_map(Prim::Write), waits([0, 5, 1, 1])),
                    1 => (k0().prop_map(Prim::Lock), waits([1, 2, 1, 1])),
                    1 => (k0().prop_map(Prim::Fair), waits([1, 2, 1, 1])),
                    1 => (Just(Prim::Booking(vec![1], 0)), waits([2, 0, 2, 3])),
                ]
                .boxed(),
                lease: prop_oneof![Just(1500u64), Just(3000)].boxed(),
                watchdog: any::<bool>().boxed(),
                hold: prop_oneof![
                    1 => Just(100u64),
                    1 => Just(400),
                    2 => Just(1200),
                    2 => Just(2000),
                ]
                .boxed(),
                exit: prop_oneof![
                    6 => Just(Exit::Release),
                    1 => Just(Exit::Drop),
                    1 => (1u8..=5).prop_map(Exit::Cancel),
                ]
                .boxed(),
            },
            Family::Cancellations => Mix {
                request: (
                    prop_oneof![
                        3 => k0().prop_map(Prim::Lock),
                        1 => k0().prop_map(Prim::Fair),
                        1 => k0().prop_map(Prim::Read),
                        2 => k0().prop_map(Prim::Write),
                        1 => Just(Prim::All(vec![0, 1])),
                        1 => prop_oneof![
                            Just(Prim::Booking(vec![1], 0)),
                            Just(Prim::Booking(vec![0], 1)),
                        ],
                        1 => (1u32..=LIMIT).prop_map(|n| Prim::Permits(0, n)),
                        1 => Just(Prim::Leader(0)),
                    ],
                    waits([1, 1, 2, 4]),
                )
                    .boxed(),
                lease: prop_oneof![1 => Just(1500u64), 3 => Just(3000)].boxed(),
                watchdog: any::<bool>().boxed(),
                hold: prop_oneof![Just(100u64), Just(400), Just(1200)].boxed(),
                exit: prop_oneof![
                    2 => Just(Exit::Release),
                    3 => (1u8..=5).prop_map(Exit::Cancel),
                ]
                .boxed(),
            },
            // The operations beside the episodes (see `unknown_outcomes_strategy`): on key 0
            // (and 1 for `lock_all`), semaphore 0 and election 0, which the first episode may
            // aim at too.
            Family::UnknownOutcomes => Mix {
                request: (
                    prop_oneof![
                        3 => Just(Prim::Lock(0)),
                        1 => Just(Prim::Fair(0)),
                        1 => Just(Prim::Unfenced(0)),
                        2 => Just(Prim::Read(0)),
                        2 => Just(Prim::Write(0)),
                        1 => Just(Prim::All(vec![0, 1])),
                        1 => prop_oneof![
                            Just(Prim::Booking(vec![1], 0)),
                            Just(Prim::Booking(vec![0], 1)),
                        ],
                        1 => Just(Prim::Job(0, 1200)),
                        // Mostly for two of the three permits: a waiter for several, and
                        // another that does not fit beside it.
                        6 => prop_oneof![1 => Just(1u32), 3 => Just(2), 1 => Just(3)]
                            .prop_map(|n| Prim::Permits(0, n)),
                        2 => Just(Prim::Leader(0)),
                    ],
                    prop_oneof![
                        3 => Just(How::Try),
                        2 => Just(How::Acquire(800)),
                        2 => Just(How::Acquire(2500)),
                        3 => Just(How::Acquire(4000)),
                    ],
                )
                    .boxed(),
                lease: prop_oneof![Just(5000u64), Just(8000)].boxed(),
                // ZooKeeper and etcd refuse a lease beyond their 4 s session without it.
                watchdog: Just(true).boxed(),
                hold: prop_oneof![Just(100u64), Just(400), Just(1200)].boxed(),
                exit: prop_oneof![
                    3 => Just(Exit::Release),
                    1 => Just(Exit::Drop),
                    2 => (1u8..=5).prop_map(Exit::Cancel),
                ]
                .boxed(),
            },
            // One key, so that holds before a restart and after it meet.
            Family::Restarts => Mix {
                request: (
                    prop_oneof![
                        2 => Just(Prim::Lock(0)),
                        4 => Just(Prim::Read(0)),
                        3 => Just(Prim::Write(0)),
                        1 => (0u8..2, 1u32..=LIMIT).prop_map(|(s, n)| Prim::Permits(s, n)),
                        1 => Just(Prim::Leader(0)),
                    ],
                    waits([2, 1, 2, 1]),
                )
                    .boxed(),
                lease: prop_oneof![Just(500u64), Just(1500), Just(3000)].boxed(),
                watchdog: any::<bool>().boxed(),
                hold: prop_oneof![Just(0u64), Just(100), Just(400)].boxed(),
                exit: prop_oneof![
                    4 => Just(Exit::Release),
                    1 => Just(Exit::Drop),
                    1 => (1u8..=5).prop_map(Exit::Cancel),
                ]
                .boxed(),
            },
        }
    }
}

/// Operations of `procs` processes, starting at 100 ms steps in `steps`.
pub fn op_strategy(
    procs: usize,
    steps: RangeInclusive<u64>,
    mix: Mix,
) -> impl Strategy<Value = Op> {
    (
        (0..procs, 0..TASKS, steps.prop_map(|t| t * 100)),
        mix.request,
        (mix.lease, mix.watchdog),
        mix.hold,
        mix.exit,
    )
        .prop_map(
            |((proc, task, at), (prim, how), (lease, watchdog), hold, exit)| Op {
                proc,
                task,
                at,
                prim,
                how,
                lease,
                watchdog,
                hold,
                exit,
            },
        )
}

/// A fault at 100 ms steps in `steps`, restarts weighted `restarts` against 5 for the rest.
pub fn fault_strategy(steps: RangeInclusive<u64>, restarts: u32) -> impl Strategy<Value = FaultAt> {
    (
        steps.prop_map(|t| t * 100),
        prop_oneof![
            2 => prop_oneof![Just(300u64), Just(1200)].prop_map(Fault::Stall),
            1 => prop_oneof![Just(300u64), Just(1200)].prop_map(Fault::Cut),
            1 => Just(Fault::Snapshot),
            restarts => any::<bool>().prop_map(|from_data| Fault::Restart { from_data }),
            1 => Just(Fault::Failover),
            2 => unknown_outcome(),
        ],
    )
        .prop_map(|(at, fault)| FaultAt { at, fault })
}

/// A call of unknown outcome, aimed mostly at key 0 and semaphore 0: the first, second or
/// third call that names it, held for 800 ms or 1.5 s: beyond the 500 ms operation timeout,
/// the longer one long enough for a waiter's attempts after the failed one to queue behind
/// it (its give-back's clean-up then comes after them), and short enough that a 5 s lease
/// outlives it on every engine (see `outlives_hold`).
pub fn unknown_outcome() -> impl Strategy<Value = Fault> {
    unknown_outcome_on(prop_oneof![
        4 => Just(On::Key(0)),
        1 => Just(On::Key(1)),
        4 => Just(On::Semaphore(0)),
        1 => Just(On::Election(0)),
    ])
}

/// A call of unknown outcome aimed at what `on` draws.
pub fn unknown_outcome_on(on: impl Strategy<Value = On>) -> impl Strategy<Value = Fault> {
    (
        on,
        prop_oneof![2 => Just(1u8), 2 => Just(2), 1 => Just(3)],
        prop_oneof![Just(800u64), Just(1500)],
        prop_oneof![3 => Just(0u8), 1 => Just(1), 1 => Just(2), 2 => Just(3)],
    )
        .prop_map(|(on, nth, ms, how)| unknown_fault(how, on, nth, ms))
}

/// Fault `how` of the four of unknown outcome (late, late reply, lost reply, lost request).
pub fn unknown_fault(how: u8, on: On, nth: u8, ms: u64) -> Fault {
    match how {
        0 => Fault::Late { on, nth, ms },
        1 => Fault::LateReply { on, nth, ms },
        2 => Fault::LostReply { on, nth, ms },
        _ => Fault::LostRequest { on, nth, ms },
    }
}

/// One family's schedules.
pub fn family_strategy(family: Family) -> BoxedStrategy<Schedule> {
    if family == Family::UnknownOutcomes {
        return unknown_outcomes_strategy();
    }
    (2usize..=3)
        .prop_flat_map(move |procs| {
            // Fewer operations where the interplay is narrow: a key busy all along hides it.
            let count = match family {
                Family::ReadersAndWriters => 6..=14,
                _ => 8..=20,
            };
            let ops = proptest::collection::vec(op_strategy(procs, 0..=15, Mix::of(family)), count);
            let faults = match family {
                // Two in three schedules without faults: those judge liveness all along.
                Family::Mixed => prop_oneof![
                    2 => Just(Vec::new()),
                    1 => proptest::collection::vec(fault_strategy(1..=15, 2), 0..=2),
                ]
                .boxed(),
                // In the middle of the schedule, with operations on both sides.
                Family::Restarts => {
                    proptest::collection::vec(fault_strategy(3..=9, 8), 1..=2).boxed()
                }
                _ => Just(Vec::new()).boxed(),
            };
            // In the order they are printed in, so that a failure's `op N` is the N-th line.
            (ops, faults).prop_map(move |(mut ops, faults)| {
                ops.sort_by_key(|op| (op.at, op.proc, op.task));
                Schedule { procs, ops, faults }
            })
        })
        .boxed()
}

/// How far apart the episodes of an unknown-outcome schedule start: after the one before
/// has had its fault (armed within 300 ms, caught within [`ARMED_FOR`] or given up, held at
/// most 1.5 s), as faults come one after the other.
///
/// [`ARMED_FOR`]: super::fault::ARMED_FOR
pub const EPISODE_MS: u64 = 2000;

/// Episodes per unknown-outcome schedule.
pub const EPISODES: u8 = 3;

/// The unknown-outcome family's schedules: [`EPISODES`] episodes, [`EPISODE_MS`] apart, each
/// of which meets a held call with what depends on its outcome (see [`episode`]), and a few
/// operations of every kind beside them.
pub fn unknown_outcomes_strategy() -> BoxedStrategy<Schedule> {
    (2usize..=3)
        .prop_flat_map(|procs| {
            let episodes: Vec<BoxedStrategy<(Vec<Op>, FaultAt)>> =
                (0..EPISODES).map(|n| episode(procs, n)).collect();
            let others = proptest::collection::vec(
                op_strategy(procs, 0..=60, Mix::of(Family::UnknownOutcomes)),
                0..=3,
            );
            (episodes, others).prop_map(move |(episodes, others)| {
                let (ops, faults): (Vec<Vec<Op>>, Vec<FaultAt>) = episodes.into_iter().unzip();
                let mut ops: Vec<Op> = ops.into_iter().flatten().chain(others).collect();
                ops.sort_by_key(|op| (op.at, op.proc, op.task));
                Schedule { procs, ops, faults }
            })
        })
        .boxed()
}

/// Episode `n` of an unknown-outcome schedule, starting `n` × [`EPISODE_MS`] in, on a target
/// of its own (key `n`, semaphore `n` or election `n`), its operations in a task of their own
/// in each process (task `TASKS + n`: an episode's waiter never queues behind another's
/// operation): a holder (process `n`); a waiter of the next process that comes while it
/// holds; a fault aimed at the waiter, armed as it is invoked so that the fault's `nth` call
/// is the waiter's (if no other call names the target meanwhile); one or two contenders after
/// the held connection was let go. The waiter is one of two kinds, and the target and the
/// call held follow from it:
/// - one in line: a long wait (riding out the held connection), mostly for permits of a
///   semaphore, more than the holder leaves (a waiter for several permits keeps its turn
///   across its attempts); the fault holds mostly its second call, its look at the queue
///   it entered with the first;
/// - one that gives up: a `try_acquire` (that times out) or an acquire cancelled while its
///   call is held; the fault holds its first call, which may land after the give-back, on
///   a target its holder has left.
///
/// The holder is mostly gone before the held connection is let go, so that what depends on
/// the held call then runs (a waiter's next attempt, a late call's landing); the faults are
/// mostly calls held and then delivered, the ones that land after their client gave up.
pub fn episode(procs: usize, n: u8) -> BoxedStrategy<(Vec<Op>, FaultAt)> {
    let offset = u64::from(n) * EPISODE_MS;
    let task = TASKS + usize::from(n);
    let holder_proc = usize::from(n) % procs;
    let in_line = prop_oneof![7 => Just(true), 3 => Just(false)];
    in_line
        .prop_flat_map(move |in_line| {
            let target = if in_line {
                prop_oneof![
                    8 => Just(On::Semaphore(n)),
                    1 => Just(On::Key(n)),
                    1 => Just(On::Election(n)),
                ]
                .boxed()
            } else {
                prop_oneof![
                    2 => Just(On::Semaphore(n)),
                    2 => Just(On::Key(n)),
                    1 => Just(On::Election(n)),
                ]
                .boxed()
            };
            // For a semaphore, the holder's permits and the waiter's, which do not fit
            // together.
            let counts =
                (1u32..=LIMIT).prop_flat_map(|held| (Just(held), (LIMIT + 1 - held)..=LIMIT));
            (target, counts)
                .prop_flat_map(move |(on, (held, wanted))| {
                    episode_on(procs, offset, task, holder_proc, in_line, on, held, wanted)
                })
                .boxed()
        })
        .boxed()
}

/// [`episode`]'s operations and fault on `on`, once its kind and counts are drawn.
#[allow(clippy::too_many_arguments)]
pub fn episode_on(
    procs: usize,
    offset: u64,
    task: usize,
    holder_proc: usize,
    in_line: bool,
    on: On,
    held: u32,
    wanted: u32,
) -> BoxedStrategy<(Vec<Op>, FaultAt)> {
    // The next process: the fault of the next episode, which holds its waiter's process,
    // never holds this episode's waiter (whose release tells a lease lost).
    let waiter_proc = (holder_proc + 1) % procs;
    let takes = move |permits: Option<u32>| -> BoxedStrategy<Prim> {
        match on {
            On::Key(k) => prop_oneof![
                3 => Just(Prim::Lock(k)),
                2 => Just(Prim::Write(k)),
                2 => Just(Prim::Read(k)),
                1 => Just(Prim::Fair(k)),
                1 => Just(Prim::Unfenced(k)),
                1 => Just(Prim::All(vec![k, k + 1])),
                1 => Just(Prim::Booking(vec![k + 1], k)),
                1 => Just(Prim::Job(k, 1200)),
            ]
            .boxed(),
            On::Semaphore(s) => match permits {
                Some(count) => Just(Prim::Permits(s, count)).boxed(),
                None => (1u32..=LIMIT)
                    .prop_map(move |count| Prim::Permits(s, count))
                    .boxed(),
            },
            On::Election(e) => Just(Prim::Leader(e)).boxed(),
        }
    };
    let op = move |proc: usize, at: u64, prim: Prim, how: How, hold: u64, exit: Exit| Op {
        proc,
        task,
        at,
        prim,
        how,
        lease: 5000,
        watchdog: true,
        hold,
        exit,
    };
    let leases = || prop_oneof![Just(5000u64), Just(8000)];
    let holder = (
        takes(Some(held)),
        prop_oneof![Just(How::Acquire(800)), Just(How::Try)],
        prop_oneof![9 => Just(400u64), 1 => Just(1200)],
        prop_oneof![3 => Just(Exit::Release), 1 => Just(Exit::Drop)],
        leases(),
    )
        .prop_map(move |(prim, how, hold, exit, lease)| Op {
            lease,
            ..op(holder_proc, offset, prim, how, hold, exit)
        });
    // Released, so that a lease it lost meanwhile is told.
    let asks: BoxedStrategy<(How, Exit)> = if in_line {
        prop_oneof![Just(How::Acquire(2500)), Just(How::Acquire(6000))]
            .prop_map(|how| (how, Exit::Release))
            .boxed()
    } else {
        prop_oneof![
            Just((How::Try, Exit::Release)),
            (1u8..=3).prop_map(|polls| (How::Acquire(2500), Exit::Cancel(polls))),
        ]
        .boxed()
    };
    let waiter = (
        takes(Some(wanted)),
        asks,
        (2u64..=3).prop_map(|t| t * 100),
        prop_oneof![1 => Just(400u64), 2 => Just(1200)],
        leases(),
    )
        .prop_map(move |(prim, (how, exit), at, hold, lease)| Op {
            lease,
            ..op(waiter_proc, offset + at, prim, how, hold, exit)
        });
    let nth = if in_line {
        prop_oneof![1 => Just(1u8), 8 => Just(2), 1 => Just(3)].boxed()
    } else {
        Just(1u8).boxed()
    };
    let fault = (
        nth,
        prop_oneof![Just(800u64), Just(1500)],
        prop_oneof![9 => Just(0u8), 2 => Just(1), 1 => Just(2), 1 => Just(3)],
    );
    // From 100 ms to 2.5 s after the held connection was let go (counted from the waiter's
    // invocation).
    let later = proptest::collection::vec(
        (
            0..procs,
            (1u64..=25).prop_map(|t| t * 100),
            takes(None),
            prop_oneof![
                3 => Just(How::Try),
                1 => Just(How::Acquire(800)),
                1 => Just(How::Acquire(2500)),
            ],
            prop_oneof![Just(100u64), Just(400)],
            prop_oneof![3 => Just(Exit::Release), 1 => (1u8..=5).prop_map(Exit::Cancel)],
        ),
        1..=2,
    );
    (holder, waiter, fault, later)
        .prop_map(move |(holder, waiter, (nth, ms, how), later)| {
            let fault = FaultAt {
                at: waiter.at,
                fault: unknown_fault(how, on, nth, ms),
            };
            let later: Vec<Op> = later
                .into_iter()
                .map(|(proc, after, prim, how, hold, exit)| {
                    op(proc, waiter.at + ms + after, prim, how, hold, exit)
                })
                .collect();
            let mut ops = vec![holder, waiter];
            ops.extend(later);
            (ops, fault)
        })
        .boxed()
}

/// Every family's schedules, the same for every engine: an engine without a fault (memory
/// has none) skips it, and runs the rest of the schedule as it is.
pub fn schedule_strategy() -> BoxedStrategy<Schedule> {
    proptest::strategy::Union::new_weighted(vec![
        (3, family_strategy(Family::Mixed)),
        (3, family_strategy(Family::ReadersAndWriters)),
        (2, family_strategy(Family::Cancellations)),
        (2, family_strategy(Family::Restarts)),
        (2, family_strategy(Family::UnknownOutcomes)),
    ])
    .boxed()
}
