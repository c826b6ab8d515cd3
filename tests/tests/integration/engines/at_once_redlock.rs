//! `lock_all` of free keys on RedLock (issue 51 item 4): each node takes every key of the
//! batch, locks and readers' shares alike, in one script call of its own, as the nodes' own
//! counters show; a batch that a majority of nodes cannot take whole leaves nothing on any
//! node; and the keys then go one by one as before.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

const SEATS: [&str; 3] = ["seat1", "seat2", "seat3"];
const VENUE: &str = "venue";

async fn redlock(servers: &[RedisServer]) -> Locker {
    Locker::builder()
        .redlock(servers.iter().map(RedisServer::url))
        .op_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("redlock")
}

/// The scripts a node ran so far.
async fn script_calls(node: &RedisServer) -> u64 {
    node.info_stat("cmdstat_evalsha").await + node.info_stat("cmdstat_eval").await
}

async fn scripts_per_node(nodes: &[RedisServer]) -> Vec<u64> {
    let mut calls = Vec::with_capacity(nodes.len());
    for node in nodes {
        calls.push(script_calls(node).await);
    }
    calls
}

/// Store-observed: the three seats and the venue's share of one `lock_all` cost each node one
/// script call for the batch (taken one by one, before issue 51's item 4 was done on RedLock,
/// four), plus the fence round's raises on the nodes that lag. The
/// leases are real on every node, the fences are each key's own, and the release frees all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lock_all_takes_every_key_in_one_script_call_per_node() {
    let nodes = RedisServer::start_many(3).await;
    let (a, b) = (redlock(&nodes).await, redlock(&nodes).await);
    // The scripts loaded and the lockers' descriptions written before counting.
    let warm = a
        .lock_all(["warm1", "warm2"])
        .read_keys(["warm3"])
        .acquire()
        .await
        .expect("warm-up");
    warm.release().await.expect("warm-up released");

    let before = scripts_per_node(&nodes).await;
    let guard = a
        .lock_all(SEATS)
        .read_keys([VENUE])
        .acquire()
        .await
        .expect("free keys");
    let after = scripts_per_node(&nodes).await;
    let per_node: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // Each node took the batch in one script call. A node's fences start at its own clock (in
    // microseconds), so the node whose clock read latest answered the highest fence of every
    // key and needs nothing more; each other node is raised to those fences, one call per key
    // (the fence round of a single lock). Taken key by key, every node would have run at
    // least one acquire per key: 4.
    let keys = SEATS.len() as u64 + 1;
    assert_eq!(
        per_node.iter().min(),
        Some(&1),
        "one node ran the batch alone: {per_node:?}"
    );
    assert!(
        per_node.iter().all(|&n| n == 1 || n == 1 + keys),
        "each node ran the batch in one call, and a raise per key where it lagged: {per_node:?}"
    );
    for node in &nodes {
        assert_eq!(
            node.keys("leasehold:lock:{seat*").await.len(),
            3,
            "every seat is locked on every node"
        );
    }
    let fences: Vec<(&str, u64)> = guard.fences().collect();
    assert_eq!(fences.len(), 4);
    assert!(fences.iter().all(|(_, fence)| *fence > 0));
    // The leases are real: a reader shares the venue, a writer of a seat or of the venue is
    // kept out.
    let reader = b.read_lock(VENUE).try_acquire().await.unwrap();
    assert!(reader.is_some(), "readers share the venue");
    drop(reader);
    assert!(b.lock(SEATS[0]).try_acquire().await.unwrap().is_none());
    assert!(b.write_lock(VENUE).try_acquire().await.unwrap().is_none());
    guard.release().await.expect("released");
    let again = b
        .lock_all(SEATS)
        .read_keys([VENUE])
        .try_acquire()
        .await
        .unwrap();
    again
        .expect("every key free after the release")
        .release()
        .await
        .unwrap();
}

/// A seat held on a majority of the nodes: the batch is taken whole on no majority, so every
/// node gives back what it took (the node where the seat was free took the batch whole) and
/// nothing of the batch is left anywhere; the other seats and the venue are free at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_batch_without_a_majority_leaves_nothing_on_any_node() {
    let nodes = RedisServer::start_many(3).await;
    let a = redlock(&nodes).await;
    // Held by other lockers on two of the three nodes only (a locker on each of them alone):
    // on the third node the batch finds every key free and takes it whole.
    let mut seats = Vec::new();
    for node in &nodes[..2] {
        let alone = Locker::builder()
            .url(node.url())
            .build()
            .await
            .expect("a locker on one node");
        seats.push(alone.lock(SEATS[1]).acquire().await.expect("the seat"));
    }
    let taken = a
        .lock_all(SEATS)
        .read_keys([VENUE])
        .try_acquire()
        .await
        .unwrap();
    assert!(taken.is_none(), "a seat is held on a majority");
    for (i, node) in nodes.iter().enumerate() {
        let locks = node.keys("leasehold:lock:*").await;
        let expected = usize::from(i < 2);
        assert_eq!(
            locks.len(),
            expected,
            "node {i}: only the other locker's seat is left: {locks:?}"
        );
        assert!(
            node.keys("leasehold:readers:*").await.is_empty(),
            "node {i}: the venue's share was given back"
        );
    }
    let others = a
        .lock_all([SEATS[0], SEATS[2]])
        .read_keys([VENUE])
        .try_acquire()
        .await
        .unwrap();
    others
        .expect("the free keys were given back")
        .release()
        .await
        .unwrap();
    for seat in seats {
        seat.release().await.unwrap();
    }
}
