//! Fences keep increasing: across holders, after the counter is gone, and across local
//! handovers and processes.

use std::sync::Arc;

use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;

use super::locker;

#[tokio::test]
async fn fences_increase_across_holders_and_after_the_counter_is_gone() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let mut last = 0;
    for i in 0..20 {
        let l = if i % 2 == 0 { &a } else { &b };
        let g = l.lock("f").acquire().await.unwrap();
        assert!(g.fence() > last);
        last = g.fence();
        g.release().await.unwrap();
    }
    // The counter expires (or is evicted): the next fence is seeded from the server clock.
    let mut conn = srv.conn().await;
    let ttl: i64 = conn.ttl("leasehold:fence:{f}").await.unwrap();
    assert!(ttl > 6 * 24 * 3600, "fence counter has a long TTL: {ttl}");
    let _: () = conn.del("leasehold:fence:{f}").await.unwrap();
    let g = a.lock("f").acquire().await.unwrap();
    assert!(g.fence() > last, "{} <= {last}", g.fence());
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_stay_increasing_across_local_handovers_and_processes() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    for round in 0..5 {
        // Forty holders in two "processes" at once: handovers inside each, Redis between.
        let mut handles = Vec::new();
        for i in 0..40 {
            let l = if i % 2 == 0 { a.clone() } else { b.clone() };
            let fences = fences.clone();
            handles.push(tokio::spawn(async move {
                let g = l.lock("fence-mix").acquire().await.unwrap();
                // Record in holding order: the lock serialises these pushes.
                fences.lock().unwrap().push(g.fence());
                tokio::task::yield_now().await;
                g.release().await.unwrap();
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let seen = fences.lock().unwrap();
        assert_eq!(seen.len(), 40 * (round + 1));
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "fences out of order: {seen:?}"
        );
    }
}
