//! `lockbench`: leasehold against Redis itself and against what users write by hand, all in
//! one run, reported as ratios.
//!
//! ```text
//! cargo run --release -p leasehold-examples --bin lockbench [-- --quick | --smoke] [--out FILE]
//!     [--only uncontended,hot-key,attribute,redlock,fairness,zookeeper,etcd,postgres,semaphore,held]
//! ```
//!
//! Starts its own `redis-server`s (or uses `REDIS_URL` for the single-node scenarios) and, for
//! scenario 6, a throwaway ZooKeeper server, for scenario 7 a throwaway etcd, and for scenario 8
//! a throwaway PostgreSQL (the tests' harness; each scenario is skipped, saying why, when its
//! server cannot start: `scripts/ensure-zookeeper`, `scripts/ensure-etcd` and
//! `scripts/ensure-postgres` install them), prints a table and
//! writes `target/lockbench.json`: a list of
//! `{"scenario", "metric", "ours", "baseline", "baseline_name", "ratio", "unit"}`, and next to
//! it `target/lockbench.svg` (the same name as `--out`, with `.svg`): the ratios against their
//! targets and scenario 10's curves (see `svg.rs`).
//!
//! Scenarios:
//! 1. uncontended lock/unlock cycles (1, 16, 64 tasks), fenced and unfenced, with the client CPU
//!    per cycle (`getrusage`), vs the same two commands sent raw by
//!    the same client (`SET NX PX` + compare-and-delete script), and vs `rslock`, taking
//!    turns in five short windows each; and `lock_all` of two keys (1, 16 tasks) vs taking
//!    them by hand, one fenced `SET NX PX` each in sorted order, then deleting each;
//! 2. one hot key, 64 tasks x 20 acquisitions in one process and 4 processes x 16 tasks, vs a
//!    hand-written polling loop and `rslock`: throughput, wait percentiles, Redis commands
//!    per acquisition, handover latency (vs a raw PING round trip);
//! 3. the attribute's overhead vs a hand-written guard;
//! 4. RedLock with 3 and 5 nodes vs one node, and vs `rslock` with the same nodes; and, to
//!    show what the machine allows, the raw lock and unlock commands sent to N nodes in
//!    parallel vs to one node;
//! 5. no process starved (issue 21): 1, 2 and 4 processes x 16 tasks, each task taking one
//!    hot key in a loop for a fixed time (holding it for a yield, and for 1 ms), in turns over
//!    three rounds; wait percentiles and acquisitions/s per process, against the one-process
//!    run (median rounds);
//! 6. leasehold on ZooKeeper vs the ZooKeeper client's own lock recipe (`Client::lock`), on the
//!    same server: uncontended cycles (1, 16 tasks), and one hot key, 16 tasks x 1 process and
//!    4 processes x 4 tasks: throughput, wait percentiles, handover, requests per acquisition;
//! 7. leasehold on etcd vs etcd's own Lock service (`Client::lock`, `unlock`), on the same
//!    server: uncontended cycles (1, 16 tasks), and one hot key, 16 tasks x 1 process and
//!    4 processes x 4 tasks: throughput, wait percentiles, handover;
//! 8. leasehold on PostgreSQL vs the same statements sent raw by the same driver
//!    (tokio-postgres; `leasehold_acquire(...)`, then the engine's `DELETE ... pg_notify`), on
//!    connections of their own to the same server: uncontended cycles (1, 16 tasks), and one
//!    hot key, 4 processes x 4 tasks: throughput, wait percentiles, handover, where the raw
//!    side polls every 1 ms on a busy lock (it has no wake-ups);
//! 9. a semaphore of 8 permits, 64 tasks each taking one permit for 1 ms in a loop, vs a
//!    hand-written sorted set of expiring holders in Lua with 1 ms polling: throughput and
//!    wait percentiles.
//! 10. many held locks (issue 19's "scenario 5"): 1k, 10k and 100k locks held at once with the
//!     watchdog on (lease 3 s), each point in a worker process of its own, vs one task per
//!     guard renewing with a compare-and-PEXPIRE script: client memory per held lock, Redis CPU
//!     and commands per renewal, renewal lag p99, and whether each grows linearly (`held.rs`).

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{distributed_lock, LockError, Locker};
use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer, ZkServer};

mod etcd;
mod held;
mod postgres;
mod semaphore;
mod svg;
mod zookeeper;

/// The system allocator, counting allocations: scenario 1 reports allocations per cycle.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One row of the report.
struct Row {
    scenario: String,
    metric: String,
    ours: f64,
    baseline: f64,
    baseline_name: String,
    unit: String,
}

impl Row {
    fn ratio(&self) -> f64 {
        if self.baseline == 0.0 {
            f64::NAN
        } else {
            self.ours / self.baseline
        }
    }
}

struct Report {
    rows: Vec<Row>,
}

impl Report {
    fn add(
        &mut self,
        scenario: &str,
        metric: &str,
        ours: f64,
        baseline: f64,
        name: &str,
        unit: &str,
    ) {
        let row = Row {
            scenario: scenario.into(),
            metric: metric.into(),
            ours,
            baseline,
            baseline_name: name.into(),
            unit: unit.into(),
        };
        println!(
            "{:<28} {:<34} {:>12.1} {:>12.1} {:>7.2}  {} (vs {})",
            row.scenario,
            row.metric,
            row.ours,
            row.baseline,
            row.ratio(),
            row.unit,
            row.baseline_name
        );
        self.rows.push(row);
    }

    fn json(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let num = |v: f64| {
            if v.is_finite() {
                format!("{v:.4}")
            } else {
                "null".to_owned()
            }
        };
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"scenario\": \"{}\", \"metric\": \"{}\", \"ours\": {}, \"baseline\": {}, \
                     \"baseline_name\": \"{}\", \"ratio\": {}, \"unit\": \"{}\"}}",
                    esc(&r.scenario),
                    esc(&r.metric),
                    num(r.ours),
                    num(r.baseline),
                    esc(&r.baseline_name),
                    num(r.ratio()),
                    esc(&r.unit)
                )
            })
            .collect();
        format!("[\n{}\n]\n", rows.join(",\n"))
    }
}

const COMPARE_AND_DELETE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// The same lock with a fencing token taken in the same atomic step, as ours does: a script,
/// since Redis has no native "set if absent, then increment". Returns the token, or nil.
const FENCED_SET: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     return redis.call('INCR', KEYS[2]) end return false";

/// [`FENCED_SET`] with the fence rule leasehold keeps (see its `fence.lua`): the counter is
/// first lifted to the server clock in microseconds, so tokens keep increasing after Redis
/// restarts from an old snapshot or fails over to a lagging replica, which a bare `INCR` does
/// not. The baseline for what a restore-safe fence costs Redis by itself.
const SAFE_FENCED_SET: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     local t = redis.call('TIME') \
     local floor = tonumber(t[1]) * 1000000 + tonumber(t[2]) \
     if tonumber(redis.call('GET', KEYS[2]) or '0') < floor then \
       redis.call('SET', KEYS[2], string.format('%d', floor + 1), 'PX', ARGV[3]) \
       return floor + 1 \
     end \
     return redis.call('INCR', KEYS[2]) \
   end return false";

/// The lock users write by hand, done right as far as it goes: random token, `SET NX PX`,
/// compare-and-delete; waiting is a 1 ms polling loop.
#[derive(Clone)]
struct Naive {
    conn: redis::aio::MultiplexedConnection,
    delete: Arc<redis::Script>,
    fenced_set: Arc<redis::Script>,
    safe_fenced_set: Arc<redis::Script>,
}

impl Naive {
    async fn new(url: &str) -> Naive {
        let client = redis::Client::open(url).expect("url");
        Naive {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .expect("connect"),
            delete: Arc::new(redis::Script::new(COMPARE_AND_DELETE)),
            fenced_set: Arc::new(redis::Script::new(FENCED_SET)),
            safe_fenced_set: Arc::new(redis::Script::new(SAFE_FENCED_SET)),
        }
    }

    /// `SET NX PX` and, when it took the lock, the next fencing token, in one script.
    async fn try_lock_fenced(&self, key: &str, fence_key: &str, token: &str) -> Option<u64> {
        let mut conn = self.conn.clone();
        self.fenced_set
            .key(key)
            .key(fence_key)
            .arg(token)
            .arg(30_000)
            .invoke_async(&mut conn)
            .await
            .expect("fenced SET")
    }

    /// [`try_lock_fenced`](Self::try_lock_fenced) with a restore-safe fence
    /// ([`SAFE_FENCED_SET`]).
    async fn try_lock_safe_fenced(&self, key: &str, fence_key: &str, token: &str) -> Option<u64> {
        let mut conn = self.conn.clone();
        self.safe_fenced_set
            .key(key)
            .key(fence_key)
            .arg(token)
            .arg(30_000)
            .arg(86_400_000)
            .invoke_async(&mut conn)
            .await
            .expect("restore-safe fenced SET")
    }

    async fn try_lock(&self, key: &str, token: &str) -> bool {
        let mut conn = self.conn.clone();
        let ok: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .expect("SET");
        ok.is_some()
    }

    async fn lock(&self, key: &str, token: &str) {
        while !self.try_lock(key, token).await {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn unlock(&self, key: &str, token: &str) {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .delete
            .key(key)
            .arg(token)
            .invoke_async(&mut conn)
            .await
            .expect("compare-and-delete");
    }
}

fn token() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs `tasks` copies of `cycle(task, i)` for `duration`; cycles per second.
async fn cycles_per_sec<F, Fut>(tasks: usize, duration: Duration, cycle: F) -> f64
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (cycle, done) = (cycle.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let mut i = 0;
            while start.elapsed() < duration {
                cycle(t, i).await;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Scenario 1's contenders that cycle one lock and unlock per call (rslock aside).
#[derive(Clone, Copy)]
enum Cycle {
    /// `SET NX PX`, then compare-and-delete, sent raw.
    Raw,
    /// `SET NX PX` + `INCR` in one script, then compare-and-delete, sent raw.
    Fenced,
    /// `locker.lock(k).acquire()`, then `release()`.
    Ours,
    /// `locker.lock(k).unfenced().acquire()`, then `release()`.
    Unfenced,
    /// [`SAFE_FENCED_SET`], then compare-and-delete, sent raw.
    SafeFenced,
}

impl Cycle {
    fn parse(s: &str) -> Cycle {
        match s {
            "raw" => Cycle::Raw,
            "fenced" => Cycle::Fenced,
            "unfenced" => Cycle::Unfenced,
            "safe-fenced" => Cycle::SafeFenced,
            "ours" => Cycle::Ours,
            other => {
                eprintln!(
                    "unknown contender {other:?}: --profile takes ours, unfenced, raw, fenced or \
                     safe-fenced"
                );
                std::process::exit(2)
            }
        }
    }

    /// Cycles per second of `tasks` tasks doing this for `window`, each on 16 keys of its own.
    async fn run(self, naive: &Naive, locker: &Locker, tasks: usize, window: Duration) -> f64 {
        let (n, l) = (naive.clone(), locker.clone());
        cycles_per_sec(tasks, window, move |t, i| {
            let (n, l) = (n.clone(), l.clone());
            async move {
                let k = i % 16;
                match self {
                    Cycle::Raw => {
                        let (key, tok) = (format!("raw:{t}:{k}"), token());
                        assert!(n.try_lock(&key, &tok).await, "raw key was taken");
                        n.unlock(&key, &tok).await;
                    }
                    Cycle::Fenced => {
                        let (key, tok) = (format!("fenced:{{{t}:{k}}}"), token());
                        let fence_key = format!("fence:{{{t}:{k}}}");
                        let fence = n.try_lock_fenced(&key, &fence_key, &tok).await;
                        assert!(fence.is_some(), "fenced key was taken");
                        n.unlock(&key, &tok).await;
                    }
                    Cycle::SafeFenced => {
                        let (key, tok) = (format!("safe:{{{t}:{k}}}"), token());
                        let fence_key = format!("safe-fence:{{{t}:{k}}}");
                        let fence = n.try_lock_safe_fenced(&key, &fence_key, &tok).await;
                        assert!(fence.is_some(), "fenced key was taken");
                        n.unlock(&key, &tok).await;
                    }
                    Cycle::Ours => {
                        let guard = l.lock(format!("u:{t}:{k}")).acquire().await;
                        guard.expect("acquire").release().await.expect("release");
                    }
                    Cycle::Unfenced => {
                        let guard = l.lock(format!("nf:{t}:{k}")).unfenced().acquire().await;
                        guard.expect("acquire").release().await.expect("release");
                    }
                }
            }
        })
        .await
    }
}

/// Scenario 1's rounds per task count: the contenders take turns in short windows, so
/// that a change in the machine's speed during the run (other processes, CPU frequency)
/// falls on all of them alike rather than on whichever ran at the time.
const UNCONTENDED_ROUNDS: u32 = 5;

async fn scenario_uncontended(report: &mut Report, url: &str, duration: Duration) {
    let naive = Naive::new(url).await;
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let rslock = Arc::new(rslock::LockManager::new(vec![url.to_owned()]));
    let window = duration / UNCONTENDED_ROUNDS;
    for tasks in [1usize, 16, 64] {
        // Cycles per second of each contender, summed over the rounds (equal windows), and
        // the client CPU (getrusage: this process; Redis is another) each one used.
        // In the order of `Cycle`: raw, fenced, ours, unfenced, safe-fenced.
        let (mut rates, mut cpu, mut theirs) = ([0.0f64; 5], [0.0f64; 5], 0.0);
        for _ in 0..UNCONTENDED_ROUNDS {
            let cycles = [
                Cycle::Raw,
                Cycle::Fenced,
                Cycle::Ours,
                Cycle::Unfenced,
                Cycle::SafeFenced,
            ];
            for (slot, cycle) in cycles.into_iter().enumerate() {
                let start = cpu_seconds();
                let rate = cycle.run(&naive, &locker, tasks, window).await;
                cpu[slot] += cpu_seconds() - start;
                rates[slot] += rate;
            }
            let r = rslock.clone();
            theirs += cycles_per_sec(tasks, window, move |t, i| {
                let r = r.clone();
                async move { rslock_lock_unlock(&r, &format!("rs:{t}:{}", i % 16)).await }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        // Client CPU per cycle, in µs: CPU seconds over the cycles done in the same windows.
        // `rate` is still the sum of the rounds' rates: times one window, the cycles done.
        let per_cycle = |cpu: f64, rate: f64| cpu * 1e6 / (rate * window.as_secs_f64());
        let cpu_us: Vec<f64> = (0..5).map(|c| per_cycle(cpu[c], rates[c])).collect();
        let [raw, fenced, ours, unfenced, safe_fenced] = rates.map(|r| r / rounds);
        let theirs = theirs / rounds;
        let scenario = format!("1 uncontended, {tasks} tasks");
        report.add(
            &scenario,
            "cycles/s",
            ours,
            raw,
            "raw SET NX PX + compare-and-delete",
            "cycles/s",
        );
        report.add(
            &scenario,
            "cycles/s vs raw with a fence",
            ours,
            fenced,
            "raw SET NX PX + INCR in one script, compare-and-delete",
            "cycles/s",
        );
        report.add(
            &scenario,
            "cycles/s vs raw, restore-safe fence",
            ours,
            safe_fenced,
            "raw SET NX PX + a fence lifted to the server clock, in one script",
            "cycles/s",
        );
        report.add(
            &scenario,
            "cycles/s (rslock)",
            theirs,
            raw,
            "raw SET NX PX + compare-and-delete",
            "cycles/s",
        );
        report.add(
            &scenario,
            "unfenced cycles/s",
            unfenced,
            raw,
            "raw SET NX PX + compare-and-delete",
            "cycles/s",
        );
        report.add(
            &scenario,
            "client CPU per cycle",
            cpu_us[2],
            cpu_us[1],
            "raw with a fence (getrusage, same windows)",
            "us",
        );
        report.add(
            &scenario,
            "unfenced client CPU per cycle",
            cpu_us[3],
            cpu_us[0],
            "raw (getrusage, same windows)",
            "us",
        );
    }
    // Two keys at once (issue 16): `lock_all` takes free keys in one script call, against
    // the loop users write by hand (take each key in sorted order with a fence, then delete
    // each).
    for tasks in [1usize, 16] {
        let (mut raw, mut ours) = (0.0, 0.0);
        for _ in 0..UNCONTENDED_ROUNDS {
            let n = naive.clone();
            raw += cycles_per_sec(tasks, window, move |t, i| {
                let n = n.clone();
                async move {
                    let tok = token();
                    let keys = [
                        format!("mraw:{{{t}:{}:a}}", i % 16),
                        format!("mraw:{{{t}:{}:b}}", i % 16),
                    ];
                    for key in &keys {
                        let fence = n.try_lock_fenced(key, &format!("f{key}"), &tok).await;
                        assert!(fence.is_some(), "raw key was taken");
                    }
                    for key in &keys {
                        n.unlock(key, &tok).await;
                    }
                }
            })
            .await;
            let l = locker.clone();
            ours += cycles_per_sec(tasks, window, move |t, i| {
                let l = l.clone();
                async move {
                    let guard = l
                        .lock_all([format!("m:{t}:{}:b", i % 16), format!("m:{t}:{}:a", i % 16)])
                        .acquire()
                        .await
                        .expect("acquire");
                    guard.release().await.expect("release");
                }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        report.add(
            &format!("1 uncontended, {tasks} tasks"),
            "lock_all of 2 keys, cycles/s",
            ours / rounds,
            raw / rounds,
            "raw, by hand: each key in order (SET NX PX + INCR), then each deleted",
            "cycles/s",
        );
    }
}

/// One acquisition on the hot key, in monotonic nanoseconds (comparable across processes).
#[derive(Clone, Copy, Debug)]
struct Sample {
    asked: u64,
    got: u64,
    released: u64,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Ours,
    /// Ours with `fair(true)`: no handover inside a process.
    OursFair,
    Naive,
    Rslock,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Ours => "ours",
            Impl::OursFair => "ours-fair",
            Impl::Naive => "naive",
            Impl::Rslock => "rslock",
        }
    }

    fn parse(s: &str) -> Impl {
        match s {
            "ours" => Impl::Ours,
            "ours-fair" => Impl::OursFair,
            "naive" => Impl::Naive,
            "rslock" => Impl::Rslock,
            other => panic!("unknown implementation {other}"),
        }
    }
}

/// How long each task of a hot-key run keeps taking the key, and what it does holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// This many acquisitions per task, nothing done while holding the lock (scenario 2).
    Rounds(usize),
    /// Acquisitions for `run`, each holding the lock for `hold` (a sleep), or with a zero
    /// `hold` yielding once to the runtime: the smallest critical section that lets other
    /// tasks run, as a handler's await would (scenario 5).
    Continuous { run: Duration, hold: Duration },
}

impl Load {
    /// The worker's command-line form: `rounds:20`, or `continuous-us:RUN:HOLD`.
    fn arg(self) -> String {
        match self {
            Load::Rounds(n) => format!("rounds:{n}"),
            Load::Continuous { run, hold } => {
                format!("continuous-us:{}:{}", run.as_micros(), hold.as_micros())
            }
        }
    }

    fn parse(s: &str) -> Load {
        let us = |x: &str| Duration::from_micros(x.parse().expect("microseconds"));
        match s.split(':').collect::<Vec<_>>()[..] {
            ["rounds", n] => Load::Rounds(n.parse().expect("rounds")),
            ["continuous-us", run, hold] => Load::Continuous {
                run: us(run),
                hold: us(hold),
            },
            _ => panic!("unknown load {s:?}: rounds:N or continuous-us:RUN:HOLD"),
        }
    }

    /// Whether a task that has made `done` acquisitions since `start` takes another.
    fn more(self, done: usize, start: Instant) -> bool {
        match self {
            Load::Rounds(n) => done < n,
            Load::Continuous { run, .. } => start.elapsed() < run,
        }
    }

    /// What a task does while it holds the lock.
    async fn critical_section(self) {
        match self {
            Load::Rounds(_) => {}
            Load::Continuous { hold, .. } if hold.is_zero() => tokio::task::yield_now().await,
            Load::Continuous { hold, .. } => tokio::time::sleep(hold).await,
        }
    }

    /// Samples room for one task.
    fn capacity(self) -> usize {
        match self {
            Load::Rounds(n) => n,
            Load::Continuous { .. } => 1024,
        }
    }
}

/// `tasks` tasks each take `key` as `load` says.
async fn hot_key(which: Impl, url: &str, key: &str, tasks: usize, load: Load) -> Vec<Sample> {
    let samples = Arc::new(std::sync::Mutex::new(Vec::with_capacity(
        tasks * load.capacity(),
    )));
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("locker");
    let naive = Naive::new(url).await;
    let rslock = Arc::new(rslock::LockManager::new(vec![url.to_owned()]));
    let barrier = Arc::new(tokio::sync::Barrier::new(tasks));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (locker, naive, rslock) = (locker.clone(), naive.clone(), rslock.clone());
        let (samples, barrier, key) = (samples.clone(), barrier.clone(), key.to_owned());
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let start = Instant::now();
            let mut done = 0;
            while load.more(done, start) {
                done += 1;
                let asked = monotonic_ns();
                let sample = match which {
                    Impl::Ours | Impl::OursFair => {
                        let guard = locker
                            .lock(key.as_str())
                            .fair(which == Impl::OursFair)
                            .acquire()
                            .await
                            .expect("acquire");
                        let got = monotonic_ns();
                        load.critical_section().await;
                        let released = monotonic_ns();
                        guard.release().await.expect("release");
                        Sample {
                            asked,
                            got,
                            released,
                        }
                    }
                    Impl::Naive => {
                        let tok = token();
                        naive.lock(&key, &tok).await;
                        let got = monotonic_ns();
                        load.critical_section().await;
                        let released = monotonic_ns();
                        naive.unlock(&key, &tok).await;
                        Sample {
                            asked,
                            got,
                            released,
                        }
                    }
                    Impl::Rslock => {
                        let lock = rslock
                            .acquire_no_guard(key.as_bytes(), Duration::from_secs(30))
                            .await
                            .expect("rslock acquire");
                        let got = monotonic_ns();
                        load.critical_section().await;
                        let released = monotonic_ns();
                        rslock.unlock(&lock).await;
                        Sample {
                            asked,
                            got,
                            released,
                        }
                    }
                };
                samples.lock().unwrap().push(sample);
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let out = samples.lock().unwrap().clone();
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Throughput, wait percentiles and handover latencies of a merged timeline.
struct HotStats {
    per_sec: f64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
    wait_max_ms: f64,
    handoff_p50_us: f64,
    handoff_p99_us: f64,
}

fn hot_stats(mut samples: Vec<Sample>) -> HotStats {
    samples.sort_by_key(|s| s.got);
    let first = samples.iter().map(|s| s.asked).min().unwrap_or(0);
    let last = samples.iter().map(|s| s.released).max().unwrap_or(0);
    let mut waits: Vec<f64> = samples
        .iter()
        .map(|s| (s.got - s.asked) as f64 / 1e6)
        .collect();
    waits.sort_by(f64::total_cmp);
    let mut handoffs: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1].asked < w[0].released) // someone was already waiting
        .map(|w| w[1].got.saturating_sub(w[0].released) as f64 / 1e3)
        .collect();
    handoffs.sort_by(f64::total_cmp);
    HotStats {
        per_sec: samples.len() as f64 / ((last - first) as f64 / 1e9),
        wait_p50_ms: percentile(&waits, 0.5),
        wait_p99_ms: percentile(&waits, 0.99),
        wait_max_ms: waits.last().copied().unwrap_or(f64::NAN),
        handoff_p50_us: percentile(&handoffs, 0.5),
        handoff_p99_us: percentile(&handoffs, 0.99),
    }
}

/// Runs the hot-key load in `processes` worker processes with `tasks` tasks each; the
/// samples of each process. `which` is an [`Impl`]'s, a [`zookeeper::Contender`]'s, an
/// [`etcd::Contender`]'s or a [`postgres::Contender`]'s name.
fn hot_key_processes(
    which: &str,
    url: &str,
    key: &str,
    processes: usize,
    tasks: usize,
    load: Load,
) -> Vec<Vec<Sample>> {
    let exe = std::env::current_exe().expect("own path");
    let mut children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .args(["--worker", which, url, key])
                .arg(tasks.to_string())
                .arg(load.arg())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    // Each worker connects, prints "ready", and starts on a line from us.
    let mut readers: Vec<_> = children
        .iter_mut()
        .map(|c| std::io::BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    for r in &mut readers {
        let mut line = String::new();
        r.read_line(&mut line).expect("worker ready");
        assert_eq!(line.trim(), "ready", "worker said {line:?}");
    }
    for c in &mut children {
        writeln!(c.stdin.as_mut().expect("stdin"), "go").expect("start worker");
    }
    let mut per_process = Vec::new();
    for (mut c, r) in children.into_iter().zip(readers) {
        let mut samples = Vec::new();
        for line in r.lines() {
            let line = line.expect("worker output");
            let v: Vec<u64> = line
                .split(' ')
                .map(|x| x.parse().expect("number"))
                .collect();
            samples.push(Sample {
                asked: v[0],
                got: v[1],
                released: v[2],
            });
        }
        assert!(c.wait().expect("worker").success(), "worker failed");
        per_process.push(samples);
    }
    per_process
}

/// What a worker process takes the hot key with, by the name it was given.
#[derive(Clone, Copy, Debug)]
enum WorkerContender {
    Redis(Impl),
    ZooKeeper(zookeeper::Contender),
    Etcd(etcd::Contender),
    Postgres(postgres::Contender),
}

impl WorkerContender {
    fn parse(which: &str) -> WorkerContender {
        if let Some(c) = zookeeper::Contender::parse(which) {
            WorkerContender::ZooKeeper(c)
        } else if let Some(c) = etcd::Contender::parse(which) {
            WorkerContender::Etcd(c)
        } else if let Some(c) = postgres::Contender::parse(which) {
            WorkerContender::Postgres(c)
        } else {
            WorkerContender::Redis(Impl::parse(which))
        }
    }
}

async fn worker(args: &[String]) {
    let [which, url, key, tasks, load] = args else {
        panic!("worker arguments: IMPL URL KEY TASKS LOAD");
    };
    let contender = WorkerContender::parse(which);
    let tasks = tasks.parse().expect("tasks");
    let load = Load::parse(load);
    // Connect before the start signal, so all processes begin together.
    let _warm = match contender {
        WorkerContender::Redis(_) => Some(Locker::connect(url).await.expect("connect")),
        _ => None,
    };
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("go");
    let samples = match contender {
        WorkerContender::ZooKeeper(c) => zookeeper::contend(c, url, key, tasks, load).await,
        WorkerContender::Etcd(c) => etcd::contend(c, url, key, tasks, load).await,
        WorkerContender::Postgres(c) => postgres::contend(c, url, key, tasks, load).await,
        WorkerContender::Redis(which) => hot_key(which, url, key, tasks, load).await,
    };
    let mut out = std::io::stdout().lock();
    for s in samples {
        writeln!(out, "{} {} {}", s.asked, s.got, s.released).expect("write");
    }
}

async fn ping_rtt_us(url: &str) -> f64 {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut rtts = Vec::new();
    for _ in 0..2000 {
        let start = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .expect("PING");
        rtts.push(start.elapsed().as_secs_f64() * 1e6);
    }
    rtts.sort_by(f64::total_cmp);
    percentile(&rtts, 0.5)
}

async fn scenario_hot_key(report: &mut Report, srv: &RedisServer, rounds: usize) {
    let url = srv.url();
    let rtt = ping_rtt_us(&url).await;
    println!("PING round trip p50: {rtt:.0} us");
    // The one-process run's wait max, which the fair lock's is measured against.
    let mut one_process_wait_max = f64::NAN;
    for (label, processes, tasks) in [
        ("64 tasks x 1 process", 1usize, 64usize),
        ("16 tasks x 4 processes", 4, 16),
    ] {
        let mut stats = Vec::new();
        let (mut ours_scripts, mut fair_scripts) = (0.0, 0.0);
        for which in [Impl::Ours, Impl::Naive, Impl::Rslock, Impl::OursFair] {
            let key = format!("hot-{}-{processes}", which.name());
            let scripts_before = script_calls(srv).await;
            let before = srv.info_stat("total_commands_processed").await;
            let load = Load::Rounds(rounds);
            let samples = if processes == 1 {
                hot_key(which, &url, &key, tasks, load).await
            } else {
                let url = url.clone();
                tokio::task::spawn_blocking(move || {
                    hot_key_processes(which.name(), &url, &key, processes, tasks, load)
                })
                .await
                .expect("workers")
                .concat()
            };
            let after = srv.info_stat("total_commands_processed").await;
            let scripts = (script_calls(srv).await - scripts_before) as f64;
            let n = samples.len() as f64;
            assert_eq!(samples.len(), processes * tasks * rounds, "lost samples");
            // Both INFO calls count as commands too.
            let commands = (after - before).saturating_sub(2) as f64 / n;
            if which == Impl::OursFair {
                fair_scripts = scripts / n;
            } else if which == Impl::Ours {
                ours_scripts = scripts / n;
            }
            stats.push((which, hot_stats(samples), commands));
        }
        let scenario = format!("2 hot key, {label}");
        let (_, fair, fair_cmds) = stats.pop().expect("the fair run");
        let (_, ours, ours_cmds) = &stats[0];
        if processes == 1 {
            one_process_wait_max = ours.wait_max_ms;
        } else {
            report_fair(
                report,
                label,
                (&fair, fair_cmds, fair_scripts),
                (ours, *ours_cmds, ours_scripts),
                one_process_wait_max,
            );
        }
        for (which, theirs, their_cmds) in &stats[1..] {
            let name = match which {
                Impl::Naive => "polling loop (SET NX PX, 1 ms sleep)",
                _ => "rslock",
            };
            report.add(
                &scenario,
                "acquisitions/s",
                ours.per_sec,
                theirs.per_sec,
                name,
                "acq/s",
            );
            report.add(
                &scenario,
                "wait p50",
                ours.wait_p50_ms,
                theirs.wait_p50_ms,
                name,
                "ms",
            );
            report.add(
                &scenario,
                "wait p99",
                ours.wait_p99_ms,
                theirs.wait_p99_ms,
                name,
                "ms",
            );
            report.add(
                &scenario,
                "wait max",
                ours.wait_max_ms,
                theirs.wait_max_ms,
                name,
                "ms",
            );
            report.add(
                &scenario,
                "redis commands per acquisition",
                *ours_cmds,
                *their_cmds,
                name,
                "commands",
            );
        }
        report.add(
            &scenario,
            "handover p50",
            ours.handoff_p50_us,
            rtt,
            "PING round trip p50",
            "us",
        );
        report.add(
            &scenario,
            "handover p99",
            ours.handoff_p99_us,
            rtt,
            "PING round trip p50",
            "us",
        );
    }
}

/// Scenario 2's fair rows: `fair(true)` against the default in the same run, and its wait max
/// against the one-process run's (the target: at most 3 times it, at no more than 1.5 times
/// the default's commands per acquisition).
fn report_fair(
    report: &mut Report,
    label: &str,
    (fair, fair_cmds, fair_scripts): (&HotStats, f64, f64),
    (ours, ours_cmds, ours_scripts): (&HotStats, f64, f64),
    one_process_wait_max: f64,
) {
    let scenario = format!("2 hot key, {label}, fair(true)");
    let s = scenario.as_str();
    let default = "default (handover in the process), same run";
    report.add(
        s,
        "acquisitions/s",
        fair.per_sec,
        ours.per_sec,
        default,
        "acq/s",
    );
    report.add(
        s,
        "wait p50",
        fair.wait_p50_ms,
        ours.wait_p50_ms,
        default,
        "ms",
    );
    report.add(
        s,
        "wait p99",
        fair.wait_p99_ms,
        ours.wait_p99_ms,
        default,
        "ms",
    );
    report.add(
        s,
        "wait max",
        fair.wait_max_ms,
        ours.wait_max_ms,
        default,
        "ms",
    );
    report.add(
        s,
        "redis commands per acquisition",
        fair_cmds,
        ours_cmds,
        default,
        "commands",
    );
    // Commands run inside scripts count above; these are the requests clients sent.
    report.add(
        s,
        "lock script calls per acquisition",
        fair_scripts,
        ours_scripts,
        default,
        "calls",
    );
    report.add(
        s,
        "wait max vs one process",
        fair.wait_max_ms,
        one_process_wait_max,
        "64 tasks x 1 process (default), same run",
        "ms",
    );
}

/// Script calls `srv` has run (acquires, releases, renewals, withdrawals): the lock requests
/// clients sent, without the commands the scripts run inside.
async fn script_calls(srv: &RedisServer) -> u64 {
    srv.info_stat("cmdstat_evalsha").await + srv.info_stat("cmdstat_eval").await
}

/// Scenario 5's runs: one process (the baseline), then two and four on the same key.
const FAIRNESS_PROCESSES: [usize; 3] = [1, 2, 4];
const FAIRNESS_TASKS: usize = 16;

/// Scenario 5's critical sections: a yield (what the lock itself costs), and a 1 ms sleep, the
/// shop's payment (`PAYMENT_TIME`), with which issue 21's starvation shows in full.
const FAIRNESS_HOLDS: [(Duration, &str); 2] = [
    (Duration::ZERO, "yield held"),
    (Duration::from_millis(1), "1 ms held"),
];

/// Scenario 5's rounds: the runs take turns, so that a stall of the machine (another
/// build on a shared VM) falls on all of them alike, and most figures are the median round's;
/// one stall in the one-process run would otherwise set the baseline's wait max.
const FAIRNESS_ROUNDS: usize = 3;

/// One round of one process count: all its processes together, and each of them.
struct FairRound {
    all: HotStats,
    each: Vec<HotStats>,
}

impl FairRound {
    fn new(per_process: &[Vec<Sample>]) -> FairRound {
        let all = hot_stats(per_process.concat());
        let total = per_process.iter().map(Vec::len).sum::<usize>() as f64;
        // Each process's rate over the round's common window, so that they add up to the
        // total (a process's own window stretches when its last acquisition came late).
        let each = per_process
            .iter()
            .map(|samples| HotStats {
                per_sec: all.per_sec * samples.len() as f64 / total,
                ..hot_stats(samples.clone())
            })
            .collect();
        FairRound { all, each }
    }

    /// The slowest and the fastest process's acquisitions/s.
    fn slowest_fastest(&self) -> (f64, f64) {
        let rates = self.each.iter().map(|p| p.per_sec);
        (
            rates.clone().fold(f64::INFINITY, f64::min),
            rates.fold(0.0, f64::max),
        )
    }
}

/// One figure of a round.
type Figure = fn(&FairRound) -> f64;

/// The round whose `key` is the median (the upper one of an even count).
fn median_round(rounds: &[FairRound], key: impl Fn(&FairRound) -> f64) -> &FairRound {
    let mut sorted: Vec<&FairRound> = rounds.iter().collect();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    sorted[sorted.len() / 2]
}

fn median_of(rounds: &[FairRound], key: impl Fn(&FairRound) -> f64) -> f64 {
    key(median_round(rounds, &key))
}

/// Scenario 5: 1, 2 and 4 processes of 16 tasks each take one hot key in a loop, with each
/// critical section, in turns over a few rounds of `duration` in all per run; whether any
/// process is starved, against the one-process run (issue 21).
async fn scenario_fairness(report: &mut Report, url: &str, duration: Duration) {
    let window = duration / FAIRNESS_ROUNDS as u32;
    // runs[hold][process count][round]
    let mut runs: Vec<Vec<Vec<FairRound>>> = FAIRNESS_HOLDS
        .iter()
        .map(|_| FAIRNESS_PROCESSES.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..FAIRNESS_ROUNDS {
        for (by_count, (hold, _)) in runs.iter_mut().zip(FAIRNESS_HOLDS) {
            for (run, processes) in by_count.iter_mut().zip(FAIRNESS_PROCESSES) {
                let key = format!("fair-{}-{processes}-{round}", hold.as_micros());
                let url = url.to_owned();
                let load = Load::Continuous { run: window, hold };
                let per_process = tokio::task::spawn_blocking(move || {
                    hot_key_processes(
                        Impl::Ours.name(),
                        &url,
                        &key,
                        processes,
                        FAIRNESS_TASKS,
                        load,
                    )
                })
                .await
                .expect("workers");
                run.push(FairRound::new(&per_process));
            }
        }
    }
    for (by_count, (_, held)) in runs.iter().zip(FAIRNESS_HOLDS) {
        report_fairness(report, held, by_count);
    }
}

/// Scenario 5's rows for one critical section: `runs[i]` are the rounds of
/// `FAIRNESS_PROCESSES[i]` processes.
fn report_fairness(report: &mut Report, held: &str, runs: &[Vec<FairRound>]) {
    let one = &runs[0];
    let vs_one = format!("1 process x {FAIRNESS_TASKS} tasks, same run");
    let whole_run_max =
        |rounds: &[FairRound]| rounds.iter().map(|r| r.all.wait_max_ms).fold(0.0, f64::max);
    for (rounds, processes) in runs.iter().zip(FAIRNESS_PROCESSES).skip(1) {
        let scenario =
            format!("5 no starving, {processes} processes x {FAIRNESS_TASKS} tasks, {held}");
        let s = scenario.as_str();
        let medians: [(&str, &str, Figure); 3] = [
            ("wait max", "ms", |r| r.all.wait_max_ms),
            ("wait p99", "ms", |r| r.all.wait_p99_ms),
            ("total acquisitions/s", "acq/s", |r| r.all.per_sec),
        ];
        for (metric, unit, key) in medians {
            let metric = format!("{metric} (median round)");
            report.add(
                s,
                &metric,
                median_of(rounds, key),
                median_of(one, key),
                &vs_one,
                unit,
            );
        }
        report.add(
            s,
            "wait max (whole run)",
            whole_run_max(rounds),
            whole_run_max(one),
            &vs_one,
            "ms",
        );
        let evenness = |r: &FairRound| {
            let (slowest, fastest) = r.slowest_fastest();
            slowest / fastest
        };
        let median = median_round(rounds, evenness);
        let (slowest, fastest) = median.slowest_fastest();
        report.add(
            s,
            "acq/s, slowest process (median round)",
            slowest,
            fastest,
            "fastest process",
            "acq/s",
        );
        // Each process of the round with the median evenness, against the one-process
        // run's median round.
        for (i, p) in median.each.iter().enumerate() {
            let metric = |m: &str| format!("process {}: {m}", i + 1);
            let rows: [(&str, f64, Figure, &str); 4] = [
                ("acquisitions/s", p.per_sec, |r| r.all.per_sec, "acq/s"),
                ("wait p50", p.wait_p50_ms, |r| r.all.wait_p50_ms, "ms"),
                ("wait p99", p.wait_p99_ms, |r| r.all.wait_p99_ms, "ms"),
                ("wait max", p.wait_max_ms, |r| r.all.wait_max_ms, "ms"),
            ];
            for (name, ours, key, unit) in rows {
                report.add(s, &metric(name), ours, median_of(one, key), &vs_one, unit);
            }
        }
    }
}

#[distributed_lock(key = "m:<task>:<i>", locker = locker)]
async fn annotated(locker: &Locker, task: usize, i: u64) -> Result<(), LockError> {
    std::hint::black_box((task, i));
    Ok(())
}

async fn hand_written(locker: &Locker, task: usize, i: u64) -> Result<(), LockError> {
    let guard = locker.lock(format!("h:{task}:{i}")).acquire().await?;
    std::hint::black_box((task, i));
    guard.release().await
}

async fn scenario_macro(report: &mut Report, url: &str, duration: Duration) {
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let l = locker.clone();
    let by_hand = cycles_per_sec(16, duration, move |t, i| {
        let l = l.clone();
        async move { hand_written(&l, t, i % 16).await.expect("hand-written") }
    })
    .await;
    let l = locker.clone();
    let attribute = cycles_per_sec(16, duration, move |t, i| {
        let l = l.clone();
        async move { annotated(&l, t, i % 16).await.expect("annotated") }
    })
    .await;
    report.add(
        "3 attribute overhead, 16 tasks",
        "calls/s",
        attribute,
        by_hand,
        "hand-written guard",
        "calls/s",
    );
}

async fn latency_us<F, Fut>(iterations: usize, mut op: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let start = Instant::now();
        op(i).await;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    percentile(&samples, 0.5)
}

/// Runs futures concurrently on this task (no spawning) and waits for all of them.
async fn join_all<F: std::future::Future<Output = ()>>(futures: Vec<F>) {
    let mut futures: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in futures.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await
}

/// The floor of a lock over `nodes`: the raw commands of a lock and an unlock (`SET NX PX`,
/// then compare-and-delete) sent to every node in parallel by the same client, as a RedLock
/// without a library would; p50 of one lock+unlock, in µs.
async fn raw_fanout_us(nodes: &[Naive], iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let key = format!("raw-rl:{}", i % 64);
        let tok = token();
        join_all(
            nodes
                .iter()
                .map(|n| async { assert!(n.try_lock(&key, &tok).await, "raw key was taken") })
                .collect(),
        )
        .await;
        join_all(nodes.iter().map(|n| n.unlock(&key, &tok)).collect()).await;
    })
    .await
}

/// One lock and unlock of `key` with rslock (30 s lease, as ours).
async fn rslock_lock_unlock(r: &rslock::LockManager, key: &str) {
    let lock = r
        .lock(key.as_bytes(), Duration::from_secs(30))
        .await
        .expect("rslock");
    r.unlock(&lock).await;
}

/// p50 of one acquire and release with `locker`, in µs.
async fn lock_unlock_us(locker: &Locker, iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let g = locker
            .lock(format!("rl:{}", i % 64))
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
    })
    .await
}

/// [`lock_unlock_us`] for unfenced locks.
async fn unfenced_lock_unlock_us(locker: &Locker, iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let g = locker
            .lock(format!("rlu:{}", i % 64))
            .unfenced()
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
    })
    .await
}

async fn scenario_redlock(
    report: &mut Report,
    single: &str,
    nodes: &[RedisServer],
    iterations: usize,
) {
    let one = Locker::builder()
        .url(single)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let single_us = lock_unlock_us(&one, iterations).await;
    let mut naive = Vec::new();
    for node in nodes {
        naive.push(Naive::new(&node.url()).await);
    }
    let raw_one_us = raw_fanout_us(&naive[..1], iterations).await;
    for n in [3usize, 5] {
        let urls: Vec<String> = nodes[..n].iter().map(|s| s.url()).collect();
        let ours = Locker::builder()
            .redlock(urls.clone())
            .prefix("bench")
            .op_timeout(Duration::from_millis(50))
            .build()
            .await
            .expect("redlock");
        let ours_us = lock_unlock_us(&ours, iterations).await;
        let unfenced_us = unfenced_lock_unlock_us(&ours, iterations).await;
        let rs = rslock::LockManager::new(urls);
        let rs_us = latency_us(iterations, |i| {
            let rs = &rs;
            async move { rslock_lock_unlock(rs, &format!("rs-rl:{}", i % 64)).await }
        })
        .await;
        let raw_us = raw_fanout_us(&naive[..n], iterations).await;
        let scenario = format!("4 redlock, {n} nodes");
        report.add(
            &scenario,
            "raw commands, N nodes vs 1 (the floor)",
            raw_us,
            raw_one_us,
            "the same raw commands to one node",
            "us",
        );
        report.add(
            &scenario,
            "acquire+release p50",
            ours_us,
            single_us,
            "leasehold on one node",
            "us",
        );
        report.add(
            &scenario,
            "acquire+release p50 vs rslock",
            ours_us,
            rs_us,
            "rslock, same nodes",
            "us",
        );
        report.add(
            &scenario,
            "acquire+release p50 vs the floor",
            ours_us,
            raw_us,
            "raw commands fanned out to the N nodes",
            "us",
        );
        report.add(
            &scenario,
            "unfenced p50 vs rslock",
            unfenced_us,
            rs_us,
            "rslock, same nodes",
            "us",
        );
    }
}

/// `--profile ours|unfenced|raw|fenced|safe-fenced TASKS SECONDS`: only that contender of scenario 1, for `perf
/// record` (its samples are then the client's alone, and the redis-server's are in its own
/// process).
async fn profile(args: &[String]) {
    let which = args.first().map_or("ours", String::as_str).to_owned();
    // Before any server starts: an unknown name exits at once.
    let cycle = Cycle::parse(&which);
    let tasks: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(16);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let server = RedisServer::start().await;
    let url = server.url();
    let naive = Naive::new(&url).await;
    let locker = Locker::builder()
        .url(url.as_str())
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let duration = Duration::from_secs(secs);
    let mut info = held::Info::connect(&url).await;
    let (server_cpu, commands, _) = info.read().await;
    let cpu = cpu_seconds();
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    let rate = cycle.run(&naive, &locker, tasks, duration).await;
    let cycles = rate * secs as f64;
    let cpu_us = (cpu_seconds() - cpu) * 1e6 / cycles;
    let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - allocations) as f64 / cycles;
    let (server_cpu_now, commands_now, _) = info.read().await;
    println!(
        "{which}, {tasks} tasks: {rate:.0} cycles/s, client CPU {cpu_us:.1} us/cycle, redis CPU \
         {:.1} us/cycle, {:.2} commands/cycle, {allocs:.1} allocations/cycle",
        (server_cpu_now - server_cpu) * 1e6 / cycles,
        (commands_now - commands) as f64 / cycles
    );
}

/// CPU time (user + system) used by this process so far, in seconds: `getrusage`. The
/// redis-servers are processes of their own, so this is the client's alone.
fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The scenarios, in the order they run; `--only` picks some by name or number.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scenario {
    Uncontended,
    HotKey,
    Attribute,
    Redlock,
    Fairness,
    ZooKeeper,
    Etcd,
    Postgres,
    Semaphore,
    Held,
}

impl Scenario {
    const ALL: [Scenario; 10] = [
        Scenario::Uncontended,
        Scenario::HotKey,
        Scenario::Attribute,
        Scenario::Redlock,
        Scenario::Fairness,
        Scenario::ZooKeeper,
        Scenario::Etcd,
        Scenario::Postgres,
        Scenario::Semaphore,
        Scenario::Held,
    ];

    fn parse(s: &str) -> Scenario {
        match s {
            "1" | "uncontended" => Scenario::Uncontended,
            "2" | "hot-key" => Scenario::HotKey,
            "3" | "attribute" => Scenario::Attribute,
            "4" | "redlock" => Scenario::Redlock,
            "5" | "fairness" => Scenario::Fairness,
            "6" | "zookeeper" => Scenario::ZooKeeper,
            "7" | "etcd" => Scenario::Etcd,
            "8" | "postgres" => Scenario::Postgres,
            "9" | "semaphore" => Scenario::Semaphore,
            "10" | "held" => Scenario::Held,
            other => {
                eprintln!(
                    "unknown scenario {other:?}: --only takes a comma-separated list of \
                     uncontended, hot-key, attribute, redlock, fairness, zookeeper, etcd, \
                     postgres, semaphore, held (or 1 to 10)"
                );
                std::process::exit(2)
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        return worker(&args[1..]).await;
    }
    if args.first().map(String::as_str) == Some("--held-worker") {
        return held::worker(&args[1..]).await;
    }
    if args.first().map(String::as_str) == Some("--profile") {
        return profile(&args[1..]).await;
    }
    let quick = args.iter().any(|a| a == "--quick");
    // --smoke: the shortest run that still exercises every scenario (CI checks it completes
    // and writes valid JSON; its figures mean nothing).
    let smoke = args.iter().any(|a| a == "--smoke");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "target/lockbench.json".to_owned());
    let (duration, rounds, iterations) = if smoke {
        (Duration::from_millis(100), 2, 20)
    } else if quick {
        (Duration::from_millis(700), 5, 300)
    } else {
        (Duration::from_secs(3), 20, 2000)
    };

    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args.get(i + 1).expect("--only needs a scenario").as_str());
    let scenarios: Vec<Scenario> = match only {
        Some(names) => names.split(',').map(Scenario::parse).collect(),
        None => Scenario::ALL.to_vec(),
    };

    eprintln!("starting redis-servers...");
    // The JVM takes seconds to start: in the background, while the Redis scenarios run. A
    // harness panic (no java, no ZooKeeper jar) has printed its reason when this is awaited.
    let mut zk_server = scenarios
        .contains(&Scenario::ZooKeeper)
        .then(|| tokio::spawn(ZkServer::start()));
    // Likewise etcd, which serves within a second or so.
    let mut etcd_server = scenarios
        .contains(&Scenario::Etcd)
        .then(|| tokio::spawn(EtcdServer::start()));
    // And PostgreSQL (initdb, then the server), a second or two.
    let mut pg_server = scenarios
        .contains(&Scenario::Postgres)
        .then(|| tokio::spawn(PgServer::start()));
    let main_server = RedisServer::start().await;
    let nodes = if scenarios.contains(&Scenario::Redlock) {
        RedisServer::start_many(5).await
    } else {
        Vec::new()
    };
    let url = main_server.url();
    println!(
        "{:<28} {:<34} {:>12} {:>12} {:>7}  unit (baseline)",
        "scenario", "metric", "ours", "baseline", "ratio"
    );
    let mut report = Report { rows: Vec::new() };
    let mut held_run = None;
    for scenario in Scenario::ALL {
        if !scenarios.contains(&scenario) {
            continue;
        }
        match scenario {
            Scenario::Uncontended => scenario_uncontended(&mut report, &url, duration).await,
            Scenario::HotKey => scenario_hot_key(&mut report, &main_server, rounds).await,
            Scenario::Attribute => scenario_macro(&mut report, &url, duration).await,
            Scenario::Redlock => scenario_redlock(&mut report, &url, &nodes, iterations).await,
            Scenario::Fairness => scenario_fairness(&mut report, &url, duration).await,
            Scenario::ZooKeeper => match zk_server.take().expect("started above").await {
                Ok(zk) => zookeeper::scenario(&mut report, &zk, duration, rounds, iterations).await,
                Err(_) => println!(
                    "6 zookeeper: skipped, the throwaway ZooKeeper did not start (the reason \
                     is above; scripts/ensure-zookeeper installs it)"
                ),
            },
            Scenario::Etcd => match etcd_server.take().expect("started above").await {
                Ok(etcd) => etcd::scenario(&mut report, &etcd, duration, rounds).await,
                Err(_) => println!(
                    "7 etcd: skipped, the throwaway etcd did not start (the reason is above; \
                     scripts/ensure-etcd installs it)"
                ),
            },
            Scenario::Postgres => match pg_server.take().expect("started above").await {
                Ok(postgres) => postgres::scenario(&mut report, &postgres, duration, rounds).await,
                Err(_) => println!(
                    "8 postgres: skipped, the throwaway PostgreSQL did not start (the reason is \
                     above; scripts/ensure-postgres installs it)"
                ),
            },
            Scenario::Semaphore => semaphore::scenario(&mut report, &url, duration).await,
            Scenario::Held => {
                held_run = Some(held::scenario(&mut report, held::Plan::new(smoke, quick)).await)
            }
        }
    }
    if let Some(dir) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&out, report.json()).expect("write the JSON report");
    eprintln!("wrote {out}");
    let picture = std::path::Path::new(&out).with_extension("svg");
    svg::write(&picture, &report.rows, held_run.as_ref()).expect("write the SVG picture");
    eprintln!("wrote {}", picture.display());
}
