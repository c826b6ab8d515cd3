//! What etcd and ZooKeeper share, written once: locks queued in the store and kept for as long
//! as the client's session (etcd: its lease) lives. Each engine's file runs every test here
//! under its own name for it (`shared_tests!`) and keeps what only it does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{ProxyMode, TcpProxy};
use tokio::time::Instant;

/// An engine whose locks live with a client session, as the shared tests drive it: its
/// single server, its 3-member cluster, and a locker on either.
pub(super) trait SessionEngine {
    /// A single server, started for one test.
    type Server;
    /// A cluster of servers, started for one test.
    type Cluster;
    /// What the engine calls the time a silent client's locks outlive it, for messages.
    const SESSION: &'static str;
    /// How long a client cut off past its session waits for the lock once it is back.
    const HEALED_WAIT: Duration;
    /// Whether a release right after a restart may go unanswered (the restarted server slow
    /// to answer within the op timeout on a loaded machine).
    const RELEASE_MAY_GO_UNANSWERED_AFTER_A_RESTART: bool;

    /// Starts a single server.
    async fn start() -> Self::Server;
    /// Starts a cluster of `members` servers.
    async fn start_cluster(members: usize) -> Self::Cluster;
    /// Where a locker reaches `server`.
    fn endpoints(server: &Self::Server) -> Vec<String>;
    /// Where a locker reaches `cluster`.
    fn cluster_endpoints(cluster: &Self::Cluster) -> Vec<String>;
    /// Where a locker reaches a server through the proxy listening at `proxy`.
    fn proxied(proxy: SocketAddr) -> Vec<String>;
    /// The address `server` listens at, for a proxy in front of it.
    fn addr(server: &Self::Server) -> SocketAddr;
    /// Freezes `server` (SIGSTOP).
    fn pause(server: &Self::Server);
    /// Thaws `server` (SIGCONT).
    fn resume(server: &Self::Server);
    /// Kills `server` (SIGKILL) and starts it again on its data.
    async fn kill_and_restart(server: &Self::Server);
    /// Kills the current leader of `cluster` (SIGKILL).
    async fn kill_the_leader(cluster: &Self::Cluster);
    /// A locker at `endpoints` with a session of `session`.
    async fn locker(endpoints: &[String], session: Duration) -> Locker;
}

/// One `#[tokio::test]` per shared test run on `$engine`, under the engine's own name for it:
/// `name => test` runs the function `test` of this module on `$engine` as the test `name`, and
/// a bare `test` runs it under its own name.
macro_rules! shared_tests {
    ($engine:ty { $($name:ident $(=> $test:ident)?),+ $(,)? }) => {
        $(shared_tests!(@one $engine, $name $(, $test)?);)+
    };
    (@one $engine:ty, $test:ident) => {
        shared_tests!(@one $engine, $test, $test);
    };
    (@one $engine:ty, $name:ident, $test:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::consensus::$test::<$engine>().await;
        }
    };
}
pub(super) use shared_tests;

/// Two lockers exclude each other on a key and not on another; the next holder's fence is
/// higher.
pub(super) async fn exclude_each_other_and_fences_increase<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(4)).await;
    let b = E::locker(&at, Duration::from_secs(4)).await;
    let first = a.lock("order:1").acquire().await.unwrap();
    assert!(b.lock("order:1").try_acquire().await.unwrap().is_none());
    let err = b
        .lock("order:1")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }), "{err}");
    let fence = first.fence();
    first.release().await.unwrap();
    let second = b.lock("order:1").acquire().await.unwrap();
    assert!(second.fence() > fence, "{} after {fence}", second.fence());
    // Another key is another lock.
    let other = a.lock("order:2").try_acquire().await.unwrap();
    assert!(other.is_some());
    second.release().await.unwrap();
}

/// A waiter is woken by the holder's release, long before its session would end.
pub(super) async fn a_waiter_wakes_on_release<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(20)).await;
    let b = E::locker(&at, Duration::from_secs(20)).await;
    let held = a.lock("k").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let guard = b.lock("k").acquire().await.unwrap();
        (Instant::now(), guard.fence())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    let fence = held.fence();
    held.release().await.unwrap();
    let (got_at, next) = waiter.await.unwrap();
    assert!(next > fence);
    // The watch on the predecessor wakes it: far below the 1 s safety poll and the session.
    let after = got_at - released_at;
    assert!(
        after < Duration::from_millis(900),
        "woken {after:?} after the release"
    );
}

/// Waiters of different lockers (processes) get the lock in the order they queued.
pub(super) async fn waiters_are_served_in_arrival_order<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let holder = E::locker(&at, Duration::from_secs(10)).await;
    let held = holder.lock("fifo").acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let l = E::locker(&at, Duration::from_secs(10)).await;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = l.lock("fifo").acquire().await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.release().await.unwrap();
        }));
        // Each is queued (its znode created, its key put) before the next arrives.
        wait_for_queue(&holder, "fifo", i + 1).await;
    }
    held.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

/// Waits (5 s at most) until `waiting` processes stand in the queue of `key`.
pub(super) async fn wait_for_queue(locker: &Locker, key: &str, waiting: u64) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let info = locker.inspect(key).await.unwrap();
        if info.waiting_processes == waiting {
            return;
        }
        assert!(
            Instant::now() < until,
            "{waiting} waiters never queued: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A waiter that gives up after its wait, or is cancelled in the middle of it, leaves the
/// queue: nothing stands between the holder's release and the next contender.
pub(super) async fn a_waiter_that_gives_up_or_is_cancelled_leaves_the_queue<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(10)).await;
    let b = E::locker(&at, Duration::from_secs(10)).await;
    let held = a.lock("q").acquire().await.unwrap();
    // Gives up after its wait.
    let err = b
        .lock("q")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Busy { .. }));
    wait_for_queue(&a, "q", 0).await;
    // Cancelled in the middle of its wait.
    let c = b.clone();
    let waiting = tokio::spawn(async move { c.lock("q").acquire().await });
    wait_for_queue(&a, "q", 1).await;
    waiting.abort();
    let _ = waiting.await;
    wait_for_queue(&a, "q", 0).await;
    // Nothing stands between the holder's release and the next contender.
    held.release().await.unwrap();
    let next = b.lock("q").try_acquire().await.unwrap();
    assert!(next.is_some(), "a withdrawn waiter still blocks the lock");
}

/// Inspection and listing see a held lock; a forced release hands it to the next holder with
/// a higher fence, and the old holder finds out.
pub(super) async fn inspection_listing_and_forced_release<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(10)).await;
    let b = E::locker(&at, Duration::from_secs(10)).await;
    let g = a.lock("inv/7 {x}").acquire().await.unwrap();
    let info = b.inspect("inv/7 {x}").await.unwrap();
    assert!(info.held);
    // The highest fence handed out or reserved so far, as on every engine: at or above
    // the holder's.
    assert!(info.last_fence.is_some_and(|f| f >= g.fence()), "{info:?}");
    let held = b.list_held("inv*").await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].key, "inv/7 {x}");
    assert!(b.force_release("inv/7 {x}").await.unwrap());
    let next = b.lock("inv/7 {x}").try_acquire().await.unwrap();
    assert!(next.is_some_and(|n| n.fence() > g.fence()));
    // The old holder finds out at its next renewal, or at release.
    assert!(g.release().await.is_err());
}

/// The holder's session cannot be kept alive while its server is frozen past the session
/// timeout: the holder reports the loss on its own clock within it, and after the server is
/// back the next holder gets the lock with a higher fence.
pub(super) async fn a_frozen_server_loses_the_lease_and_fences_move_on<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let session = Duration::from_secs(2);
    let a = E::locker(&at, session).await;
    let g = a.lock("paused").acquire().await.unwrap();
    let fence = g.fence();
    E::pause(&server);
    let paused_at = Instant::now();
    tokio::time::timeout(session * 3, g.lost())
        .await
        .expect("the lease was never reported lost");
    let lost_after = paused_at.elapsed();
    assert!(
        lost_after <= session + Duration::from_millis(500),
        "trusted for {lost_after:?} with a {session:?} {}",
        E::SESSION
    );
    assert!(!g.is_held());
    E::resume(&server);
    let b = E::locker(&at, session).await;
    let next = tokio::time::timeout(Duration::from_secs(15), b.lock("paused").acquire())
        .await
        .expect("the lock never came free after the session ended")
        .unwrap();
    assert!(next.fence() > fence);
    // The first locker works again with a new session.
    drop(g);
    next.release().await.unwrap();
    let again = a
        .lock("paused")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(again.fence() > fence);
}

/// One client is cut off (its proxy stalls every byte) past the session timeout while the
/// server keeps running: the holder reports the loss on its own clock within it, the server
/// ends its session, the next holder gets the lock with a higher fence, and when the partition
/// heals the first client works again (a new session).
pub(super) async fn a_client_partitioned_loses_its_lock_to_the_next<E: SessionEngine>() {
    let server = E::start().await;
    let proxy = TcpProxy::start(E::addr(&server)).await;
    let session = Duration::from_secs(2);
    let cut = E::locker(&E::proxied(proxy.addr()), session).await;
    let other = E::locker(&E::endpoints(&server), session).await;
    let g = cut.lock("part").acquire().await.unwrap();
    let fence = g.fence();
    proxy.set_mode(ProxyMode::Stall);
    let at = Instant::now();
    tokio::time::timeout(session * 3, g.lost())
        .await
        .expect("the partitioned holder never noticed");
    let noticed = at.elapsed();
    assert!(
        noticed <= session + Duration::from_millis(500),
        "trusted {noticed:?} into a partition with a {session:?} {}",
        E::SESSION
    );
    // The server ends the partitioned session; its entry goes, the waiter gets the lock.
    let next = other
        .lock("part")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the lock never came free while its holder was cut off");
    assert!(next.fence() > fence);
    assert!(matches!(g.release().await, Err(LockError::Lost { .. })));
    next.release().await.unwrap();
    proxy.set_mode(ProxyMode::Pass);
    let again = cut
        .lock("part")
        .wait(E::HEALED_WAIT)
        .acquire()
        .await
        .expect("the healed client did not lock again");
    assert!(again.fence() > fence);
}

/// A server restart with its data kept: the session survives a short outage, and the lock
/// still excludes.
pub(super) async fn a_server_restart_with_data_keeps_exclusion_and_fences<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(8)).await;
    let b = E::locker(&at, Duration::from_secs(8)).await;
    let g = a.lock("r").acquire().await.unwrap();
    E::kill_and_restart(&server).await;
    // The other locker cannot take it while the holder's session lives.
    let tried = b.lock("r").wait(Duration::from_millis(500)).acquire().await;
    assert!(tried.is_err(), "two holders after a restart");
    let fence = g.fence();
    if g.is_held() {
        match g.release().await {
            Ok(_) => {}
            // Where the restarted server may not answer the release within the op timeout
            // yet, the lock goes with the release's retries in the background or with the
            // session, within the 10 s `b` waits. Exclusion and fences are what this test
            // checks.
            Err(LockError::Unavailable { .. }) if E::RELEASE_MAY_GO_UNANSWERED_AFTER_A_RESTART => {}
            Err(e) => panic!("release after the restart: {e}"),
        }
    } else {
        drop(g);
    }
    let next = b
        .lock("r")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(next.fence() > fence);
}

/// The leader of a 3-member cluster is killed under load: never two holders, fences always
/// increasing, and locks keep being granted after the election.
pub(super) async fn a_leader_failover_under_load_keeps_exclusion<E: SessionEngine>() {
    let cluster = E::start_cluster(3).await;
    let at = E::cluster_endpoints(&cluster);
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let last_fence = Arc::new(AtomicU64::new(0));
    let regressions = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..3 {
        let l = E::locker(&at, Duration::from_secs(6)).await;
        let (inside, overlaps, last_fence, regressions, granted, stop) = (
            inside.clone(),
            overlaps.clone(),
            last_fence.clone(),
            regressions.clone(),
            granted.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let Ok(g) = l.lock("hot").wait(Duration::from_secs(2)).acquire().await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                if last_fence.fetch_max(g.fence(), Ordering::SeqCst) >= g.fence() {
                    regressions.fetch_add(1, Ordering::SeqCst);
                }
                granted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.store(false, Ordering::SeqCst);
                let _ = g.release().await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = granted.load(Ordering::SeqCst);
    assert!(before > 0, "no lock granted before the failover");
    E::kill_the_leader(&cluster).await;
    let killed = granted.load(Ordering::SeqCst);
    // Liveness after the election: sessions on the dead member move to a live one (within
    // the session timeout) and grants resume. A generous bound: this detects a hang.
    let until = Instant::now() + Duration::from_secs(30);
    while granted.load(Ordering::SeqCst) < killed + 10 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Who stands in the queue, for the message should grants not have resumed.
    let queue = E::locker(&at, Duration::from_secs(6))
        .await
        .inspect("hot")
        .await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("a worker hung")
            .unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(regressions.load(Ordering::SeqCst), 0, "a fence went back");
    assert!(
        granted.load(Ordering::SeqCst) >= killed + 10,
        "grants did not resume within 30 s of the leader's death: {queue:?}"
    );
}

/// A reader cut off past the session timeout reports its loss on its own clock, and its share
/// goes with its session: a writer of another locker gets the lock.
pub(super) async fn a_reader_cut_off_frees_its_share<E: SessionEngine>() {
    let server = E::start().await;
    let proxy = TcpProxy::start(E::addr(&server)).await;
    let session = Duration::from_secs(2);
    let cut = E::locker(&E::proxied(proxy.addr()), session).await;
    let other = E::locker(&E::endpoints(&server), session).await;
    let reader = cut.read_lock("shared").acquire().await.unwrap();
    let also = other.read_lock("shared").acquire().await.unwrap();
    also.release().await.unwrap();
    proxy.set_mode(ProxyMode::Stall);
    let at = Instant::now();
    tokio::time::timeout(session * 3, reader.lost())
        .await
        .expect("the partitioned reader never noticed");
    assert!(
        at.elapsed() <= session + Duration::from_millis(500),
        "a reader trusted {:?} into a partition with a {session:?} {}",
        at.elapsed(),
        E::SESSION
    );
    let writer = other
        .write_lock("shared")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the cut-off reader's share was never freed");
    assert!(matches!(
        reader.release().await,
        Err(LockError::Lost { .. })
    ));
    writer.release().await.unwrap();
}

/// A reader waiting beside a writer of its own locker (whose entry waits in the queue for the
/// locker) wakes when that writer lets go, not at its next poll a second later. (Before the
/// fix its wake-ups stopped once the locker's writer got the lock.)
pub(super) async fn a_reader_beside_its_lockers_writer_wakes_on_its_release<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(10)).await;
    let b = E::locker(&at, Duration::from_secs(10)).await;
    let held = a.write_lock("page").acquire().await.unwrap();
    let released = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let writer = {
        let (b, released) = (b.clone(), released.clone());
        tokio::spawn(async move {
            let w = b.write_lock("page").acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            *released.lock().unwrap() = Some(Instant::now());
            w.release().await.unwrap();
        })
    };
    wait_for_queue(&a, "page", 1).await;
    let reader = {
        let b = b.clone();
        tokio::spawn(async move {
            let r = b.read_lock("page").acquire().await.unwrap();
            let at = Instant::now();
            r.release().await.unwrap();
            at
        })
    };
    // The reader tried and subscribed; it holds no place in the queue while it waits. (Its
    // attempt's own contender stands there until the attempt ends: on a loaded machine that
    // took longer than the 300 ms given, so the queue is waited on, for as long as a queue
    // takes to form.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_for_queue(&a, "page", 1).await;
    held.release().await.unwrap();
    writer.await.unwrap();
    let got = reader.await.unwrap();
    let after = got - released.lock().unwrap().expect("the writer released");
    assert!(
        after < Duration::from_millis(500),
        "the reader got in {after:?} after its locker's writer let go"
    );
}

/// Readers holding a lock are its holders, not waiting processes, for inspection; a forced
/// release frees every one of them, and the writer waiting behind them gets the lock.
pub(super) async fn inspection_and_forced_release_with_readers<E: SessionEngine>() {
    let server = E::start().await;
    let at = E::endpoints(&server);
    let a = E::locker(&at, Duration::from_secs(10)).await;
    let b = E::locker(&at, Duration::from_secs(10)).await;
    let r1 = a.read_lock("doc").acquire().await.unwrap();
    let r2 = b.read_lock("doc").acquire().await.unwrap();
    let info = a.inspect("doc").await.unwrap();
    assert!(info.held && info.waiting_processes == 0, "{info:?}");
    let writer = {
        let b = b.clone();
        tokio::spawn(async move { b.write_lock("doc").acquire().await })
    };
    wait_for_queue(&a, "doc", 1).await;
    assert!(a.force_release("doc").await.unwrap());
    let w = writer
        .await
        .unwrap()
        .expect("the writer behind the forced-out readers");
    assert!(r1.release().await.is_err());
    assert!(r2.release().await.is_err());
    w.release().await.unwrap();
}

/// The top of the fence slot `fence` is in: a writer's fences are `order × 32 + n`.
pub(super) fn slot_top(fence: u64) -> u64 {
    fence / 32 * 32 + 31
}
