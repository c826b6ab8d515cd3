//! Scenario 4: RedLock with 3 and 5 nodes against leasehold on one node and rslock on the same
//! nodes; and, to show what the machine allows, the raw lock and unlock commands sent to N
//! nodes in parallel against to one node (the floor).

use std::future::Future;
use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::baselines::{rslock_lock_unlock, token, Naive};
use crate::measure::percentile;
use crate::report::Report;

/// p50 of `iterations` sequential calls of `op(i)`, in µs.
async fn latency_us<F, Fut>(iterations: usize, mut op: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let start = Instant::now();
        op(i).await;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    percentile(&samples, 0.5)
}

/// Runs futures concurrently on this task (no spawning) and waits for all of them.
async fn join_all<F: Future<Output = ()>>(futures: Vec<F>) {
    let mut futures: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in futures.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await
}

/// The floor of a lock over `nodes`: the raw commands of a lock and an unlock (`SET NX PX`,
/// then compare-and-delete) sent to every node in parallel by the same client, as a RedLock
/// without a library would; p50 of one lock+unlock, in µs.
async fn raw_fanout_us(nodes: &[Naive], iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let key = format!("raw-rl:{}", i % 64);
        let tok = token();
        join_all(
            nodes
                .iter()
                .map(|n| async { assert!(n.try_lock(&key, &tok).await, "raw key was taken") })
                .collect(),
        )
        .await;
        join_all(nodes.iter().map(|n| n.unlock(&key, &tok)).collect()).await;
    })
    .await
}

/// p50 of one acquire and release with `locker`, in µs.
async fn lock_unlock_us(locker: &Locker, iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let g = locker
            .lock(format!("rl:{}", i % 64))
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
    })
    .await
}

/// [`lock_unlock_us`] for unfenced locks.
async fn unfenced_lock_unlock_us(locker: &Locker, iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let g = locker
            .lock(format!("rlu:{}", i % 64))
            .unfenced()
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
    })
    .await
}

/// Scenario 4: `single` is the one-node server, `nodes` (five) the RedLock's.
pub(crate) async fn scenario(
    report: &mut Report,
    single: &str,
    nodes: &[RedisServer],
    iterations: usize,
) {
    let one = Locker::builder()
        .url(single)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let single_us = lock_unlock_us(&one, iterations).await;
    let mut naive = Vec::new();
    for node in nodes {
        naive.push(Naive::new(&node.url()).await);
    }
    let raw_one_us = raw_fanout_us(&naive[..1], iterations).await;
    for n in [3usize, 5] {
        let urls: Vec<String> = nodes[..n].iter().map(|s| s.url()).collect();
        let ours = Locker::builder()
            .redlock(urls.clone())
            .prefix("bench")
            .op_timeout(Duration::from_millis(50))
            .build()
            .await
            .expect("redlock");
        let ours_us = lock_unlock_us(&ours, iterations).await;
        let unfenced_us = unfenced_lock_unlock_us(&ours, iterations).await;
        let rs = rslock::LockManager::new(urls);
        let rs_us = latency_us(iterations, |i| {
            let rs = &rs;
            async move { rslock_lock_unlock(rs, &format!("rs-rl:{}", i % 64)).await }
        })
        .await;
        let raw_us = raw_fanout_us(&naive[..n], iterations).await;
        let scenario = format!("4 redlock, {n} nodes");
        let rows = [
            (
                "raw commands, N nodes vs 1 (the floor)",
                raw_us,
                raw_one_us,
                "the same raw commands to one node",
            ),
            (
                "acquire+release p50",
                ours_us,
                single_us,
                "leasehold on one node",
            ),
            (
                "acquire+release p50 vs rslock",
                ours_us,
                rs_us,
                "rslock, same nodes",
            ),
            (
                "acquire+release p50 vs the floor",
                ours_us,
                raw_us,
                "raw commands fanned out to the N nodes",
            ),
            (
                "unfenced p50 vs rslock",
                unfenced_us,
                rs_us,
                "rslock, same nodes",
            ),
        ];
        for (metric, ours, baseline, name) in rows {
            report.add(&scenario, metric, ours, baseline, name, "us");
        }
    }
}
