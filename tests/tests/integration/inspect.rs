//! The inspection API that operators' tools use: list, inspect, force-release.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::RedisServer;

#[tokio::test]
async fn list_inspect_and_force_release() {
    let srv = RedisServer::start().await;
    let app = Locker::connect(&srv.url()).await.unwrap();
    let ops = Locker::connect(&srv.url()).await.unwrap();
    let a = app
        .lock("stock:sku-7")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    let b = app.lock("stock:{odd}").acquire().await.unwrap();
    let c = app.lock("order:1").acquire().await.unwrap();
    c.release().await.unwrap();

    let held = ops.list_held("stock:*").await.unwrap();
    let keys: Vec<&str> = held.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["stock:sku-7", "stock:{odd}"]);
    assert!(
        ops.list_held("*").await.unwrap().len() == 2,
        "order:1 was released"
    );

    let info = ops.inspect("stock:sku-7").await.unwrap();
    assert!(info.held);
    assert!(info.remaining.unwrap() <= Duration::from_millis(600));
    assert!(info.last_fence.unwrap() >= a.fence());
    assert!(!info.waiters);
    let free = ops.inspect("order:1").await.unwrap();
    assert!(!free.held && free.remaining.is_none() && free.last_fence.is_some());
    let never = ops.inspect("never:used").await.unwrap();
    assert_eq!(never.last_fence, None);

    // Someone waits: the marker shows.
    let waiter_locker = Locker::connect(&srv.url()).await.unwrap();
    let waiting = tokio::spawn(async move {
        waiter_locker
            .lock("stock:sku-7")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .map(|g| g.fence())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waited = ops.inspect("stock:sku-7").await.unwrap();
    assert!(waited.waiters);
    assert_eq!(waited.waiting_processes, 1, "{waited:?}");

    // Force-release: the waiter gets the lock at once, with a larger fence, and the old
    // holder finds out at its next renewal.
    assert!(ops.force_release("stock:sku-7").await.unwrap());
    let next_fence = waiting.await.unwrap().unwrap();
    assert!(next_fence > a.fence());
    tokio::time::timeout(Duration::from_secs(2), a.lost())
        .await
        .expect("the holder learns it lost the lock");
    assert!(matches!(a.release().await, Err(LockError::Lost { .. })));
    assert!(!ops.force_release("nothing:here").await.unwrap());
    b.release().await.unwrap();

    let memory = Locker::in_memory();
    assert!(matches!(
        memory.inspect("x").await,
        Err(LockError::Config { .. })
    ));
    assert!(matches!(
        ops.inspect("").await,
        Err(LockError::InvalidKey { .. })
    ));
}
