//! Unfenced locks (`LockRequest::unfenced`) against real `redis-server`s: a free lock costs
//! one native `SET NX PX` and no script, the lock excludes fenced and unfenced holders alike,
//! a fenced waiter is never handed an unfenced lease, re-entry keeps the two apart, the
//! watchdog renews it, a cancelled acquire leaves nothing behind, and RedLock takes it too.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer, TcpProxy};

async fn locker(url: &str) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_millis(500))
        .default_wait(Duration::from_secs(5))
        .build()
        .await
        .expect("connect")
}

/// Script calls `srv` has run: acquires, releases and renewals of fenced locks are scripts.
async fn script_calls(srv: &RedisServer) -> u64 {
    srv.info_stat("cmdstat_evalsha").await + srv.info_stat("cmdstat_eval").await
}

/// Queues a fenced request for `k` on `locker`, then releases `holder` (an unfenced lock on
/// `k`): the fence the waiter got, once it got the lock.
async fn fence_of_the_next_holder(locker: &Locker, holder: leasehold::UnfencedGuard) -> u64 {
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let g = locker
                .lock("k")
                .wait(Duration::from_secs(5))
                .acquire()
                .await
                .expect("the lock after the release");
            let fence = g.fence();
            g.release().await.unwrap();
            fence
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("the waiter was not given the lock after the release")
        .unwrap()
}

/// Whether an unfenced `try_acquire` of `k` by `locker` finds it taken.
async fn taken_for_unfenced(locker: &Locker) -> bool {
    let got = locker.lock("k").unfenced().try_acquire().await.unwrap();
    got.is_none()
}

#[tokio::test]
async fn a_free_unfenced_lock_is_one_native_set_and_no_script() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    // The locker's first lock has its description written once, in the background (a SET
    // of its own): take one first, so that the count below is the acquire's alone.
    let first = a.lock("warm-up").unfenced().acquire().await.unwrap();
    first.release().await.unwrap();
    leasehold_tests::harness::eventually("the description", Duration::from_secs(5), || async {
        !srv.keys("leasehold:locker:*").await.is_empty()
    })
    .await;
    let before = script_calls(&srv).await;
    let sets = srv.info_stat("cmdstat_set").await;
    let guard = a
        .lock("cache:rebuild")
        .unfenced()
        .lease(Duration::from_secs(10))
        .acquire()
        .await
        .expect("free");
    assert_eq!(script_calls(&srv).await, before, "the acquire ran a script");
    assert_eq!(srv.info_stat("cmdstat_set").await, sets + 1, "one SET");
    assert!(guard.is_held());
    assert_eq!(guard.key(), "cache:rebuild");
    // The key holds the owner token and the lease, as a fenced lock's does; no fence counter.
    assert_eq!(srv.keys("leasehold:lock:*").await.len(), 1);
    assert!(srv.keys("leasehold:fence:*").await.is_empty());
    guard.release().await.expect("still ours");
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test]
async fn unfenced_and_fenced_holders_exclude_each_other() {
    let srv = RedisServer::start().await;
    let (a, b) = (locker(&srv.url()).await, locker(&srv.url()).await);
    let unfenced = a.lock("k").unfenced().acquire().await.unwrap();
    assert!(b.lock("k").try_acquire().await.unwrap().is_none());
    assert!(taken_for_unfenced(&b).await);
    // A waiter of another process is woken by the unfenced release.
    let fence = fence_of_the_next_holder(&b, unfenced).await;
    assert!(fence > 0);
    let fenced = a.lock("k").acquire().await.unwrap();
    let c = locker(&srv.url()).await;
    assert!(taken_for_unfenced(&c).await);
    fenced.release().await.unwrap();
}

/// The holder of an unfenced lease reserved no fencing tokens: its tokens are local numbers
/// (1, 2, ...). A fenced waiter of the same process must not get one of those as its fence:
/// it takes the lock from Redis instead, with a token above every earlier one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_waiter_is_not_handed_an_unfenced_lease() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let earlier = a.lock("k").acquire().await.unwrap();
    let earlier_fence = earlier.fence();
    earlier.release().await.unwrap();

    let unfenced = a.lock("k").unfenced().acquire().await.unwrap();
    let fence = fence_of_the_next_holder(&a, unfenced).await;
    assert!(
        fence > earlier_fence,
        "the fenced waiter got token {fence}, not above the earlier holder's {earlier_fence}: \
         it was handed the unfenced lease's local number"
    );
}

/// An unfenced waiter of the same process may take over an unfenced lease in the process:
/// no round trip, as for fenced locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfenced_waiter_takes_over_an_unfenced_lease_in_the_process() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let holder = a.lock("k").unfenced().acquire().await.unwrap();
    let waiter = {
        let a = a.clone();
        tokio::spawn(async move {
            let g = a.lock("k").unfenced().acquire().await.unwrap();
            g.release().await.unwrap();
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = script_calls(&srv).await;
    holder.release().await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("the waiter got the lock")
        .unwrap();
    // Handed over without a call; then the waiter's own release is the one script call.
    assert_eq!(script_calls(&srv).await - before, 1);
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test]
async fn reentry_keeps_fenced_and_unfenced_apart() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let outer = a.lock("k").unfenced().acquire().await.unwrap();
    outer
        .scope(async {
            let inner = a.lock("k").unfenced().acquire().await.expect("re-enters");
            assert!(inner.is_reentrant());
            inner.release().await.unwrap();
            match a.lock("k").wait(Duration::ZERO).acquire().await {
                Err(LockError::Config { message, .. }) => {
                    assert!(message.contains("unfenced"), "{message}")
                }
                other => panic!("a fenced re-entry into an unfenced hold gave {other:?}"),
            }
        })
        .await;
    outer.release().await.unwrap();
    // The other way round is fine: an unfenced re-entry into a fenced hold has a token it
    // does not read.
    let outer = a.lock("k").acquire().await.unwrap();
    outer
        .scope(async {
            let inner = a.lock("k").unfenced().acquire().await.expect("re-enters");
            assert!(inner.is_reentrant());
        })
        .await;
    outer.release().await.unwrap();
}

#[tokio::test]
async fn the_watchdog_renews_an_unfenced_lease() {
    let srv = RedisServer::start().await;
    let (a, b) = (locker(&srv.url()).await, locker(&srv.url()).await);
    let lease = Duration::from_millis(300);
    let guard = a.lock("k").unfenced().lease(lease).acquire().await.unwrap();
    for _ in 0..10 {
        tokio::time::sleep(lease / 3).await;
        assert!(guard.is_held());
        assert!(taken_for_unfenced(&b).await);
    }
    guard
        .release()
        .await
        .expect("still ours after three leases");
}

/// Cancelled while its `SET` is on its way (the proxy delays every byte), the acquire may have
/// taken the lock in Redis: it is given back, not left for its 30 s lease.
#[tokio::test]
async fn an_unfenced_acquire_cancelled_in_flight_leaves_no_lock() {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let a = locker(&proxy.url()).await;
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(300)));
    let pending = a
        .lock("k")
        .unfenced()
        .lease(Duration::from_secs(30))
        .acquire();
    let cancelled = tokio::time::timeout(Duration::from_millis(100), pending).await;
    assert!(cancelled.is_err(), "the reply was still on its way");
    eventually("the SET ran", Duration::from_secs(5), || async {
        srv.info_stat("cmdstat_set").await >= 1
    })
    .await;
    eventually(
        "the lock the SET took is given back",
        Duration::from_secs(5),
        || async { srv.keys("leasehold:lock:*").await.is_empty() },
    )
    .await;
}

#[tokio::test]
async fn redlock_takes_an_unfenced_lock_with_native_sets() {
    let servers = RedisServer::start_many(3).await;
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let redlock = |urls: Vec<String>| async move {
        Locker::builder()
            .redlock(urls)
            .op_timeout(Duration::from_millis(500))
            .build()
            .await
            .expect("redlock")
    };
    let (a, b) = (redlock(urls.clone()).await, redlock(urls).await);
    let mut scripts = 0;
    for s in &servers {
        scripts += script_calls(s).await;
    }
    let guard = a.lock("k").unfenced().acquire().await.unwrap();
    let mut after = 0;
    for s in &servers {
        after += script_calls(s).await;
        assert_eq!(s.keys("leasehold:lock:*").await.len(), 1);
    }
    assert_eq!(after, scripts, "an unfenced RedLock acquire ran a script");
    assert!(taken_for_unfenced(&b).await);
    assert!(b.lock("k").try_acquire().await.unwrap().is_none());
    guard.release().await.unwrap();
    let next = b.lock("k").unfenced().try_acquire().await.unwrap();
    next.expect("free after the release")
        .release()
        .await
        .unwrap();
}
