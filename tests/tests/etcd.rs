//! The etcd engine against real servers: a single member, and a 3-member cluster for a leader
//! failover and a whole-cluster restart. Each locker has an etcd lease of its own, as a process
//! would.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{EtcdCluster, EtcdServer, ProxyMode, TcpProxy};
use tokio::time::Instant;

async fn locker(endpoints: &[String], ttl: Duration) -> Locker {
    Locker::builder()
        .etcd(endpoints.iter().cloned())
        .session_timeout(ttl)
        .op_timeout(Duration::from_millis(1500))
        .connect_timeout(Duration::from_secs(5))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("locker on etcd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockers_exclude_each_other_and_fences_increase() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(4)).await;
    let b = locker(&at, Duration::from_secs(4)).await;
    let first = a.lock("order:1").acquire().await.unwrap();
    assert!(b.lock("order:1").try_acquire().await.unwrap().is_none());
    let err = b
        .lock("order:1")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }), "{err}");
    let fence = first.fence();
    first.release().await.unwrap();
    let second = b.lock("order:1").acquire().await.unwrap();
    assert!(second.fence() > fence, "{} after {fence}", second.fence());
    // Another key is another lock.
    let other = a.lock("order:2").try_acquire().await.unwrap();
    assert!(other.is_some());
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_outlives_many_ttls_while_renewed() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(1);
    let a = locker(&at, ttl).await;
    let b = locker(&at, ttl).await;
    let g = a.lock("long").acquire().await.unwrap();
    tokio::time::sleep(ttl * 4).await;
    assert!(g.is_held(), "the watchdog let the lease lapse");
    assert!(b.lock("long").try_acquire().await.unwrap().is_none());
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_release_not_on_the_ttl() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(20)).await;
    let b = locker(&at, Duration::from_secs(20)).await;
    let held = a.lock("k").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let guard = b.lock("k").acquire().await.unwrap();
        (Instant::now(), guard.fence())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    let fence = held.fence();
    held.release().await.unwrap();
    let (got_at, next) = waiter.await.unwrap();
    assert!(next > fence);
    // The watch on the predecessor wakes it: far below the 1 s safety poll and the TTL.
    let after = got_at - released_at;
    assert!(
        after < Duration::from_millis(900),
        "woken {after:?} after the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_different_lockers_are_served_in_arrival_order() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let holder = locker(&at, Duration::from_secs(10)).await;
    let held = holder.lock("fifo").acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let l = locker(&at, Duration::from_secs(10)).await;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = l.lock("fifo").acquire().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.release().await.unwrap();
        }));
        // Each is queued (its key put) before the next arrives.
        wait_for_queue(&holder, "fifo", i + 1).await;
    }
    held.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

async fn wait_for_queue(locker: &Locker, key: &str, waiting: u64) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let info = locker.inspect(key).await.unwrap();
        if info.waiting_processes == waiting {
            return;
        }
        assert!(
            Instant::now() < until,
            "{waiting} waiters never queued: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_or_is_cancelled_leaves_the_queue() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(10)).await;
    let b = locker(&at, Duration::from_secs(10)).await;
    let held = a.lock("q").acquire().await.unwrap();
    // Gives up after its wait.
    let err = b
        .lock("q")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }));
    wait_for_queue(&a, "q", 0).await;
    // Cancelled in the middle of its wait.
    let c = b.clone();
    let waiting = tokio::spawn(async move { c.lock("q").acquire().await });
    wait_for_queue(&a, "q", 1).await;
    waiting.abort();
    let _ = waiting.await;
    wait_for_queue(&a, "q", 0).await;
    // Nothing stands between the holder's release and the next contender.
    held.release().await.unwrap();
    let next = b.lock("q").try_acquire().await.unwrap();
    assert!(next.is_some(), "a withdrawn waiter still blocks the lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspection_listing_and_forced_release() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(10)).await;
    let b = locker(&at, Duration::from_secs(10)).await;
    let g = a.lock("inv/7 {x}").acquire().await.unwrap();
    let info = b.inspect("inv/7 {x}").await.unwrap();
    assert!(info.held);
    assert!(info.last_fence.is_some_and(|f| f <= g.fence()));
    let held = b.list_held("inv*").await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].key, "inv/7 {x}");
    assert!(b.force_release("inv/7 {x}").await.unwrap());
    let next = b.lock("inv/7 {x}").try_acquire().await.unwrap();
    assert!(next.is_some_and(|n| n.fence() > g.fence()));
    // The old holder finds out at its next renewal, or at release.
    assert!(g.release().await.is_err());
}

/// The holder's lease cannot be kept alive while its server is frozen past the TTL: the holder
/// reports the loss on its own clock within the TTL, and after the server is back the next
/// holder gets the lock with a higher fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_past_the_ttl_loses_the_lease_and_fences_move_on() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(2);
    let a = locker(&at, ttl).await;
    let g = a.lock("paused").acquire().await.unwrap();
    let fence = g.fence();
    etcd.pause();
    let paused_at = Instant::now();
    tokio::time::timeout(ttl * 3, g.lost())
        .await
        .expect("the lease was never reported lost");
    let lost_after = paused_at.elapsed();
    assert!(
        lost_after <= ttl + Duration::from_millis(500),
        "trusted for {lost_after:?} with a {ttl:?} TTL"
    );
    assert!(!g.is_held());
    etcd.resume();
    let b = locker(&at, ttl).await;
    let next = tokio::time::timeout(Duration::from_secs(15), b.lock("paused").acquire())
        .await
        .expect("the lock never came free after the lease ended")
        .unwrap();
    assert!(next.fence() > fence);
    // The first locker works again with a new lease.
    drop(g);
    next.release().await.unwrap();
    let again = a
        .lock("paused")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(again.fence() > fence);
}

/// One client is cut off (its proxy stalls every byte) past the TTL while the server keeps
/// running: the holder reports the loss on its own clock within the TTL, etcd expires its
/// lease, the next holder gets the lock with a higher fence, and when the partition heals the
/// first client works again (a new lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_partitioned_past_the_ttl_loses_its_lock_to_the_next() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let ttl = Duration::from_secs(2);
    let cut = locker(&[format!("http://{}", proxy.addr())], ttl).await;
    let other = locker(&[etcd.endpoint()], ttl).await;
    let g = cut.lock("part").acquire().await.unwrap();
    let fence = g.fence();
    proxy.set_mode(ProxyMode::Stall);
    let at = Instant::now();
    tokio::time::timeout(ttl * 3, g.lost())
        .await
        .expect("the partitioned holder never noticed");
    let noticed = at.elapsed();
    assert!(
        noticed <= ttl + Duration::from_millis(500),
        "trusted {noticed:?} into a partition with a {ttl:?} TTL"
    );
    // etcd expires the partitioned lease; its key goes, the waiter gets the lock.
    let next = other
        .lock("part")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the lock never came free while its holder was cut off");
    assert!(next.fence() > fence);
    assert!(matches!(g.release().await, Err(LockError::Lost { .. })));
    next.release().await.unwrap();
    proxy.set_mode(ProxyMode::Pass);
    let again = cut
        .lock("part")
        .wait(Duration::from_secs(20))
        .acquire()
        .await
        .expect("the healed client did not lock again");
    assert!(again.fence() > fence);
}

/// A server restart with its data kept: the lease survives a short outage, and the lock still
/// excludes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_with_data_keeps_exclusion_and_fences() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(8)).await;
    let b = locker(&at, Duration::from_secs(8)).await;
    let g = a.lock("r").acquire().await.unwrap();
    etcd.kill9();
    etcd.restart().await;
    // The other locker cannot take it while the holder's lease lives.
    let tried = b.lock("r").wait(Duration::from_millis(500)).acquire().await;
    assert!(tried.is_err(), "two holders after a restart");
    let fence = g.fence();
    if g.is_held() {
        g.release().await.unwrap();
    } else {
        drop(g);
    }
    let next = b
        .lock("r")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(next.fence() > fence);
}

/// Every member of a 3-member cluster killed and started again from its data: the revision
/// goes on from where it was (fences keep increasing), never two holders (the holder keeps its
/// lease through a short outage, or has given it up by the time another takes it), and the
/// lock is granted again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_restarted_with_its_data_keeps_exclusion_and_fences() {
    let etcd = EtcdCluster::start(3).await;
    let at = etcd.endpoints();
    let ttl = Duration::from_secs(20);
    let a = locker(&at, ttl).await;
    let b = locker(&at, ttl).await;
    let g = a.lock("all").acquire().await.unwrap();
    let fence = g.fence();
    for member in etcd.members() {
        member.kill9();
    }
    for member in etcd.members() {
        member.start_again();
    }
    etcd.wait_until_serving().await;
    let tried = b
        .lock("all")
        .wait(Duration::from_millis(500))
        .acquire()
        .await;
    if let Ok(other) = &tried {
        // Only once the first holder stopped trusting its lease (the outage outlasted it).
        assert!(!g.is_held(), "two holders after the cluster restarted");
        assert!(other.fence() > fence);
    }
    drop(tried);
    if g.is_held() {
        g.release().await.unwrap();
    } else {
        drop(g);
    }
    let next = b
        .lock("all")
        .wait(Duration::from_secs(15))
        .acquire()
        .await
        .expect("no lock after the cluster restarted");
    assert!(next.fence() > fence, "{} after {fence}", next.fence());
    next.release().await.unwrap();
}

/// The leader of a 3-member cluster is killed under load: never two holders, fences always
/// increasing, and locks keep being granted after the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_failover_under_load_keeps_exclusion() {
    let etcd = EtcdCluster::start(3).await;
    let at = etcd.endpoints();
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let last_fence = Arc::new(AtomicU64::new(0));
    let regressions = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..3 {
        let l = locker(&at, Duration::from_secs(6)).await;
        let (inside, overlaps, last_fence, regressions, granted, stop) = (
            inside.clone(),
            overlaps.clone(),
            last_fence.clone(),
            regressions.clone(),
            granted.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let Ok(g) = l.lock("hot").wait(Duration::from_secs(2)).acquire().await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                if last_fence.fetch_max(g.fence(), Ordering::SeqCst) >= g.fence() {
                    regressions.fetch_add(1, Ordering::SeqCst);
                }
                granted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.store(false, Ordering::SeqCst);
                let _ = g.release().await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = granted.load(Ordering::SeqCst);
    assert!(before > 0, "no lock granted before the failover");
    let leader = etcd.leader().await;
    etcd.member(leader).kill9();
    let killed = granted.load(Ordering::SeqCst);
    // Liveness after the election: a generous bound, which detects a hang.
    let until = Instant::now() + Duration::from_secs(30);
    while granted.load(Ordering::SeqCst) < killed + 10 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Who stands in the queue, for the message should grants not have resumed.
    let queue = locker(&at, Duration::from_secs(6))
        .await
        .inspect("hot")
        .await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("a worker hung")
            .unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(regressions.load(Ordering::SeqCst), 0, "a fence went back");
    assert!(
        granted.load(Ordering::SeqCst) >= killed + 10,
        "grants did not resume within 30 s of the leader's death: {queue:?}"
    );
}

/// With authentication on, the right password locks and a wrong one is a configuration error
/// that does not show it; neither shows in the builder's `Debug`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password_authenticate_and_never_show() {
    let etcd = EtcdServer::start().await;
    let mut admin = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    admin.user_add("root", "r00t-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let port = etcd.addr().port();
    let good = format!("http://root:r00t-pw@127.0.0.1:{port}");
    let builder = Locker::builder()
        .etcd([good])
        .session_timeout(Duration::from_secs(4));
    assert!(!format!("{builder:?}").contains("r00t-pw"));
    let locker = builder.build().await.expect("the right password");
    let g = locker.lock("secret").acquire().await.unwrap();
    g.release().await.unwrap();
    let err = Locker::builder()
        .etcd([format!("http://root:wr0ng-pw@127.0.0.1:{port}")])
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err}");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("wr0ng-pw"), "{shown}");
    // Without credentials, etcd refuses the keys (etcd 3.4 still grants a lease to anyone).
    let anonymous = Locker::builder().etcd([etcd.endpoint()]).build().await;
    if let Ok(anonymous) = anonymous {
        let err = anonymous.lock("secret").try_acquire().await.unwrap_err();
        assert!(err.to_string().contains("user name is empty"), "{err}");
    }
}

#[tokio::test]
async fn etcd_configuration_errors() {
    for (endpoints, ttl, needle) in [
        (
            vec!["redis://127.0.0.1:2379"],
            Duration::from_secs(5),
            "http://",
        ),
        (vec![], Duration::from_secs(5), "at least one"),
        (vec!["127.0.0.1"], Duration::from_secs(5), "host:port"),
        (
            vec!["127.0.0.1:2379"],
            Duration::from_millis(10),
            "session_timeout",
        ),
    ] {
        let err = Locker::builder()
            .etcd(endpoints)
            .session_timeout(ttl)
            .build()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    let err = Locker::builder()
        .url("redis://127.0.0.1:6379")
        .etcd(["127.0.0.1:2379"])
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than one"), "{err}");
    // Nothing listens: unavailable within the connect timeout, not a hang.
    let err = Locker::builder()
        .etcd(["http://127.0.0.1:1"])
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
}

/// A lease without the watchdog runs out while its guard lives: the key stays in etcd as long
/// as the locker's etcd lease is kept alive, so the locker gives it back, and another locker
/// gets the lock. (Before the fix the lock stayed taken until the guard was dropped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_without_the_watchdog_is_given_back_when_it_runs_out() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let a = locker(&at, Duration::from_secs(4)).await;
    let b = locker(&at, Duration::from_secs(4)).await;
    let lapsing = a
        .lock("k")
        .lease(Duration::from_millis(200))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    lapsing.lost().await;
    let next = b
        .lock("k")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("the lapsed lease still holds the lock");
    assert!(next.fence() > lapsing.fence());
    drop(lapsing);
}
