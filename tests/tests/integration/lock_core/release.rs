//! Release on every path out of a body (`?`, an early return, a panic, a drop), and a stale
//! release after expiry that leaves the new holder alone.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::RedisServer;
use tokio::time::Instant;

use super::locker;

async fn assert_free(locker: &Locker, key: &str) {
    // The release of a dropped guard runs in the background: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match locker.lock(key).try_acquire().await.unwrap() {
            Some(g) => return g.release().await.unwrap(),
            None if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(5)).await,
            None => panic!("{key} is still locked"),
        }
    }
}

#[derive(Debug)]
struct Failed;

async fn body_with_question_mark(locker: &Locker) -> Result<(), Failed> {
    let _guard = locker.lock("q").acquire().await.unwrap();
    Err(Failed)?;
    Ok(())
}

async fn body_with_early_return(locker: &Locker, stop: bool) -> u32 {
    let _guard = locker.lock("early").acquire().await.unwrap();
    if stop {
        return 1;
    }
    2
}

#[tokio::test]
async fn every_exit_path_releases() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let other = self::locker(&srv.url()).await;

    assert!(body_with_question_mark(&locker).await.is_err());
    assert_free(&other, "q").await;

    assert_eq!(body_with_early_return(&locker, true).await, 1);
    assert_free(&other, "early").await;

    let l = locker.clone();
    let panicked = tokio::spawn(async move {
        let _guard = l.lock("panic").acquire().await.unwrap();
        panic!("body panics while holding the lock");
    })
    .await;
    assert!(panicked.is_err());
    assert_free(&other, "panic").await;

    let l = locker.clone();
    let body = async move {
        let _guard = l.lock("dropped").acquire().await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
    };
    assert!(tokio::time::timeout(Duration::from_millis(50), body)
        .await
        .is_err());
    assert_free(&other, "dropped").await;
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test]
async fn stale_release_after_expiry_fails_and_leaves_new_holder_alone() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let stale = a
        .lock("k")
        .lease(Duration::from_millis(100))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    stale.lost().await;
    assert!(!stale.is_held());
    let fresh = b
        .lock("k")
        .wait(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    assert!(fresh.fence() > stale.fence());
    assert!(matches!(stale.release().await, Err(LockError::Lost { .. })));
    assert!(fresh.is_held());
    assert_eq!(
        srv.keys("leasehold:lock:*").await.len(),
        1,
        "new holder's key kept"
    );
    assert!(a.lock("k").try_acquire().await.unwrap().is_none());
    fresh.release().await.unwrap();
}
