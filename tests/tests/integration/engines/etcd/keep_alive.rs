//! How a lock is counted from the lease's keep-alives (issue 32): from the last one
//! acknowledged, never longer than the lease it rides on, also across a freeze of etcd and a
//! change of leader.

use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{EtcdCluster, EtcdServer};
use tokio::time::Instant;

use super::{grpc_count, locker};

/// The keep-alives etcd has received, from its `/metrics`.
async fn keep_alives_received(etcd: &EtcdServer) -> u64 {
    grpc_count(etcd, "grpc_server_msg_received_total", "LeaseKeepAlive").await
}

/// Issue 32: an acquire counts its lock from the send time of the lease's last acknowledged
/// keep-alive, so in the steady state (a keep-alive every third of the TTL) acquires send no
/// keep-alive of their own: rounds of concurrent acquires cost etcd only the keeper's periodic
/// ones. (Before, every acquire of a lock as long as the TTL waited for one sent after it:
/// at least one per round.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_with_a_fresh_keep_alive_send_none_of_their_own() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let locker = locker(&at, ttl).await;
    // The session exists (its lease granted, its keep-alive stream open) before counting.
    locker
        .lock("warm-up")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let before = keep_alives_received(&etcd).await;
    let started = Instant::now();
    const TASKS: usize = 16;
    const ROUNDS: usize = 6;
    for round in 0..ROUNDS {
        let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (locker, barrier) = (locker.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    // As long as the TTL (a longer one is shortened to it).
                    let guard = locker
                        .lock(format!("fresh-beat-{round}-{i}"))
                        .lease(Duration::from_secs(30))
                        .acquire()
                        .await
                        .unwrap();
                    assert!(guard.is_held());
                    guard.release().await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
    let elapsed = started.elapsed();
    let sent = keep_alives_received(&etcd).await - before;
    // The keeper's own, one every third of the TTL.
    let periodic = (elapsed.as_secs_f64() / (ttl / 3).as_secs_f64()).floor() as u64 + 1;
    assert!(
        sent <= periodic,
        "{sent} keep-alives for {ROUNDS} rounds of {TASKS} acquires in {elapsed:?}, where the \
         keeper sends {periodic}"
    );
}

/// A locker of `ttl` whose calls may wait out a short freeze of etcd.
async fn patient_locker(endpoints: &[String], ttl: Duration) -> Locker {
    Locker::builder()
        .etcd(endpoints.iter().cloned())
        .session_timeout(ttl)
        .op_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("locker on etcd")
}

/// A [`patient_locker`] of `ttl` on `etcd` that took and gave back a lock (its lease is kept
/// alive), and the moment etcd was frozen (SIGSTOP) right after.
async fn warmed_up_then_frozen(etcd: &EtcdServer, ttl: Duration) -> (Locker, Instant) {
    let locker = patient_locker(&[etcd.endpoint()], ttl).await;
    let guard = locker.lock("warm-up").acquire().await.unwrap();
    guard.release().await.unwrap();
    etcd.pause();
    (locker, Instant::now())
}

/// How much of a lease as long as the TTL the default locker counts on.
fn validity_of(ttl: Duration) -> Duration {
    ttl - (ttl.mul_f64(0.01) + Duration::from_millis(2))
}

/// Issue 32: keep-alives stalled (etcd frozen) for longer than half the validity when an
/// acquire is sent. Its lock must not count from the last acknowledged keep-alive (that would
/// leave less than half of it): it waits for a keep-alive sent after it, in parallel with its
/// put, and counts from its own send time, or reports `Unavailable`. Either way its validity
/// never ends after `acked + validity` for the last keep-alive acknowledged before the grant
/// (here: before the grant returned, since a keep-alive after the request was awaited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_while_keep_alives_stall_waits_for_one_or_fails() {
    let etcd = EtcdServer::start().await;
    let ttl = Duration::from_secs(9);
    let validity = validity_of(ttl);
    let (locker, frozen) = warmed_up_then_frozen(&etcd, ttl).await;
    // Every acknowledged keep-alive was sent before the freeze: more than half the validity
    // ago once the acquire is sent. (The keeper gives the lease up a TTL after the last one,
    // at least 6 s into the freeze with a keep-alive every 3 s.)
    tokio::time::sleep(validity / 2 + Duration::from_millis(150)).await;
    let sent = Instant::now();
    let acquire = tokio::spawn({
        let locker = locker.clone();
        async move {
            let got = locker
                .lock("stalled")
                .lease(ttl)
                .watchdog(false)
                .wait(Duration::ZERO)
                .acquire()
                .await;
            (got, Instant::now())
        }
    });
    tokio::time::sleep_until(frozen + Duration::from_millis(5000)).await;
    etcd.resume();
    let (got, returned) = acquire.await.unwrap();
    let guard = match got {
        Ok(guard) => guard,
        Err(e) => {
            assert!(matches!(e, LockError::Unavailable { .. }), "{e:?}");
            return;
        }
    };
    tokio::time::timeout(validity + Duration::from_secs(2), guard.lost())
        .await
        .expect("a lease without the watchdog never ran out");
    let ended = Instant::now();
    assert!(
        ended >= sent + validity / 2,
        "a uselessly short lock: it ended {:?} after the acquire was sent, of a {validity:?} \
         validity (counted from a keep-alive sent before the freeze)",
        ended - sent
    );
    assert!(
        ended <= returned + validity + Duration::from_millis(200),
        "trusted past every acknowledged keep-alive: {:?} after the grant",
        ended - returned
    );
}

/// Issue 32: a put that lands late in the lease's life (etcd frozen with it in flight) is
/// counted from the last keep-alive acknowledged before it was sent, not from its own send
/// time: the lock is reported lost by `acked + validity`, every acknowledged keep-alive having
/// been sent before the freeze. (Counted from the put's send time, it would be trusted a
/// second longer.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_landing_late_is_counted_from_the_last_acknowledged_keep_alive() {
    let etcd = EtcdServer::start().await;
    let ttl = Duration::from_secs(9);
    let validity = validity_of(ttl);
    let (locker, frozen) = warmed_up_then_frozen(&etcd, ttl).await;
    // At most a keep-alive period (3 s) and this second since the last acknowledged one:
    // under half the validity, so the acquire waits for none.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acquire = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .lock("late-put")
                .lease(ttl)
                .watchdog(false)
                .wait(Duration::ZERO)
                .acquire()
                .await
        }
    });
    tokio::time::sleep_until(frozen + Duration::from_millis(2500)).await;
    etcd.resume();
    let guard = acquire.await.unwrap().expect("granted once etcd is back");
    tokio::time::timeout(validity, guard.lost())
        .await
        .expect("a lease without the watchdog never ran out");
    let ended = frozen.elapsed();
    assert!(
        ended <= validity + Duration::from_millis(300),
        "trusted {ended:?} after the freeze, with every acknowledged keep-alive sent before \
         it and a {validity:?} validity"
    );
}

/// Issue 32: the leader of a 3-member cluster dies between the keep-alive a lock is counted
/// from and the lock's put, which lands on the next leader. etcd's new leader restarts every
/// lease's countdown when elected (after that keep-alive was sent), so the lease outlives the
/// lock's validity: another locker gets the lock only once the first stopped trusting it,
/// never two holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_put_after_a_leader_change_is_never_held_twice() {
    let etcd = EtcdCluster::start(3).await;
    let at = etcd.endpoints();
    let ttl = Duration::from_secs(9);
    let validity = validity_of(ttl);
    let a = patient_locker(&at, ttl).await;
    let b = patient_locker(&at, ttl).await;
    a.lock("warm-up")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let leader = etcd.leader().await;
    etcd.member(leader).kill9();
    let killed = Instant::now();
    let first = a
        .lock("failover")
        .lease(ttl)
        .watchdog(false)
        .wait(Duration::from_secs(15))
        .acquire()
        .await
        .expect("no lock after the leader died");
    let granted = Instant::now();
    let first = Arc::new(first);
    let watched = first.clone();
    let lost = tokio::spawn(async move {
        watched.lost().await;
        Instant::now()
    });
    let next = b
        .lock("failover")
        .wait(validity + Duration::from_secs(15))
        .acquire()
        .await
        .expect("the lock never came free after its lease ran out");
    assert!(
        !first.is_held(),
        "two holders: the lock taken {:?} after the leader died is still trusted",
        granted - killed
    );
    assert!(next.fence() > first.fence());
    let lost = lost.await.unwrap();
    assert!(lost <= granted + validity + Duration::from_millis(200));
    next.release().await.unwrap();
}
