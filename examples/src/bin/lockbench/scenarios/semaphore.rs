//! Scenario 9: a semaphore of 8 permits, 64 tasks taking one permit each in a loop (holding
//! it for 1 ms), against what users write by hand on the same server in the same run: a
//! sorted set of expiring holders in Lua (drop the expired, `ZCARD`, `ZADD` when below the
//! limit; `ZREM` to release), waiting by polling every 1 ms. The two take turns in short
//! windows. Throughput and wait percentiles, as ratios.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::Locker;

use crate::measure::percentile;
use crate::report::Report;

const PERMITS: u32 = 8;
const TASKS: usize = 64;
const HOLD: Duration = Duration::from_millis(1);
const LEASE: Duration = Duration::from_secs(30);
/// Windows per side: the two take turns, so that a stall of the machine hits both.
const WINDOWS: u32 = 3;

/// The hand-written semaphore: a sorted set of holders scored by the end of their lease.
const HAND_ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
";

/// Acquisitions and each one's wait in ms, over every window of one side.
#[derive(Default)]
struct Tally {
    acquired: AtomicU64,
    waits_ms: Mutex<Vec<f64>>,
    elapsed: Mutex<Duration>,
}

impl Tally {
    fn stats(&self) -> (f64, f64, f64) {
        let mut waits = self.waits_ms.lock().unwrap().clone();
        waits.sort_by(f64::total_cmp);
        let secs = self.elapsed.lock().unwrap().as_secs_f64();
        (
            self.acquired.load(Ordering::Relaxed) as f64 / secs,
            percentile(&waits, 0.5),
            percentile(&waits, 0.99),
        )
    }
}

/// Runs `TASKS` tasks of `cycle` (which returns the wait of one acquisition) for `window`.
async fn window<F, Fut>(tally: &Arc<Tally>, window: Duration, cycle: F)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Duration> + Send,
{
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let (cycle, tally) = (cycle.clone(), tally.clone());
        handles.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut i = 0;
            while start.elapsed() < window {
                waits.push(cycle(t, i).await.as_secs_f64() * 1e3);
                i += 1;
            }
            tally.acquired.fetch_add(i, Ordering::Relaxed);
            tally.waits_ms.lock().unwrap().extend(waits);
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    *tally.elapsed.lock().unwrap() += start.elapsed();
}

/// Scenario 9 on the server at `url`, `duration` per side.
pub(crate) async fn scenario(report: &mut Report, url: &str, duration: Duration) {
    let locker = Locker::builder()
        .url(url)
        .prefix("bench-sem")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("locker");
    let conn = redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let acquire = Arc::new(redis::Script::new(HAND_ACQUIRE));
    let (ours, hand) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let slice = duration / WINDOWS;
    for _ in 0..WINDOWS {
        let (conn, acquire) = (conn.clone(), acquire.clone());
        window(&hand, slice, move |t, i| {
            let (mut conn, acquire) = (conn.clone(), acquire.clone());
            async move {
                let token = format!("{}:{t}:{i}", std::process::id());
                let start = Instant::now();
                loop {
                    let got: i64 = acquire
                        .key("hand:sem")
                        .arg(PERMITS)
                        .arg(&token)
                        .arg(LEASE.as_millis() as u64)
                        .invoke_async(&mut conn)
                        .await
                        .expect("hand-written acquire");
                    if got == 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let waited = start.elapsed();
                tokio::time::sleep(HOLD).await;
                let _: i64 = redis::cmd("ZREM")
                    .arg("hand:sem")
                    .arg(&token)
                    .query_async(&mut conn)
                    .await
                    .expect("hand-written release");
                waited
            }
        })
        .await;
        let l = locker.clone();
        window(&ours, slice, move |_, _| {
            let l = l.clone();
            async move {
                let start = Instant::now();
                let permit = l
                    .semaphore("sem", PERMITS)
                    .acquire()
                    .await
                    .expect("a permit");
                let waited = start.elapsed();
                tokio::time::sleep(HOLD).await;
                permit.release().await.expect("release");
                waited
            }
        })
        .await;
    }
    let (ours_rate, ours_p50, ours_p99) = ours.stats();
    let (hand_rate, hand_p50, hand_p99) = hand.stats();
    let scenario = "9 semaphore, 8 permits, 64 tasks";
    let name = "ZSET + Lua, 1 ms polling";
    report.add(
        scenario,
        "permits/s",
        ours_rate,
        hand_rate,
        name,
        "permits/s",
    );
    report.add(scenario, "wait p50", ours_p50, hand_p50, name, "ms");
    report.add(scenario, "wait p99", ours_p99, hand_p99, name, "ms");
}
