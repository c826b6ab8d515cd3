//! etcd under faults, with worker processes and the history checker (as `zookeeper` does for
//! ZooKeeper): a holder process frozen with SIGSTOP past its
//! etcd lease's TTL, and the leader of a 3-member cluster killed under load. The checker finds
//! any overlap of believed holdings, any fence that goes back and any stale write the fenced
//! resource accepted.

use std::time::Duration;

use leasehold_tests::harness::{EtcdCluster, EtcdServer, RedisServer};
use leasehold_tests::history::WorkerSpec;

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
