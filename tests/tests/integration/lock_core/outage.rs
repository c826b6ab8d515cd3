//! Redis failures: a dead, hung or absent server is `Unavailable` in bounded time, connections
//! come back after a restart, and releases of guards dropped during an outage are retried
//! until they are done, refused, or their locker is gone.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer, TcpProxy};
use redis::AsyncCommands;
use tokio::time::Instant;

use super::{lock_keys, locker, script_calls};

#[tokio::test]
async fn dead_redis_is_unavailable_in_bounded_time_and_restart_recovers() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    locker
        .lock("r")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    srv.kill9();
    let start = Instant::now();
    let err = locker
        .lock("r")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(300 + 500 + 500),
        "{:?}",
        start.elapsed()
    );
    assert!(
        !err.to_string().contains('{'),
        "no key in the message: {err}"
    );

    // Restarted empty: the scripts are gone (NOSCRIPT) and must reload by themselves.
    srv.restart().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let guard = loop {
        match locker
            .lock("r")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
        {
            Ok(g) => break g,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_unavailable(), "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("did not recover after restart: {e}"),
        }
    };
    guard.release().await.unwrap();
}

/// After a restart the connections come back by themselves, as soon as the server answers:
/// the first acquire after it does not fail on a connection that nobody revived, and a
/// waiter's wake-up subscription is live again without a failed SUBSCRIBE first.
#[tokio::test]
async fn connections_come_back_by_themselves_after_a_restart() {
    const WITHIN: Duration = Duration::from_secs(10);
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let b_waits = || {
        let b = b.clone();
        tokio::spawn(async move { b.lock("r").wait(Duration::from_secs(5)).acquire().await })
    };
    // b has waited once, so both of its connections are open.
    let held = a.lock("r").acquire().await.unwrap();
    let waiter = b_waits();
    eventually("b subscribed", WITHIN, || async {
        srv.subscribers("leasehold:wake:{r}").await == 1
    })
    .await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();

    srv.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    srv.restart().await;
    // a's lock connection, b's lock and wake connections, and the INFO probe's own.
    eventually("the three connections reopened", WITHIN, || async {
        srv.info_stat("connected_clients").await >= 4
    })
    .await;
    let held = a
        .lock("r")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect("the first acquire after the restart");
    let waiter = b_waits();
    eventually("b subscribed again", WITHIN, || async {
        srv.subscribers("leasehold:wake:{r}").await == 1
    })
    .await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}

#[tokio::test]
async fn hung_redis_is_unavailable_in_bounded_time() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    locker
        .lock("h")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    srv.pause();
    let start = Instant::now();
    let err = locker
        .lock("h")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap_err();
    let took = start.elapsed();
    srv.resume();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(took < Duration::from_millis(200 + 500 + 500), "{took:?}");
}

#[tokio::test]
async fn connecting_to_nothing_is_unavailable() {
    let err = Locker::builder()
        .url("redis://127.0.0.1:1")
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

/// A 30 s lease on `key` through a proxy, whose guard is dropped while the proxy is cut: its
/// background release cannot reach Redis.
async fn drop_during_outage(key: &str) -> (RedisServer, TcpProxy, Locker) {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let holder = locker(&proxy.url()).await;
    let guard = holder
        .lock(key)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    proxy.set_mode(ProxyMode::Cut);
    drop(guard);
    (srv, proxy, holder)
}

#[tokio::test]
async fn a_guard_dropped_during_an_outage_is_released_once_redis_is_back() {
    // `_holder` keeps the locker, and with it the retries, alive.
    let (srv, proxy, _holder) = drop_during_outage("outage").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        lock_keys(&srv).await.len(),
        1,
        "the release cannot have reached Redis through the cut proxy"
    );
    proxy.set_mode(ProxyMode::Pass);
    // Far below the 30 s lease: only a retried release frees the lock this early.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lock_keys(&srv).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dropped guard's lock is still held in Redis 5 s after it came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = locker(&srv.url()).await;
    let next = other.lock("outage").try_acquire().await.unwrap();
    next.expect("free for another process")
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_background_release_that_finds_another_owner_is_not_retried() {
    let (srv, proxy, _holder) = drop_during_outage("foreign").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Meanwhile the lock changed hands (as after an expiry): the token is not ours any more.
    let mut conn = srv.conn().await;
    let _: () = redis::cmd("SET")
        .arg("leasehold:lock:{foreign}")
        .arg("someone-else")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = script_calls(&srv).await;
    proxy.set_mode(ProxyMode::Pass);
    // One retry gets through and finds the other owner...
    let deadline = Instant::now() + Duration::from_secs(5);
    while script_calls(&srv).await == before {
        assert!(
            Instant::now() < deadline,
            "the failed background release was never retried"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...and that is the last one: a release that was answered is not retried (the pause
    // between retries is at most 1 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        script_calls(&srv).await,
        before + 1,
        "retried after the answer"
    );
    let owner: String = conn.get("leasehold:lock:{foreign}").await.unwrap();
    assert_eq!(owner, "someone-else", "the other owner's lock was touched");
}

#[tokio::test]
async fn dropping_the_locker_ends_the_retries_of_its_background_releases() {
    let (srv, proxy, holder) = drop_during_outage("orphan").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(holder);
    // Longer than the longest pause between retries: a retry still pending now finds the
    // locker gone, and stops.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = script_calls(&srv).await;
    proxy.set_mode(ProxyMode::Pass);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        script_calls(&srv).await,
        before,
        "a retry outlived its locker"
    );
    assert_eq!(lock_keys(&srv).await.len(), 1);
}
