//! Leases and the watchdog: renewals keep a lease's length and touch no other owner's, a lease
//! without the watchdog is a hard maximum, and a paused holder loses its lease.

use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};
use redis::AsyncCommands;
use tokio::time::Instant;

use super::locker;

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
