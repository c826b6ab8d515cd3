//! RedLock read locks with real servers: readers' fences when the nodes' counters differ,
//! readers through a node killed and a node restarted empty, and the refusal of semaphores.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{ProxyMode, RedisServer};
use tokio::time::Instant;

use super::{Cluster, NODE_TIMEOUT};

/// A lease renewed several times over a few seconds (every 500 ms). (900 ms, renewed every
/// 300 ms, lapsed in a CI run with both cores busy with other work: a renewal that waits out a
/// dead node's 250 ms, late on a loaded machine, missed the lease.)
const SHORT_LEASE: Duration = Duration::from_millis(1500);

/// Node 0's counter runs far ahead of the others' (as after attempts that incremented only a
/// minority, or a clock ahead). A reader on nodes {0, 1} gets node 0's counter as its fence;
/// the next writer's majority {1, 2} misses node 0, and still gets a larger fence: the reader
/// raised node 1 to its fence before it was let in. Without that round node 1 and node 2 are
/// near the clock, below the reader's fence.
#[tokio::test]
async fn a_readers_fence_from_a_node_ahead_is_below_the_next_writers() {
    let cluster = Cluster::start(3).await;
    let key = "ahead";
    let writer = cluster.locker().await;
    let first = writer.write_lock(key).acquire().await.unwrap();
    let f1 = first.fence();
    first.release().await.unwrap();

    let ahead = f1 + 1_000_000_000; // 1000 s of the clock in microseconds
    let mut conn = cluster.servers[0].conn().await;
    let _: () = redis::AsyncCommands::set(&mut conn, format!("leasehold:fence:{{{key}}}"), ahead)
        .await
        .unwrap();
    cluster.proxies[2].set_mode(ProxyMode::Cut);
    let reader = cluster.locker().await;
    let read = reader.read_lock(key).acquire().await.unwrap();
    let fence = read.fence();
    assert!(
        fence >= f1,
        "reader {fence} below the writer before it {f1}"
    );
    assert_eq!(fence, ahead, "the reader's fence is its majority's highest");
    assert_eq!(
        cluster.fence_counter(1, key).await,
        ahead,
        "node 1 was raised to the reader's fence"
    );
    read.release().await.unwrap();

    cluster.proxies[2].set_mode(ProxyMode::Pass);
    cluster.proxies[0].set_mode(ProxyMode::Cut);
    let next = cluster.locker().await;
    let second = next
        .write_lock(key)
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    assert!(
        second.fence() > fence,
        "the next writer's fence {} is not above the reader's {fence}",
        second.fence()
    );
    second.release().await.unwrap();
}

/// Two readers hold over three nodes; one node is killed. Their renewals keep a majority,
/// a writer is still kept out, and once they leave it gets in with a larger fence.
#[tokio::test]
async fn readers_keep_their_majority_when_a_node_is_killed() {
    let servers = RedisServer::start_many(3).await;
    let lockers = [
        direct(&servers).await,
        direct(&servers).await,
        direct(&servers).await,
    ];
    let r1 = lockers[0]
        .read_lock("killed")
        .lease(SHORT_LEASE)
        .acquire()
        .await
        .unwrap();
    let r2 = lockers[1]
        .read_lock("killed")
        .lease(SHORT_LEASE)
        .acquire()
        .await
        .unwrap();
    servers[0].kill9();
    tokio::time::sleep(SHORT_LEASE * 3).await;
    assert!(
        r1.is_held() && r2.is_held(),
        "readers lost a majority of two"
    );
    let writer = lockers[2].write_lock("killed");
    assert!(
        writer.try_acquire().await.unwrap().is_none(),
        "a writer got in beside two readers"
    );
    let waiting = {
        let locker = lockers[2].clone();
        tokio::spawn(async move {
            locker
                .write_lock("killed")
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the writer got in while readers hold"
    );
    let top = r1.fence().max(r2.fence());
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let w = waiting
        .await
        .unwrap()
        .expect("the writer once the readers left");
    assert!(w.fence() > top, "writer {} <= reader {top}", w.fence());
    w.release().await.unwrap();
}

/// A node restarts empty (no persistence) while a reader holds. What holds:
/// - a reader that holds every node keeps a majority: a writer is still kept out, and the
///   reader's renewals go on;
/// - a reader that held only a bare majority holds a minority now (RedLock's delayed-restart
///   rule is broken: the node came back within the lease): a writer can get in, the reader
///   learns of the loss at its next renewal (a third of the lease later at most), and the
///   writer's fence is above the reader's, so a fenced resource refuses the reader's writes
///   after the writer's.
#[tokio::test]
async fn a_node_restarted_empty_during_a_readers_hold() {
    let cluster = Cluster::start(3).await;
    let reader = cluster.locker().await;
    let writer = cluster.locker().await;

    let everywhere = reader
        .read_lock("restart:all")
        .lease(SHORT_LEASE)
        .acquire()
        .await
        .unwrap();
    cluster.servers[0].restart().await;
    assert!(
        writer
            .write_lock("restart:all")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a writer got in beside a reader of two nodes"
    );
    tokio::time::sleep(SHORT_LEASE * 3).await;
    assert!(everywhere.is_held(), "the reader lost two nodes of three");
    everywhere.release().await.unwrap();

    cluster.proxies[2].set_mode(ProxyMode::Cut);
    let bare = cluster.locker().await;
    let read = bare
        .read_lock("restart:bare")
        .lease(SHORT_LEASE)
        .acquire()
        .await
        .unwrap();
    cluster.proxies[2].set_mode(ProxyMode::Pass);
    cluster.servers[0].restart().await;
    let fresh = cluster.locker().await;
    let write = fresh
        .write_lock("restart:bare")
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .expect("a writer on the restarted node and the one the reader missed");
    assert!(
        write.fence() > read.fence(),
        "writer {} <= reader {}",
        write.fence(),
        read.fence()
    );
    let bound = SHORT_LEASE / 3 + NODE_TIMEOUT * 3 + Duration::from_secs(2);
    let start = Instant::now();
    tokio::time::timeout(bound, read.lost())
        .await
        .unwrap_or_else(|_| panic!("the reader did not learn of its loss within {bound:?}"));
    assert!(!read.is_held());
    tracing::debug!(after = ?start.elapsed(), "the reader saw its loss");
    write.release().await.unwrap();
}

/// A reader let in by a minority (writers hold the other nodes) is not in, and gives its share
/// back: the node that let it in holds nothing of it afterwards.
#[tokio::test]
async fn a_minority_of_shares_is_given_back() {
    let cluster = Cluster::start(3).await;
    let key = "minority";
    for node in [1, 2] {
        let mut conn = cluster.servers[node].conn().await;
        let _: () = redis::AsyncCommands::set_ex(
            &mut conn,
            format!("leasehold:lock:{{{key}}}"),
            "someone-else-holds-this-lock-now",
            30,
        )
        .await
        .unwrap();
    }
    let reader = cluster.locker().await;
    let got = reader.read_lock(key).try_acquire().await.unwrap();
    assert!(got.is_none(), "a reader in on one node of three");
    let mut conn = cluster.servers[0].conn().await;
    let (lock, readers): (Option<String>, u64) = redis::pipe()
        .get(format!("leasehold:lock:{{{key}}}"))
        .zcard(format!("leasehold:readers:{{{key}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((lock, readers), (None, 0), "node 0 kept the share");
}

/// Semaphores are refused on RedLock, and the refusal says why.
#[tokio::test]
async fn semaphores_are_refused_with_the_reason() {
    let servers = RedisServer::start_many(3).await;
    let locker = direct(&servers).await;
    let e = locker.semaphore("sem", 2).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("semaphores are not supported on redlock over")
            && text.contains("admit more holders than the limit")
            && text.contains("consensus"),
        "{text}"
    );
    assert!(locker.capabilities().read_locks && locker.capabilities().leader_election);
    assert!(!locker.capabilities().semaphores);
}

/// A RedLock locker straight to the servers (a killed server refuses connections at once).
async fn direct(servers: &[RedisServer]) -> Locker {
    Locker::builder()
        .redlock(servers.iter().map(|s| s.url()))
        .op_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("redlock locker")
}
