//! Scenario 9, `held` (issue 19's "scenario 5": many held locks, how cost grows): one process
//! holds 1k, 10k and 100k locks at once with the watchdog on (lease 3 s), against the hand-written
//! renewal users write (one task per guard, a compare-and-PEXPIRE script every lease/3).
//!
//! Each side of each point runs in a fresh worker process (`lockbench --held-worker ...`), so
//! that its resident memory is its own, against a throwaway `redis-server` of its own that is
//! flushed between runs, so that Redis's CPU is spent on that run's keys alone. Per point:
//!
//! - client memory per held lock: the worker's RSS (`/proc/self/statm`) after acquiring all
//!   locks and letting them settle for half a lease (every lease renewed at least once), minus
//!   its RSS before, over the number held;
//! - Redis CPU per renewal: `used_cpu_sys + used_cpu_user` (`INFO cpu`) over the hold window,
//!   less what the idle server used in as long a time before the locks were taken (its cron),
//!   over the renewals done in it; and per held lock per second, for the curve;
//! - renewal lag p99: how late each renewal was sent against its schedule (a third of the
//!   lease after the previous acquire or renewal was sent). Ours is the library's own
//!   `leasehold_renewal_lag_seconds` histogram (the `metrics` feature), read by a recorder of
//!   the worker's; the baseline's tasks measure the same thing themselves;
//! - commands per renewal: `total_commands_processed` over the hold window (less the worker's
//!   own `INFO`), over the renewals done in it (Redis counts the commands a script runs too:
//!   a compare-and-PEXPIRE is GET and PEXPIRE), and script calls (`EVALSHA`, `EVAL`: client
//!   requests) per renewal;
//! - acquisitions per second while taking them (512 tasks; the library batches).

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{LockGuard, Locker};
use leasehold_tests::harness::RedisServer;

use crate::{token, Report};

/// How many tasks take the locks at the start of a run.
const ACQUIRERS: usize = 512;

/// A per-lock figure that grows by more than this between the fewest and the most locks
/// held is said to grow faster than linear (its total does).
const LINEAR_SLACK: f64 = 1.5;

/// The hand-written renewal: extend the lease only while the key still holds our token.
const COMPARE_AND_PEXPIRE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

/// How many locks, how long, for one run of the scenario.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The numbers of locks held at once, smallest first.
    pub(crate) points: Vec<usize>,
    /// The lease of every lock; renewed every third of it.
    pub(crate) lease: Duration,
    /// How long the locks are held before the measured window (memory is read at its end).
    settle: Duration,
    /// The measured window.
    hold: Duration,
}

impl Plan {
    /// The plan (15 s per point), a shorter `--quick` one, or a tiny `--smoke` one
    /// with a short lease so that renewals happen within it.
    pub(crate) fn new(smoke: bool, quick: bool) -> Plan {
        let lease = Duration::from_secs(3);
        if smoke {
            let lease = Duration::from_millis(600);
            Plan {
                points: vec![50, 100, 200],
                lease,
                settle: lease / 2,
                hold: Duration::from_millis(800),
            }
        } else if quick {
            Plan {
                points: vec![1_000, 10_000, 100_000],
                lease,
                settle: lease / 2,
                hold: Duration::from_secs(5),
            }
        } else {
            Plan {
                points: vec![1_000, 10_000, 100_000],
                lease,
                settle: lease / 2,
                hold: Duration::from_secs(15),
            }
        }
    }
}

/// Which side a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// leasehold's watchdog.
    Ours,
    /// One spawned task per guard renewing with a script of its own.
    ByHand,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::ByHand => "by-hand",
        }
    }

    fn parse(s: &str) -> Side {
        match s {
            "ours" => Side::Ours,
            "by-hand" => Side::ByHand,
            other => panic!("unknown side {other:?}: ours or by-hand"),
        }
    }
}

/// What one worker measured while holding its locks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Point {
    /// RSS growth over the locks held, bytes per lock.
    pub(crate) memory_per_lock: f64,
    /// Redis CPU over the window, µs per renewal.
    pub(crate) cpu_per_renewal_us: f64,
    /// Redis CPU over the window, µs per second per held lock.
    pub(crate) cpu_per_lock_us_s: f64,
    /// p99 of how late renewals were sent, ms.
    pub(crate) lag_p99_ms: f64,
    /// Redis commands per renewal over the window, those run by scripts included.
    pub(crate) commands_per_renewal: f64,
    /// Script calls (client requests) per renewal over the window.
    pub(crate) scripts_per_renewal: f64,
    /// Locks taken per second at the start.
    pub(crate) acquired_per_s: f64,
    /// Renewals done in the window.
    pub(crate) renewals: u64,
    /// Renewals that failed (an error, not an answer) in the window.
    pub(crate) failed: u64,
    /// Locks not held any more at the end.
    pub(crate) lost: u64,
}

impl Point {
    fn line(&self) -> String {
        format!(
            "held memory_per_lock={} cpu_per_renewal_us={} cpu_per_lock_us_s={} lag_p99_ms={} \
             commands_per_renewal={} scripts_per_renewal={} acquired_per_s={} renewals={} \
             failed={} lost={}",
            self.memory_per_lock,
            self.cpu_per_renewal_us,
            self.cpu_per_lock_us_s,
            self.lag_p99_ms,
            self.commands_per_renewal,
            self.scripts_per_renewal,
            self.acquired_per_s,
            self.renewals,
            self.failed,
            self.lost
        )
    }

    fn parse(line: &str) -> Option<Point> {
        let mut p = Point::default();
        let mut fields = line.strip_prefix("held ")?.split(' ');
        for field in fields.by_ref() {
            let (name, value) = field.split_once('=')?;
            let f = || value.parse::<f64>().ok();
            let n = || value.parse::<u64>().ok();
            match name {
                "memory_per_lock" => p.memory_per_lock = f()?,
                "cpu_per_renewal_us" => p.cpu_per_renewal_us = f()?,
                "cpu_per_lock_us_s" => p.cpu_per_lock_us_s = f()?,
                "lag_p99_ms" => p.lag_p99_ms = f()?,
                "commands_per_renewal" => p.commands_per_renewal = f()?,
                "scripts_per_renewal" => p.scripts_per_renewal = f()?,
                "acquired_per_s" => p.acquired_per_s = f()?,
                "renewals" => p.renewals = n()?,
                "failed" => p.failed = n()?,
                "lost" => p.lost = n()?,
                _ => return None,
            }
        }
        Some(p)
    }
}

/// The scenario's figures, for the picture.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    /// The lease every lock had.
    pub(crate) lease: Duration,
    /// `(locks held, ours, by hand)`, fewest locks first.
    pub(crate) points: Vec<(usize, Point, Point)>,
}

/// Runs the scenario: every point, ours then by hand, each in a worker process of its own.
pub(crate) async fn scenario(report: &mut Report, plan: Plan) -> Run {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut run = Run {
        lease: plan.lease,
        points: Vec::new(),
    };
    for &n in &plan.points {
        let mut sides = Vec::new();
        for side in [Side::Ours, Side::ByHand] {
            flush(&url).await;
            let (url, plan) = (url.clone(), plan.clone());
            let point = tokio::task::spawn_blocking(move || run_worker(side, &url, n, &plan))
                .await
                .expect("held worker");
            sides.push(point);
        }
        let (ours, by_hand) = (sides[0], sides[1]);
        add_rows(report, n, &ours, &by_hand);
        run.points.push((n, ours, by_hand));
    }
    flush(&url).await;
    say_how_it_grows(&run);
    run
}

/// Empties the scenario's own server, so that a run's Redis CPU is spent on its own keys.
async fn flush(url: &str) {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL");
}

fn run_worker(side: Side, url: &str, n: usize, plan: &Plan) -> Point {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--held-worker", side.name(), url])
        .arg(n.to_string())
        .arg(plan.lease.as_millis().to_string())
        .arg(plan.settle.as_millis().to_string())
        .arg(plan.hold.as_millis().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn held worker");
    assert!(out.status.success(), "held worker failed: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(Point::parse)
        .unwrap_or_else(|| panic!("held worker said {text:?}"))
}

fn add_rows(report: &mut Report, n: usize, ours: &Point, by_hand: &Point) {
    let scenario = format!("10 held, {n} locks");
    let s = scenario.as_str();
    let base = "by hand: a task per guard, compare-and-PEXPIRE script";
    report.add(
        s,
        "client memory per held lock",
        ours.memory_per_lock,
        by_hand.memory_per_lock,
        base,
        "B",
    );
    report.add(
        s,
        "Redis CPU per renewal",
        ours.cpu_per_renewal_us,
        by_hand.cpu_per_renewal_us,
        base,
        "us",
    );
    report.add(
        s,
        "Redis CPU per held lock",
        ours.cpu_per_lock_us_s,
        by_hand.cpu_per_lock_us_s,
        base,
        "us/s",
    );
    report.add(
        s,
        "renewal lag p99",
        ours.lag_p99_ms,
        by_hand.lag_p99_ms,
        base,
        "ms",
    );
    report.add(
        s,
        "commands per renewal (in scripts)",
        ours.commands_per_renewal,
        by_hand.commands_per_renewal,
        base,
        "cmds",
    );
    report.add(
        s,
        "script calls per renewal",
        ours.scripts_per_renewal,
        by_hand.scripts_per_renewal,
        base,
        "calls",
    );
    report.add(
        s,
        "acquisitions/s (512 tasks)",
        ours.acquired_per_s,
        by_hand.acquired_per_s,
        base,
        "acq/s",
    );
    if ours.lost + ours.failed + by_hand.lost + by_hand.failed > 0 {
        println!(
            "10 held, {n} locks: lost at the end: ours {}, by hand {}; failed renewals in the \
             window: ours {}, by hand {}",
            ours.lost, by_hand.lost, ours.failed, by_hand.failed
        );
    }
}

/// Prints, for each per-lock figure, whether it stays flat from the fewest to the most locks
/// (the total grows linearly) or grows (the total grows faster than linear).
fn say_how_it_grows(run: &Run) {
    let (Some(first), Some(last)) = (run.points.first(), run.points.last()) else {
        return;
    };
    if first.0 == last.0 {
        return;
    }
    type Figure = fn(&Point) -> f64;
    type Side = fn(&(usize, Point, Point)) -> &Point;
    let figures: [(&str, Figure); 5] = [
        ("client memory per held lock", |p| p.memory_per_lock),
        ("Redis CPU per renewal", |p| p.cpu_per_renewal_us),
        ("Redis commands per renewal", |p| p.commands_per_renewal),
        ("script calls per renewal", |p| p.scripts_per_renewal),
        ("renewal lag p99", |p| p.lag_p99_ms),
    ];
    println!(
        "10 held: how each figure grows from {} to {} locks held (a per-lock figure that grows \
         by more than {LINEAR_SLACK}x means its total grows faster than linear):",
        first.0, last.0
    );
    for (name, figure) in figures {
        let sides: [(&str, Side); 2] = [("ours", |p| &p.1), ("by hand", |p| &p.2)];
        for (side, pick) in sides {
            let (a, b) = (figure(pick(first)), figure(pick(last)));
            let growth = b / a;
            let verdict = if name == "renewal lag p99" {
                // Not a per-lock figure: a lag that grows with the locks held means the
                // renewals queue up behind each other.
                format!("{a:.2} -> {b:.2} ms ({growth:.2}x)")
            } else if !growth.is_finite() {
                "not measurable (a zero figure)".to_owned()
            } else if growth > LINEAR_SLACK {
                format!("per lock {growth:.2}x: the total grows FASTER than linear")
            } else {
                format!("per lock {growth:.2}x: linear (or better)")
            };
            println!("  {name:<30} {side:<8} {verdict}");
        }
    }
}

/// A worker: holds `N` locks as `SIDE` does and prints one [`Point`] line.
///
/// Arguments: `SIDE URL N LEASE_MS SETTLE_MS HOLD_MS`.
pub(crate) async fn worker(args: &[String]) {
    let [side, url, n, lease, settle, hold] = args else {
        panic!("held worker arguments: SIDE URL N LEASE_MS SETTLE_MS HOLD_MS");
    };
    let side = Side::parse(side);
    let n: usize = n.parse().expect("N");
    let ms = |s: &str| Duration::from_millis(s.parse().expect("milliseconds"));
    let (lease, settle, hold) = (ms(lease), ms(settle), ms(hold));
    let probe = Probe::install();
    let mut info = Info::connect(url).await;
    let point = match side {
        Side::Ours => hold_ours(url, n, lease, settle, hold, &probe, &mut info).await,
        Side::ByHand => hold_by_hand(url, n, lease, settle, hold, &probe, &mut info).await,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", point.line()).expect("write");
    out.flush().expect("flush");
    // The locks expire by themselves, and the server is flushed before the next run: no
    // need to wait for 100k releases.
    std::process::exit(0);
}

/// What the window measured, on either side.
struct Window {
    cpu_s: f64,
    commands: u64,
    scripts: u64,
    renewals: u64,
    failed: u64,
    lag_p99_ms: f64,
}

/// Redis's CPU seconds per second while nothing is held (up to 1 s of `hold`).
async fn idle_cpu_per_s(info: &mut Info, hold: Duration) -> f64 {
    let span = hold.min(Duration::from_secs(1));
    let (cpu0, _, _) = info.read().await;
    tokio::time::sleep(span).await;
    let (cpu1, _, _) = info.read().await;
    (cpu1 - cpu0) / span.as_secs_f64()
}

/// Measures Redis and the probe over `hold`; `idle` is Redis's own CPU use per second.
async fn window(info: &mut Info, probe: &Probe, hold: Duration, idle: f64) -> Window {
    let (cpu0, commands0, scripts0) = info.read().await;
    let (renewals0, failed0) = (probe.renewals(), probe.failed());
    probe.lag.start();
    tokio::time::sleep(hold).await;
    probe.lag.stop();
    let (cpu1, commands1, scripts1) = info.read().await;
    Window {
        cpu_s: (cpu1 - cpu0 - idle * hold.as_secs_f64()).max(0.0),
        // The first INFO counts itself once it has answered; the second does not yet.
        commands: (commands1 - commands0).saturating_sub(1),
        scripts: scripts1 - scripts0,
        renewals: probe.renewals() - renewals0,
        failed: probe.failed() - failed0,
        lag_p99_ms: probe.lag.quantile(0.99) / 1e3,
    }
}

fn point(n: usize, grew: u64, acquired_per_s: f64, w: &Window, hold: Duration, lost: u64) -> Point {
    let renewals = w.renewals.max(1) as f64;
    Point {
        memory_per_lock: grew as f64 / n as f64,
        cpu_per_renewal_us: w.cpu_s * 1e6 / renewals,
        cpu_per_lock_us_s: w.cpu_s * 1e6 / hold.as_secs_f64() / n as f64,
        lag_p99_ms: w.lag_p99_ms,
        commands_per_renewal: w.commands as f64 / renewals,
        scripts_per_renewal: w.scripts as f64 / renewals,
        acquired_per_s,
        renewals: w.renewals,
        failed: w.failed,
        lost,
    }
}

/// Runs `count` copies of `take(i)` over [`ACQUIRERS`] tasks; what they took, and how fast.
async fn take_all<T, F, Fut>(count: usize, take: F) -> (Vec<T>, f64)
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let start = Instant::now();
    let tasks = ACQUIRERS.min(count);
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let take = take.clone();
            tokio::spawn(async move {
                let mut held = Vec::with_capacity(count / tasks + 1);
                for i in (t..count).step_by(tasks) {
                    held.push(take(i).await);
                }
                held
            })
        })
        .collect();
    let mut all = Vec::with_capacity(count);
    for h in handles {
        all.extend(h.await.expect("acquirer"));
    }
    let per_s = count as f64 / start.elapsed().as_secs_f64();
    (all, per_s)
}

async fn hold_ours(
    url: &str,
    n: usize,
    lease: Duration,
    settle: Duration,
    hold: Duration,
    probe: &Probe,
    info: &mut Info,
) -> Point {
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .default_lease(lease)
        .build()
        .await
        .expect("locker");
    // Warm up: connections, scripts loaded, the runtime's threads.
    let (warm, _) = take_all(64, {
        let l = locker.clone();
        move |i| {
            let l = l.clone();
            async move { l.lock(format!("warm:{i}")).acquire().await.expect("warm") }
        }
    })
    .await;
    for g in warm {
        g.release().await.expect("release");
    }
    let idle = idle_cpu_per_s(info, hold).await;
    let before = rss();
    let (guards, per_s): (Vec<LockGuard>, f64) = take_all(n, {
        let l = locker.clone();
        move |i| {
            let l = l.clone();
            async move {
                l.lock(format!("held:{i}"))
                    .acquire()
                    .await
                    .expect("acquire")
            }
        }
    })
    .await;
    tokio::time::sleep(settle).await;
    let grew = rss().saturating_sub(before);
    let w = window(info, probe, hold, idle).await;
    let lost = guards.iter().filter(|g| !g.is_held()).count() as u64;
    point(n, grew, per_s, &w, hold, lost)
}

/// A lock as users hold it by hand: the key, the token, and the task that renews it.
struct HandGuard {
    _key: String,
    _token: String,
    renewer: tokio::task::JoinHandle<()>,
}

impl Drop for HandGuard {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn hold_by_hand(
    url: &str,
    n: usize,
    lease: Duration,
    settle: Duration,
    hold: Duration,
    probe: &Probe,
    info: &mut Info,
) -> Point {
    let client = redis::Client::open(url).expect("url");
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let script = Arc::new(redis::Script::new(COMPARE_AND_PEXPIRE));
    let probe = probe.clone();
    let lost = Arc::new(AtomicU64::new(0));
    let take = {
        let (conn, script, probe, lost) =
            (conn.clone(), script.clone(), probe.clone(), lost.clone());
        move |i: usize| {
            let (mut conn, script, probe, lost) =
                (conn.clone(), script.clone(), probe.clone(), lost.clone());
            async move {
                let key = format!("held-by-hand:{i}");
                let token = token();
                let sent = tokio::time::Instant::now();
                let ok: Option<String> = redis::cmd("SET")
                    .arg(&key)
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease.as_millis() as u64)
                    .query_async(&mut conn)
                    .await
                    .expect("SET");
                assert!(ok.is_some(), "{key} was taken");
                let (k, t) = (key.clone(), token.clone());
                let renewer = tokio::spawn(async move {
                    let mut due = sent + lease / 3;
                    loop {
                        tokio::time::sleep_until(due).await;
                        let sent = tokio::time::Instant::now();
                        probe.lag.record(sent - due);
                        let renewed: redis::RedisResult<i64> = script
                            .key(&k)
                            .arg(&t)
                            .arg(lease.as_millis() as u64)
                            .invoke_async(&mut conn)
                            .await;
                        match renewed {
                            Ok(1) => probe.renewed.fetch_add(1, Ordering::Relaxed),
                            Ok(_) => {
                                lost.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                            Err(_) => probe.failed.fetch_add(1, Ordering::Relaxed),
                        };
                        due = sent + lease / 3;
                    }
                });
                HandGuard {
                    _key: key,
                    _token: token,
                    renewer,
                }
            }
        }
    };
    // Warm up as ours does: the connection, the script loaded.
    let (warm, _) = take_all(64, {
        let take = take.clone();
        move |i| take(n + i)
    })
    .await;
    drop(warm);
    let idle = idle_cpu_per_s(info, hold).await;
    let before = rss();
    let (guards, per_s): (Vec<HandGuard>, f64) = take_all(n, take).await;
    tokio::time::sleep(settle).await;
    let grew = rss().saturating_sub(before);
    let w = window(info, &probe, hold, idle).await;
    drop(guards);
    point(n, grew, per_s, &w, hold, lost.load(Ordering::Relaxed))
}

/// This process's resident set, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split(' ')
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    // SAFETY: sysconf only reads a system setting.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page as u64
}

/// Redis's CPU and command counters, read with `INFO cpu stats commandstats` on a connection
/// of its own.
pub(crate) struct Info {
    conn: redis::aio::MultiplexedConnection,
}

impl Info {
    pub(crate) async fn connect(url: &str) -> Info {
        let client = redis::Client::open(url).expect("url");
        Info {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .expect("connect"),
        }
    }

    /// `(used_cpu_sys + used_cpu_user in seconds, total_commands_processed, script calls)`,
    /// in one command.
    pub(crate) async fn read(&mut self) -> (f64, u64, u64) {
        let text: String = redis::cmd("INFO")
            .arg("cpu")
            .arg("stats")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .expect("INFO");
        let field = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in INFO"))
        };
        // `cmdstat_evalsha:calls=N,usec=...`; absent when never called.
        let calls = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(":calls="))
                .and_then(|v| v.split(',').next()?.parse().ok())
                .unwrap_or(0)
        };
        (
            field("used_cpu_sys") + field("used_cpu_user"),
            field("total_commands_processed") as u64,
            calls("cmdstat_evalsha") + calls("cmdstat_eval"),
        )
    }
}

/// A latency histogram with about 3% resolution, filled from many tasks without a lock:
/// 64 exact microsecond buckets, then 32 per power of two.
pub(crate) struct LagHistogram {
    buckets: Vec<AtomicU64>,
    on: AtomicBool,
}

impl LagHistogram {
    const SUB: u32 = 32;

    fn new() -> LagHistogram {
        LagHistogram {
            buckets: (0..64 + 58 * Self::SUB as usize)
                .map(|_| AtomicU64::new(0))
                .collect(),
            on: AtomicBool::new(false),
        }
    }

    fn index(us: u64) -> usize {
        if us < 64 {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros(); // at least 6
        let sub = (us >> (exp - 5)) & u64::from(Self::SUB - 1);
        64 + ((exp - 6) * Self::SUB) as usize + sub as usize
    }

    /// The middle of bucket `i`, in µs.
    fn value(i: usize) -> f64 {
        if i < 64 {
            return i as f64;
        }
        let exp = (i - 64) as u32 / Self::SUB + 6;
        let sub = (i - 64) as u64 % u64::from(Self::SUB);
        let low = (u64::from(Self::SUB) + sub) << (exp - 5);
        low as f64 + (1u64 << (exp - 5)) as f64 / 2.0
    }

    /// Counts `lag` if the window is open.
    fn record(&self, lag: Duration) {
        if self.on.load(Ordering::Relaxed) {
            let i = Self::index(lag.as_micros() as u64).min(self.buckets.len() - 1);
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn start(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.on.store(true, Ordering::Relaxed);
    }

    fn stop(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// The `q` quantile of the counted lags, in µs; NaN with none counted.
    fn quantile(&self, q: f64) -> f64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return f64::NAN;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i);
            }
        }
        f64::NAN
    }
}

impl metrics::HistogramFn for LagHistogram {
    fn record(&self, seconds: f64) {
        LagHistogram::record(self, Duration::from_secs_f64(seconds.max(0.0)));
    }
}

/// The worker's view of renewals: the library's `leasehold_renewals_total` and
/// `leasehold_renew_failures_total` counters and `leasehold_renewal_lag_seconds` histogram
/// (through a `metrics` recorder that keeps only those), or the by-hand tasks' own counts.
#[derive(Clone)]
struct Probe {
    renewed: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    lag: Arc<LagHistogram>,
}

impl Probe {
    /// A probe, installed as the process's metrics recorder.
    fn install() -> Probe {
        let probe = Probe {
            renewed: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            lag: Arc::new(LagHistogram::new()),
        };
        metrics::set_global_recorder(probe.clone()).expect("the only metrics recorder");
        probe
    }

    fn renewals(&self) -> u64 {
        self.renewed.load(Ordering::Relaxed)
    }

    fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

impl metrics::Recorder for Probe {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        match key.name() {
            "leasehold_renewals_total" => metrics::Counter::from_arc(self.renewed.clone()),
            "leasehold_renew_failures_total" => metrics::Counter::from_arc(self.failed.clone()),
            _ => metrics::Counter::noop(),
        }
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        key: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        if key.name() == "leasehold_renewal_lag_seconds" {
            metrics::Histogram::from_arc(self.lag.clone())
        } else {
            metrics::Histogram::noop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_buckets_are_within_three_percent() {
        for us in [0u64, 1, 63, 64, 100, 999, 1_000, 12_345, 300_000, 2_999_999] {
            let v = LagHistogram::value(LagHistogram::index(us));
            assert!(
                (v - us as f64).abs() <= (us as f64 * 0.03).max(0.5),
                "{us} us read as {v}"
            );
        }
    }

    #[test]
    fn a_point_survives_its_line() {
        let p = Point {
            memory_per_lock: 812.5,
            renewals: 42,
            lag_p99_ms: f64::NAN,
            ..Point::default()
        };
        let q = Point::parse(&p.line()).expect("parses");
        assert_eq!(q.memory_per_lock, 812.5);
        assert_eq!(q.renewals, 42);
        assert!(q.lag_p99_ms.is_nan());
    }
}
