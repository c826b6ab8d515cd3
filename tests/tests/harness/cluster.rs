//! The Redis Cluster harness: a cluster starts, a cluster client uses every shard, and
//! `node_for_key` names the node that serves a key.

use std::collections::BTreeSet;
use std::time::Instant;

use leasehold_tests::harness::RedisCluster;
use redis::cluster::ClusterClient;

const KEYS: usize = 200;

#[tokio::test]
async fn a_cluster_client_reads_and_writes_keys_in_every_shard() {
    let started = Instant::now();
    let cluster = RedisCluster::start(3).await;
    eprintln!("a cluster of 3 started in {:?}", started.elapsed());
    assert_eq!(cluster.nodes().len(), 3);
    assert_eq!(cluster.urls().len(), 3);

    let client = ClusterClient::new(cluster.urls()).unwrap();
    let mut conn = client.get_async_connection().await.unwrap();
    let mut slots = BTreeSet::new();
    let mut owners = BTreeSet::new();
    for i in 0..KEYS {
        let key = format!("harness:{i}");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(i)
            .query_async(&mut conn)
            .await
            .unwrap();
        slots.insert(cluster.keyslot(&key).await);
        owners.insert(cluster.node_for_key(&key).await);
    }
    for i in 0..KEYS {
        let value: usize = redis::cmd("GET")
            .arg(format!("harness:{i}"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(value, i);
    }
    assert!(slots.len() > KEYS / 2, "only {} slots used", slots.len());
    assert_eq!(owners, BTreeSet::from([0, 1, 2]), "every shard holds keys");

    let mut expected: Vec<String> = (0..KEYS).map(|i| format!("harness:{i}")).collect();
    expected.sort();
    assert_eq!(cluster.keys("harness:*").await, expected);
    // Each key lives on exactly the node `node_for_key` names.
    for (index, node) in cluster.nodes().iter().enumerate() {
        for key in node.keys("harness:*").await {
            assert_eq!(cluster.node_for_key(&key).await, index, "{key}");
        }
    }
}

#[tokio::test]
async fn node_for_key_agrees_with_moved_redirects() {
    let cluster = RedisCluster::start(3).await;
    for key in [
        "a",
        "b",
        "c",
        "lock:{order-7}",
        "{order-7}:fence",
        "x:y:z",
        "",
    ] {
        let owner = cluster.node_for_key(key).await;
        let slot = cluster.keyslot(key).await;
        for (index, node) in cluster.nodes().iter().enumerate() {
            let mut conn = node.conn().await;
            let reply: redis::RedisResult<Option<String>> =
                redis::cmd("GET").arg(key).query_async(&mut conn).await;
            if index == owner {
                assert_eq!(reply.unwrap(), None, "{key:?} on its owner {index}");
            } else {
                let err = reply.expect_err("a node that does not own the slot redirects");
                let owner_addr = cluster.nodes()[owner].addr().to_string();
                assert_eq!(
                    err.redirect_node(),
                    Some((owner_addr.as_str(), slot)),
                    "{key:?} on node {index}: {err}"
                );
            }
        }
    }
    // A hash tag pins keys to one slot, hence one node.
    assert_eq!(
        cluster.node_for_key("lock:{order-7}").await,
        cluster.node_for_key("{order-7}:fence").await
    );
}

#[tokio::test]
async fn a_cluster_with_replicas_has_one_synced_replica_per_master() {
    let started = Instant::now();
    let cluster = RedisCluster::start_with_replicas(3, 1).await;
    eprintln!(
        "a cluster of 3 masters and 3 replicas started in {:?}",
        started.elapsed()
    );
    assert_eq!(cluster.nodes().len(), 6);
    let mut roles = Vec::new();
    for node in cluster.nodes() {
        let mut conn = node.conn().await;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
        roles.push(redis::from_redis_value_ref::<String>(&role[0]).unwrap());
    }
    assert_eq!(
        roles.iter().filter(|r| *r == "master").count(),
        3,
        "{roles:?}"
    );
    assert_eq!(
        roles.iter().filter(|r| *r == "slave").count(),
        3,
        "{roles:?}"
    );
    for key in ["a", "b", "c"] {
        let owner = cluster.node_for_key(key).await;
        assert_eq!(roles[owner], "master", "{key} is served by a master");
    }
}
