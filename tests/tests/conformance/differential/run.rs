//! Running a schedule on an engine: each operation on its process's locker, logged for the
//! history checker, the faults injected between them, then the judgement.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::conformance::{Engine, EngineKind, OP_TIMEOUT};
use leasehold_tests::history::{encode_key, monotonic_ns, History};
use leasehold_tests::polls::for_polls;
use tokio::time::{sleep, sleep_until, Instant};

use super::end_state::end_state;
use super::fault::{inject, Window};
use super::judge::{hit_by, judge, Judged};
use super::schedule::{election, key, semaphore, Exit, How, Op, Prim, Schedule, LIMIT, TASKS};

/// How often a holder asks `is_held()` while it holds (the checker's belief windows).
pub const SAMPLE: Duration = Duration::from_millis(25);

/// The per-worker logs of one run, in the history checker's format. Process `p`'s locks
/// are worker `3p`, its semaphore permits worker `3p + 1`, its leaderships worker `3p + 2`.
pub struct Logs {
    pub workers: Vec<Mutex<String>>,
    pub faults: Mutex<String>,
}

impl Logs {
    pub fn new(procs: usize, max_wait: u64) -> Self {
        let workers: Vec<Mutex<String>> = (0..procs * 3)
            .map(|w| {
                let mut text = format!(
                    "{} start {w} {} {} {max_wait} {} {TASKS} 0\n",
                    monotonic_ns(),
                    std::process::id(),
                    3000,
                    OP_TIMEOUT.as_millis()
                );
                match w % 3 {
                    1 => text.push_str(&format!("{} sem {LIMIT}\n", monotonic_ns())),
                    2 => text.push_str(&format!("{} ldr\n", monotonic_ns())),
                    _ => {}
                }
                Mutex::new(text)
            })
            .collect();
        Logs {
            workers,
            faults: Mutex::new(String::new()),
        }
    }

    pub fn at(&self, worker: usize, t: u64, event: &str, fields: &[&dyn fmt::Display]) {
        let mut line = format!("{t} {event}");
        for field in fields {
            let _ = write!(line, " {field}");
        }
        line.push('\n');
        self.workers[worker].lock().unwrap().push_str(&line);
    }

    pub fn fault(&self, event: &str, kind: &str) -> u64 {
        let t = monotonic_ns();
        let line = format!("{t} {event} {kind} engine\n");
        self.faults.lock().unwrap().push_str(&line);
        t
    }

    pub fn history(&self) -> History {
        let t = monotonic_ns();
        let logs: Vec<(usize, String)> = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, text)| (w, format!("{}{t} end\n", text.lock().unwrap())))
            .collect();
        History::parse(&logs, &self.faults.lock().unwrap())
    }
}

/// What became of one operation, in `monotonic_ns` times.
#[derive(Clone, Debug, Default)]
pub struct Record {
    /// The index of the operation in the schedule.
    pub op: usize,
    pub inv: u64,
    /// When the acquire returned (or was dropped).
    pub answered: u64,
    pub outcome: Outcome,
    /// When the hold surely ended from the holder's side: the release returned, or the guard
    /// was dropped (its task panicked).
    pub let_go: Option<u64>,
    /// The release's answer, for `Exit::Release`.
    pub released: Option<Result<(), String>>,
    /// The release said the lease was lost (not merely that the engine did not answer).
    pub release_lost: bool,
    /// When `is_held()` was first seen false while holding (before letting go).
    pub saw_loss: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    #[default]
    Pending,
    Granted,
    /// `Busy`, or `try_acquire` found nothing.
    Busy,
    /// Refused as a primitive the engine does not offer: the error's message.
    Refused(String),
    /// Dropped after N polls, unfinished.
    Cancelled,
    /// Any other error: its code.
    Failed(String),
}

/// A held guard of any primitive.
pub enum Held {
    Lock(leasehold::LockGuard),
    Unfenced(leasehold::UnfencedGuard),
    Multi(leasehold::MultiGuard),
    Permit(leasehold::PermitGuard),
    Leader(leasehold::Leadership),
}

impl Held {
    pub fn is_held(&self) -> bool {
        match self {
            Held::Lock(g) => g.is_held(),
            Held::Unfenced(g) => g.is_held(),
            Held::Multi(g) => g.is_held(),
            Held::Permit(g) => g.is_held(),
            Held::Leader(g) => g.is_leader(),
        }
    }

    /// The `ok` fields: fence (`-` when unfenced) and, for several keys, each key's fence.
    pub fn fences(&self, keys: &[String]) -> (String, Option<String>) {
        match self {
            Held::Lock(g) => (g.fence().to_string(), None),
            Held::Unfenced(_) => ("-".to_owned(), None),
            Held::Multi(g) => {
                let fences: Vec<String> = keys
                    .iter()
                    .map(|k| g.fence(k).unwrap_or(0).to_string())
                    .collect();
                (fences[0].clone(), Some(fences.join(",")))
            }
            Held::Permit(g) => (g.fence().to_string(), None),
            Held::Leader(g) => (g.term().to_string(), None),
        }
    }

    pub async fn release(self) -> Result<(), LockError> {
        match self {
            Held::Lock(g) => g.release().await,
            Held::Unfenced(g) => g.release().await,
            Held::Multi(g) => g.release().await,
            Held::Permit(g) => g.release().await,
            Held::Leader(g) => g.resign().await,
        }
    }

    /// Runs `fut` inside the guard's scope, where it has one.
    pub async fn scope<F: Future>(&self, fut: F) -> F::Output {
        match self {
            Held::Lock(g) => g.scope(fut).await,
            Held::Unfenced(g) => g.scope(fut).await,
            Held::Multi(g) => g.scope(fut).await,
            Held::Permit(g) => g.scope(fut).await,
            Held::Leader(_) => fut.await,
        }
    }
}

pub type Acquiring<'a> = Pin<Box<dyn Future<Output = Result<Option<Held>, LockError>> + Send + 'a>>;

/// The acquire of `op` on `locker`: `Ok(None)` when a `try_acquire` found it taken.
pub fn acquire<'a>(locker: &'a Locker, op: &Op) -> Acquiring<'a> {
    let lease = Duration::from_millis(op.lease);
    let wait = match op.how {
        How::Acquire(ms) => Some(Duration::from_millis(ms)),
        How::Try => None,
    };
    let watchdog = op.watchdog;
    macro_rules! lock_like {
        ($request:expr, $held:path) => {{
            let request = $request.lease(lease).watchdog(watchdog);
            match wait {
                Some(wait) => {
                    Box::pin(
                        async move { request.wait(wait).acquire().await.map(|g| Some($held(g))) },
                    )
                }
                None => Box::pin(async move { request.try_acquire().await.map(|g| g.map($held)) }),
            }
        }};
    }
    match &op.prim {
        Prim::Lock(k) => lock_like!(locker.lock(key(*k)), Held::Lock),
        Prim::Fair(k) => lock_like!(locker.lock(key(*k)).fair(true), Held::Lock),
        Prim::Read(k) => lock_like!(locker.read_lock(key(*k)), Held::Lock),
        Prim::Write(k) => lock_like!(locker.write_lock(key(*k)), Held::Lock),
        Prim::Job(k, at_least) => lock_like!(
            locker
                .lock(key(*k))
                .hold_at_least(Duration::from_millis(*at_least)),
            Held::Lock
        ),
        Prim::Unfenced(k) => lock_like!(locker.lock(key(*k)).unfenced(), Held::Unfenced),
        Prim::All(ks) => {
            let keys: Vec<String> = ks.iter().map(|k| key(*k)).collect();
            lock_like!(locker.lock_all(keys), Held::Multi)
        }
        Prim::Booking(ks, read) => {
            let keys: Vec<String> = ks.iter().map(|k| key(*k)).collect();
            lock_like!(locker.lock_all(keys).read_keys([key(*read)]), Held::Multi)
        }
        Prim::Permits(s, n) => {
            let n = *n;
            let request = locker
                .semaphore(semaphore(*s), LIMIT)
                .lease(lease)
                .watchdog(watchdog);
            match wait {
                Some(wait) => Box::pin(async move {
                    request
                        .wait(wait)
                        .acquire_many(n)
                        .await
                        .map(|g| Some(Held::Permit(g)))
                }),
                None => Box::pin(async move {
                    request
                        .try_acquire_many(n)
                        .await
                        .map(|g| g.map(Held::Permit))
                }),
            }
        }
        Prim::Leader(e) => {
            let request = locker
                .leader(election(*e))
                .identity(format!("op{}-{}", op.proc, op.task))
                .lease(lease)
                .watchdog(watchdog)
                .wait(wait.unwrap_or(Duration::ZERO));
            let is_try = wait.is_none();
            Box::pin(async move {
                match request.campaign().await {
                    Ok(l) => Ok(Some(Held::Leader(l))),
                    Err(e) if is_try && e.is_busy() => Ok(None),
                    Err(e) => Err(e),
                }
            })
        }
    }
}

/// The worker (history log) of an operation of process `proc`.
pub fn worker_of(op: &Op) -> usize {
    op.proc * 3
        + match op.prim {
            Prim::Permits(..) => 1,
            Prim::Leader(_) => 2,
            _ => 0,
        }
}

/// Runs operation `index` of a schedule on `locker`, logging it.
pub async fn run_op(locker: Locker, op: Op, index: usize, logs: Arc<Logs>) -> Record {
    let worker = worker_of(&op);
    let hold_id = format!("{worker}.{}.{index}", op.task);
    // The holds it is logged as: one, with one mode for all its keys; a booking as two, its
    // written keys exclusive and its read key a reader's share (the history checker takes one
    // mode per hold), each with its own keys' fences.
    let parts: Vec<(String, Vec<String>, String)> = match &op.prim {
        Prim::Permits(s, n) => vec![(hold_id, vec![semaphore(*s)], format!("p{n}"))],
        Prim::Leader(e) => vec![(hold_id, vec![election(*e)], "x".to_owned())],
        Prim::Read(_) => vec![(hold_id, op.prim.keys(), "r".to_owned())],
        Prim::Write(_) => vec![(hold_id, op.prim.keys(), "w".to_owned())],
        Prim::Booking(ks, read) => vec![
            (
                hold_id.clone(),
                ks.iter().map(|k| key(*k)).collect(),
                "x".to_owned(),
            ),
            (format!("{hold_id}r"), vec![key(*read)], "r".to_owned()),
        ],
        _ => vec![(hold_id, op.prim.keys(), "x".to_owned())],
    };
    let ids: Vec<String> = parts.iter().map(|(id, _, _)| id.clone()).collect();
    let mut record = Record {
        op: index,
        ..Record::default()
    };
    record.inv = monotonic_ns();
    for (id, keys, mode) in &parts {
        let encoded: Vec<String> = keys.iter().map(|k| encode_key(k)).collect();
        logs.at(worker, record.inv, "inv", &[id, &encoded.join(","), mode]);
    }
    let acquiring = acquire(&locker, &op);
    let result = match op.exit {
        Exit::Cancel(polls) => for_polls(polls as usize, acquiring).await,
        _ => Some(acquiring.await),
    };
    record.answered = monotonic_ns();
    let held = match result {
        None => {
            record.outcome = Outcome::Cancelled;
            for id in &ids {
                logs.at(worker, record.answered, "aerr", &[id, &"cancelled"]);
            }
            return record;
        }
        Some(Ok(None)) => {
            record.outcome = Outcome::Busy;
            for id in &ids {
                logs.at(worker, record.answered, "aerr", &[id, &"lock_busy"]);
            }
            return record;
        }
        Some(Err(e)) => {
            let code = e.code();
            record.outcome = match &e {
                LockError::Busy { .. } => Outcome::Busy,
                LockError::Config { .. } => Outcome::Refused(e.to_string()),
                _ => Outcome::Failed(format!("{code}: {e}")),
            };
            for id in &ids {
                logs.at(worker, record.answered, "aerr", &[id, &code]);
            }
            return record;
        }
        Some(Ok(Some(held))) => held,
    };
    record.outcome = Outcome::Granted;
    let validity = op.lease * 1000;
    for (id, keys, _) in &parts {
        let (fence, fences) = held.fences(keys);
        match &fences {
            Some(list) => logs.at(
                worker,
                record.answered,
                "ok",
                &[id, &fence, &validity, list],
            ),
            None => logs.at(worker, record.answered, "ok", &[id, &fence, &validity]),
        }
    }
    let hold = Duration::from_millis(op.hold);
    let sample = |held: &Held, logs: &Logs, saw_loss: &mut Option<u64>| {
        let t = monotonic_ns();
        if held.is_held() {
            for id in &ids {
                logs.at(worker, t, "h", &[id]);
            }
        } else if saw_loss.is_none() {
            *saw_loss = Some(t);
            for id in &ids {
                logs.at(worker, t, "nh", &[id]);
            }
        }
    };
    let mut saw_loss = None;
    match op.exit {
        Exit::Release | Exit::Drop | Exit::Cancel(_) => {
            let until = Instant::now() + hold;
            loop {
                sample(&held, &logs, &mut saw_loss);
                if Instant::now() >= until {
                    break;
                }
                sleep(SAMPLE.min(until - Instant::now())).await;
            }
            record.saw_loss = saw_loss;
            if op.exit == Exit::Drop {
                drop(held);
                record.let_go = Some(monotonic_ns());
                return record;
            }
            let t = monotonic_ns();
            let was_held = held.is_held();
            for id in &ids {
                logs.at(worker, t, "rel", &[id, &u8::from(was_held)]);
            }
            let released = held.release().await;
            let done = monotonic_ns();
            let event = match &released {
                Ok(()) => "rok",
                Err(e) if e.is_lost() => "rlost",
                Err(e) if e.is_unavailable() => "runav",
                Err(_) => "rerr",
            };
            for id in &ids {
                logs.at(worker, done, event, &[id]);
            }
            record.release_lost = released.as_ref().is_err_and(LockError::is_lost);
            record.released = Some(released.map_err(|e| e.to_string()));
            record.let_go = Some(done);
        }
        Exit::Panic => {
            let logs2 = logs.clone();
            let ids2 = ids.clone();
            let task = tokio::spawn(async move {
                let held = held;
                held.scope(async {
                    let until = Instant::now() + hold;
                    loop {
                        let t = monotonic_ns();
                        if held.is_held() {
                            for id in &ids2 {
                                logs2.at(worker, t, "h", &[id]);
                            }
                        }
                        if Instant::now() >= until {
                            break;
                        }
                        sleep(SAMPLE.min(until - Instant::now())).await;
                    }
                    panic!("{PLANNED_PANIC}");
                })
                .await
            });
            let joined = task.await;
            assert!(
                joined.as_ref().is_err_and(|e| e.is_panic()),
                "the planned panic did not happen"
            );
            record.let_go = Some(monotonic_ns());
        }
    }
    record
}

/// The message of the panics the schedules plan (kept out of the test's output).
pub const PLANNED_PANIC: &str = "differential: the planned panic inside a guard's scope";

/// Runs `schedule` on `engine` under a prefix of its own, and judges it: the failures found
/// (none when it passed) and the run's figures.
pub async fn run(engine: &Engine, schedule: &Schedule) -> Judged {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let prefix = format!(
        "diff{}x{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let mut lockers = Vec::new();
    let first = engine.locker_with_prefix(&prefix).await;
    for p in 0..schedule.procs {
        // Memory: clones of one store; otherwise one client per process.
        if engine.kind() == EngineKind::Memory || p == 0 {
            lockers.push(first.clone());
        } else {
            lockers.push(engine.locker_with_prefix(&prefix).await);
        }
    }
    let max_wait = schedule
        .ops
        .iter()
        .map(|op| match op.how {
            How::Acquire(ms) => ms,
            How::Try => 0,
        })
        .max()
        .unwrap_or(0);
    let logs = Arc::new(Logs::new(schedule.procs, max_wait));
    let start = Instant::now() + Duration::from_millis(50);

    // One Tokio task per (process, task), running its operations in order.
    let mut by_task: BTreeMap<(usize, usize), Vec<(usize, Op)>> = BTreeMap::new();
    for (i, op) in schedule.ops.iter().enumerate() {
        by_task
            .entry((op.proc, op.task))
            .or_default()
            .push((i, op.clone()));
    }
    let mut tasks = Vec::new();
    for ((proc, _), mut ops) in by_task {
        ops.sort_by_key(|(i, op)| (op.at, *i));
        let locker = lockers[proc].clone();
        let logs = logs.clone();
        tasks.push(tokio::spawn(async move {
            let mut records = Vec::new();
            for (i, op) in ops {
                sleep_until(start + Duration::from_millis(op.at)).await;
                records.push(run_op(locker.clone(), op, i, logs.clone()).await);
            }
            records
        }));
    }
    // The faults, in order, by one more task.
    let mut faults = schedule.faults.clone();
    faults.sort_by_key(|f| f.at);
    let fault_task = {
        let logs = logs.clone();
        async move {
            let mut windows = Vec::new(); // (start, end, loses locks)
            for f in faults {
                sleep_until(start + Duration::from_millis(f.at)).await;
                if let Some(w) = inject(engine, f.fault, &logs).await {
                    windows.push(w);
                }
            }
            windows
        }
    };
    let overall = Duration::from_secs(90);
    let (records, windows) = tokio::join!(
        async {
            let mut all = Vec::new();
            for task in tasks {
                match tokio::time::timeout(overall, task).await {
                    Ok(Ok(records)) => all.extend(records),
                    Ok(Err(e)) => return Err(format!("a task of the schedule failed: {e}")),
                    Err(_) => return Err(format!("a task hung: not done after {overall:?}")),
                }
            }
            Ok(all)
        },
        fault_task
    );
    let mut judged = Judged::default();
    let records = match records {
        Ok(records) => records,
        Err(hang) => {
            judged.failures.push(hang);
            return judged;
        }
    };
    judged.figures.ops = records.len();
    let held: Vec<&Window> = windows.iter().filter(|w| w.unknown).collect();
    judged.figures.held = held.len();
    judged.figures.hit = records
        .iter()
        .filter(|r| held.iter().any(|w| hit_by(r, w)))
        .count();
    if std::env::var_os("DIFF_TRACE").is_some() {
        let t0 = records.iter().map(|r| r.inv).min().unwrap_or(0);
        let faults: Vec<String> = windows
            .iter()
            .map(|w| {
                format!(
                    "{} {}..{} ms{}",
                    w.kind,
                    w.start.saturating_sub(t0) / 1_000_000,
                    w.end.saturating_sub(t0) / 1_000_000,
                    if w.loses_locks {
                        " (may lose locks)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        eprintln!("{}faults: {faults:?}\n", trace(schedule, &records));
    }
    judge(engine, schedule, &records, &windows, &logs, &mut judged);
    end_state(engine, schedule, &records, &windows, &prefix, &mut judged).await;
    judged
}

/// The run as a table, one line per operation (`DIFF_TRACE=1`): times in ms from the first
/// invocation.
pub fn trace(schedule: &Schedule, records: &[Record]) -> String {
    let t0 = records.iter().map(|r| r.inv).min().unwrap_or(0);
    let at = |t: u64| (t.saturating_sub(t0)) / 1_000_000;
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by_key(|r| r.inv);
    let mut text = String::new();
    for r in sorted {
        let op = &schedule.ops[r.op];
        let _ = writeln!(
            text,
            "op {:>2} p{}t{} {:<14} {:<14} asked {:>5} answered {:>5} {:<12} let go {:>5} {}",
            r.op,
            op.proc,
            op.task,
            format!("{:?}", op.prim),
            format!("{:?}", op.how),
            at(r.inv),
            at(r.answered),
            format!("{:?}", r.outcome)
                .chars()
                .take(12)
                .collect::<String>(),
            r.let_go.map_or("-".to_owned(), |t| at(t).to_string()),
            r.released
                .as_ref()
                .map_or(String::new(), |x| format!("{x:?}"))
        );
    }
    text
}
