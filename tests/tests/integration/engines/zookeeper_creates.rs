//! Concurrent acquires' creates sent together on ZooKeeper (issue 49): one `multi` carries the
//! creates of many attempts (each writer's with its fence record), so they share one
//! transaction, and each attempt still gets its own answer; and a shared `multi` that the
//! server applies after its callers gave up leaves nothing. Judged by what ZooKeeper holds: the
//! contenders' creation zxids (one transaction, one zxid), and its own create events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{ProxyMode, TcpProxy, ZkServer};
use zookeeper_client as zk;

async fn locker(hosts: &str) -> Locker {
    Locker::builder()
        .zookeeper(hosts)
        .session_timeout(Duration::from_secs(9))
        .op_timeout(Duration::from_millis(1500))
        .connect_timeout(Duration::from_secs(5))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("locker on zookeeper")
}

/// A plain client of `server`, beside the lockers, to read what it holds.
async fn observer(server: &ZkServer) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(9))
        .connect(&server.connect_string())
        .await
        .expect("a plain client")
}

/// Each lock container whose name has `part`, with the creation zxid of each of its children.
async fn contenders(client: &zk::Client, part: &str) -> BTreeMap<String, Vec<i64>> {
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
        locker(&server.connect_string()).await,
        locker(&server.connect_string()).await,
    );
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let held = b.lock("seat:3").acquire().await.unwrap();
    const TASKS: usize = 16;
    let start = Arc::new(tokio::sync::Barrier::new(TASKS));
    // The fifteen free seats are held until all of them are granted, and read while held.
    let granted = Arc::new(tokio::sync::Barrier::new(TASKS));
    let read = Arc::new(tokio::sync::Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (a, start, granted, read) =
                (a.clone(), start.clone(), granted.clone(), read.clone());
            tokio::spawn(async move {
                start.wait().await;
                let g = a.lock(format!("seat:{i}")).acquire().await.unwrap();
                if i != 3 {
                    granted.wait().await;
                    read.wait().await;
                }
                let fence = g.fence();
                g.release().await.unwrap();
                fence
            })
        })
        .collect();
    // The fifteen are granted while seat 3 is still held (the barriers' last waits are ours).
    granted.wait().await;
    let zk = observer(&server).await;
    let seats = contenders(&zk, "seat:").await;
    read.wait().await;
    let free: Vec<i64> = seats
        .iter()
        .filter(|(container, _)| !container.ends_with("{seat:3}"))
        .flat_map(|(_, zxids)| zxids.iter().copied())
        .collect();
    assert_eq!(
        free.len(),
        TASKS - 1,
        "one contender per free seat: {seats:?}"
    );
    let transactions: BTreeSet<i64> = free.iter().copied().collect();
    assert!(
        transactions.len() < TASKS - 1,
        "{} transactions for {} free seats' creates: none were shared ({seats:?})",
        transactions.len(),
        TASKS - 1
    );
    let holders_fence = held.fence();
    held.release().await.unwrap();
    let mut fences = Vec::new();
    for t in tasks {
        fences.push(t.await.unwrap());
    }
    assert!(fences.iter().all(|&f| f > 0), "{fences:?}");
    assert!(
        fences[3] > holders_fence,
        "seat 3's fence {} after its holder's {holders_fence}",
        fences[3]
    );
    for i in 0..TASKS {
        let g = b.lock(format!("seat:{i}")).try_acquire().await.unwrap();
        assert!(g.is_some(), "seat {i} was left taken");
        g.unwrap().release().await.unwrap();
    }
}

/// Attempts whose creates, alone and shared, go over a link that takes a second each way:
/// ZooKeeper applies them a second after they were sent, and their answers would come a second
/// later, past the operation timeout (1.5 s), so each attempt fails as unavailable with its
/// outcome unknown. What they made belongs to nobody: each attempt's give-back finds its
/// contender by its name (a shared `multi` that fails fails every attempt in it, each
/// unanswered), so the server ends with no contender of theirs. The premise (the creates
/// landed) is read from the server's own create events, watched beside the link; rounds go on
/// until one saw a create land, at most five, and every round must end with none left. Another
/// locker holds the locks meanwhile, so their containers are there, as in steady state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_creates_applied_after_their_callers_gave_up_leave_nothing() {
    let server = ZkServer::start().await;
    let proxy = TcpProxy::start(server.addr()).await;
    let a = locker(&proxy.addr().to_string()).await;
    let b = locker(&server.connect_string()).await;
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let zk = observer(&server).await;
    let mut events = zk
        .watch("/leasehold", zk::AddWatchMode::PersistentRecursive)
        .await
        .expect("a recursive watch");
    const TASKS: usize = 8;
    let mut landed = 0;
    for round in 0..5 {
        // Each lock held by another locker, over its own fast link, while the attempts go:
        // its container stays (ZooKeeper deletes an empty one), as in steady state, and the
        // attempts' creates, once they land, are waiters behind it.
        let mut held = Vec::new();
        for i in 0..TASKS {
            held.push(b.lock(format!("late:{i}")).acquire().await.unwrap());
        }
        while tokio::time::timeout(Duration::from_millis(100), events.changed())
            .await
            .is_ok()
        {}
        proxy.set_mode(ProxyMode::Delay(Duration::from_secs(1)));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let a = a.clone();
                tokio::spawn(async move {
                    a.lock(format!("late:{i}"))
                        .wait(Duration::from_millis(100))
                        .acquire()
                        .await
                })
            })
            .collect();
        for t in tasks {
            let outcome = t.await.unwrap();
            assert!(
                outcome.as_ref().is_err_and(LockError::is_unavailable),
                "not failed as unavailable over a link slower than the operation timeout: \
                 {outcome:?}"
            );
        }
        proxy.set_mode(ProxyMode::Pass);
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
    let a = locker(&server.connect_string()).await;
    let warm = a.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    let zk = observer(&server).await;
    let read_only = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read());
    zk.create("/leasehold/leasehold:lock:{closed}", b"", &read_only)
        .await
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
