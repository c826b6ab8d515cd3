//! A held-locks worker (`lockbench --held-worker SIDE URL N LEASE_MS SETTLE_MS HOLD_MS`): takes
//! N locks as its side does, holds them, and measures its own memory and Redis over a window.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold::{LockGuard, Locker};

use super::point::{Point, Side};
use super::probe::Probe;
use crate::baselines::token;
use crate::redis_info::Info;

/// How many tasks take the locks at the start of a run.
const ACQUIRERS: usize = 512;

/// The hand-written renewal: extend the lease only while the key still holds our token.
const COMPARE_AND_PEXPIRE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

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
