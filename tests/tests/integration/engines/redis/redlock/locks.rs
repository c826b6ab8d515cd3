//! RedLock locks: the quorum table, holding through minority failures, fencing across
//! restarts, replies slower than the lease, wake-ups, configuration errors.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer};
use redis::AsyncCommands;
use tokio::time::Instant;

use super::{Cluster, NODE_TIMEOUT};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Node {
    Free,
    Down,
    Hung,
    Foreign,
}

const STATES: [Node; 4] = [Node::Free, Node::Down, Node::Hung, Node::Foreign];

/// Puts each node in its state, tries to acquire once, and checks the outcome. Each case
/// gets a fresh locker: a connection cut in one case fails its first command in the next,
/// while it reconnects, which would blur the table.
async fn quorum_case(cluster: &Cluster, states: &[Node], key: &str) {
    let locker = cluster.locker().await;
    let n = states.len();
    let free = states.iter().filter(|s| **s == Node::Free).count();
    for (i, state) in states.iter().enumerate() {
        if *state == Node::Foreign {
            let mut conn = cluster.servers[i].conn().await;
            let _: () = conn
                .set_ex(format!("leasehold:lock:{{{key}}}"), "someone-else", 30)
                .await
                .unwrap();
        }
        cluster.proxies[i].set_mode(match state {
            Node::Down => ProxyMode::Cut,
            Node::Hung => ProxyMode::Stall,
            Node::Free | Node::Foreign => ProxyMode::Pass,
        });
    }
    let start = Instant::now();
    let result = locker
        .lock(key)
        .lease(Duration::from_secs(5))
        .wait(Duration::ZERO)
        .acquire()
        .await;
    let took = start.elapsed();
    // Acquire round, fence round and roll-back each cost at most one node timeout (about
    // 0.4 s in all on a quiet machine). The bound separates that from an attempt that a hung
    // node holds until the lease (5 s) or forever; its slack is for a loaded machine, where a
    // case took 1.1 s.
    assert!(
        took < NODE_TIMEOUT * 4 + Duration::from_millis(2500),
        "{states:?}: took {took:?}"
    );
    let expect_ok = free > n / 2;
    match result {
        Ok(guard) => {
            assert!(expect_ok, "{states:?}: acquired without a majority");
            assert!(guard.is_held());
            cluster.set_all(ProxyMode::Pass);
            guard.release().await.expect("release");
        }
        Err(e) => {
            assert!(
                !expect_ok,
                "{states:?}: not acquired with a majority free: {e}"
            );
            let unreachable = states
                .iter()
                .filter(|s| matches!(s, Node::Down | Node::Hung))
                .count();
            if unreachable > n - (n / 2 + 1) {
                assert!(
                    matches!(e, LockError::Unavailable { .. }),
                    "{states:?}: {e}"
                );
                assert!(e.to_string().contains("no majority"), "{e}");
            } else {
                assert!(matches!(e, LockError::Busy { .. }), "{states:?}: {e}");
            }
            cluster.set_all(ProxyMode::Pass);
        }
    }
    // Stalled requests (and their roll-backs) arrive now; then nothing of ours may remain.
    tokio::time::sleep(Duration::from_millis(50)).await;
    for (i, state) in states.iter().enumerate() {
        let mut conn = cluster.servers[i].conn().await;
        let lock: Option<String> = conn.get(format!("leasehold:lock:{{{key}}}")).await.unwrap();
        match state {
            Node::Foreign => {
                assert_eq!(
                    lock.as_deref(),
                    Some("someone-else"),
                    "{states:?}: foreign lock touched"
                );
                let _: () = conn.del(format!("leasehold:lock:{{{key}}}")).await.unwrap();
            }
            _ => assert_eq!(
                lock, None,
                "{states:?}: node {i} still locked (partial grant kept)"
            ),
        }
    }
}

#[tokio::test]
async fn quorum_table_three_nodes_every_assignment() {
    let cluster = Cluster::start(3).await;
    let mut cases = 0;
    for a in STATES {
        for b in STATES {
            for c in STATES {
                cases += 1;
                quorum_case(&cluster, &[a, b, c], &format!("q3-{cases}")).await;
            }
        }
    }
    assert_eq!(cases, 64);
}

#[tokio::test]
async fn quorum_table_five_nodes_every_mix() {
    let cluster = Cluster::start(5).await;
    // Every multiset of states over five nodes (56 of them), each placed on rotating nodes.
    let mut cases = 0;
    for down in 0..=5usize {
        for hung in 0..=5 - down {
            for foreign in 0..=5 - down - hung {
                let mut states = vec![Node::Free; 5];
                let mut slot = cases % 5;
                for (count, state) in [
                    (down, Node::Down),
                    (hung, Node::Hung),
                    (foreign, Node::Foreign),
                ] {
                    for _ in 0..count {
                        states[slot] = state;
                        slot = (slot + 1) % 5;
                    }
                }
                cases += 1;
                quorum_case(&cluster, &states, &format!("q5-{cases}")).await;
            }
        }
    }
    assert_eq!(cases, 56);
}

#[tokio::test]
async fn holder_survives_a_minority_and_loses_the_lock_with_the_majority() {
    let cluster = Cluster::start(5).await;
    // Calls may take half a second here (a loaded machine delays replies at times): a
    // renewal of the live nodes that runs late must not pass for a lost majority.
    let locker = Locker::builder()
        .redlock(cluster.proxies.iter().map(|p| p.url()))
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let lease = Duration::from_secs(3);
    let guard = locker.lock("held").lease(lease).acquire().await.unwrap();
    cluster.servers[0].kill9();
    cluster.servers[1].kill9();
    // Two lease periods with two of five nodes gone: renewals keep a majority, and the live
    // nodes hold the key past its first lease.
    tokio::time::sleep(lease * 2).await;
    assert!(guard.is_held(), "lost the lock with only a minority down");
    for server in &cluster.servers[2..] {
        assert_eq!(
            server.keys("leasehold:lock:*").await.len(),
            1,
            "a live node lost the key: renewals did not reach it"
        );
    }
    cluster.servers[2].kill9();
    tokio::time::timeout(lease * 2, guard.lost())
        .await
        .expect("lost() must fire once a majority is gone");
    assert!(!guard.is_held());
}

#[tokio::test]
async fn fences_increase_across_a_thousand_acquisitions_with_minority_restarts() {
    let cluster = Cluster::start(5).await;
    let a = cluster.locker().await;
    let b = cluster.locker().await;
    let mut last = 0;
    for i in 0..1000 {
        if i % 100 == 50 {
            // Restart a different minority node, empty (no persistence).
            let node = (i / 100) % 5;
            cluster.servers[node].restart().await;
        }
        let locker = if i % 3 == 0 { &b } else { &a };
        let guard = locker
            .lock("fenced")
            .wait(Duration::from_secs(2))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("acquisition {i}: {e}"));
        assert!(
            guard.fence() > last,
            "acquisition {i}: fence {} <= {last}",
            guard.fence()
        );
        last = guard.fence();
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn replies_slower_than_the_lease_do_not_lock() {
    let cluster = Cluster::start(3).await;
    let locker = Locker::builder()
        .redlock(cluster.proxies.iter().map(|p| p.url()))
        .op_timeout(Duration::from_millis(800))
        .build()
        .await
        .unwrap();
    // Each reply of two nodes takes longer than the whole lease.
    for p in &cluster.proxies[..2] {
        p.set_mode(ProxyMode::Delay(Duration::from_millis(300)));
    }
    let result = locker
        .lock("slow")
        .lease(Duration::from_millis(200))
        .wait(Duration::ZERO)
        .acquire()
        .await;
    assert!(
        result.is_err(),
        "acquired although the quorum answered after the lease"
    );
    cluster.set_all(ProxyMode::Pass);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(cluster.lock_keys().await, 0, "something stayed locked");
    // And with the delays gone, it works.
    locker
        .lock("slow")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn redlock_waiters_wake_on_release_and_exclude_each_other() {
    let cluster = Cluster::start(3).await;
    let a = cluster.locker().await;
    let b = cluster.locker().await;
    let guard = a.lock("w").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let g = b
            .lock("w")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let woke = waiter.await.unwrap() - released;
    assert!(woke < Duration::from_millis(300), "woke after {woke:?}");
}

/// A waiter that began while a node was down listens to that node as soon as it is back,
/// and both lockers' connections to it reopen by themselves, so the first acquire after the
/// restart counts that node. Without this a waiter is deaf to the node for its whole wait, and
/// once another node fails it hears nobody: it then acquires only by its timer, and loses
/// every race to processes that listen (a liveness failure of the fault suite's RedLock
/// restart scenario).
#[tokio::test]
async fn a_waiter_hears_a_node_that_came_back_during_its_wait() {
    const WITHIN: Duration = Duration::from_secs(10);
    const CHANNEL: &str = "leasehold:wake:{back}";
    // Straight to the servers: a proxy would keep the client's side open while a server is
    // down, and hide the drop this is about.
    let servers = RedisServer::start_many(3).await;
    let locker = || {
        Locker::builder()
            .redlock(servers.iter().map(|s| s.url()))
            .op_timeout(NODE_TIMEOUT)
            .build()
    };
    let a = locker().await.unwrap();
    let b = locker().await.unwrap();
    let held = a
        .lock("back")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    servers[1].kill9();
    let waiter =
        tokio::spawn(async move { b.lock("back").wait(Duration::from_secs(20)).acquire().await });
    for i in [0, 2] {
        eventually(
            "the waiter subscribed on the live nodes",
            WITHIN,
            || async { servers[i].subscribers(CHANNEL).await == 1 },
        )
        .await;
    }
    servers[1].restart().await;
    eventually(
        "the waiter subscribed on the restarted node",
        WITHIN,
        || async { servers[1].subscribers(CHANNEL).await == 1 },
    )
    .await;
    // Each locker's lock connection to the restarted node, the waiter's subscription, and
    // the INFO probe's own.
    eventually("the lock connections reopened", WITHIN, || async {
        servers[1].info_stat("connected_clients").await >= 4
    })
    .await;
    held.release().await.unwrap();
    let guard = waiter.await.unwrap().expect("the waiter acquires");
    assert!(guard.is_held());
}

#[tokio::test]
async fn redlock_configuration_errors() {
    let one = RedisServer::start().await;
    let err = Locker::builder()
        .redlock([one.url(), one.url()])
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err}");
    assert!(err.to_string().contains("odd number"), "{err}");
    // A majority down at start-up is an error; a minority is fine.
    let err = Locker::builder()
        .redlock([
            one.url(),
            "redis://127.0.0.1:1".into(),
            "redis://127.0.0.1:2".into(),
        ])
        .connect_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    let cluster = Cluster::start(3).await;
    cluster.servers[2].kill9();
    let locker = cluster.locker().await;
    locker
        .lock("x")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_lagging_fence_counter_is_raised_before_the_lock_is_handed_out() {
    let cluster = Cluster::start(3).await;
    let locker = cluster.locker().await;
    let first = locker.lock("lag").acquire().await.unwrap();
    let f1 = first.fence();
    first.release().await.unwrap();
    // Node 0's counter falls far behind (as after a restore from an old snapshot), and node 2
    // misses the next acquisition.
    let mut conn = cluster.servers[0].conn().await;
    let _: () = redis::AsyncCommands::set(&mut conn, "leasehold:fence:{lag}", 5)
        .await
        .unwrap();
    cluster.proxies[2].set_mode(ProxyMode::Cut);
    let second = locker.lock("lag").acquire().await.unwrap();
    let f2 = second.fence();
    second.release().await.unwrap();
    assert!(f2 > f1);
    // Now node 1 is gone and node 2 is back: the majority {0, 2} must still see f2. Without
    // the second round node 0 would still be near 5 and node 2 at f1, and the next token
    // would not exceed f2.
    cluster.proxies[2].set_mode(ProxyMode::Pass);
    cluster.proxies[1].set_mode(ProxyMode::Cut);
    let fresh = cluster.locker().await;
    let third = fresh.lock("lag").acquire().await.unwrap();
    assert!(third.fence() > f2, "{} <= {f2}", third.fence());
    third.release().await.unwrap();
}
