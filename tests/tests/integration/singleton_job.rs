//! Singleton jobs across real processes and real servers: three instances of a service
//! (`job_worker` processes) trigger `#[distributed_lock(on_busy = "skip", hold_at_least =
//! "3s")]` within 100 ms of each other, as their schedulers would; the job runs exactly once
//! per window, a second trigger 1 s later (after the job ended) is skipped everywhere, and
//! the next window runs it once again, with a higher fence. On Redis the hold also outlives
//! the process that ran the job (SIGKILLed right after), and it is an expiry in Redis, not a
//! key the watchdog keeps renewing.

use std::process::Stdio;
use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker};
use leasehold_tests::harness::{EtcdServer, RedisServer, ZkServer};
use redis::AsyncCommands;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{sleep, sleep_until, timeout, Instant};

/// `hold_at_least` of the worker's job.
const HOLD: Duration = Duration::from_secs(3);
/// The triggers of one round are spread over this much, one worker after the other.
const SPREAD: Duration = Duration::from_millis(100);
/// How long a worker may take to answer: generous, the machine is shared.
const ANSWER: Duration = Duration::from_secs(30);

struct Worker {
    child: Child,
    stdin: ChildStdin,
    out: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    async fn start(engine: &str, addresses: &[String]) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_job_worker"))
            .arg(engine)
            .args(addresses)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start job_worker");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut worker = Worker { child, stdin, out };
        assert_eq!(worker.line().await, "ready");
        worker
    }

    async fn line(&mut self) -> String {
        timeout(ANSWER, self.out.next_line())
            .await
            .expect("the worker did not answer in time")
            .expect("reading the worker's output")
            .expect("the worker ended")
    }

    async fn trigger(&mut self, round: &str) {
        let line = format!("run {round}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }
}

/// What one worker's job did in a round: ran (with its fence) or skipped.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ran(u64),
    Skipped,
}

async fn outcome(worker: &mut Worker, round: &str) -> Outcome {
    let line = worker.line().await;
    let mut words = line.split_whitespace();
    let (what, said_round) = (words.next(), words.next());
    assert_eq!(said_round, Some(round), "{line}");
    match what {
        Some("ran") => Outcome::Ran(words.next().unwrap().parse().unwrap()),
        Some("skipped") => Outcome::Skipped,
        _ => panic!("the job failed: {line}"),
    }
}

/// Triggers `round` on every worker, spread over [`SPREAD`] (in an order that turns with
/// `round_no`, so that each worker is first in some round), and collects the outcomes.
async fn trigger_all(workers: &mut [Worker], round: &str, round_no: usize) -> Vec<Outcome> {
    let n = workers.len();
    let step = SPREAD / (n as u32 - 1).max(1);
    let start = Instant::now();
    for i in 0..n {
        sleep_until(start + step * i as u32).await;
        workers[(i + round_no) % n].trigger(round).await;
    }
    let mut outcomes = Vec::with_capacity(n);
    for worker in workers.iter_mut() {
        outcomes.push(outcome(worker, round).await);
    }
    outcomes
}

fn ran(outcomes: &[Outcome]) -> Vec<u64> {
    outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Ran(fence) => Some(*fence),
            Outcome::Skipped => None,
        })
        .collect()
}

/// `windows` windows on three workers: in each, the job runs once out of three triggers
/// within 100 ms, and not at all for three more triggers 1 s later.
async fn once_per_window(engine: &str, addresses: &[String], windows: usize) {
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(Worker::start(engine, addresses).await);
    }
    let mut last_fence = 0;
    for w in 0..windows {
        let start = Instant::now();
        let first = trigger_all(&mut workers, &format!("{w}.first"), w).await;
        let fences = ran(&first);
        assert_eq!(
            fences.len(),
            1,
            "window {w} on {engine}: the job ran {} times: {first:?}",
            fences.len()
        );
        assert!(
            fences[0] > last_fence,
            "fences go back: {fences:?} after {last_fence}"
        );
        last_fence = fences[0];

        sleep_until(start + Duration::from_secs(1)).await;
        let late = trigger_all(&mut workers, &format!("{w}.late"), w + 1).await;
        assert!(
            ran(&late).is_empty(),
            "window {w} on {engine}: triggered 1 s later, within the hold, the job ran again: \
             {late:?}"
        );
        // The next window starts once this one's hold is over.
        sleep_until(start + HOLD + Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_job_triggered_on_three_processes_runs_once_per_window() {
    let redis = RedisServer::start().await;
    once_per_window("redis", &[redis.url()], 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_zookeeper_a_job_triggered_on_three_processes_runs_once_per_window() {
    let zk = ZkServer::start().await;
    once_per_window("zookeeper", &[zk.connect_string()], 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_a_job_triggered_on_three_processes_runs_once_per_window() {
    let etcd = EtcdServer::start().await;
    once_per_window("etcd", &[etcd.endpoint()], 2).await;
}

/// On Redis the hold is the lock key's expiry: it survives the process that ran the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_the_hold_outlives_the_process_that_ran_the_job() {
    let redis = RedisServer::start().await;
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(Worker::start("redis", &[redis.url()]).await);
    }
    let start = Instant::now();
    workers[0].trigger("alone").await;
    assert!(matches!(
        outcome(&mut workers[0], "alone").await,
        Outcome::Ran(_)
    ));
    let mut ran_it = workers.remove(0);
    ran_it.child.kill().await.unwrap(); // SIGKILL: no release, no goodbye
    sleep_until(start + Duration::from_secs(1)).await;
    let late = trigger_all(&mut workers, "after-kill", 0).await;
    assert!(
        ran(&late).is_empty(),
        "the process that ran the job died, and the hold went with it: {late:?}"
    );
    sleep_until(start + HOLD + Duration::from_millis(300)).await;
    let next = trigger_all(&mut workers, "next-window", 1).await;
    assert_eq!(ran(&next).len(), 1, "{next:?}");
}

#[distributed_lock(key = "job:cleanup", on_busy = "skip", hold_at_least = "2s", locker = locker)]
async fn cleanup(locker: &Locker) -> Result<(), LockError> {
    Ok(())
}

/// The Redis mechanism: after an early end the lock key keeps the owner's token with an
/// expiry at most the time left of the hold, and nobody renews it any more.
#[tokio::test]
async fn on_redis_an_early_end_leaves_an_expiry_not_a_renewed_lease() {
    let redis = RedisServer::start().await;
    let locker = Locker::builder()
        .url(redis.url())
        .default_lease(Duration::from_millis(600))
        .build()
        .await
        .unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let start = Instant::now();
    cleanup(&locker).await.unwrap();
    let key = "leasehold:lock:{job:cleanup}";
    let pttl: i64 = conn.pttl(key).await.unwrap();
    assert!(
        pttl > 600 && pttl <= 2000,
        "expected an expiry at the end of the hold (longer than the 600 ms lease), found a \
         PTTL of {pttl} ms"
    );
    // Past two renewal periods of the lease: the expiry only went down.
    sleep(Duration::from_millis(500)).await;
    let later: i64 = conn.pttl(key).await.unwrap();
    assert!(
        later < pttl,
        "renewed after the job ended: {pttl} ms, then {later} ms"
    );
    let other = Locker::connect(&redis.url()).await.unwrap();
    assert!(other
        .lock("job:cleanup")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    sleep_until(start + Duration::from_millis(2100)).await;
    assert!(other
        .lock("job:cleanup")
        .try_acquire()
        .await
        .unwrap()
        .is_some());
}
