//! One instance of a service with a singleton job, as a separate OS process: the
//! `tests/tests/integration/singleton_job.rs` test runs three and triggers the job on each at nearly the
//! same moment, as their schedulers would.
//!
//! Usage: `job_worker ENGINE ADDRESS...`, ENGINE one of `redis` (one URL), `cluster` (node
//! URLs), `zookeeper` (`host:port`s), `etcd` (endpoint URLs), `postgres` (one URL).
//!
//! Prints `ready` once connected, then reads commands from stdin, one a line: `run ROUND`
//! calls the job and prints `ran ROUND FENCE`, `skipped ROUND` or `error ROUND MESSAGE`.
//! Ends at the end of its input.

use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The job: a short body (shorter than the spread of the triggers), then the lock stays
/// taken until 3 s after it started (`integration/singleton_job.rs` counts on these 3 s).
#[distributed_lock(
    key = "job:nightly-report",
    on_busy = "skip",
    hold_at_least = "3s",
    locker = locker,
    guard = lock
)]
async fn nightly_report(locker: &Locker) -> Result<Option<u64>, LockError> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(Some(lock.fence()))
}

async fn connect(engine: &str, addresses: &[String]) -> Result<Locker, LockError> {
    let session = Duration::from_secs(10);
    let builder = match (engine, addresses) {
        ("redis", [url]) => Locker::builder().url(url.as_str()),
        ("cluster", urls) => Locker::builder().cluster(urls.iter().cloned()),
        ("zookeeper", hosts) => Locker::builder()
            .zookeeper(hosts.join(","))
            .session_timeout(session),
        ("etcd", urls) => Locker::builder()
            .etcd(urls.iter().cloned())
            .session_timeout(session),
        ("postgres", [url]) => Locker::builder().postgres(url.as_str()),
        ("mysql", [url]) => Locker::builder().mysql(url.as_str()),
        _ => {
            eprintln!("usage: job_worker redis|cluster|zookeeper|etcd|postgres|mysql ADDRESS...");
            std::process::exit(2);
        }
    };
    builder.build().await
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((engine, addresses)) = args.split_first() else {
        eprintln!("usage: job_worker ENGINE ADDRESS...");
        std::process::exit(2);
    };
    let locker = connect(engine, addresses).await.expect("connect");
    // One lock taken and given back first, so that the triggers do not race connection set-up.
    let warm_up = locker.lock("job:warm-up").acquire().await.expect("warm up");
    warm_up.release().await.expect("warm up");
    println!("ready");

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some(round) = line.strip_prefix("run ") else {
            eprintln!("job_worker: unknown command {line:?}");
            continue;
        };
        match nightly_report(&locker).await {
            Ok(Some(fence)) => println!("ran {round} {fence}"),
            Ok(None) => println!("skipped {round}"),
            Err(e) => println!("error {round} {e}"),
        }
    }
}
