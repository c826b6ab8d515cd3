//! Scenario 13's waiting part: MySQL has no LISTEN/NOTIFY, so how soon a waiter in another
//! process hears a release, and what waiting costs the server, against a waiter that polls the
//! lock's row itself at the interval of the engine's wake log reader (the same latency budget).
//!
//! - **Wake-up**: one holder, one waiter in another locker (its own pool and wake log reader,
//!   as another process has); from the release call to the waiter's grant, p50 and p99.
//! - **Cost of waiting**: N waiters (1, 16, 64) spread over four lockers wait for a lock held
//!   all along; the statements the server received meanwhile (its `Questions` counter, which
//!   counts what clients send, not what procedures run), per second. The engine's waiters cost
//!   one read of the wake log per locker and interval, plus each waiter's refresh of its place in
//!   line; a poller costs one call per waiter and interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use tokio::time::Instant;

use crate::baselines::MysqlRaw;
use crate::engine::Engine;
use crate::report::Report;

/// The engine's wake log reader's interval, the poller's too.
const INTERVAL: Duration = Duration::from_millis(25);
/// The longest the cost of waiting is counted, once the waiters are waiting (a full run's).
const WINDOW: Duration = Duration::from_secs(4);
/// The lockers (processes) the waiters are spread over.
const LOCKERS: usize = 4;
const POLLER: &str = "a waiter polling the lock's row every 25 ms (raw CALL leasehold_acquire)";

/// Wake-up p50/p99 over `rounds` × 5 hand-offs, and the cost of 1, 16 and 64 waiters, each
/// counted for twice the run length `duration` (at most [`WINDOW`]).
pub(crate) async fn scenario(report: &mut Report, url: &str, duration: Duration, rounds: usize) {
    let window = (duration * 2).clamp(Duration::from_millis(200), WINDOW);
    let holder = Engine::Mysql.locker(url).await;
    let waiter = Engine::Mysql.locker(url).await;
    let raw = Arc::new(MysqlRaw::connect(url).await);
    let handoffs = 5 * rounds.max(1);
    let mut ours = wake_ups(&holder, &waiter, handoffs).await;
    let mut polled = polled_wake_ups(&raw, handoffs).await;
    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
        report.add(
            "13 mysql waiting",
            &format!("release to waiter's grant {name}"),
            quantile(&mut ours, q),
            quantile(&mut polled, q),
            POLLER,
            "ms",
        );
    }
    let mut lockers = vec![holder, waiter];
    for _ in 2..LOCKERS + 1 {
        lockers.push(Engine::Mysql.locker(url).await);
    }
    let mut counter = counter(url).await;
    for waiters in [1, 16, 64] {
        let ours = cost_of_waiting(&lockers, waiters, &mut counter, window).await;
        let polled = cost_of_polling(&raw, waiters, &mut counter, window).await;
        report.add(
            "13 mysql waiting",
            &format!("statements/s, {waiters} waiting"),
            ours,
            polled,
            POLLER,
            "1/s",
        );
    }
}

/// Hand-offs from `holder` to a waiter of `waiter`, each timed from the release call to the
/// waiter's grant, in ms.
async fn wake_ups(holder: &Locker, waiter: &Locker, handoffs: usize) -> Vec<f64> {
    let mut took = Vec::with_capacity(handoffs);
    for i in 0..handoffs {
        let key = format!("wake:{i}");
        let held = holder.lock(&key).acquire().await.expect("holder's acquire");
        let waiting = {
            let waiter = waiter.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let guard = waiter.lock(&key).acquire().await.expect("waiter's acquire");
                let granted = Instant::now();
                guard.release().await.expect("waiter's release");
                granted
            })
        };
        // The waiter's first attempt found the lock held and it waits (in line, subscribed).
        tokio::time::sleep(Duration::from_millis(150)).await;
        let released = Instant::now();
        held.release().await.expect("holder's release");
        let granted = waiting.await.expect("waiter");
        took.push(granted.duration_since(released).as_secs_f64() * 1e3);
    }
    took
}

/// The same hand-offs between two raw callers, the waiter polling every [`INTERVAL`].
async fn polled_wake_ups(raw: &Arc<MysqlRaw>, handoffs: usize) -> Vec<f64> {
    let mut took = Vec::with_capacity(handoffs);
    for i in 0..handoffs {
        let key = format!("bench:polled-wake:{i}");
        let holder = format!("h{i}");
        raw.try_lock(&key, &holder).await.expect("free");
        let waiting = {
            let raw = raw.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let me = format!("w{i}");
                while raw.try_lock(&key, &me).await.is_none() {
                    tokio::time::sleep(INTERVAL).await;
                }
                let granted = Instant::now();
                raw.unlock(&key, &me).await;
                granted
            })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        let released = Instant::now();
        raw.unlock(&key, &holder).await;
        let granted = waiting.await.expect("poller");
        took.push(granted.duration_since(released).as_secs_f64() * 1e3);
    }
    took
}

/// Statements per second the server received while `waiters` waiters of the lockers (taken in
/// turn) waited for one lock held all along.
async fn cost_of_waiting(
    lockers: &[Locker],
    waiters: usize,
    counter: &mut Conn,
    window: Duration,
) -> f64 {
    let key = format!("cost:{waiters}");
    let held = lockers[0].lock(&key).acquire().await.expect("holder");
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let locker = lockers[1 + i % LOCKERS].clone();
            let key = key.clone();
            tokio::spawn(async move {
                let _ = locker.lock(&key).acquire().await;
            })
        })
        .collect();
    // Past the first attempts: every waiter is in line and subscribed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = statements_per_second(counter, window).await;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    held.release().await.expect("holder's release");
    rate
}

/// The same with `waiters` raw pollers. They stop between calls when told (aborting one in a
/// call would leave its shared connection in the middle of a reply).
async fn cost_of_polling(
    raw: &Arc<MysqlRaw>,
    waiters: usize,
    counter: &mut Conn,
    window: Duration,
) -> f64 {
    let key = format!("bench:polled-cost:{waiters}");
    raw.try_lock(&key, "holder").await.expect("free");
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let (raw, key, stop) = (raw.clone(), key.clone(), stop.clone());
            tokio::spawn(async move {
                let me = format!("p{i}");
                while !stop.load(Ordering::Relaxed) {
                    if raw.try_lock(&key, &me).await.is_some() {
                        raw.unlock(&key, &me).await;
                    }
                    tokio::time::sleep(INTERVAL).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rate = statements_per_second(counter, window).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a poller");
    }
    raw.unlock(&key, "holder").await;
    rate
}

/// The server's `Questions` over `window`, per second, less the counter's own read.
async fn statements_per_second(counter: &mut Conn, window: Duration) -> f64 {
    let before = questions(counter).await;
    tokio::time::sleep(window).await;
    let after = questions(counter).await;
    (after.saturating_sub(before).saturating_sub(1)) as f64 / window.as_secs_f64()
}

async fn questions(conn: &mut Conn) -> u64 {
    let row: Option<(String, String)> = conn
        .query_first("SHOW GLOBAL STATUS LIKE 'Questions'")
        .await
        .expect("the server's Questions");
    row.and_then(|(_, v)| v.parse().ok()).expect("a count")
}

/// A connection of its own that reads the server's counter.
async fn counter(url: &str) -> Conn {
    let opts =
        OptsBuilder::from_opts(Opts::from_url(url).expect("a mysql:// URL")).prefer_socket(false);
    Conn::new(opts).await.expect("the counter's connection")
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let at = ((values.len() as f64 - 1.0) * q).round() as usize;
    values[at]
}
