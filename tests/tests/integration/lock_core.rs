//! The core runtime against real `redis-server` processes: exclusion, release on every path,
//! leases and the watchdog, fencing, waiting, cancellation, and Redis failures. Read-write and
//! multi-key locks are in `read_write` and `multi`, which share the helpers of this file.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer, TcpProxy};
use redis::AsyncCommands;
use tokio::time::Instant;

pub(crate) async fn locker(url: &str) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_millis(500))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("connect")
}

/// Runs a read-sleep-write on a counter in Redis under the lock from `tasks` tasks and
/// checks that no increment was lost and no two bodies overlapped.
async fn exclusive_counter(lockers: Vec<Locker>, srv: &RedisServer, tasks: usize) {
    let in_body = Arc::new(AtomicUsize::new(0));
    let max_in_body = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..tasks {
        let locker = lockers[i % lockers.len()].clone();
        let mut conn = srv.conn().await;
        let (in_body, max_in_body) = (in_body.clone(), max_in_body.clone());
        handles.push(tokio::spawn(async move {
            let guard = locker.lock("counter").acquire().await.expect("acquire");
            let now = in_body.fetch_add(1, Ordering::SeqCst) + 1;
            max_in_body.fetch_max(now, Ordering::SeqCst);
            let n: i64 = conn.get("counter-value").await.unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(2)).await;
            let _: () = conn.set("counter-value", n + 1).await.unwrap();
            in_body.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.expect("release");
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let mut conn = srv.conn().await;
    let n: i64 = conn.get("counter-value").await.unwrap();
    assert_eq!(
        n, tasks as i64,
        "lost increments: the lock let bodies overlap"
    );
    assert_eq!(max_in_body.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_counter_under_100_tasks_one_locker() {
    let srv = RedisServer::start().await;
    exclusive_counter(vec![locker(&srv.url()).await], &srv, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_counter_under_100_tasks_four_lockers() {
    // Four lockers are four independent clients: exclusion comes from Redis alone.
    let srv = RedisServer::start().await;
    let mut lockers = Vec::new();
    for _ in 0..4 {
        lockers.push(locker(&srv.url()).await);
    }
    exclusive_counter(lockers, &srv, 100).await;
}

#[tokio::test]
async fn exclusive_counter_across_os_processes() {
    let srv = RedisServer::start().await;
    let worker = env!("CARGO_BIN_EXE_lock_worker");
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(worker)
                .args([srv.url().as_str(), "shared", "shared-counter", "40"])
                .spawn()
                .expect("spawn lock_worker")
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "worker failed: {status}");
    }
    let mut conn = srv.conn().await;
    let n: i64 = conn.get("shared-counter").await.unwrap();
    assert_eq!(n, 120);
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

async fn assert_free(locker: &Locker, key: &str) {
    // The release of a dropped guard runs in the background: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match locker.lock(key).try_acquire().await.unwrap() {
            Some(g) => return g.release().await.unwrap(),
            None if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(5)).await,
            None => panic!("{key} is still locked"),
        }
    }
}

#[derive(Debug)]
struct Failed;

async fn body_with_question_mark(locker: &Locker) -> Result<(), Failed> {
    let _guard = locker.lock("q").acquire().await.unwrap();
    Err(Failed)?;
    Ok(())
}

async fn body_with_early_return(locker: &Locker, stop: bool) -> u32 {
    let _guard = locker.lock("early").acquire().await.unwrap();
    if stop {
        return 1;
    }
    2
}

#[tokio::test]
async fn every_exit_path_releases() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let other = self::locker(&srv.url()).await;

    assert!(body_with_question_mark(&locker).await.is_err());
    assert_free(&other, "q").await;

    assert_eq!(body_with_early_return(&locker, true).await, 1);
    assert_free(&other, "early").await;

    let l = locker.clone();
    let panicked = tokio::spawn(async move {
        let _guard = l.lock("panic").acquire().await.unwrap();
        panic!("body panics while holding the lock");
    })
    .await;
    assert!(panicked.is_err());
    assert_free(&other, "panic").await;

    let l = locker.clone();
    let body = async move {
        let _guard = l.lock("dropped").acquire().await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
    };
    assert!(tokio::time::timeout(Duration::from_millis(50), body)
        .await
        .is_err());
    assert_free(&other, "dropped").await;
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test]
async fn stale_release_after_expiry_fails_and_leaves_new_holder_alone() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let stale = a
        .lock("k")
        .lease(Duration::from_millis(100))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    stale.lost().await;
    assert!(!stale.is_held());
    let fresh = b
        .lock("k")
        .wait(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    assert!(fresh.fence() > stale.fence());
    assert!(matches!(stale.release().await, Err(LockError::Lost { .. })));
    assert!(fresh.is_held());
    assert_eq!(
        srv.keys("leasehold:lock:*").await.len(),
        1,
        "new holder's key kept"
    );
    assert!(a.lock("k").try_acquire().await.unwrap().is_none());
    fresh.release().await.unwrap();
}

#[tokio::test]
async fn watchdog_keeps_a_short_lease_through_a_long_body_then_stops() {
    let srv = RedisServer::start().await;
    let holder = locker(&srv.url()).await;
    let other = locker(&srv.url()).await;
    let guard = holder
        .lock("long")
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    let mut conn = srv.conn().await;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(guard.is_held(), "lease lost at {:?}", start.elapsed());
        assert!(other.lock("long").try_acquire().await.unwrap().is_none());
        let pttl: i64 = conn.pttl("leasehold:lock:{long}").await.unwrap();
        assert!(pttl > 0 && pttl <= 1000, "pttl {pttl}");
    }
    guard.release().await.unwrap();
    // After the release the watchdog sends nothing more for this lease.
    let before = srv.info_stat("cmdstat_evalsha").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let after = srv.info_stat("cmdstat_evalsha").await;
    assert_eq!(before, after, "renewals continued after release");
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

/// One renewal script call carries leases of different lengths (renew.lua takes one length
/// per call, so the watchdog splits its batch by length): each key keeps its own lease, a key
/// someone waits for (`token+`) is renewed too, and a key taken over by someone else is left
/// exactly as it is while only its lease is reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_each_lease_length_and_leave_other_owners_alone() {
    let srv = RedisServer::start().await;
    let holder = locker(&srv.url()).await;
    let waiter = locker(&srv.url()).await;
    let (short, long) = (Duration::from_millis(900), Duration::from_millis(1800));
    let mut guards = Vec::new();
    for i in 0..40 {
        let lease = if i % 2 == 0 { short } else { long };
        let key = format!("mixed-{i}");
        guards.push((
            key.clone(),
            lease,
            holder.lock(&key).lease(lease).acquire().await.unwrap(),
        ));
    }
    // Someone waits for mixed-0, so its value is the token with a `+` after it.
    let wait = tokio::spawn(async move {
        waiter
            .lock("mixed-0")
            .wait(Duration::from_secs(30))
            .acquire()
            .await
            .map(|g| g.fence())
    });
    let mut conn = srv.conn().await;
    let start = Instant::now();
    let mut longest_long = 0;
    while start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for (key, lease, guard) in &guards {
            assert!(guard.is_held(), "{key} lost at {:?}", start.elapsed());
            let pttl: i64 = conn
                .pttl(format!("leasehold:lock:{{{key}}}"))
                .await
                .unwrap();
            let max = lease.as_millis() as i64;
            assert!(
                pttl > 0 && pttl <= max,
                "{key}: pttl {pttl} with a lease of {max} ms"
            );
            if *lease == long {
                longest_long = longest_long.max(pttl);
            }
        }
    }
    assert!(
        longest_long > short.as_millis() as i64,
        "long leases renewed to their length"
    );
    let marked: String = conn.get("leasehold:lock:{mixed-0}").await.unwrap();
    assert!(marked.ends_with('+'), "the waiter marked mixed-0: {marked}");

    // Someone else takes mixed-1 over (no expiry): only that lease is lost, and its key keeps
    // the other owner's value and no expiry.
    let stolen = "leasehold:lock:{mixed-1}";
    let _: () = conn.set(stolen, "someone-else").await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), guards[1].2.lost())
        .await
        .expect("the taken-over lease is reported lost");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let value: String = conn.get(stolen).await.unwrap();
    assert_eq!(value, "someone-else");
    assert_eq!(
        conn.pttl::<_, i64>(stolen).await.unwrap(),
        -1,
        "renewals left it alone"
    );
    for (key, _, guard) in guards.iter().filter(|(k, _, _)| k != "mixed-1") {
        assert!(guard.is_held(), "{key} lost with another key's lease");
    }
    for (key, _, guard) in guards {
        if key != "mixed-1" {
            guard.release().await.unwrap();
        }
    }
    wait.await
        .unwrap()
        .expect("the waiter takes mixed-0 after the release");
}

#[tokio::test]
async fn watchdog_off_makes_the_lease_a_hard_maximum() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let guard = locker
        .lock("hard")
        .lease(Duration::from_millis(200))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let start = Instant::now();
    guard.lost().await;
    let lasted = start.elapsed();
    assert!(lasted > Duration::from_millis(150), "{lasted:?}");
    assert!(lasted < Duration::from_millis(400), "{lasted:?}");
    // However late the timer fires, the guard stops counting as held before Redis expires
    // the key (200 ms after the acquire was sent, which was before `start`).
    tokio::time::sleep_until(start + Duration::from_millis(197)).await;
    assert!(!guard.is_held());
    tokio::time::sleep_until(start + Duration::from_millis(250)).await;
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let remote = self::locker(&srv.url()).await;
    // A holder in another "process" keeps the lock busy while acquires are cancelled at
    // many different points: queued locally, contending in Redis, mid-round-trip.
    let holder = remote.lock("c").acquire().await.unwrap();
    let mut handles = Vec::new();
    for i in 0..200u64 {
        let locker = locker.clone();
        handles.push(tokio::spawn(async move {
            let cancel_after = Duration::from_micros((i * 137) % 3000);
            let _ = tokio::time::timeout(cancel_after, locker.lock("c").acquire()).await;
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    holder.release().await.unwrap();
    // Also cancel acquires that race with a free lock (some of them win the round trip).
    for i in 0..200u64 {
        let cancel_after = Duration::from_micros((i * 53) % 400);
        let _ = tokio::time::timeout(cancel_after, locker.lock("c").acquire()).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        srv.keys("leasehold:lock:*").await.is_empty(),
        "a cancelled acquire left a lock"
    );
    // The local queue is not stuck either: the same locker takes the lock at once.
    let g = locker
        .lock("c")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .expect("queue stalled by a cancelled waiter");
    g.release().await.unwrap();
    let renewals = srv.info_stat("cmdstat_evalsha").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        srv.info_stat("cmdstat_evalsha").await,
        renewals,
        "no renewals left"
    );
}

#[tokio::test]
async fn paused_holder_loses_its_lease_and_cannot_release_the_next_one() {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let paused = locker(&proxy.url()).await;
    let next = locker(&srv.url()).await;
    let guard = paused
        .lock("p")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    // The holder's traffic stalls, as if the process were paused or cut off.
    proxy.set_mode(ProxyMode::Stall);
    let lost_in = Instant::now();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost() never fired");
    assert!(lost_in.elapsed() < Duration::from_millis(1000));
    assert!(!guard.is_held());
    let taken = next
        .lock("p")
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    // The safety property: by the time anyone else holds the lock, the paused holder no
    // longer believes it does.
    assert!(!guard.is_held());
    assert!(taken.fence() > guard.fence());
    proxy.set_mode(ProxyMode::Pass);
    let stale = guard.release().await;
    assert!(
        matches!(
            stale,
            Err(LockError::Lost { .. }) | Err(LockError::Unavailable { .. })
        ),
        "{stale:?}"
    );
    assert!(taken.is_held());
    assert_eq!(srv.keys("leasehold:lock:*").await.len(), 1);
    taken.release().await.unwrap();
}

#[tokio::test]
async fn dead_redis_is_unavailable_in_bounded_time_and_restart_recovers() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    locker
        .lock("r")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    srv.kill9();
    let start = Instant::now();
    let err = locker
        .lock("r")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(300 + 500 + 500),
        "{:?}",
        start.elapsed()
    );
    assert!(
        !err.to_string().contains('{'),
        "no key in the message: {err}"
    );

    // Restarted empty: the scripts are gone (NOSCRIPT) and must reload by themselves.
    srv.restart().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let guard = loop {
        match locker
            .lock("r")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
        {
            Ok(g) => break g,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_unavailable(), "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("did not recover after restart: {e}"),
        }
    };
    guard.release().await.unwrap();
}

/// After a restart the connections come back by themselves, as soon as the server answers:
/// the first acquire after it does not fail on a connection that nobody revived, and a
/// waiter's wake-up subscription is live again without a failed SUBSCRIBE first.
#[tokio::test]
async fn connections_come_back_by_themselves_after_a_restart() {
    const WITHIN: Duration = Duration::from_secs(10);
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let b_waits = || {
        let b = b.clone();
        tokio::spawn(async move { b.lock("r").wait(Duration::from_secs(5)).acquire().await })
    };
    // b has waited once, so both of its connections are open.
    let held = a.lock("r").acquire().await.unwrap();
    let waiter = b_waits();
    eventually("b subscribed", WITHIN, || async {
        srv.subscribers("leasehold:wake:{r}").await == 1
    })
    .await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();

    srv.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    srv.restart().await;
    // a's lock connection, b's lock and wake connections, and the INFO probe's own.
    eventually("the three connections reopened", WITHIN, || async {
        srv.info_stat("connected_clients").await >= 4
    })
    .await;
    let held = a
        .lock("r")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect("the first acquire after the restart");
    let waiter = b_waits();
    eventually("b subscribed again", WITHIN, || async {
        srv.subscribers("leasehold:wake:{r}").await == 1
    })
    .await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}

#[tokio::test]
async fn hung_redis_is_unavailable_in_bounded_time() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    locker
        .lock("h")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    srv.pause();
    let start = Instant::now();
    let err = locker
        .lock("h")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap_err();
    let took = start.elapsed();
    srv.resume();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(took < Duration::from_millis(200 + 500 + 500), "{took:?}");
}

#[tokio::test]
async fn a_waiter_in_another_process_wakes_on_release_not_at_expiry() {
    let srv = RedisServer::start().await;
    let holder = locker(&srv.url()).await;
    let waiter = locker(&srv.url()).await;
    let guard = holder
        .lock("w")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let g = waiter.lock("w").acquire().await.unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let acquired_at = waiting.await.unwrap();
    let delay = acquired_at - released_at;
    assert!(delay < Duration::from_millis(100), "woke after {delay:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_are_served_in_order_by_handoff() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let first = locker.lock("fifo").acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..10 {
        let (locker, order) = (locker.clone(), order.clone());
        handles.push(tokio::spawn(async move {
            let g = locker.lock("fifo").acquire().await.unwrap();
            order.lock().unwrap().push((i, g.fence()));
            g.release().await.unwrap();
        }));
        // Queue them in a known order.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = srv.info_stat("cmdstat_evalsha").await;
    first.release().await.unwrap();
    for h in handles {
        h.await.unwrap();
    }
    let scripts = srv.info_stat("cmdstat_evalsha").await - before;
    let order = order.lock().unwrap().clone();
    let ids: Vec<i32> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>(), "first come, first served");
    assert!(order.windows(2).all(|w| w[0].1 < w[1].1), "fences increase");
    // The first holder reserved no fences for later waiters (none were queued when it
    // acquired), so its release goes through Redis (1) and the first waiter acquires (1),
    // reserving fences for the nine behind it; they get the lease handed over without a
    // round trip, and the last one releases (1). No retries, no polling.
    assert_eq!(scripts, 3);
}

#[tokio::test]
async fn nested_acquire_in_scope_reenters_but_siblings_do_not() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let outer = locker.lock("re").acquire().await.unwrap();
    // The locker's first lock has its description written once, in the background: let it
    // land before counting.
    leasehold_tests::harness::eventually("the description", Duration::from_secs(5), || async {
        !srv.keys("leasehold:locker:*").await.is_empty()
    })
    .await;
    let before = srv.info_stat("total_commands_processed").await;
    outer
        .scope(async {
            let inner = locker
                .lock("re")
                .wait(Duration::ZERO)
                .acquire()
                .await
                .unwrap();
            assert!(inner.is_reentrant());
            assert_eq!(inner.fence(), outer.fence());
            inner.release().await.unwrap();
        })
        .await;
    // INFO itself counts once.
    assert!(srv.info_stat("total_commands_processed").await - before <= 1);
    assert!(
        outer.is_held(),
        "the nested release must not free the outer lock"
    );
    // Outside the scope (a sibling future of the same task) the lock is someone else's.
    let sibling = locker
        .lock("re")
        .wait(Duration::from_millis(50))
        .acquire()
        .await;
    assert!(matches!(sibling, Err(LockError::Busy { .. })));
    outer.release().await.unwrap();
}

#[tokio::test]
async fn fences_increase_across_holders_and_after_the_counter_is_gone() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let mut last = 0;
    for i in 0..20 {
        let l = if i % 2 == 0 { &a } else { &b };
        let g = l.lock("f").acquire().await.unwrap();
        assert!(g.fence() > last);
        last = g.fence();
        g.release().await.unwrap();
    }
    // The counter expires (or is evicted): the next fence is seeded from the server clock.
    let mut conn = srv.conn().await;
    let ttl: i64 = conn.ttl("leasehold:fence:{f}").await.unwrap();
    assert!(ttl > 6 * 24 * 3600, "fence counter has a long TTL: {ttl}");
    let _: () = conn.del("leasehold:fence:{f}").await.unwrap();
    let g = a.lock("f").acquire().await.unwrap();
    assert!(g.fence() > last, "{} <= {last}", g.fence());
    g.release().await.unwrap();
}

#[tokio::test]
async fn redis_memory_stays_bounded_for_many_keys() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    for i in 0..500 {
        let g = locker.lock(format!("item:{i}")).acquire().await.unwrap();
        g.release().await.unwrap();
    }
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
    let fences = srv.keys("leasehold:fence:*").await;
    assert_eq!(fences.len(), 500);
    let mut conn = srv.conn().await;
    for key in fences.iter().take(20) {
        let ttl: i64 = conn.ttl(key).await.unwrap();
        assert!(ttl > 0, "{key} has no TTL");
    }
}

#[tokio::test]
async fn keys_are_validated_and_escaped() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    assert!(matches!(
        locker.lock("").acquire().await,
        Err(LockError::InvalidKey { .. })
    ));
    let huge = "x".repeat(leasehold::MAX_KEY_LEN + 1);
    assert!(matches!(
        locker.lock(huge).acquire().await,
        Err(LockError::InvalidKey { .. })
    ));
    // A key that imitates another lock's internals gets its own lock.
    let a = locker.lock("y}:fence:{z").acquire().await.unwrap();
    let b = locker
        .lock("z")
        .try_acquire()
        .await
        .unwrap()
        .expect("distinct lock");
    assert_eq!(
        srv.keys("leasehold:lock:*").await.len(),
        2,
        "two locks, two keys"
    );
    let mut names = srv.keys("leasehold:*").await;
    names.sort();
    assert!(
        names.contains(&"leasehold:lock:{y%7D:fence:%7Bz}".to_owned()),
        "{names:?}"
    );
    a.release().await.unwrap();
    b.release().await.unwrap();
    let nul = locker.lock("nul\0byte").acquire().await.unwrap();
    nul.release().await.unwrap();

    assert!(matches!(
        Locker::builder().url(srv.url()).prefix("a{b").build().await,
        Err(LockError::Config { .. })
    ));
    assert!(matches!(
        locker
            .lock("x")
            .lease(Duration::from_millis(1))
            .acquire()
            .await,
        Err(LockError::Config { .. })
    ));
    let bad = Locker::connect("not a url").await.unwrap_err();
    assert!(matches!(bad, LockError::Config { .. }), "{bad}");
}

#[tokio::test]
async fn connecting_to_nothing_is_unavailable() {
    let err = Locker::builder()
        .url("redis://127.0.0.1:1")
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

#[tokio::test]
async fn try_acquire_never_waits() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let g = a.lock("t").acquire().await.unwrap();
    let start = Instant::now();
    assert!(b.lock("t").try_acquire().await.unwrap().is_none());
    assert!(a.lock("t").try_acquire().await.unwrap().is_none());
    assert!(start.elapsed() < Duration::from_millis(100));
    let busy = b
        .lock("t")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    match busy {
        LockError::Busy { retry_after } => {
            let left = retry_after.expect("remaining lease reported");
            assert!(left > Duration::from_secs(25) && left <= Duration::from_secs(30));
        }
        other => panic!("{other}"),
    }
    g.release().await.unwrap();
}

#[tokio::test]
async fn a_local_waiter_takes_over_from_a_lost_holder_in_the_same_process() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    // The holder's lease runs out while it still has its guard (it hangs, say).
    let hung = locker
        .lock("l")
        .lease(Duration::from_millis(150))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let start = Instant::now();
    let next = locker
        .lock("l")
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(!hung.is_held());
    assert!(next.fence() > hung.fence());
    assert!(matches!(hung.release().await, Err(LockError::Lost { .. })));
    assert!(next.is_held());
    next.release().await.unwrap();
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_stay_increasing_across_local_handovers_and_processes() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    for round in 0..5 {
        // Forty holders in two "processes" at once: handovers inside each, Redis between.
        let mut handles = Vec::new();
        for i in 0..40 {
            let l = if i % 2 == 0 { a.clone() } else { b.clone() };
            let fences = fences.clone();
            handles.push(tokio::spawn(async move {
                let g = l.lock("fence-mix").acquire().await.unwrap();
                // Record in holding order: the lock serialises these pushes.
                fences.lock().unwrap().push(g.fence());
                tokio::task::yield_now().await;
                g.release().await.unwrap();
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let seen = fences.lock().unwrap();
        assert_eq!(seen.len(), 40 * (round + 1));
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "fences out of order: {seen:?}"
        );
    }
}

#[tokio::test]
async fn releases_publish_wake_ups_only_when_someone_waits() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    for _ in 0..50 {
        a.lock("quiet")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    assert_eq!(srv.info_stat("cmdstat_publish").await, 0, "nobody waited");
    let held = a.lock("busy").acquire().await.unwrap();
    let waiter =
        tokio::spawn(async move { b.lock("busy").acquire().await.unwrap().release().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        srv.info_stat("cmdstat_publish").await,
        1,
        "one waiter, one wake-up"
    );
}

/// The lock keys of `srv`, read on the server itself (not through any proxy).
pub(crate) async fn lock_keys(srv: &RedisServer) -> Vec<String> {
    srv.keys("leasehold:lock:*").await
}

/// Script calls `srv` has run: acquires, releases and renewals are all scripts.
pub(crate) async fn script_calls(srv: &RedisServer) -> u64 {
    srv.info_stat("cmdstat_evalsha").await + srv.info_stat("cmdstat_eval").await
}

/// A 30 s lease on `key` through a proxy, whose guard is dropped while the proxy is cut: its
/// background release cannot reach Redis.
async fn drop_during_outage(key: &str) -> (RedisServer, TcpProxy, Locker) {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let holder = locker(&proxy.url()).await;
    let guard = holder
        .lock(key)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    proxy.set_mode(ProxyMode::Cut);
    drop(guard);
    (srv, proxy, holder)
}

#[tokio::test]
async fn a_guard_dropped_during_an_outage_is_released_once_redis_is_back() {
    // `_holder` keeps the locker, and with it the retries, alive.
    let (srv, proxy, _holder) = drop_during_outage("outage").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        lock_keys(&srv).await.len(),
        1,
        "the release cannot have reached Redis through the cut proxy"
    );
    proxy.set_mode(ProxyMode::Pass);
    // Far below the 30 s lease: only a retried release frees the lock this early.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lock_keys(&srv).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dropped guard's lock is still held in Redis 5 s after it came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = locker(&srv.url()).await;
    let next = other.lock("outage").try_acquire().await.unwrap();
    next.expect("free for another process")
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_background_release_that_finds_another_owner_is_not_retried() {
    let (srv, proxy, _holder) = drop_during_outage("foreign").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Meanwhile the lock changed hands (as after an expiry): the token is not ours any more.
    let mut conn = srv.conn().await;
    let _: () = redis::cmd("SET")
        .arg("leasehold:lock:{foreign}")
        .arg("someone-else")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = script_calls(&srv).await;
    proxy.set_mode(ProxyMode::Pass);
    // One retry gets through and finds the other owner...
    let deadline = Instant::now() + Duration::from_secs(5);
    while script_calls(&srv).await == before {
        assert!(
            Instant::now() < deadline,
            "the failed background release was never retried"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...and that is the last one: a release that was answered is not retried (the pause
    // between retries is at most 1 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        script_calls(&srv).await,
        before + 1,
        "retried after the answer"
    );
    let owner: String = conn.get("leasehold:lock:{foreign}").await.unwrap();
    assert_eq!(owner, "someone-else", "the other owner's lock was touched");
}

#[tokio::test]
async fn dropping_the_locker_ends_the_retries_of_its_background_releases() {
    let (srv, proxy, holder) = drop_during_outage("orphan").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(holder);
    // Longer than the longest pause between retries: a retry still pending now finds the
    // locker gone, and stops.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = script_calls(&srv).await;
    proxy.set_mode(ProxyMode::Pass);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        script_calls(&srv).await,
        before,
        "a retry outlived its locker"
    );
    assert_eq!(lock_keys(&srv).await.len(), 1);
}
