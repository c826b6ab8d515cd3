//! Scenario 7: leasehold on etcd against etcd's own Lock service (`etcd_client::Client::lock`
//! and `unlock`, through the client the engine uses), on the same throwaway server, in the same
//! run.
//!
//! Both take turns in the same windows, as in scenario 1, and both hold their locks with etcd
//! leases of the same TTL (leasehold's default session timeout, 10 s) kept alive by one stream.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client as etcd;
use leasehold::Locker;
use leasehold_tests::harness::EtcdServer;

use super::{
    cycles_per_sec, hot_key_processes, hot_stats, monotonic_ns, HotStats, Load, Report, Sample,
    UNCONTENDED_ROUNDS,
};

/// The TTL of every lease of both: leasehold's default session timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The baseline's lock names (the service keeps each holder's key under `<name>/`).
const RAW_ROOT: &str = "bench-raw";

const RAW: &str = "etcd's Lock service (etcd-client's Client::lock)";

/// Who takes the hot key; the worker's first argument, as for the Redis contenders.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Contender {
    Ours,
    Raw,
}

impl Contender {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Ours => "etcd-ours",
            Contender::Raw => "etcd-raw",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Contender> {
        match s {
            "etcd-ours" => Some(Contender::Ours),
            "etcd-raw" => Some(Contender::Raw),
            _ => None,
        }
    }
}

async fn locker(endpoint: &str) -> Locker {
    Locker::builder()
        .session_timeout(SESSION_TIMEOUT)
        .etcd([endpoint])
        .prefix("bench")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("leasehold on etcd")
}

/// A client of the Lock service with a lease of its own, kept alive by a background task for
/// as long as the client lives, as a user of the service would hold one.
#[derive(Clone)]
struct RawClient {
    client: etcd::Client,
    lease: i64,
    _keep_alive: Arc<KeepAlive>,
}

/// Aborts the keep-alive task when the last clone of its client goes.
struct KeepAlive(tokio::task::JoinHandle<()>);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl RawClient {
    async fn connect(endpoint: &str) -> RawClient {
        let client = etcd::Client::connect([endpoint], None)
            .await
            .expect("etcd client");
        RawClient::with_lease(client).await
    }

    /// Another lease over the same connection.
    async fn with_lease(mut client: etcd::Client) -> RawClient {
        let ttl = SESSION_TIMEOUT.as_secs() as i64;
        let lease = client
            .lease_grant(ttl, None)
            .await
            .expect("lease grant")
            .id();
        let (mut keeper, mut responses) = client
            .lease_keep_alive(lease)
            .await
            .expect("lease keep-alive");
        let keep_alive = tokio::spawn(async move {
            // A third of the TTL, as leasehold's watchdog renews.
            let mut every = tokio::time::interval(SESSION_TIMEOUT / 3);
            loop {
                every.tick().await;
                if keeper.keep_alive().await.is_err() {
                    return;
                }
                if !matches!(responses.message().await, Ok(Some(_))) {
                    return;
                }
            }
        });
        RawClient {
            client,
            lease,
            _keep_alive: Arc::new(KeepAlive(keep_alive)),
        }
    }

    /// One acquisition: the service puts `<name>/<lease>` with the lease and waits until its
    /// key has the lowest create revision under `name/`; the key to unlock with.
    async fn lock(&self, name: &str) -> Vec<u8> {
        let options = etcd::LockOptions::new().with_lease(self.lease);
        let mut client = self.client.clone();
        let held = client
            .lock(format!("{RAW_ROOT}/{name}"), Some(options))
            .await
            .expect("raw lock");
        held.key().to_vec()
    }

    /// Deletes the key `lock` answered; the next in line is woken by its watch.
    async fn unlock(&self, key: Vec<u8>) {
        let mut client = self.client.clone();
        client.unlock(key).await.expect("raw unlock");
    }
}

/// Scenario 7: uncontended cycles at 1 and 16 tasks, then one hot key, in one process and in
/// four.
pub(crate) async fn scenario(
    report: &mut Report,
    etcd: &EtcdServer,
    duration: Duration,
    rounds: usize,
) {
    uncontended(report, etcd, duration).await;
    hot_key(report, etcd, rounds).await;
}

/// As scenario 6: 16 tasks on a key, `HOT_KEY_ROUNDS` × more acquisitions per task than
/// scenario 2's 64.
const HOT_KEY_ROUNDS: usize = 4;

async fn uncontended(report: &mut Report, etcd: &EtcdServer, duration: Duration) {
    let endpoint = &etcd.endpoint();
    let locker = locker(endpoint).await;
    // One lease for the process: the tasks never share a lock name here, so the service never
    // sees one lease ask twice for the same lock.
    let client = RawClient::connect(endpoint).await;
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
                    let key = c.lock(&format!("u-{t}-{}", i % 16)).await;
                    c.unlock(key).await;
                }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        report.add(
            &format!("7 etcd uncontended, {tasks} tasks"),
            "cycles/s",
            ours / rounds,
            raw / rounds,
            RAW,
            "cycles/s",
        );
    }
}

/// Scenario 7's hot key: 16 tasks in one process (ours queues them locally and hands the lease
/// over without the server), and 4 processes x 4 tasks (a handover between processes goes
/// through the server), `HOT_KEY_ROUNDS` x `rounds` acquisitions per task.
async fn hot_key(report: &mut Report, etcd: &EtcdServer, rounds: usize) {
    let rounds = HOT_KEY_ROUNDS * rounds;
    let endpoint = etcd.endpoint();
    for (label, processes, tasks) in [
        ("16 tasks x 1 process", 1usize, 16usize),
        ("4 tasks x 4 processes", 4, 4),
    ] {
        let mut stats: Vec<HotStats> = Vec::new();
        for contender in [Contender::Ours, Contender::Raw] {
            let key = format!("hot-{}-{processes}", contender.name());
            let load = Load::Rounds(rounds);
            let samples = if processes == 1 {
                contend(contender, &endpoint, &key, tasks, load).await
            } else {
                let endpoint = endpoint.clone();
                tokio::task::spawn_blocking(move || {
                    hot_key_processes(contender.name(), &endpoint, &key, processes, tasks, load)
                })
                .await
                .expect("workers")
                .concat()
            };
            assert_eq!(samples.len(), processes * tasks * rounds, "lost samples");
            assert_exclusive(contender, &samples);
            stats.push(hot_stats(samples));
        }
        let scenario = format!("7 etcd hot key, {label}");
        let [ours, raw] = &stats[..] else {
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
        ];
        for (metric, ours, raw, unit) in figures {
            report.add(&scenario, metric, ours, raw, RAW, unit);
        }
    }
}

/// No two holds of the hot key overlapped (the clock is the machine's monotonic one, shared by
/// the worker processes): a baseline that did not exclude would not be a baseline.
fn assert_exclusive(contender: Contender, samples: &[Sample]) {
    let mut holds: Vec<(u64, u64)> = samples.iter().map(|s| (s.got, s.released)).collect();
    holds.sort_unstable();
    for pair in holds.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "{}: two holders of the hot key at once",
            contender.name()
        );
    }
}

/// A contender connected: its own locker or client, shared by the tasks of one process.
#[derive(Clone)]
enum Connected {
    Ours(Locker),
    /// Boxed: the etcd client is some 3.7 kB.
    Raw(Box<RawClient>),
}

impl Connected {
    async fn new(contender: Contender, endpoint: &str) -> Connected {
        match contender {
            Contender::Ours => Connected::Ours(locker(endpoint).await),
            Contender::Raw => Connected::Raw(Box::new(RawClient::connect(endpoint).await)),
        }
    }

    /// What one task of the process takes the key with. The service treats every request
    /// made with one lease as the same holder (its key is `<name>/<lease>`, and asking again
    /// finds it there and holds at once), so tasks sharing a lease would all hold the hot key
    /// together: each task gets a lease of its own, over the process's one connection.
    async fn for_task(&self) -> Connected {
        match self {
            Connected::Ours(locker) => Connected::Ours(locker.clone()),
            Connected::Raw(raw) => {
                Connected::Raw(Box::new(RawClient::with_lease(raw.client.clone()).await))
            }
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
                let held = client.lock(key).await;
                let got = monotonic_ns();
                load.critical_section().await;
                let released = monotonic_ns();
                client.unlock(held).await;
                (got, released)
            }
        }
    }
}

/// `tasks` tasks of this process each take `key` as `load` says, with `contender`'s lock;
/// also the body of a worker process.
pub(crate) async fn contend(
    contender: Contender,
    endpoint: &str,
    key: &str,
    tasks: usize,
    load: Load,
) -> Vec<Sample> {
    let samples = Arc::new(Mutex::new(Vec::with_capacity(tasks * load.capacity())));
    let connected = Connected::new(contender, endpoint).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(tasks));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let connected = connected.for_task().await;
        let (samples, barrier) = (samples.clone(), barrier.clone());
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
