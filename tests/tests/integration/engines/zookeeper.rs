//! The ZooKeeper engine against real servers: a standalone server, and a 3-member ensemble for
//! a leader failover. Each locker is a session of its own, as a process would be. What etcd
//! does alike runs from `consensus`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{ProxyMode, TcpProxy, ZkEnsemble, ZkOptions, ZkServer};
use leasehold_tests::partition::{cut_off, CutOff};
use zookeeper_client as zk;

use super::at_once::container;
use super::consensus::{shared_tests, slot_top, SessionEngine};
use super::zookeeper_creates::{observer, BOUND};

pub(super) async fn locker(hosts: &str, session: Duration) -> Locker {
    Locker::builder()
        .zookeeper(hosts)
        .session_timeout(session)
        .op_timeout(Duration::from_millis(1500))
        .connect_timeout(Duration::from_secs(5))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("locker on zookeeper")
}

/// ZooKeeper as the shared tests drive it: each locker is a session.
struct ZooKeeper;

impl SessionEngine for ZooKeeper {
    type Server = ZkServer;
    type Cluster = ZkEnsemble;
    const SESSION: &'static str = "session";
    const HEALED_WAIT: Duration = Duration::from_secs(15);
    const RELEASE_MAY_GO_UNANSWERED_AFTER_A_RESTART: bool = true;

    async fn start() -> ZkServer {
        ZkServer::start().await
    }

    async fn start_cluster(members: usize) -> ZkEnsemble {
        ZkEnsemble::start(members).await
    }

    fn endpoints(server: &ZkServer) -> Vec<String> {
        vec![server.connect_string()]
    }

    fn cluster_endpoints(cluster: &ZkEnsemble) -> Vec<String> {
        vec![cluster.connect_string()]
    }

    fn proxied(proxy: SocketAddr) -> Vec<String> {
        vec![proxy.to_string()]
    }

    fn addr(server: &ZkServer) -> SocketAddr {
        server.addr()
    }

    fn pause(server: &ZkServer) {
        server.pause();
    }

    fn resume(server: &ZkServer) {
        server.resume();
    }

    async fn kill_and_restart(server: &ZkServer) {
        server.kill9();
        server.restart().await;
    }

    async fn kill_the_leader(cluster: &ZkEnsemble) {
        let leader = cluster.leader().await;
        cluster.member(leader).kill9();
    }

    async fn locker(endpoints: &[String], session: Duration) -> Locker {
        locker(&endpoints.join(","), session).await
    }
}

shared_tests!(ZooKeeper {
    sessions_exclude_each_other_and_fences_increase => exclude_each_other_and_fences_increase,
    a_waiter_wakes_on_release_not_on_the_session_timeout => a_waiter_wakes_on_release,
    waiters_of_different_sessions_are_served_in_arrival_order
        => waiters_are_served_in_arrival_order,
    a_waiter_that_gives_up_or_is_cancelled_leaves_the_queue,
    inspection_listing_and_forced_release,
    a_frozen_server_past_the_session_timeout_loses_the_lease_and_fences_move_on
        => a_frozen_server_loses_the_lease_and_fences_move_on,
    a_client_partitioned_past_the_session_timeout_loses_its_lock_to_the_next
        => a_client_partitioned_loses_its_lock_to_the_next,
    a_server_restart_with_data_keeps_exclusion_and_fences,
    a_leader_failover_under_load_keeps_exclusion,
    a_reader_cut_off_past_the_session_timeout_frees_its_share => a_reader_cut_off_frees_its_share,
    a_reader_waiting_beside_its_processs_writer_wakes_on_that_writers_release
        => a_reader_beside_its_lockers_writer_wakes_on_its_release,
    inspection_and_forced_release_with_readers,
});

/// Issue 27, bug 1: a server grants at most its `maxSessionTimeout`, whatever the client asks.
/// Server cap 2 s, the locker asks for 8 s and locks with a 6 s lease; the holder is cut off
/// (a stalled proxy), the server expires its 2 s session, and another process takes the lock.
/// By then the cut-off guard must have stopped trusting its lease: never two holders by the
/// client's own judgement. Before the fix the lease was bounded by the 8 s asked: the other
/// process held the lock at about 2.1 s while the first guard reported held until the
/// ZooKeeper client ended the session on its own, 7/5 of the timeout (2.8 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_never_outlives_the_session_the_server_granted() {
    let cap = Duration::from_secs(2);
    let zk = ZkServer::start_with(ZkOptions::default().max_session_timeout(cap)).await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let asked = Duration::from_secs(8);
    let cut = locker(&proxy.addr().to_string(), asked).await;
    let other = locker(&zk.connect_string(), asked).await;
    let first = Arc::new(
        cut.lock("capped")
            .lease(Duration::from_secs(6))
            .acquire()
            .await
            .unwrap(),
    );
    let CutOff {
        taken,
        noticed,
        next,
    } = cut_off(first, &proxy, &other, "capped").await;
    eprintln!("cut off at 0: the holder lost its lease at {noticed:?}, another held at {taken:?}");
    next.release().await.unwrap();
}

/// Every bound a locker takes from its session is the timeout the server granted, not the one
/// asked for: above the server's `maxSessionTimeout` it is the cap, below its
/// `minSessionTimeout` the floor. Seen in the lease a request is shortened to (the refusal of
/// a `hold_at_least` longer than that lease names it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_bound_is_the_session_timeout_the_server_granted() {
    let (floor, cap) = (Duration::from_millis(1500), Duration::from_secs(2));
    let zk = ZkServer::start_with(
        ZkOptions::default()
            .min_session_timeout(floor)
            .max_session_timeout(cap),
    )
    .await;
    let hosts = zk.connect_string();
    for (asked, granted) in [
        (Duration::from_secs(8), cap),
        (Duration::from_secs(1), floor),
    ] {
        let locker = locker(&hosts, asked).await;
        let err = locker
            .lock("bound")
            .lease(Duration::from_secs(6))
            .watchdog(false)
            .hold_at_least(Duration::from_secs(7))
            .acquire()
            .await
            .unwrap_err();
        assert!(
            matches!(err, LockError::Config { .. })
                && err
                    .to_string()
                    .contains(&format!("honours ({granted:?}: the session timeout")),
            "asked {asked:?}, granted {granted:?}: {err}"
        );
        // And a lease within it works.
        let guard = locker.lock("bound").lease(asked).acquire().await.unwrap();
        assert!(guard.is_held());
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn zookeeper_configuration_errors() {
    for (hosts, timeout, needle) in [
        (
            "redis://127.0.0.1:2181",
            Duration::from_secs(5),
            "host:port",
        ),
        ("", Duration::from_secs(5), "host:port"),
        (
            "127.0.0.1:2181",
            Duration::from_millis(10),
            "session_timeout",
        ),
    ] {
        let err = Locker::builder()
            .zookeeper(hosts)
            .session_timeout(timeout)
            .build()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    let err = Locker::builder()
        .url("redis://127.0.0.1:6379")
        .zookeeper("127.0.0.1:2181")
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than one"), "{err}");
}

/// A lease without the watchdog runs out while its guard lives: ZooKeeper keeps the znode as
/// long as the session does, so the locker gives it back, and another session gets the lock.
/// (Before the fix the lock stayed taken until the guard was dropped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_without_the_watchdog_is_given_back_when_it_runs_out() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let a = locker(&hosts, Duration::from_secs(4)).await;
    let b = locker(&hosts, Duration::from_secs(4)).await;
    let guard = a
        .lock("k")
        .lease(Duration::from_millis(300))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    guard.lost().await;
    assert!(!guard.is_held());
    let next = b
        .lock("k")
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("the lapsed lease still holds the lock");
    assert!(next.fence() > guard.fence());
    drop(guard);
}

/// Readers' fences are the last writer's, the same for every reader of one version, also when
/// that writer's session died without a release (the writer records its fence when it gets
/// the lock, not when it lets go); writers' fences keep increasing past them.
///
/// A lock's container is empty whenever nobody holds or waits (a reader waits without a
/// znode), and the server may reap it then (the harness checks every 500 ms; a loaded machine
/// widens the gaps): the writer's record goes with it, and the next readers' fence is the new
/// container's floor. Which of the two a reader met is read from the store (the container's
/// creation zxid, while the readers hold it), and its fence is checked exactly for that case.
/// The end reaps the container on purpose, so the second case is always tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_the_last_writers_fence_also_after_it_crashed() {
    let zk = ZkServer::start().await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let plain = observer(&zk).await;
    let session = Duration::from_secs(2);
    let a = locker(&zk.connect_string(), session).await;
    let b = locker(&zk.connect_string(), session).await;
    let cut = locker(&proxy.addr().to_string(), session).await;
    let r0 = a.read_lock("doc").acquire().await.unwrap();
    assert!(r0.fence() >= 1);
    r0.release().await.unwrap();
    let w1 = a.write_lock("doc").acquire().await.unwrap();
    let f1 = w1.fence();
    w1.release().await.unwrap();
    let r1 = b.read_lock("doc").acquire().await.unwrap();
    let r2 = a.read_lock("doc").acquire().await.unwrap();
    // A reader's fence is the top of the last earlier writer's fence slots (its order × 32
    // + 31): at or above every fence that writer's process handed on, below the next writer's.
    let container = container_czxid(&plain, "doc")
        .await
        .expect("the readers' container");
    assert_eq!(
        r1.fence(),
        reader_fence_after(f1, container),
        "a reader sees the last writer's fence slots, or the floor of a container made after \
         it (writer's fence {f1}, container made at zxid {container})"
    );
    assert_eq!(
        r2.fence(),
        r1.fence(),
        "every reader of one version sees the same fence"
    );
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    // A writer whose session dies while it holds the lock: nothing releases it.
    let w2 = cut.write_lock("doc").acquire().await.unwrap();
    let f2 = w2.fence();
    assert!(f2 > f1);
    proxy.set_mode(ProxyMode::Stall);
    let r3 = b
        .read_lock("doc")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the dead writer's session never ended");
    // The crashed writer's fence, read from the record it left in the queue's container (or
    // the floor of a container made after the server reaped that one).
    let container = container_czxid(&plain, "doc")
        .await
        .expect("the reader's container");
    let seen = r3.fence();
    assert_eq!(
        seen,
        reader_fence_after(f2, container),
        "a reader after a crashed writer (fence {f2}, container made at zxid {container})"
    );
    assert!(seen >= f2);
    r3.release().await.unwrap();
    let w3 = a.write_lock("doc").acquire().await.unwrap();
    let f3 = w3.fence();
    assert!(f3 > f2);
    assert!(f3 > seen, "a later writer is above the reader");
    w3.release().await.unwrap();
    drop(w2);
    // The container reaped after the last writer left: readers take the new one's floor,
    // above that writer's fence, and the next writer is above them.
    container_reaped(&plain, "doc").await;
    let r4 = b.read_lock("doc").acquire().await.unwrap();
    let container = container_czxid(&plain, "doc")
        .await
        .expect("the new container");
    assert_eq!(
        r4.fence(),
        (container as u64) * 32,
        "a reader in a container made after the last writer (fence {f3}) takes its floor"
    );
    let f4 = r4.fence();
    assert!(f4 > f3);
    r4.release().await.unwrap();
    let w4 = a.write_lock("doc").acquire().await.unwrap();
    assert!(w4.fence() > f4);
    w4.release().await.unwrap();
}

/// The fence of readers that got in after the last writer with `fence` left, in the container
/// created at zxid `container`: the top of that writer's slots when the container holds its
/// record (it was made before the writer's znode), else the container's floor.
fn reader_fence_after(fence: u64, container: i64) -> u64 {
    let floor = (container as u64) * 32;
    if floor < fence {
        slot_top(fence)
    } else {
        floor
    }
}

/// The creation zxid of lock `key`'s container, or `None` when the server has none.
async fn container_czxid(client: &zk::Client, key: &str) -> Option<i64> {
    let path = container(key);
    match tokio::time::timeout(BOUND, client.check_stat(&path)).await {
        Ok(Ok(stat)) => stat.map(|stat| stat.czxid),
        Ok(Err(e)) => panic!("reading {path}: {e}"),
        Err(_) => panic!("ZooKeeper did not answer the plain client within {BOUND:?}"),
    }
}

/// Returns once the server has reaped lock `key`'s empty container (30 s at most).
async fn container_reaped(client: &zk::Client, key: &str) {
    let gone = tokio::time::timeout(Duration::from_secs(30), async {
        while container_czxid(client, key).await.is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the server kept the empty container of {key} for 30 s (checked every 500 ms)"
    );
}
