//! Scenario 7 of RELIABILITY.md, the soak: mixed load (several keys, local queues, holds
//! longer than the lease, blocked runtimes) with periodic faults, one at a time and bounded
//! in length: holders paused and killed, networks stalled, cut and slowed, Redis frozen,
//! paused and put to sleep. The history must be clean, the memory of the workers and of
//! Redis flat, and nothing left in Redis afterwards but fence counters with a TTL.
//!
//! The default run soaks for 30 s; the 10-minute soak is ignored by default:
//! `scripts/reliability` runs it (`cargo test --release -p leasehold-tests --test faults soak::
//! -- --ignored`).

use std::sync::Arc;
use std::time::Duration;

use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};
use leasehold_tests::history::{rss_kib, Run, WorkerSpec};
use tokio::time::{sleep, Instant};

/// Memory samples over the run: (seconds since start, KiB).
#[derive(Default)]
struct Samples(Vec<(f64, u64)>);

impl Samples {
    fn push(&mut self, t: f64, kib: u64) {
        self.0.push((t, kib));
    }

    /// The largest sample in the fraction `from..to` of the run.
    fn max_in(&self, total: f64, from: f64, to: f64) -> u64 {
        self.0
            .iter()
            .filter(|(t, _)| *t >= total * from && *t < total * to)
            .map(|&(_, k)| k)
            .max()
            .unwrap_or(0)
    }

    /// Flat: the last third never exceeds the middle third by more than 10% plus `slack`.
    fn assert_flat(&self, what: &str, total: f64, slack: u64) {
        let middle = self.max_in(total, 1.0 / 3.0, 2.0 / 3.0);
        let last = self.max_in(total, 2.0 / 3.0, 1.01);
        eprintln!("{what}: max {middle} KiB in the middle third, {last} KiB in the last");
        assert!(
            last <= middle + middle / 10 + slack,
            "{what} grew from {middle} KiB to {last} KiB: {:?}",
            self.0
        );
    }
}

async fn used_memory(redis: &RedisServer) -> u64 {
    redis.info_stat("used_memory").await / 1024
}

async fn admin(redis: &RedisServer, args: &[&str]) {
    let mut conn = redis.conn().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let call = cmd.query_async::<redis::Value>(&mut conn);
    let _ = tokio::time::timeout(Duration::from_secs(10), call).await;
}

async fn soak(total: Duration, every: Duration) {
    let mut servers = RedisServer::start_many(2).await;
    let resource = servers.pop().unwrap();
    let locks = Arc::new(servers.pop().unwrap());
    let mut run = Run::new("soak");
    let lease = Duration::from_millis(500);
    let keys: Vec<String> = (0..4).map(|i| format!("soak:{i}")).collect();
    let base = WorkerSpec::new(&locks.url(), &resource.url())
        .keys(&keys)
        .lease(lease)
        .op_timeout(Duration::from_millis(250))
        .wait(Duration::from_secs(2))
        .hold(Duration::from_millis(20), 2)
        .duration(total);
    let started = Instant::now();
    let mut proxies = Vec::new();
    let mut specs = Vec::new();
    for i in 0..4 {
        let proxy = TcpProxy::start(locks.addr()).await;
        let spec = base.clone().urls(&[proxy.url()]);
        let spec = match i {
            // Local queues and handovers, on a multi-thread runtime.
            0 => spec.tasks(3).current_thread(false),
            // Holds longer than the lease: only the watchdog keeps them.
            1 => spec.hold(lease * 2, 6),
            // Blocks its runtime past the lease now and then.
            2 => spec.block(lease * 3 / 2, 15),
            // Plain, and the one that gets killed (and replaced).
            _ => spec,
        };
        run.spawn(&spec);
        specs.push(spec);
        proxies.push(proxy);
    }
    let mut victim = 3; // the index of the current killable worker
    let mut worker_rss = Samples::default();
    let mut redis_mem = Samples::default();
    let mut fault = 0usize;
    let mut next_fault = Instant::now() + Duration::from_secs(2);
    let quiet_end = started + total.saturating_sub(Duration::from_secs(4));
    while started.elapsed() < total.saturating_sub(Duration::from_secs(1)) {
        let t = started.elapsed().as_secs_f64();
        let rss: u64 = [0, 1]
            .iter()
            .filter_map(|&i| run.workers()[i].pid().and_then(rss_kib))
            .sum();
        worker_rss.push(t, rss);
        redis_mem.push(t, used_memory(&locks).await);
        if Instant::now() >= next_fault && Instant::now() < quiet_end {
            let which = fault % 8;
            fault += 1;
            match which {
                0 => {
                    let w = run
                        .open_holds()
                        .first()
                        .map(|h| h.0)
                        .filter(|&w| w != victim)
                        .unwrap_or(1);
                    run.pause(w);
                    sleep(lease * 2).await;
                    run.resume(w);
                }
                1 => {
                    run.kill9(victim);
                    let left = total.saturating_sub(started.elapsed());
                    let spec = specs[3].clone().duration(left);
                    victim = run.spawn(&spec);
                }
                2..=4 => {
                    let (mode, kind) = match which {
                        2 => (ProxyMode::Stall, "stall"),
                        3 => (ProxyMode::Cut, "cut"),
                        _ => (ProxyMode::Delay(Duration::from_millis(80)), "delay"),
                    };
                    let w = fault % 3;
                    let target = format!("w{w}");
                    run.fault(kind, &target);
                    proxies[w].set_mode(mode);
                    sleep(lease * 2).await;
                    proxies[w].set_mode(ProxyMode::Pass);
                    run.heal(kind, &target);
                }
                5 => {
                    run.fault("sigstop", "redis");
                    locks.pause();
                    sleep(lease * 2).await;
                    locks.resume();
                    run.heal("sigstop", "redis");
                }
                6 => {
                    run.fault("client-pause", "redis");
                    admin(&locks, &["CLIENT", "PAUSE", "800", "ALL"]).await;
                    sleep(Duration::from_millis(800)).await;
                    run.heal("client-pause", "redis");
                }
                _ => {
                    run.fault("debug-sleep", "redis");
                    let sleeper = locks.clone();
                    tokio::spawn(async move { admin(&sleeper, &["DEBUG", "SLEEP", "0.8"]).await })
                        .await
                        .unwrap();
                    run.heal("debug-sleep", "redis");
                }
            }
            next_fault = Instant::now() + every;
        }
        sleep(Duration::from_millis(250)).await;
    }
    run.wait_all(Duration::from_secs(30)).await;
    let name = format!("7-soak-{}s", total.as_secs());
    let (_, report) = run.check_and_record(&name);
    assert!(report.faults >= 5, "{report}");

    let secs = total.as_secs_f64();
    worker_rss.assert_flat("worker RSS", secs, 4 * 1024);
    redis_mem.assert_flat("redis used_memory", secs, 1024);

    // Nothing left behind but fence counters and the workers' descriptions (which expire
    // 30 s after their last refresh), each with a TTL.
    sleep(lease + Duration::from_millis(200)).await;
    let mut left = locks.keys("*").await;
    let mut conn = locks.conn().await;
    for key in &left {
        assert!(
            key.starts_with("leasehold:fence:{") || key.starts_with("leasehold:locker:{"),
            "left behind: {key} (all: {left:?})"
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 0, "{key} has no TTL");
    }
    left.retain(|key| key.starts_with("leasehold:fence:{"));
    assert!(left.len() <= keys.len(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_soak_short() {
    soak(Duration::from_secs(30), Duration::from_millis(2500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "10-minute soak; run with scripts/reliability"]
async fn s7_soak_ten_minutes() {
    soak(Duration::from_secs(600), Duration::from_secs(4)).await;
}
