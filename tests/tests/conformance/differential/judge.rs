//! The judgement of a run: safety by the history checker, liveness by the model replayed over
//! the engine's own trace (every `Busy` must have had a reason in its way).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use leasehold_tests::conformance::{Engine, EngineKind, OP_TIMEOUT, ZK_SESSION_TIMEOUT};
use leasehold_tests::history::Rule;

use super::fault::Window;
use super::run::{Logs, Outcome, Record};
use super::schedule::{Exit, How, Op, Prim, Schedule, LIMIT};

/// The longest stretch of a wait during which the model found nothing in the way, before the
/// engine is blamed for a `Busy`: the handover's tolerance (a waiter woken by a release or a
/// lease's end, scheduling noise on two loaded cores).
pub const GAP: Duration = Duration::from_millis(600);

/// How long a grant may precede the `ok` logged for it (the reply's trip back, a loaded
/// client): a hold counts as a reason from `ok - GRANT_LEAD` (never before its invocation).
pub const GRANT_LEAD: Duration = Duration::from_millis(150);

/// How long after a guard was dropped (or its task panicked) its release may still be on the
/// way: the release runs in the background.
pub const RELEASE_SLACK: Duration = Duration::from_millis(300);

/// How long after a fault ended the engine may take to serve as before (reconnections, a
/// ZooKeeper session or an etcd lease proved alive again, leases of a rolled-back snapshot
/// running out): waits overlapping it are not judged.
pub const RECOVERY: Duration = Duration::from_secs(6);

/// How long after a held connection was released or cut a call of unknown outcome may still
/// keep others out: its late answer or the cut reaches the client, what it may have taken is
/// given back (a round trip), and a waiting acquire of the held process that was riding it
/// out comes back from its pause (at most three attempts fail in a hold of 1.5 s: a pause of
/// at most 800 ms) and tries again within the operation timeout. Far below the leases of the
/// unknown-outcome schedules (5 s and 8 s): a lock that a late call left to nobody for its
/// lease is blamed, a prompt give-back is not. [`GAP`] comes on top, as everywhere.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What a run found, and its figures.
#[derive(Debug, Default)]
pub struct Judged {
    pub failures: Vec<String>,
    pub figures: Figures,
}

#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub ops: usize,
    pub granted: usize,
    pub busy: usize,
    pub cancelled: usize,
    pub failed: usize,
    /// The kinds refused as not offered.
    pub refused: BTreeSet<&'static str>,
    /// Waits judged by the model.
    pub judged_waits: usize,
    /// The longest stretch of a judged wait with nothing in the way (ms).
    pub longest_gap_ms: u64,
    /// Faults of unknown outcome that caught a connection.
    pub held: usize,
    /// Operations in flight while such a connection was held.
    pub hit: usize,
}

impl Figures {
    pub fn add(&mut self, run: &Figures) {
        self.ops += run.ops;
        self.granted += run.granted;
        self.busy += run.busy;
        self.cancelled += run.cancelled;
        self.failed += run.failed;
        self.judged_waits += run.judged_waits;
        self.longest_gap_ms = self.longest_gap_ms.max(run.longest_gap_ms);
        self.refused.extend(run.refused.iter().copied());
        self.held += run.held;
        self.hit += run.hit;
    }
}

/// `d` in nanoseconds, the unit of the trace's times.
pub fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Whether the model says `op` is a bad request, to be refused with a `Config` error on every
/// engine: a `hold_at_least` longer than a lease that is not renewed.
pub fn invalid(op: &Op) -> bool {
    matches!(op.prim, Prim::Job(_, at_least) if at_least > op.lease && !op.watchdog)
}

/// When the hold of `r` surely stopped keeping others out, as the engine sees it.
pub fn free_by(op: &Op, r: &Record) -> u64 {
    let lease_end = r.answered + op.lease * 1_000_000;
    let mut end = match r.let_go {
        Some(t) => {
            let t = if matches!(op.exit, Exit::Drop | Exit::Panic) {
                t + ns(RELEASE_SLACK)
            } else {
                t
            };
            if op.watchdog {
                t
            } else {
                t.min(lease_end)
            }
        }
        None => lease_end,
    };
    if let Prim::Job(_, at_least) = op.prim {
        end = end.max(r.answered + at_least * 1_000_000);
    }
    // A release that did not go through leaves the lock to its lease.
    if matches!(&r.released, Some(Err(_))) {
        end = end.max(lease_end);
    }
    end
}

/// The safety and liveness judgement of one run.
pub fn judge(
    engine: &Engine,
    schedule: &Schedule,
    records: &[Record],
    windows: &[Window],
    logs: &Logs,
    judged: &mut Judged,
) {
    let ops = &schedule.ops;
    let memory = engine.kind() == EngineKind::Memory;
    // Refusals: all of a kind, or none; never in memory; always saying why.
    let mut by_kind: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    for r in records {
        let op = &ops[r.op];
        let entry = by_kind.entry(op.prim.kind()).or_default();
        match &r.outcome {
            Outcome::Refused(_) if invalid(op) => {}
            _ if invalid(op) => judged.failures.push(format!(
                "op {} ({:?}, lease {} ms, watchdog {}) is a request no engine may take, but it \
                 was not refused: {:?}",
                r.op, op.prim, op.lease, op.watchdog, r.outcome
            )),
            Outcome::Refused(message) => {
                entry.0 += 1;
                if memory || !message.contains("not supported on") {
                    judged.failures.push(format!(
                        "op {} ({:?}) refused with a Config error that does not say the engine \
                         lacks the primitive: {message}",
                        r.op, op.prim
                    ));
                }
            }
            Outcome::Cancelled => {}
            _ => entry.1 += 1,
        }
        match &r.outcome {
            Outcome::Granted => judged.figures.granted += 1,
            Outcome::Busy => judged.figures.busy += 1,
            Outcome::Cancelled => judged.figures.cancelled += 1,
            Outcome::Failed(_) => judged.figures.failed += 1,
            _ => {}
        }
    }
    for (kind, (refused, served)) in &by_kind {
        if *refused > 0 {
            judged.figures.refused.insert(kind);
            if *served > 0 {
                judged.failures.push(format!(
                    "`{kind}` operations refused {refused} times and served {served} times"
                ));
            }
        }
    }

    // Near a fault that may leave the engine out for a while (until RECOVERY after it), waits
    // are not judged, and leases may be lost; near a held connection they are judged, with
    // what it held among the reasons (see `reasons_for`) and the leases it may take.
    let near_outage = |from: u64, to: u64| {
        windows
            .iter()
            .filter(|w| !w.unknown)
            .any(|w| from <= w.settled_by() && to + ns(GAP) >= w.start)
    };

    // Safety, by the history checker. Locks that a restart may have lost (Redis restarted
    // empty or from an older snapshot) are protected by their fences only from then on: the
    // belief windows of holds granted before such a restart end at it.
    let mut history = logs.history();
    for w in windows.iter().filter(|w| w.loses_locks) {
        for h in &mut history.holds {
            if h.ok.is_some_and(|(t, _)| t < w.end) {
                if let Some(last) = h.last_true.as_mut() {
                    *last = (*last).min(w.start);
                }
                if h.first_true.is_some_and(|f| f > w.start) {
                    h.first_true = None;
                    h.last_true = None;
                }
            }
        }
    }
    let report = history.check();
    for v in report.violations_except(&[Rule::Liveness]) {
        judged.failures.push(format!("safety: {v}"));
    }

    // No lease lost, and every release went through, without a fault that could explain it:
    // the engine agrees with the model that a renewed lease, or one that outlasts its hold,
    // stays held. A held connection takes no lease that outlives it (see `outlives_hold`),
    // and fails only the releases sent while it held or settled.
    for r in records.iter().filter(|r| r.outcome == Outcome::Granted) {
        let op = &ops[r.op];
        let let_go = r.let_go.unwrap_or(r.answered);
        if near_outage(r.inv, let_go) {
            continue;
        }
        let held: Vec<&Window> = windows
            .iter()
            .filter(|w| w.unknown && r.inv <= w.settled_by() && let_go + ns(GAP) >= w.start)
            .collect();
        // A connection cut under a holder may tell it its lease is lost: to a client, a
        // dropped connection may be a server that restarted without its locks (Redis).
        let cut_under = |w: &&Window| w.cut && r.inv <= w.end && let_go >= w.end;
        if held
            .iter()
            .any(|w| !outlives_hold(op.lease, w) || cut_under(w))
        {
            continue;
        }
        // A release sent while the connection was held, or before it settled, may find the
        // engine silent, not the lease gone.
        let release_held = held
            .iter()
            .any(|w| let_go >= w.start && let_go <= w.settled_by() + 2 * ns(OP_TIMEOUT));
        let no_fault = if held.is_empty() {
            "with no fault"
        } else {
            "with no fault that could take it (a connection held shorter than the lease)"
        };
        let outlasts = op.watchdog || op.hold + 300 < op.lease;
        if outlasts && op.lease >= 1500 {
            if let Some(t) = r.saw_loss {
                judged.failures.push(format!(
                    "op {} ({:?}, lease {} ms, watchdog {}) saw its lease lost {} ms into a \
                     {} ms hold, {no_fault}",
                    r.op,
                    op.prim,
                    op.lease,
                    op.watchdog,
                    (t - r.answered) / 1_000_000,
                    op.hold
                ));
            }
            match &r.released {
                Some(Err(_)) if release_held && !r.release_lost => {}
                Some(Err(e)) => judged.failures.push(format!(
                    "op {} ({:?}) release failed {no_fault}: {e}",
                    r.op, op.prim
                )),
                _ => {}
            }
        }
    }

    // Liveness: the model replayed over the trace.
    for x in records {
        let op = &ops[x.op];
        if x.outcome != Outcome::Busy {
            continue;
        }
        let (from, to) = match op.how {
            How::Acquire(wait) => (x.inv + 50_000_000, x.inv + wait * 1_000_000),
            How::Try => (x.inv, x.answered),
        };
        if near_outage(x.inv, x.answered) {
            continue;
        }
        let reasons = reasons_for(ops, records, x, memory, windows);
        let gap = longest_gap(op, &reasons, from, to);
        judged.figures.judged_waits += 1;
        let allowed = match op.how {
            // Nothing in the way at all while it asked.
            How::Try => to - from,
            How::Acquire(_) => ns(GAP),
        };
        judged.figures.longest_gap_ms = judged.figures.longest_gap_ms.max(gap.0 / 1_000_000);
        if gap.0 > allowed || (op.how == How::Try && gap.0 >= to - from && to > from) {
            judged.failures.push(format!(
                "liveness: op {} ({:?}, {:?}) gave up Busy, though the model had nothing in its \
                 way for {} ms (from {} ms to {} ms after it asked){}",
                x.op,
                op.prim,
                op.how,
                gap.0 / 1_000_000,
                gap.1.saturating_sub(x.inv) / 1_000_000,
                gap.2.saturating_sub(x.inv) / 1_000_000,
                describe_reasons(ops, &reasons, x.inv)
            ));
        }
    }
}

/// Something that may keep an operation out: from, until, the op it comes from (none: a
/// held connection, which may have held anyone), the permits it takes (semaphores).
#[derive(Clone, Copy, Debug)]
pub struct Reason {
    pub from: u64,
    pub until: u64,
    pub op: Option<usize>,
    pub permits: u32,
}

pub fn describe_reasons(ops: &[Op], reasons: &[Reason], t0: u64) -> String {
    if reasons.is_empty() {
        return "; nothing else held or asked for it".to_owned();
    }
    let mut text = String::from("; what the model saw in its way:");
    for r in reasons {
        let what = match r.op {
            Some(op) => format!("op {op} ({:?})", ops[op].prim),
            None => "a held connection, until settled".to_owned(),
        };
        let _ = write!(
            text,
            " {what} {}..{} ms;",
            r.from as i64 / 1_000_000 - t0 as i64 / 1_000_000,
            r.until as i64 / 1_000_000 - t0 as i64 / 1_000_000
        );
    }
    text
}

/// Whether `a` and `b` contend, and whether b's *waiting* (not only its holding) keeps `a` out.
pub fn contends(a: &Prim, b: &Prim) -> (bool, bool) {
    match (a, b) {
        (Prim::Permits(s, _), Prim::Permits(t, _)) => (s == t, s == t),
        (Prim::Leader(e), Prim::Leader(f)) => (e == f, e == f),
        (Prim::Permits(..) | Prim::Leader(_), _) | (_, Prim::Permits(..) | Prim::Leader(_)) => {
            (false, false)
        }
        _ => {
            let ak = a.keys();
            let shared: Vec<String> = b.keys().into_iter().filter(|k| ak.contains(k)).collect();
            if shared.is_empty() {
                return (false, false);
            }
            // Readers share (per key: a booking reads one key and writes the others); a
            // waiting writer keeps new readers out; fair locks and multi-key requests wait in
            // line (the latter may hold some keys while they wait).
            let holding = shared.iter().any(|k| !(a.reads(k) && b.reads(k)));
            let waiting = shared.iter().any(|k| a.reads(k) && !b.reads(k))
                || matches!(a, Prim::Fair(_))
                || matches!(b, Prim::All(_) | Prim::Booking(..));
            (holding, waiting)
        }
    }
}

/// Whether `a` and `b` wait in one local line: exclusive requests (not readers, not fair
/// requests, which wait in the store's queue under names of their own) of one key in one
/// process, where only the task at the front contends and a `try_acquire` does not overtake a
/// waiting task. `one_process`: every op runs in the same process (memory, whose processes
/// are clones of one locker).
pub fn same_local_line(a: &Op, b: &Op, one_process: bool) -> bool {
    let queues = |p: &Prim| {
        matches!(
            p,
            Prim::Lock(_)
                | Prim::Unfenced(_)
                | Prim::Write(_)
                | Prim::Job(..)
                | Prim::All(_)
                | Prim::Booking(..)
        )
    };
    (one_process || a.proc == b.proc) && queues(&a.prim) && queues(&b.prim)
}

/// Whether a lease of `lease_ms` outlives connection `w` held: its last renewal (a ZooKeeper
/// ping, an etcd keep-alive) was answered at most a third of the lease before the hold, the
/// next one within an operation timeout after it, and the lease is judged with 10 % to
/// spare (drift, a loaded client). ZooKeeper's and etcd's sessions of 4 s bound every lease
/// there, so that bound is taken everywhere: a 5 s lease outlives a hold of 1.5 s.
pub fn outlives_hold(lease_ms: u64, w: &Window) -> bool {
    let lease = ns(Duration::from_millis(lease_ms).min(ZK_SESSION_TIMEOUT));
    lease / 3 + (w.end - w.start) + ns(OP_TIMEOUT) < lease * 9 / 10
}

/// Whether `r`'s calls may have gone over the connection `w` held: it asked before the
/// connection was let go, and was answered after it was caught.
pub fn hit_by(r: &Record, w: &Window) -> bool {
    w.unknown && r.inv <= w.end && r.answered >= w.start
}

/// Everything in the way of the Busy operation `x`, from the trace. `one_process`: see
/// [`same_local_line`]. `windows`: the faults, of which those of unknown outcome are reasons
/// (see [`Window::unknown`]).
pub fn reasons_for(
    ops: &[Op],
    records: &[Record],
    x: &Record,
    one_process: bool,
    windows: &[Window],
) -> Vec<Reason> {
    let a = &ops[x.op];
    let mut reasons = Vec::new();
    for w in windows.iter().filter(|w| w.unknown) {
        // The waiters of the held process could not be served, whatever was free, until the
        // held calls were settled.
        reasons.push(Reason {
            from: w.start,
            until: w.settled_by(),
            op: None,
            permits: LIMIT + 1,
        });
    }
    for y in records.iter().filter(|y| y.op != x.op) {
        let b = &ops[y.op];
        let (holding, waiting) = contends(&a.prim, &b.prim);
        if !holding {
            continue;
        }
        let waiting = waiting || same_local_line(a, b, one_process);
        let permits = match b.prim {
            Prim::Permits(_, n) => n,
            _ => LIMIT + 1,
        };
        // Either outcome of a call the held connection may have carried: it may have taken
        // what it asked for from its invocation until it was settled (whatever its caller was
        // told: granted, busy, failed, cancelled).
        for w in windows.iter().filter(|w| hit_by(y, w)) {
            reasons.push(Reason {
                from: y.inv,
                until: y.answered.max(w.end) + ns(SETTLE),
                op: Some(y.op),
                permits,
            });
        }
        match &y.outcome {
            Outcome::Granted => {
                let from = y.inv.max(y.answered.saturating_sub(ns(GRANT_LEAD)));
                reasons.push(Reason {
                    from,
                    until: free_by(b, y),
                    op: Some(y.op),
                    permits,
                });
                // In line until its call was answered (a request in flight is ahead of a
                // later `try_acquire` of its process, even when the permits would do).
                if waiting && waits_ahead(a, x, b, y) {
                    reasons.push(Reason {
                        from: y.inv,
                        until: y.answered,
                        op: Some(y.op),
                        permits: LIMIT + 1,
                    });
                }
            }
            // A call that may still land, then be given back.
            Outcome::Cancelled | Outcome::Failed(_) => reasons.push(Reason {
                from: y.inv,
                until: y.answered + ns(OP_TIMEOUT) + ns(RELEASE_SLACK),
                op: Some(y.op),
                permits,
            }),
            Outcome::Busy if waiting && waits_ahead(a, x, b, y) => reasons.push(Reason {
                from: y.inv,
                until: y.answered + 50_000_000,
                op: Some(y.op),
                permits: LIMIT + 1,
            }),
            _ => {}
        }
    }
    reasons
}

/// Whether `y`'s waiting keeps `x` out: a writer (or any excluding request) keeps readers
/// out whenever it waits; in a line (fair locks, permits, campaigns) only one that came first.
pub fn waits_ahead(a: &Op, x: &Record, b: &Op, y: &Record) -> bool {
    if matches!(a.prim, Prim::Read(_)) && !matches!(b.prim, Prim::Read(_)) {
        return true;
    }
    // A booking's read key, which a writer waiting for it keeps out as it keeps a reader.
    let b_keys = b.prim.keys();
    if matches!(a.prim, Prim::Booking(..))
        && a.prim
            .keys()
            .iter()
            .any(|k| a.prim.reads(k) && !b.prim.reads(k) && b_keys.contains(k))
    {
        return true;
    }
    if matches!(b.prim, Prim::All(_) | Prim::Booking(..)) {
        return true;
    }
    y.inv <= x.inv
}

/// The longest stretch of `[from, to]` in which nothing kept `op` out: (length, start, end).
pub fn longest_gap(op: &Op, reasons: &[Reason], from: u64, to: u64) -> (u64, u64, u64) {
    if to <= from {
        return (0, from, from);
    }
    let asked = match op.prim {
        Prim::Permits(_, n) => n,
        _ => 1,
    };
    // Sweep: at each instant, the permits the reasons take; blocked when asked + taken > LIMIT
    // (a lock's reason takes more than the limit).
    let mut edges: Vec<(u64, i64)> = Vec::new();
    for r in reasons {
        if r.until <= r.from {
            continue;
        }
        edges.push((r.from, i64::from(r.permits)));
        edges.push((r.until, -i64::from(r.permits)));
    }
    edges.sort();
    let mut taken: i64 = 0;
    let mut free_since: Option<u64> = Some(from);
    let mut best = (0, from, from);
    let blocked = |taken: i64| taken + i64::from(asked) > i64::from(LIMIT);
    let close = |since: u64, until: u64, best: &mut (u64, u64, u64)| {
        let (s, u) = (since.max(from), until.min(to));
        if u > s && u - s > best.0 {
            *best = (u - s, s, u);
        }
    };
    // Apply the edges before `from` first.
    let mut i = 0;
    while i < edges.len() && edges[i].0 <= from {
        taken += edges[i].1;
        i += 1;
    }
    if blocked(taken) {
        free_since = None;
    }
    for &(t, d) in &edges[i..] {
        if t > to {
            break;
        }
        let was = blocked(taken);
        taken += d;
        let now = blocked(taken);
        if !was && now {
            if let Some(since) = free_since.take() {
                close(since, t, &mut best);
            }
        } else if was && !now {
            free_since = Some(t);
        }
    }
    if let Some(since) = free_since {
        close(since, to, &mut best);
    }
    best
}
