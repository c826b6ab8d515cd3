//! etcd under faults, with worker processes and the history checker (as `zookeeper` does for
//! ZooKeeper): a holder process frozen with SIGSTOP past its
//! etcd lease's TTL, and the leader of a 3-member cluster killed under load. The checker finds
//! any overlap of believed holdings, any fence that goes back and any stale write the fenced
//! resource accepted.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{EtcdCluster, EtcdServer, RedisServer};
use leasehold_tests::history::WorkerSpec;

/// A worker spec on one etcd server with a lease TTL of `ttl`, and a locker of this process
/// on it.
async fn sessions(
    etcd: &EtcdServer,
    resource: &RedisServer,
    ttl: Duration,
) -> (WorkerSpec, Locker) {
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .etcd(&[etcd.endpoint()], ttl)
        .lease(ttl)
        .op_timeout(Duration::from_millis(1500));
    let locker = Locker::builder()
        .etcd([etcd.endpoint()])
        .session_timeout(ttl)
        .build()
        .await
        .unwrap();
    (spec, locker)
}

/// A permit holder's process is frozen past its lease's TTL: etcd expires the lease and its
/// key, and the permit comes back with a larger fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_holder_frozen_past_its_lease_ttl_gives_the_permit_back() {
    let etcd = EtcdServer::start().await;
    let resource = RedisServer::start().await;
    let ttl = Duration::from_secs(2);
    let (spec, locker) = sessions(&etcd, &resource, ttl).await;
    crate::zookeeper_etcd::a_frozen_permit_holder_gives_the_permit_back(
        "etcd-permit-pause",
        &spec,
        ttl,
        &locker,
    )
    .await;
}

/// A leader's process is frozen past its lease's TTL: the next campaigner leads with a larger
/// term, and an observer sees it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_frozen_past_its_lease_ttl_is_replaced_and_observed() {
    let etcd = EtcdServer::start().await;
    let resource = RedisServer::start().await;
    let ttl = Duration::from_secs(2);
    let (spec, campaigner) = sessions(&etcd, &resource, ttl).await;
    let (_, other) = sessions(&etcd, &resource, ttl).await;
    let (_, observer) = sessions(&etcd, &resource, ttl).await;
    crate::zookeeper_etcd::a_frozen_leader_is_replaced_with_a_larger_term_and_observed(
        "etcd-leader-pause",
        &spec,
        ttl,
        &[campaigner, other, observer],
    )
    .await;
}

/// The holder's process is frozen past its etcd lease's TTL: etcd expires the lease and its
/// keys, the next holder gets the lock with a higher fence, and the frozen one, once thawed,
/// is told of its loss and cannot write with its stale fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_process_frozen_past_its_lease_ttl_is_deposed_and_told() {
    let etcd = EtcdServer::start().await;
    let resource = RedisServer::start().await;
    let ttl = Duration::from_secs(2);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .etcd(&[etcd.endpoint()], ttl)
        .lease(Duration::from_secs(2))
        .op_timeout(Duration::from_millis(1500))
        .hold(Duration::from_millis(500), 3)
        .duration(Duration::from_secs(14));
    crate::frozen::a_frozen_holder_is_deposed_and_told("etcd-pause", &spec, ttl).await;
}

/// The leader of a 3-member cluster is killed while 3 worker processes contend: no overlap,
/// no stale write, fences increasing (the checker), and locks granted after the election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_under_load_breaks_no_rule_of_the_history() {
    let etcd = EtcdCluster::start(3).await;
    let resource = RedisServer::start().await;
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .etcd(&etcd.endpoints(), Duration::from_secs(4))
        .lease(Duration::from_secs(4))
        .op_timeout(Duration::from_millis(1500))
        .hold(Duration::from_millis(30), 2)
        .duration(Duration::from_secs(16));
    // Borrowed: the kill must not take the cluster with it (dropped, it stops every member).
    let cluster = &etcd;
    crate::killed_leader::a_killed_leader_breaks_no_rule(
        "etcd-failover",
        &spec,
        "etcd leader",
        || async {
            let leader = cluster.leader().await;
            move || cluster.member(leader).kill9()
        },
    )
    .await;
}
