//! Keys: validated and escaped, and Redis's memory bounded over many of them.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;

use super::locker;

#[tokio::test]
async fn redis_memory_stays_bounded_for_many_keys() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    for i in 0..500 {
        let g = locker.lock(format!("item:{i}")).acquire().await.unwrap();
        g.release().await.unwrap();
    }
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
    let fences = srv.keys("leasehold:fence:*").await;
    assert_eq!(fences.len(), 500);
    let mut conn = srv.conn().await;
    for key in fences.iter().take(20) {
        let ttl: i64 = conn.ttl(key).await.unwrap();
        assert!(ttl > 0, "{key} has no TTL");
    }
}

#[tokio::test]
async fn keys_are_validated_and_escaped() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    assert!(matches!(
        locker.lock("").acquire().await,
        Err(LockError::InvalidKey { .. })
    ));
    let huge = "x".repeat(leasehold::MAX_KEY_LEN + 1);
    assert!(matches!(
        locker.lock(huge).acquire().await,
        Err(LockError::InvalidKey { .. })
    ));
    // A key that imitates another lock's internals gets its own lock.
    let a = locker.lock("y}:fence:{z").acquire().await.unwrap();
    let b = locker
        .lock("z")
        .try_acquire()
        .await
        .unwrap()
        .expect("distinct lock");
    assert_eq!(
        srv.keys("leasehold:lock:*").await.len(),
        2,
        "two locks, two keys"
    );
    let mut names = srv.keys("leasehold:*").await;
    names.sort();
    assert!(
        names.contains(&"leasehold:lock:{y%7D:fence:%7Bz}".to_owned()),
        "{names:?}"
    );
    a.release().await.unwrap();
    b.release().await.unwrap();
    let nul = locker.lock("nul\0byte").acquire().await.unwrap();
    nul.release().await.unwrap();

    assert!(matches!(
        Locker::builder().url(srv.url()).prefix("a{b").build().await,
        Err(LockError::Config { .. })
    ));
    assert!(matches!(
        locker
            .lock("x")
            .lease(Duration::from_millis(1))
            .acquire()
            .await,
        Err(LockError::Config { .. })
    ));
    let bad = Locker::connect("not a url").await.unwrap_err();
    assert!(matches!(bad, LockError::Config { .. }), "{bad}");
}
