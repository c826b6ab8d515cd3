//! Starting without the engine (`LockerBuilder::lazy_connect`): the locker builds while the
//! engine refuses every connection, calls that do not wait fail at once with `Unavailable`
//! meanwhile (waiting ones ride the outage out), and once the engine answers the same locker
//! locks — on Redis, PostgreSQL and etcd, each behind a
//! proxy that cuts every connection until it is told to pass bytes.

use std::time::Duration;

use leasehold::{LockError, Locker, LockerBuilder};
use leasehold_tests::harness::{
    eventually, EtcdServer, MysqlServer, PgServer, ProxyMode, RedisServer, TcpProxy,
};
use tokio::time::Instant;

async fn starts_down_then_locks(proxy: &TcpProxy, builder: LockerBuilder) {
    proxy.set_mode(ProxyMode::Cut);
    let started = Instant::now();
    // The default connect timeout (2 s): each connection attempt in the background is bounded
    // by it, and on a loaded machine opening a MySQL locker (its pooled connections and
    // prepared statements) took longer than 500 ms on every attempt of a CI run's 30 s.
    let locker = builder
        .lazy_connect(true)
        .op_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("a lazy locker builds while the engine is down");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // A call that does not wait fails at once; so does a waiting one told not to retry.
    let asked = Instant::now();
    let e = locker.lock("k").try_acquire().await.unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    assert!(e.to_string().contains("not connected"), "{e}");
    let e = locker
        .lock("k")
        .wait(Duration::from_secs(5))
        .retry_unavailable(false)
        .acquire()
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    assert!(
        asked.elapsed() < Duration::from_millis(100),
        "a call fails at once, not after a timeout: {:?}",
        asked.elapsed()
    );
    // What the engine offers does not wait for it: a fair lock is not refused meanwhile
    // (a lazy PostgreSQL locker once refused it until connected, its engine's queue being
    // decided in two places), and the capabilities are the connected engine's.
    let before = locker.capabilities();
    // (Another key: the failed attempts on "k" hold its local turn until their clean-up ran.)
    let e = locker
        .lock("kf")
        .fair(true)
        .try_acquire()
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    // A waiting acquire rides the outage out: it takes the lock once the engine answers.
    let waiting = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .lock("k3")
                .wait(Duration::from_secs(30))
                .acquire()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "the waiting acquire gave up: {:?}",
        waiting.await
    );

    proxy.set_mode(ProxyMode::Pass);
    eventually(
        "the locker connects once the engine answers",
        // A first connection installs the schema (MySQL's procedures): seconds on a loaded
        // machine.
        Duration::from_secs(30),
        || async {
            locker
                .lock("k")
                .try_acquire()
                .await
                .is_ok_and(|g| g.is_some())
        },
    )
    .await;
    let waited = waiting
        .await
        .unwrap()
        .expect("the acquire that waited through the outage takes the lock");
    waited.release().await.unwrap();
    let guard = locker
        .lock("k2")
        .acquire()
        .await
        .expect("locks once connected");
    guard.release().await.unwrap();
    assert_eq!(
        locker.capabilities(),
        before,
        "as configured, then as connected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_starts_down_then_locks() {
    let redis = RedisServer::start().await;
    let proxy = TcpProxy::start(redis.addr()).await;
    starts_down_then_locks(&proxy, Locker::builder().url(proxy.url())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_starts_down_then_locks() {
    let pg = PgServer::start().await;
    let proxy = TcpProxy::start(pg.addr()).await;
    let url = format!("postgres://postgres@{}/postgres", proxy.addr());
    starts_down_then_locks(&proxy, Locker::builder().postgres(url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_starts_down_then_locks() {
    let db = MysqlServer::start().await;
    let proxy = TcpProxy::start(db.addr()).await;
    starts_down_then_locks(&proxy, Locker::builder().mysql(db.url_at(proxy.addr()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_starts_down_then_locks() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let endpoint = format!("http://{}", proxy.addr());
    starts_down_then_locks(
        &proxy,
        Locker::builder()
            .etcd([endpoint])
            .session_timeout(Duration::from_secs(3)),
    )
    .await;
}

/// Off by default: `build` connects and fails when the engine cannot be reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_lazy_connect_build_fails_while_down() {
    let redis = RedisServer::start().await;
    let proxy = TcpProxy::start(redis.addr()).await;
    proxy.set_mode(ProxyMode::Cut);
    let e = Locker::builder()
        .url(proxy.url())
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
}

/// A refusal that retrying cannot mend reaches the callers as the `Config` error it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_a_config_error_for_the_callers() {
    let pg = PgServer::start().await;
    let url = format!("postgres://postgres@{}/nosuchdb", pg.addr());
    let locker = Locker::builder()
        .postgres(url)
        .lazy_connect(true)
        .build()
        .await
        .expect("builds");
    eventually(
        "the refusal reaches the callers",
        Duration::from_secs(10),
        || async {
            matches!(
                locker.lock("k").acquire().await,
                Err(LockError::Config { message, .. }) if message.contains("no such database")
            )
        },
    )
    .await;
}
