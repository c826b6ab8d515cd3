//! What the scenarios share: the deployment of lock servers and the fenced resource's own
//! server, waits for a hold to fault, the check that a hold was reported lost, and an
//! administrative command sent past the busy lock connections.

use std::sync::Arc;
use std::time::Duration;

use leasehold_tests::harness::{RedisOptions, RedisServer};
use leasehold_tests::history::{monotonic_ns, History, Run, WorkerSpec};
use tokio::time::{sleep, Instant};

/// Where the locks live, and the fenced resource's own server (never faulted).
pub struct Deployment {
    pub nodes: Vec<Arc<RedisServer>>,
    pub resource: RedisServer,
}

impl Deployment {
    /// One lock server (`nodes == 1`) or the masters of a RedLock.
    pub async fn start(nodes: usize) -> Self {
        let mut servers = RedisServer::start_many(nodes + 1).await;
        let resource = servers.pop().expect("started");
        Deployment {
            nodes: servers.into_iter().map(Arc::new).collect(),
            resource,
        }
    }

    /// As [`start`](Self::start), with options for the lock servers.
    pub async fn start_with(nodes: usize, options: RedisOptions) -> Self {
        let mut servers = Vec::new();
        for _ in 0..nodes {
            servers.push(Arc::new(RedisServer::start_with(options.clone()).await));
        }
        Deployment {
            nodes: servers,
            resource: RedisServer::start().await,
        }
    }

    pub fn name(&self) -> &'static str {
        if self.nodes.len() == 1 {
            "single"
        } else {
            "redlock"
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    pub fn spec(&self) -> WorkerSpec {
        WorkerSpec::new(&self.nodes[0].url(), &self.resource.url()).urls(&self.urls())
    }
}

/// An open hold, waiting up to 2 s for one: the worker and the hold id.
pub async fn some_open_hold(run: &mut Run) -> Option<(usize, String)> {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Some(open) = run.open_holds().into_iter().next() {
            return Some(open);
        }
        sleep(Duration::from_millis(5)).await;
    }
    None
}

/// Waits up to 2 s for a hold acquired within the last 15 ms, so that a fault injected now
/// lands well inside it rather than racing its release.
pub async fn young_open_hold(run: &mut Run) -> Option<(usize, String)> {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let now = monotonic_ns();
        if let Some((w, id, _)) = run
            .open_holds_since()
            .into_iter()
            .find(|(_, _, since)| now.saturating_sub(*since) < 15_000_000)
        {
            return Some((w, id));
        }
        sleep(Duration::from_millis(1)).await;
    }
    some_open_hold(run).await
}

/// Waits up to 4 s until worker `w` has just acquired the lock (within 150 ms).
pub async fn holding(run: &mut Run, w: usize) {
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let young = run
            .open_holds_since()
            .iter()
            .any(|(o, _, since)| *o == w && monotonic_ns().saturating_sub(*since) < 150_000_000);
        if young {
            return;
        }
        sleep(Duration::from_millis(2)).await;
    }
}

pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// How many times each scenario repeats: `LEASEHOLD_RUNS` (default 1).
pub fn runs() -> usize {
    std::env::var("LEASEHOLD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// The hold `id`, hit by a fault at `at`, ended as a lost one: not believed long after the
/// fault, told so (its loss noticed, or its release refused), and never released as if
/// nothing happened.
pub fn assert_reported_lost(history: &History, id: &str, at: u64) {
    let hold = history
        .hold(id)
        .unwrap_or_else(|| panic!("no hold {id} in the history"));
    assert!(
        hold.last_true.is_none_or(|t| t < at + 1_000_000_000),
        "{id} believed it held the lock long after the fault: {hold:?}"
    );
    let release_said_lost = hold
        .rel_done
        .as_ref()
        .is_some_and(|(_, how)| how == "rlost" || how == "runav");
    assert!(
        hold.lost.is_some() || hold.rel.is_some_and(|(_, held)| !held) || release_said_lost,
        "{id} was not reported lost: {hold:?}"
    );
    if let Some((_, how)) = &hold.rel_done {
        assert_ne!(
            how, "rok",
            "{id}: a release after losing the lease succeeded: {hold:?}"
        );
    }
}

/// Sends one command on a connection of its own, bounded; for faults that the server must
/// carry out while the lock connections are busy (CLIENT PAUSE, DEBUG SLEEP).
pub async fn admin(redis: &RedisServer, args: &[&str]) {
    let mut conn = redis.conn().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let call = cmd.query_async::<redis::Value>(&mut conn);
    let _ = tokio::time::timeout(Duration::from_secs(10), call).await;
}
