//! Locks on a real 3-master Redis Cluster started by the harness: keys in many slots,
//! exclusion, wake-ups through sharded pub/sub, and renewal batched per slot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisCluster;
use tokio::time::Instant;

/// A locker on the cluster. Its calls may take a second (a loaded machine delays replies by
/// hundreds of milliseconds at times); the leases they keep are three times as long, so that
/// a renewal that times out is tried again before its lease runs out.
async fn locker(cluster: &RedisCluster) -> Locker {
    Locker::builder()
        .cluster(cluster.urls())
        .op_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("cluster locker")
}

#[tokio::test]
async fn locks_on_many_slots_hold_renew_and_release() {
    let cluster = RedisCluster::start(3).await;
    let a = locker(&cluster).await;
    let b = locker(&cluster).await;
    // 60 keys land on all three masters; hold them for one and a half lease periods, so the
    // watchdog renews keys of many slots in one round, several times.
    let lease = Duration::from_secs(3);
    let mut guards = Vec::new();
    let mut owners = std::collections::HashSet::new();
    for i in 0..60 {
        let key = format!("item:{i}");
        owners.insert(
            cluster
                .node_for_key(&format!("leasehold:lock:{{{key}}}"))
                .await,
        );
        guards.push(
            a.lock(key)
                .lease(lease)
                .acquire()
                .await
                .expect("acquire on the cluster"),
        );
    }
    assert_eq!(owners.len(), 3, "the keys should spread over every master");
    tokio::time::sleep(lease * 3 / 2).await;
    // The store kept every key past its first lease: the renewals reached it.
    assert_eq!(
        cluster.keys("leasehold:lock:*").await.len(),
        60,
        "keys expired on the cluster: their renewals did not reach it"
    );
    for (i, g) in guards.iter().enumerate() {
        assert!(g.is_held(), "item:{i} lost its lease");
        assert!(b
            .lock(format!("item:{i}"))
            .try_acquire()
            .await
            .unwrap()
            .is_none());
    }
    let mut fences = Vec::new();
    for g in guards {
        fences.push(g.fence());
        g.release().await.expect("release");
    }
    assert!(cluster.keys("leasehold:lock:*").await.is_empty());
    // Fences keep increasing per key across holders.
    for (i, before) in fences.iter().enumerate() {
        let g = b.lock(format!("item:{i}")).acquire().await.unwrap();
        assert!(g.fence() > *before);
        g.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_and_wake_ups_across_clients() {
    let cluster = RedisCluster::start(3).await;
    let lockers = [locker(&cluster).await, locker(&cluster).await];
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let l = lockers[i % 2].clone();
        let (inside, done) = (inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let g = l
                .lock("shared")
                .wait(Duration::from_secs(20))
                .acquire()
                .await
                .unwrap();
            assert_eq!(
                inside.fetch_add(1, Ordering::SeqCst),
                0,
                "two holders at once"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            g.release().await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 40);

    // A waiter in the other client wakes on the release (sharded pub/sub), not at expiry.
    let holder = lockers[0]
        .lock("wake")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let other = lockers[1].clone();
    let waiter = tokio::spawn(async move {
        let g = other
            .lock("wake")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    holder.release().await.unwrap();
    let woke = waiter.await.unwrap() - released;
    assert!(woke < Duration::from_millis(200), "woke after {woke:?}");
}
