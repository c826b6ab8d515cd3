//! Scenario 6: leasehold on ZooKeeper against the ZooKeeper client's own lock recipe
//! (`zookeeper_client::Client::lock`), on the same throwaway server, in the same run.
//!
//! Both take turns in the same windows, as in scenario 1; both hold one session per process
//! with the same timeout (leasehold's default, 10 s), and both wait for the release's delete.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_tests::harness::ZkServer;
use zookeeper_client as zk;

use super::{
    cycles_per_sec, hot_key_processes, hot_stats, monotonic_ns, HotStats, Load, Report, Sample,
    UNCONTENDED_ROUNDS,
};

/// The session timeout of both: leasehold's default.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The baseline's lock directories (persistent, created by the recipe when missing).
const RAW_ROOT: &str = "/bench-raw";

const RAW: &str = "zookeeper-client's Client::lock (curator prefix)";

/// Who takes the hot key; the worker's first argument, as for the Redis contenders.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Contender {
    Ours,
    Raw,
}

impl Contender {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Ours => "zk-ours",
            Contender::Raw => "zk-raw",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Contender> {
        match s {
            "zk-ours" => Some(Contender::Ours),
            "zk-raw" => Some(Contender::Raw),
            _ => None,
        }
    }
}

async fn locker(hosts: &str) -> Locker {
    Locker::builder()
        .session_timeout(SESSION_TIMEOUT)
        .zookeeper(hosts)
        .prefix("bench")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("leasehold on zookeeper")
}

async fn raw_client(hosts: &str) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(hosts)
        .await
        .expect("zookeeper client")
}

/// One acquisition with the recipe: an ephemeral sequential `_c_<uuid>-lock-<seq>` under `dir`
/// (created, with its parents, if missing), then waiting until it is the lowest.
async fn raw_lock<'c>(client: &'c zk::Client, dir: &str) -> zk::LockClient<'c> {
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
        .expect("ancestor options");
    let prefix = zk::LockPrefix::new_curator(dir, "lock-").expect("lock prefix");
    client.lock(prefix, b"", options).await.expect("raw lock")
}

/// Releases a lock of the recipe and waits until it is released, as ours is waited for. The
/// recipe's own release is a delete its `LockClient` sends in the background when dropped;
/// dropping it after ours would send a second one, so it is forgotten (its path, a few dozen
/// bytes, stays allocated until the benchmark exits).
async fn raw_unlock(client: &zk::Client, lock: zk::LockClient<'_>) {
    client
        .delete(lock.lock_path(), None)
        .await
        .expect("raw unlock");
    std::mem::forget(lock);
}

/// Requests the server has received from clients so far (`mntr`'s `zk_packets_received`).
async fn packets_received(zk: &ZkServer) -> u64 {
    let mntr = zk.four_letter_word("mntr").await.expect("mntr");
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_packets_received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr:\n{mntr}"))
}

/// Scenario 6: uncontended cycles at 1 and 16 tasks, then one hot key, in one process and in
/// four.
pub(crate) async fn scenario(
    report: &mut Report,
    zk: &ZkServer,
    duration: Duration,
    rounds: usize,
    iterations: usize,
) {
    uncontended(report, zk, duration, iterations).await;
    hot_key(report, zk, rounds).await;
}

/// Scenario 2 runs 64 tasks on a key, these 16: more acquisitions per task, so that each run
/// has as many (and lasts a second or so with the baseline).
const HOT_KEY_ROUNDS: usize = 4;

/// Cycles of one task for the request count: enough to drown the session's pings.
const MAX_COUNTED_CYCLES: usize = 500;

async fn uncontended(report: &mut Report, zk: &ZkServer, duration: Duration, iterations: usize) {
    let hosts = &zk.connect_string();
    let locker = locker(hosts).await;
    let client = raw_client(hosts).await;
    let window = duration / UNCONTENDED_ROUNDS;
    for tasks in [1usize, 16] {
        let (mut ours, mut raw) = (0.0, 0.0);
        for _ in 0..UNCONTENDED_ROUNDS {
            let l = locker.clone();
            ours += cycles_per_sec(tasks, window, move |t, i| {
                let l = l.clone();
                async move {
                    let guard = l
                        .lock(format!("u:{t}:{}", i % 16))
                        .acquire()
                        .await
                        .expect("acquire");
                    guard.release().await.expect("release");
                }
            })
            .await;
            let c = client.clone();
            raw += cycles_per_sec(tasks, window, move |t, i| {
                let c = c.clone();
                async move {
                    let lock = raw_lock(&c, &format!("{RAW_ROOT}/u-{t}-{}", i % 16)).await;
                    raw_unlock(&c, lock).await;
                }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        report.add(
            &format!("6 zookeeper uncontended, {tasks} tasks"),
            "cycles/s",
            ours / rounds,
            raw / rounds,
            RAW,
            "cycles/s",
        );
    }
    // What one cycle asks of the server, counted over cycles of one task.
    let cycles = iterations.min(MAX_COUNTED_CYCLES);
    let before = packets_received(zk).await;
    for i in 0..cycles {
        let guard = locker
            .lock(format!("c:{}", i % 16))
            .acquire()
            .await
            .expect("acquire");
        guard.release().await.expect("release");
    }
    let middle = packets_received(zk).await;
    for i in 0..cycles {
        let lock = raw_lock(&client, &format!("{RAW_ROOT}/c-{}", i % 16)).await;
        raw_unlock(&client, lock).await;
    }
    let after = packets_received(zk).await;
    let per_cycle = |n: u64| n as f64 / cycles as f64;
    report.add(
        "6 zookeeper uncontended, 1 tasks",
        "zookeeper requests per cycle",
        per_cycle(middle.saturating_sub(before)),
        per_cycle(after.saturating_sub(middle)),
        RAW,
        "requests",
    );
}

/// Scenario 6's hot key: 16 tasks in one process (ours queues them locally and hands the
/// lease over without the server), and 4 processes x 4 tasks (a handover between processes
/// goes through the server), `HOT_KEY_ROUNDS` x `rounds` acquisitions per task.
async fn hot_key(report: &mut Report, zk: &ZkServer, rounds: usize) {
    let rounds = HOT_KEY_ROUNDS * rounds;
    let hosts = zk.connect_string();
    for (label, processes, tasks) in [
        ("16 tasks x 1 process", 1usize, 16usize),
        ("4 tasks x 4 processes", 4, 4),
    ] {
        let mut stats: Vec<(HotStats, f64)> = Vec::new();
        for contender in [Contender::Ours, Contender::Raw] {
            let key = format!("hot-{}-{processes}", contender.name());
            let load = Load::Rounds(rounds);
            let before = packets_received(zk).await;
            let samples = if processes == 1 {
                contend(contender, &hosts, &key, tasks, load).await
            } else {
                let hosts = hosts.clone();
                tokio::task::spawn_blocking(move || {
                    hot_key_processes(contender.name(), &hosts, &key, processes, tasks, load)
                })
                .await
                .expect("workers")
                .concat()
            };
            let after = packets_received(zk).await;
            assert_eq!(samples.len(), processes * tasks * rounds, "lost samples");
            // Includes each process's connect and close, and pings: a few per process.
            let requests = after.saturating_sub(before) as f64 / samples.len() as f64;
            stats.push((hot_stats(samples), requests));
        }
        let scenario = format!("6 zookeeper hot key, {label}");
        let [(ours, ours_requests), (raw, raw_requests)] = &stats[..] else {
            unreachable!("two contenders")
        };
        let figures = [
            ("acquisitions/s", ours.per_sec, raw.per_sec, "acq/s"),
            ("wait p50", ours.wait_p50_ms, raw.wait_p50_ms, "ms"),
            ("wait p99", ours.wait_p99_ms, raw.wait_p99_ms, "ms"),
            ("wait max", ours.wait_max_ms, raw.wait_max_ms, "ms"),
            (
                "handover p50",
                ours.handoff_p50_us,
                raw.handoff_p50_us,
                "us",
            ),
            (
                "zookeeper requests per acquisition",
                *ours_requests,
                *raw_requests,
                "requests",
            ),
        ];
        for (metric, ours, raw, unit) in figures {
            report.add(&scenario, metric, ours, raw, RAW, unit);
        }
    }
}

/// A contender connected: its own locker or client, shared by the tasks of one process.
#[derive(Clone)]
enum Connected {
    Ours(Locker),
    Raw(zk::Client),
}

impl Connected {
    async fn new(contender: Contender, hosts: &str) -> Connected {
        match contender {
            Contender::Ours => Connected::Ours(locker(hosts).await),
            Contender::Raw => Connected::Raw(raw_client(hosts).await),
        }
    }

    /// One acquisition of `key`, holding it as `load` says; when it was got and released.
    async fn take(&self, key: &str, load: Load) -> (u64, u64) {
        match self {
            Connected::Ours(locker) => {
                let guard = locker.lock(key).acquire().await.expect("acquire");
                let got = monotonic_ns();
                load.critical_section().await;
                let released = monotonic_ns();
                guard.release().await.expect("release");
                (got, released)
            }
            Connected::Raw(client) => {
                let lock = raw_lock(client, &format!("{RAW_ROOT}/{key}")).await;
                let got = monotonic_ns();
                load.critical_section().await;
                let released = monotonic_ns();
                raw_unlock(client, lock).await;
                (got, released)
            }
        }
    }
}

/// `tasks` tasks of this process each take `key` as `load` says, with `contender`'s lock;
/// also the body of a worker process.
pub(crate) async fn contend(
    contender: Contender,
    hosts: &str,
    key: &str,
    tasks: usize,
    load: Load,
) -> Vec<Sample> {
    let samples = Arc::new(Mutex::new(Vec::with_capacity(tasks * load.capacity())));
    let connected = Connected::new(contender, hosts).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(tasks));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (connected, samples, barrier) = (connected.clone(), samples.clone(), barrier.clone());
        let key = key.to_owned();
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let start = Instant::now();
            let mut done = 0;
            while load.more(done, start) {
                done += 1;
                let asked = monotonic_ns();
                let (got, released) = connected.take(&key, load).await;
                samples.lock().unwrap().push(Sample {
                    asked,
                    got,
                    released,
                });
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let out = samples.lock().unwrap().clone();
    out
}
