//! Concurrent acquires' creates sent together on ZooKeeper (issue 49): one `multi` carries the
//! creates of many attempts (each writer's with its fence record), so they share one
//! transaction, and each attempt still gets its own answer; and a shared `multi` that the
//! server applies after its callers gave up leaves nothing. Judged by what ZooKeeper holds: the
//! contenders' creation zxids (one transaction, one zxid), and its own create events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::harness::{TcpProxy, ZkServer};
use zookeeper_client as zk;

use super::grouped_creates::{
    attempts_over_a_slow_link, cycles_alone, refused_behind_then_above, seats_at_once, LATE,
};
use super::zookeeper::locker;

const SESSION: Duration = Duration::from_secs(9);

/// How long the plain client's calls may take.
pub(super) const BOUND: Duration = Duration::from_secs(20);

/// A plain client of `server`, beside the lockers, to read what it holds (its connect
/// bounded at 20 s; bound its calls with [`BOUND`] too).
pub(super) async fn observer(server: &ZkServer) -> zk::Client {
    let hosts = server.connect_string();
    let connector = zk::Client::connector();
    let connecting = connector.with_session_timeout(SESSION).connect(&hosts);
    tokio::time::timeout(BOUND, connecting)
        .await
        .expect("a plain client within 20 s")
        .expect("a plain client")
}

/// Each lock container whose name has `part`, with the creation zxid of each of its children.
async fn contenders(client: &zk::Client, part: &str) -> BTreeMap<String, Vec<i64>> {
    tokio::time::timeout(BOUND, listed(client, part))
        .await
        .expect("ZooKeeper listed the contenders within 20 s")
}

async fn listed(client: &zk::Client, part: &str) -> BTreeMap<String, Vec<i64>> {
    let mut found = BTreeMap::new();
    let containers = match client.list_children("/leasehold").await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(e) => panic!("listing /leasehold: {e}"),
    };
    for container in containers.into_iter().filter(|c| c.contains(part)) {
        let parent = format!("/leasehold/{container}");
        let children = match client.list_children(&parent).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("listing {parent}: {e}"),
        };
        let mut zxids = Vec::new();
        for child in children {
            if let Ok(Some(stat)) = client.check_stat(&format!("{parent}/{child}")).await {
                zxids.push(stat.czxid);
            }
        }
        found.insert(container, zxids);
    }
    found
}

/// Sixteen tasks acquire sixteen seats at once, seat 3 held by another locker: the fifteen
/// free seats are granted with fewer creation zxids than contenders (each create alone is a
/// transaction of its own, with a zxid of its own), seat 3 waits in its queue without holding
/// up the others and is granted after the release with a fence above the holder's, and every
/// seat is free after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_share_one_multi_each_with_its_own_answer() {
    let server = ZkServer::start().await;
    let (a, b) = (
        locker(&server.connect_string(), SESSION).await,
        locker(&server.connect_string(), SESSION).await,
    );
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let held = b.lock("seat:3").acquire().await.unwrap();
    let zk = observer(&server).await;
    let seats = seats_at_once(&a, &b, held, || contenders(&zk, "seat:")).await;
    let free: Vec<i64> = seats
        .iter()
        .filter(|(container, _)| !container.ends_with("{seat:3}"))
        .flat_map(|(_, zxids)| zxids.iter().copied())
        .collect();
    assert_eq!(free.len(), 15, "one contender per free seat: {seats:?}");
    let transactions: BTreeSet<i64> = free.iter().copied().collect();
    assert!(
        transactions.len() < 15,
        "{} transactions for 15 free seats' creates: none were shared ({seats:?})",
        transactions.len()
    );
}

/// Attempts whose creates, alone and shared, go over a link that takes a second each way
/// ([`attempts_over_a_slow_link`]): ZooKeeper applies them, and each attempt fails as unavailable
/// with its outcome unknown. What they made belongs to nobody: each attempt's give-back finds its
/// contender by its name (a shared `multi` that fails fails every attempt in it, each unanswered),
/// so the server ends with no contender of theirs. The premise (the creates landed) is read from
/// the server's own create events, watched beside the link; rounds go on until one saw a create
/// land, at most five, and every round must end with none left. Another locker holds the locks
/// meanwhile, so their containers are there, as in steady state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_creates_applied_after_their_callers_gave_up_leave_nothing() {
    let server = ZkServer::start().await;
    let proxy = TcpProxy::start(server.addr()).await;
    let a = locker(&proxy.addr().to_string(), SESSION).await;
    let b = locker(&server.connect_string(), SESSION).await;
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let zk = observer(&server).await;
    let watching = zk.watch("/leasehold", zk::AddWatchMode::PersistentRecursive);
    let mut events = tokio::time::timeout(BOUND, watching)
        .await
        .expect("an answer within 20 s")
        .expect("a recursive watch");
    let mut landed = 0;
    for round in 0..5 {
        // Each lock held by another locker, over its own fast link, while the attempts go:
        // its container stays (ZooKeeper deletes an empty one), as in steady state, and the
        // attempts' creates, once they land, are waiters behind it.
        let mut held = Vec::new();
        for i in 0..LATE {
            held.push(b.lock(format!("late:{i}")).acquire().await.unwrap());
        }
        while tokio::time::timeout(Duration::from_millis(100), events.changed())
            .await
            .is_ok()
        {}
        attempts_over_a_slow_link(&a, &proxy).await;
        for g in held {
            g.release().await.unwrap();
        }
        // Five seconds to settle: a create that lands later is still seen (its event, and
        // the next round's listing).
        let mut left = usize::MAX;
        let mut created = 0;
        for _ in 0..50 {
            while let Ok(event) =
                tokio::time::timeout(Duration::from_millis(100), events.changed()).await
            {
                let contender = event.path.contains("late:") && event.path.contains("/n-");
                if contender && event.event_type == zk::EventType::NodeCreated {
                    created += 1;
                }
            }
            left = contenders(&zk, "late:").await.values().map(Vec::len).sum();
            if left == 0 && created > 0 {
                break;
            }
        }
        assert_eq!(
            left, 0,
            "round {round}: contenders of attempts that gave up are left"
        );
        if created > 0 {
            landed += 1;
            break;
        }
    }
    assert!(
        landed > 0,
        "in five rounds no late create landed: the premise never held"
    );
}

/// One lock's container refuses this locker (it is read-only to it: another identity's) while
/// fifteen free seats are acquired at the same moment: the `multi` the refused create shares
/// with others is refused as a whole, with nothing made, and each create is then sent alone, so
/// the refused attempt fails with `Config` and every seat is granted. Three rounds, each started
/// together behind a barrier, so that the refused create shares a `multi` with free seats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_locks_refusal_fails_no_other_attempt_beside_it() {
    let server = ZkServer::start().await;
    let a = locker(&server.connect_string(), SESSION).await;
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let zk = observer(&server).await;
    let read_only = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read());
    tokio::time::timeout(
        BOUND,
        zk.create("/leasehold/leasehold:lock:{closed}", b"", &read_only),
    )
    .await
    .expect("an answer within 20 s")
    .expect("a read-only container");
    const TASKS: usize = 16;
    for round in 0..3 {
        let start = Arc::new(tokio::sync::Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (a, start) = (a.clone(), start.clone());
                let name = match i {
                    0 => "closed".to_owned(),
                    i => format!("seat:{round}:{i}"),
                };
                tokio::spawn(async move {
                    start.wait().await;
                    let g = a.lock(&name).wait(Duration::from_secs(5)).acquire().await?;
                    g.release().await?;
                    Ok::<_, LockError>(())
                })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            let outcome = t.await.unwrap();
            match i {
                0 => assert!(
                    matches!(outcome, Err(LockError::Config { .. })),
                    "round {round}: the refused lock answered {outcome:?}"
                ),
                i => assert!(
                    outcome.is_ok(),
                    "round {round}: seat {i}, beside the refused lock, answered {outcome:?}"
                ),
            }
        }
    }
}

/// Requests ZooKeeper has received from clients so far (`mntr`'s `zk_packets_received`).
async fn packets_received(server: &ZkServer) -> u64 {
    let mntr = server.four_letter_word("mntr").await.expect("mntr");
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_packets_received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr:\n{mntr}"))
}

/// Uncontended cycles of one locker, alone on the server.
const CYCLES: u64 = 100;

/// A writer alone in its lock's container holds the lock from its create's answer, without a
/// listing: the fence record's write, in the writer's own transaction, answers with the
/// container's child count, and one child is the create itself. Judged by ZooKeeper's own
/// request counter: a hundred uncontended cycles are a create and a delete each (at most 2.5
/// requests a cycle with the session's pings; with a listing after each create, 3). The
/// answer's place is a holder's only when nothing stands ahead: a writer behind a held write
/// or a held read, or behind both a held read and a waiting writer, is refused at once, and
/// each holds after the locks ahead go, with a fence above theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_writer_holds_from_its_creates_answer_without_a_listing() {
    let server = ZkServer::start().await;
    let a = locker(&server.connect_string(), SESSION).await;
    let b = locker(&server.connect_string(), SESSION).await;
    // The lock's container exists from here on while a lock of the key is held.
    let warm = a.lock("alone").acquire().await.unwrap();
    warm.release().await.unwrap();
    let before = packets_received(&server).await;
    cycles_alone(&a, CYCLES).await;
    let per_cycle = (packets_received(&server).await - before) as f64 / CYCLES as f64;
    assert!(
        per_cycle <= 2.5,
        "an uncontended cycle took {per_cycle:.2} requests: a listing after each create"
    );
    refused_behind_then_above(&a, &b, "ahead", false).await;
    refused_behind_then_above(&a, &b, "read", true).await;

    // Behind a held read with a writer waiting after it.
    let read = b.read_lock("shared").acquire().await.unwrap();
    assert!(a.lock("shared").try_acquire().await.unwrap().is_none());
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("shared").acquire().await })
    };
    // The waiter's create is in the queue once ZooKeeper lists two children of the lock.
    let zk = observer(&server).await;
    for _ in 0..200 {
        if contenders(&zk, "shared")
            .await
            .values()
            .map(Vec::len)
            .sum::<usize>()
            >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        contenders(&zk, "shared")
            .await
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        2,
        "the reader and the waiting writer stand in the lock's queue"
    );
    assert!(a.lock("shared").try_acquire().await.unwrap().is_none());
    read.release().await.unwrap();
    let waiter = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("the waiting writer holds within 20 s")
        .unwrap()
        .unwrap();
    assert!(a.lock("shared").try_acquire().await.unwrap().is_none());
    let waited = waiter.fence();
    waiter.release().await.unwrap();
    let last = a.lock("shared").acquire().await.unwrap();
    assert!(
        last.fence() > waited,
        "the last writer's fence is above the waiter's"
    );
    last.release().await.unwrap();
}
