//! Exclusion: a read-sleep-write counter under the lock loses no increment, from many tasks,
//! lockers and OS processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;

use super::locker;

/// Runs a read-sleep-write on a counter in Redis under the lock from `tasks` tasks and
/// checks that no increment was lost and no two bodies overlapped.
async fn exclusive_counter(lockers: Vec<Locker>, srv: &RedisServer, tasks: usize) {
    let in_body = Arc::new(AtomicUsize::new(0));
    let max_in_body = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..tasks {
        let locker = lockers[i % lockers.len()].clone();
        let mut conn = srv.conn().await;
        let (in_body, max_in_body) = (in_body.clone(), max_in_body.clone());
        handles.push(tokio::spawn(async move {
            let guard = locker.lock("counter").acquire().await.expect("acquire");
            let now = in_body.fetch_add(1, Ordering::SeqCst) + 1;
            max_in_body.fetch_max(now, Ordering::SeqCst);
            let n: i64 = conn.get("counter-value").await.unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(2)).await;
            let _: () = conn.set("counter-value", n + 1).await.unwrap();
            in_body.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.expect("release");
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let mut conn = srv.conn().await;
    let n: i64 = conn.get("counter-value").await.unwrap();
    assert_eq!(
        n, tasks as i64,
        "lost increments: the lock let bodies overlap"
    );
    assert_eq!(max_in_body.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_counter_under_100_tasks_one_locker() {
    let srv = RedisServer::start().await;
    exclusive_counter(vec![locker(&srv.url()).await], &srv, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_counter_under_100_tasks_four_lockers() {
    // Four lockers are four independent clients: exclusion comes from Redis alone.
    let srv = RedisServer::start().await;
    let mut lockers = Vec::new();
    for _ in 0..4 {
        lockers.push(locker(&srv.url()).await);
    }
    exclusive_counter(lockers, &srv, 100).await;
}

#[tokio::test]
async fn exclusive_counter_across_os_processes() {
    let srv = RedisServer::start().await;
    let worker = env!("CARGO_BIN_EXE_lock_worker");
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(worker)
                .args([srv.url().as_str(), "shared", "shared-counter", "40"])
                .spawn()
                .expect("spawn lock_worker")
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "worker failed: {status}");
    }
    let mut conn = srv.conn().await;
    let n: i64 = conn.get("shared-counter").await.unwrap();
    assert_eq!(n, 120);
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}
