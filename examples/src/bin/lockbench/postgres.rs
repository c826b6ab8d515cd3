//! Scenario 8: leasehold on PostgreSQL against the same statements sent raw by the same driver
//! (tokio-postgres), on connections of their own, to the same throwaway server, in the same
//! run: an acquire is `leasehold_acquire(...)`, a release the engine's `DELETE ... pg_notify`.
//!
//! The raw side has no wake-ups (it would need a listening connection and a table of waiters,
//! which is what the library is): on a busy lock it polls, sleeping 1 ms between attempts,
//! as the Redis polling loop of scenario 2 does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::postgres::tokio_postgres as pg;
use leasehold::Locker;
use leasehold_tests::harness::PgServer;

use super::{
    cycles_per_sec, hot_key_processes, hot_stats, monotonic_ns, token, HotStats, Load, Report,
    Sample, UNCONTENDED_ROUNDS,
};

/// The engine's acquire, as its `ACQUIRE` statement sends it.
const ACQUIRE: &str = "SELECT fence, remaining_ms FROM leasehold_acquire($1, $2, $3, $4)";

/// The engine's release (its `RELEASE` statement, copied from `runtime/src/store/postgres.rs`):
/// delete the row if the owner holds it, and notify the waiters' channel in the same
/// transaction.
const RELEASE: &str = "WITH gone AS (\
     DELETE FROM leasehold_locks WHERE key = $1 AND owner = $2 \
     RETURNING expires > clock_timestamp() AS valid) \
     SELECT valid, pg_notify('leasehold', $3) IS NULL FROM gone";

/// As many connections as the engine shares among its lock calls (it pipelines concurrent
/// statements on them; so does the raw side, round robin).
const CONNECTIONS: usize = 4;

/// How long the raw side sleeps when the lock is busy before it asks again.
const POLL: Duration = Duration::from_millis(1);

const RAW: &str = "raw leasehold_acquire + DELETE/pg_notify (tokio-postgres)";

const RAW_POLLING: &str = "raw leasehold_acquire + DELETE/pg_notify (tokio-postgres), polling \
                           every 1 ms when busy (no wake-ups)";

/// Who takes the hot key; the worker's first argument, as for the Redis contenders.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Contender {
    Ours,
    Raw,
}

impl Contender {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Ours => "postgres-ours",
            Contender::Raw => "postgres-raw",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Contender> {
        match s {
            "postgres-ours" => Some(Contender::Ours),
            "postgres-raw" => Some(Contender::Raw),
            _ => None,
        }
    }
}

async fn locker(url: &str) -> Locker {
    Locker::builder()
        .postgres(url)
        .prefix("bench")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("leasehold on PostgreSQL")
}

/// One raw connection with the two statements prepared.
struct RawConn {
    client: pg::Client,
    acquire: pg::Statement,
    release: pg::Statement,
    driver: tokio::task::AbortHandle,
}

impl Drop for RawConn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// The raw lock: `CONNECTIONS` connections of its own, used in turn.
#[derive(Clone)]
struct Raw {
    conns: Arc<Vec<RawConn>>,
    next: Arc<AtomicUsize>,
}

impl Raw {
    /// Connects; the lock table must exist (a leasehold locker on the same database made it).
    async fn connect(url: &str) -> Raw {
        let mut conns = Vec::new();
        for _ in 0..CONNECTIONS {
            let (client, connection) = pg::connect(url, pg::NoTls).await.expect("raw connection");
            let driver = tokio::spawn(async move {
                let _ = connection.await;
            })
            .abort_handle();
            use pg::types::Type;
            let acquire = client
                .prepare_typed(ACQUIRE, &[Type::TEXT, Type::TEXT, Type::INT8, Type::INT8])
                .await
                .expect("prepare the acquire");
            let release = client
                .prepare_typed(RELEASE, &[Type::TEXT, Type::TEXT, Type::TEXT])
                .await
                .expect("prepare the release");
            conns.push(RawConn {
                client,
                acquire,
                release,
                driver,
            });
        }
        Raw {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn conn(&self) -> &RawConn {
        &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()]
    }

    /// One attempt, with the library's default lease; the fence when granted.
    async fn try_lock(&self, key: &str, owner: &str) -> Option<i64> {
        let conn = self.conn();
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
        let row = conn
            .client
            .query_one(&conn.acquire, &[&key, &owner, &lease_ms, &0i64])
            .await
            .expect("raw acquire");
        row.get(0)
    }

    /// Polls until the lock is granted.
    async fn lock(&self, key: &str, owner: &str) {
        while self.try_lock(key, owner).await.is_none() {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes the row if `owner` holds it, and notifies.
    async fn unlock(&self, key: &str, owner: &str) {
        let conn = self.conn();
        conn.client
            .query_opt(&conn.release, &[&key, &owner, &key])
            .await
            .expect("raw release");
    }
}

/// Scenario 8: uncontended cycles at 1 and 16 tasks, then one hot key across four processes.
pub(crate) async fn scenario(
    report: &mut Report,
    postgres: &PgServer,
    duration: Duration,
    rounds: usize,
) {
    let url = postgres.url();
    // Ours first: connecting creates the lock table the raw side uses too.
    let locker = locker(&url).await;
    let raw = Raw::connect(&url).await;
    uncontended(report, &locker, &raw, duration).await;
    hot_key(report, &url, rounds).await;
}

async fn uncontended(report: &mut Report, locker: &Locker, raw: &Raw, duration: Duration) {
    let window = duration / UNCONTENDED_ROUNDS;
    for tasks in [1usize, 16] {
        let (mut ours, mut theirs) = (0.0, 0.0);
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
            let r = raw.clone();
            theirs += cycles_per_sec(tasks, window, move |t, i| {
                let r = r.clone();
                async move {
                    let (key, owner) = (format!("raw-u:{t}:{}", i % 16), token());
                    assert!(
                        r.try_lock(&key, &owner).await.is_some(),
                        "raw key was taken"
                    );
                    r.unlock(&key, &owner).await;
                }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        report.add(
            &format!("8 postgres uncontended, {tasks} tasks"),
            "cycles/s",
            ours / rounds,
            theirs / rounds,
            RAW,
            "cycles/s",
        );
    }
}

/// As scenarios 6 and 7: `HOT_KEY_ROUNDS` × scenario 2's acquisitions per task.
const HOT_KEY_ROUNDS: usize = 4;

/// One hot key, 4 processes x 4 tasks: a handover between processes goes through the server
/// (ours wakes the next process by `NOTIFY`; the raw side finds the lock free on a poll).
async fn hot_key(report: &mut Report, url: &str, rounds: usize) {
    let rounds = HOT_KEY_ROUNDS * rounds;
    let (processes, tasks) = (4usize, 4usize);
    let mut stats: Vec<HotStats> = Vec::new();
    for contender in [Contender::Ours, Contender::Raw] {
        let key = format!("hot-{}-{processes}", contender.name());
        let load = Load::Rounds(rounds);
        let url = url.to_owned();
        let samples = tokio::task::spawn_blocking(move || {
            hot_key_processes(contender.name(), &url, &key, processes, tasks, load)
        })
        .await
        .expect("workers")
        .concat();
        assert_eq!(samples.len(), processes * tasks * rounds, "lost samples");
        assert_exclusive(contender, &samples);
        stats.push(hot_stats(samples));
    }
    let scenario = format!("8 postgres hot key, {tasks} tasks x {processes} processes");
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
        report.add(&scenario, metric, ours, raw, RAW_POLLING, unit);
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

/// A contender connected: its own locker or raw connections, shared by the tasks of one
/// process.
#[derive(Clone)]
enum Connected {
    Ours(Locker),
    Raw(Raw),
}

impl Connected {
    async fn new(contender: Contender, url: &str) -> Connected {
        match contender {
            Contender::Ours => Connected::Ours(locker(url).await),
            Contender::Raw => Connected::Raw(Raw::connect(url).await),
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
            Connected::Raw(raw) => {
                let owner = token();
                raw.lock(key, &owner).await;
                let got = monotonic_ns();
                load.critical_section().await;
                let released = monotonic_ns();
                raw.unlock(key, &owner).await;
                (got, released)
            }
        }
    }
}

/// `tasks` tasks of this process each take `key` as `load` says, with `contender`'s lock; the
/// body of a worker process.
pub(crate) async fn contend(
    contender: Contender,
    url: &str,
    key: &str,
    tasks: usize,
    load: Load,
) -> Vec<Sample> {
    let samples = Arc::new(Mutex::new(Vec::with_capacity(tasks * load.capacity())));
    let connected = Connected::new(contender, url).await;
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
