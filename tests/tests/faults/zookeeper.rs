//! ZooKeeper under faults, with worker processes and the history checker (as
//! `scenarios` does for Redis): a holder process frozen with SIGSTOP past its session
//! timeout, and the leader of a 3-member ensemble killed under load. The checker finds any
//! overlap of believed holdings, any fence that goes back and any stale write the fenced
//! resource accepted.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{RedisServer, ZkEnsemble, ZkServer};
use leasehold_tests::history::WorkerSpec;

/// A worker spec on one ZooKeeper server with a session of `session`, and a locker of this
/// process on it.
async fn sessions(
    zk: &ZkServer,
    resource: &RedisServer,
    session: Duration,
) -> (WorkerSpec, Locker) {
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .zookeeper(&zk.connect_string(), session)
        .lease(session)
        .op_timeout(Duration::from_millis(1500));
    let locker = Locker::builder()
        .zookeeper(zk.connect_string())
        .session_timeout(session)
        .build()
        .await
        .unwrap();
    (spec, locker)
}

/// A permit holder's process is frozen past its session timeout: the server ends the session
/// and deletes its znode, and the permit comes back with a larger fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_holder_frozen_past_its_session_gives_the_permit_back() {
    let zk = ZkServer::start().await;
    let resource = RedisServer::start().await;
    let session = Duration::from_secs(2);
    let (spec, locker) = sessions(&zk, &resource, session).await;
    crate::zookeeper_etcd::a_frozen_permit_holder_gives_the_permit_back(
        "zk-permit-pause",
        &spec,
        session,
        &locker,
    )
    .await;
}

/// A leader's process is frozen past its session timeout: the next campaigner leads with a
/// larger term, and an observer sees it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_frozen_past_its_session_is_replaced_and_observed() {
    let zk = ZkServer::start().await;
    let resource = RedisServer::start().await;
    let session = Duration::from_secs(2);
    let (spec, campaigner) = sessions(&zk, &resource, session).await;
    let (_, other) = sessions(&zk, &resource, session).await;
    let (_, observer) = sessions(&zk, &resource, session).await;
    crate::zookeeper_etcd::a_frozen_leader_is_replaced_with_a_larger_term_and_observed(
        "zk-leader-pause",
        &spec,
        session,
        &[campaigner, other, observer],
    )
    .await;
}

/// The holder's process is frozen past its session timeout: the server expires the session,
/// the next holder gets the lock with a higher fence, and the frozen one, once thawed, is
/// told of its loss and cannot write with its stale fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_process_frozen_past_its_session_is_deposed_and_told() {
    let zk = ZkServer::start().await;
    let resource = RedisServer::start().await;
    let session = Duration::from_secs(2);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .zookeeper(&zk.connect_string(), session)
        .lease(Duration::from_secs(2))
        .op_timeout(Duration::from_millis(1500))
        .hold(Duration::from_millis(500), 3)
        .duration(Duration::from_secs(14));
    crate::frozen::a_frozen_holder_is_deposed_and_told("zk-pause", &spec, session).await;
}

/// The leader of a 3-member ensemble is killed while 3 worker processes contend: no overlap,
/// no stale write, fences increasing (the checker), and locks granted after the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_under_load_breaks_no_rule_of_the_history() {
    let zk = ZkEnsemble::start(3).await;
    let resource = RedisServer::start().await;
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .zookeeper(&zk.connect_string(), Duration::from_secs(4))
        .lease(Duration::from_secs(4))
        .op_timeout(Duration::from_millis(1500))
        .hold(Duration::from_millis(30), 2)
        .duration(Duration::from_secs(16));
    // Borrowed: the kill must not take the cluster with it (dropped, it stops every member).
    let cluster = &zk;
    crate::killed_leader::a_killed_leader_breaks_no_rule(
        "zk-failover",
        &spec,
        "zookeeper leader",
        || async {
            let leader = cluster.leader().await;
            move || cluster.member(leader).kill9()
        },
    )
    .await;
}
