//! Concurrent acquires' creates sent together (issue 49): one etcd transaction carries the
//! creates of many attempts, each nested with its own comparisons, so each attempt gets its own
//! answer; and a shared create that etcd applies after its callers gave up leaves nothing.

use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{eventually, EtcdServer};

use super::locker;

/// The transactions etcd has answered, from its `/metrics` (a create, a look and a delete are
/// each one).
async fn txns(etcd: &EtcdServer) -> u64 {
    let metrics = etcd
        .http("GET", "/metrics", "")
        .await
        .expect("etcd metrics");
    metrics
        .lines()
        .filter(|l| l.starts_with("grpc_server_handled_total"))
        .filter(|l| l.contains("grpc_method=\"Txn\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

async fn warm_up(locker: &Locker) {
    let g = locker.lock("warm-up").acquire().await.unwrap();
    g.release().await.unwrap();
}

/// Sixteen tasks acquire sixteen keys at once, one of them held by another locker: the free
/// ones are granted in fewer transactions than acquires (each create would be one), the held
/// one waits in its queue without holding up the others and is granted after the release,
/// with a fence above the holder's, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_share_their_creates_each_with_its_own_answer() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let (a, b) = (locker(&at, ttl).await, locker(&at, ttl).await);
    warm_up(&a).await;
    let held = b.lock("seat:3").acquire().await.unwrap();
    const TASKS: usize = 16;
    let before = txns(&etcd).await;
    let start = Arc::new(tokio::sync::Barrier::new(TASKS));
    // The fifteen free seats are held until all of them are granted.
    let granted = Arc::new(tokio::sync::Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (a, start, granted) = (a.clone(), start.clone(), granted.clone());
            tokio::spawn(async move {
                start.wait().await;
                let g = a.lock(format!("seat:{i}")).acquire().await.unwrap();
                if i != 3 {
                    granted.wait().await;
                }
                let fence = g.fence();
                g.release().await.unwrap();
                fence
            })
        })
        .collect();
    // The fifteen are granted while seat 3 is still held (the barrier's last wait is ours).
    granted.wait().await;
    let creates = txns(&etcd).await - before;
    assert!(
        creates < (TASKS - 1) as u64,
        "{creates} transactions for {} free seats' creates: none were shared",
        TASKS - 1
    );
    let holders_fence = held.fence();
    held.release().await.unwrap();
    let mut fences = Vec::new();
    for t in tasks {
        fences.push(t.await.unwrap());
    }
    assert!(fences.iter().all(|&f| f > 0), "{fences:?}");
    assert!(
        fences[3] > holders_fence,
        "seat 3's fence {} after its holder's {holders_fence}",
        fences[3]
    );
    for i in 0..TASKS {
        let g = b.lock(format!("seat:{i}")).try_acquire().await.unwrap();
        assert!(g.is_some(), "seat {i} was left taken");
        g.unwrap().release().await.unwrap();
    }
}

/// etcd frozen while attempts' creates are on their way, alone and shared: the attempts give
/// up, and etcd, thawed, applies the creates late. What they made belongs to nobody: each
/// attempt's give-back finds it by its name and deletes it, so another locker gets every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_creates_applied_after_their_callers_gave_up_leave_nothing() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let (a, b) = (locker(&at, ttl).await, locker(&at, ttl).await);
    warm_up(&a).await;
    warm_up(&b).await;
    let before = txns(&etcd).await;
    etcd.pause();
    const TASKS: usize = 8;
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move {
                let tried = a
                    .lock(format!("late:{i}"))
                    .wait(Duration::from_millis(500))
                    .acquire();
                tokio::time::timeout(Duration::from_secs(3), tried).await
            })
        })
        .collect();
    for t in tasks {
        let outcome = t.await.unwrap();
        assert!(
            !matches!(outcome, Ok(Ok(_))),
            "granted by a frozen etcd: {outcome:?}"
        );
    }
    etcd.resume();
    eventually(
        "etcd answered the late creates",
        Duration::from_secs(10),
        || async { txns(&etcd).await > before },
    )
    .await;
    for i in 0..TASKS {
        eventually(
            "the late creates are deleted",
            Duration::from_secs(10),
            || {
                let b = b.clone();
                async move {
                    match b.lock(format!("late:{i}")).try_acquire().await {
                        Ok(Some(g)) => g.release().await.is_ok(),
                        _ => false,
                    }
                }
            },
        )
        .await;
    }
}
