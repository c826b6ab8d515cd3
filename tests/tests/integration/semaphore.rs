//! Semaphores across processes, judged by the history checker: four worker processes, two
//! tasks each, take permits of one semaphore of 2 on one Redis server, while the test freezes
//! a holder (SIGSTOP) past its lease and kills another (SIGKILL). At no instant may more than
//! 2 holders believe they hold a permit (`Rule::Permits`); the frozen holder is told of its
//! loss; the killed holder's permit comes back after its lease; every call stays within its
//! bound and the others keep going.

use std::time::Duration;

use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::{monotonic_ns, Run, WorkerSpec};
use tokio::time::sleep;

const PERMITS: u32 = 2;
const LEASE: Duration = Duration::from_millis(500);

/// A hold opened in the last 50 ms by a worker other than `not`, waiting up to 3 s for one.
async fn young_hold_of_another(run: &mut Run, not: Option<usize>) -> (usize, String) {
    for _ in 0..1500 {
        let now = monotonic_ns();
        if let Some((w, id, _)) = run
            .open_holds_since()
            .into_iter()
            .find(|(w, _, since)| Some(*w) != not && now.saturating_sub(*since) < 50_000_000)
        {
            return (w, id);
        }
        sleep(Duration::from_millis(2)).await;
    }
    panic!("no other worker took a permit within 3 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits_with_holders_killed_and_paused() {
    let mut servers = RedisServer::start_many(2).await;
    let (locks, resource) = (servers.remove(0), servers.remove(0));
    let spec = WorkerSpec::new(&locks.url(), &resource.url())
        .keys(&["partner-api"])
        .semaphore(PERMITS)
        .tasks(2)
        .lease(LEASE)
        .wait(Duration::from_secs(3))
        .hold(Duration::from_millis(120), 3)
        .gap(Duration::from_millis(10))
        .duration(Duration::from_secs(7));
    let mut run = Run::new("semaphore");
    for _ in 0..4 {
        run.spawn(&spec);
    }
    sleep(Duration::from_millis(1200)).await;

    // A holder frozen for three leases: its permit comes back to the others meanwhile, and
    // it must not believe in it once thawed.
    let (paused, paused_hold) = young_hold_of_another(&mut run, None).await;
    let frozen_at = monotonic_ns();
    run.pause(paused);
    sleep(LEASE * 3).await;
    run.resume(paused);
    sleep(Duration::from_millis(500)).await;

    // A holder killed: its permit comes back after its lease, nobody releases it.
    let (killed, _) = young_hold_of_another(&mut run, Some(paused)).await;
    let killed_at = run.kill9(killed);

    run.wait_all(Duration::from_secs(30)).await;
    let (history, report) = run.check_and_record("semaphore");
    assert_eq!(
        report.most_permit_holders, PERMITS as usize,
        "the limit was never reached: the run proves little\n{report}"
    );

    let frozen = history.hold(&paused_hold).expect("the frozen hold");
    assert!(
        frozen.last_true.is_none_or(|t| t < frozen_at + 100_000_000),
        "the frozen holder believed in its permit after the freeze: {frozen:?}"
    );
    let told = frozen.lost.is_some()
        || frozen
            .rel_done
            .as_ref()
            .is_some_and(|(_, how)| how == "rlost");
    assert!(
        told,
        "the frozen holder was not told of its loss: {frozen:?}"
    );

    // After the kill, the survivors still reach the limit: the killed holder's permit came
    // back (by its lease; nobody released it).
    let survivors: Vec<_> = history
        .holds
        .iter()
        .filter(|h| h.worker != killed && h.ok.is_some_and(|(t, _)| t > killed_at + 1_000_000_000))
        .collect();
    assert!(
        survivors.len() >= 4,
        "the others barely got permits after the kill: {report}"
    );
}

/// The fencing tokens of `n` holders taken one after the other (each released before the
/// next), alternating one and two permits of a semaphore of 3, checked to strictly increase
/// from `last`; returns the last one.
async fn permit_fences_increase(locker: &leasehold::Locker, key: &str, mut last: u64) -> u64 {
    for i in 0..4u32 {
        let permits = locker
            .semaphore(key, 3)
            .acquire_many(1 + i % 2)
            .await
            .expect("free permits");
        let fence = permits.fence();
        assert!(
            fence > last,
            "a permit holder got fence {fence} after {last} was handed out"
        );
        last = fence;
        permits.release().await.expect("release");
    }
    last
}

/// Issue 27, bug 2's rule for permits: a permit holder's fence is above every fence handed out
/// before for the semaphore (it was 1 for every holder), by the writers' rule: for holders
/// at once and one after the other, after a restart from an RDB snapshot that holds an older
/// counter, and after the counter expired (`fence_ttl`). Then the same in memory.
#[tokio::test]
async fn permit_fences_increase_across_holders_restarts_and_counter_expiry() {
    use redis::AsyncCommands;

    let srv = RedisServer::start().await;
    let build = || {
        leasehold::Locker::builder()
            .url(srv.url())
            .op_timeout(Duration::from_secs(1))
            .fence_ttl(Duration::from_secs(1))
            .build()
    };
    let locker = build().await.expect("connect");
    let key = "fenced-api";

    // Holders at once: each its own token, in the order they came in.
    let a = locker.semaphore(key, 3).acquire().await.expect("a");
    let b = locker.semaphore(key, 3).acquire_many(2).await.expect("b");
    assert!(b.fence() > a.fence(), "{} then {}", a.fence(), b.fence());
    let mut last = b.fence();
    drop((a, b));
    last = permit_fences_increase(&locker, key, last).await;

    // A snapshot, more holders, then a restart from the snapshot: its counter is older than
    // the last fence handed out.
    let mut conn = srv.conn().await;
    let _: () = redis::cmd("SAVE").query_async(&mut conn).await.unwrap();
    last = permit_fences_increase(&locker, key, last).await;
    srv.restart_from_disk().await;
    let mut conn = srv.conn().await;
    let counter: u64 = conn.get("leasehold:semfence:{fenced-api}").await.unwrap();
    assert!(counter < last, "the snapshot holds the older counter");
    let locker = build().await.expect("reconnect");
    last = permit_fences_increase(&locker, key, last).await;

    // The counter expires after fence_ttl of disuse; the next holder is still above.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let exists: bool = conn
        .exists("leasehold:semfence:{fenced-api}")
        .await
        .unwrap();
    assert!(!exists, "the fence counter outlived its fence_ttl");
    last = permit_fences_increase(&locker, key, last).await;
    assert!(last < 1 << 53, "fences stay exact in doubles: {last}");

    // In memory, by the memory engine's writers' rule.
    let memory = leasehold::Locker::builder()
        .fence_ttl(Duration::from_secs(1))
        .build_in_memory()
        .expect("in memory");
    let a = memory.semaphore(key, 3).acquire().await.expect("a");
    let b = memory.semaphore(key, 3).acquire_many(2).await.expect("b");
    assert!(b.fence() > a.fence(), "{} then {}", a.fence(), b.fence());
    let last = b.fence();
    drop((a, b));
    let last = permit_fences_increase(&memory, key, last).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    permit_fences_increase(&memory, key, last).await;
}

/// Issue 27 (risk): a request for several permits starved behind single-permit requests under
/// steady load: it needs them all free at once, and a single permit that came free was taken
/// again at once. Limit 3; twelve lockers (processes, as the store sees them) of two tasks
/// each take one permit over and over, holding it 20 to 80 ms, out of step; a thirteenth
/// locker asks for all 3 with a 10 s wait, three times. Each time it must get them, on Redis
/// and in memory, and the others go on afterwards. (Before the fix, on Redis, it got `Busy`
/// after 10 s in most rounds.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_several_permits_gets_its_turn_under_steady_load() {
    let srv = RedisServer::start().await;
    let mut on_redis = Vec::new();
    for _ in 0..13 {
        on_redis.push(
            leasehold::Locker::builder()
                .url(srv.url())
                .op_timeout(Duration::from_secs(1))
                .build()
                .await
                .expect("connect"),
        );
    }
    let memory = leasehold::Locker::in_memory();
    for (engine, lockers) in [("redis", on_redis), ("memory", vec![memory; 13])] {
        let waits = several_permits_under_load(&lockers).await;
        println!("{engine}: all 3 permits under steady load after {waits:?}");
    }
}

/// Runs the load of [`a_request_for_several_permits_gets_its_turn_under_steady_load`] on all
/// lockers but the last, and asks for all permits on the last one, three times; how long
/// each request waited.
async fn several_permits_under_load(lockers: &[leasehold::Locker]) -> Vec<Duration> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    const KEY: &str = "batch-api";
    let stop = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    let (big, load_lockers) = lockers.split_last().expect("lockers");
    for (i, locker) in load_lockers.iter().enumerate() {
        for j in 0..2u64 {
            let (locker, stop, taken) = (locker.clone(), stop.clone(), taken.clone());
            // Holds of 20 to 80 ms, out of step with each other, as real work is.
            let mut step = i as u64 * 7 + j * 13;
            load.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let permit = locker
                        .semaphore(KEY, 3)
                        .wait(Duration::from_secs(20))
                        .acquire()
                        .await
                        .expect("a single permit");
                    taken.fetch_add(1, Ordering::Relaxed);
                    step = (step * 31 + 17) % 61;
                    sleep(Duration::from_millis(20 + step)).await;
                    permit.release().await.expect("release");
                }
            }));
        }
    }
    // The load is steady: every permit is taken again as soon as it comes back.
    sleep(Duration::from_millis(500)).await;
    assert!(taken.load(Ordering::Relaxed) > 10, "no load");
    let mut waits = Vec::new();
    for _ in 0..3 {
        let asked = tokio::time::Instant::now();
        let all = big
            .semaphore(KEY, 3)
            .wait(Duration::from_secs(10))
            .acquire_many(3)
            .await;
        let waited = asked.elapsed();
        let all = all.unwrap_or_else(|e| {
            panic!("a request for 3 permits of 3 starved for {waited:?} under steady load: {e}")
        });
        waits.push(waited);
        let during = taken.load(Ordering::Relaxed);
        all.release().await.expect("release");
        // The single-permit holders go on afterwards.
        sleep(Duration::from_millis(300)).await;
        assert!(
            taken.load(Ordering::Relaxed) > during,
            "the single-permit holders stopped after the big request"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for task in load {
        tokio::time::timeout(Duration::from_secs(25), task)
            .await
            .expect("a load task hung")
            .expect("a load task failed");
    }
    waits
}

/// A request for several permits that stops waiting without them (`Busy`, or its future
/// dropped) leaves the queue at once: the permits it kept are anyone's again, so a
/// `try_acquire` right after it gets one. (A waiter that vanishes without leaving, a killed
/// process, lapses after 2 s: `PERMIT_INTEREST`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_for_several_permits_that_leaves_keeps_nothing() {
    let srv = RedisServer::start().await;
    let mut on_redis = Vec::new();
    for _ in 0..3 {
        on_redis.push(
            leasehold::Locker::builder()
                .url(srv.url())
                .op_timeout(Duration::from_secs(1))
                .build()
                .await
                .expect("connect"),
        );
    }
    let memory = leasehold::Locker::in_memory();
    for (engine, lockers) in [("redis", on_redis), ("memory", vec![memory; 3])] {
        let (holder, big, other) = (&lockers[0], &lockers[1], &lockers[2]);
        let held = holder.semaphore("leaving", 3).acquire().await.unwrap();
        // Gives up: Busy after its wait.
        let err = big
            .semaphore("leaving", 3)
            .wait(Duration::from_millis(300))
            .acquire_many(3)
            .await
            .unwrap_err();
        assert!(matches!(err, leasehold::LockError::Busy { .. }), "{err}");
        sleep(Duration::from_millis(100)).await; // the withdrawal runs in the background
        let one = other.semaphore("leaving", 3).try_acquire().await.unwrap();
        assert!(
            one.is_some(),
            "{engine}: a waiter that gave up still kept its permits"
        );
        drop(one);
        // Cancelled: its future dropped while it waits.
        let waiting = big
            .semaphore("leaving", 3)
            .wait(Duration::from_secs(10))
            .acquire_many(3);
        assert!(tokio::time::timeout(Duration::from_millis(300), waiting)
            .await
            .is_err());
        sleep(Duration::from_millis(100)).await;
        let one = other.semaphore("leaving", 3).try_acquire().await.unwrap();
        assert!(
            one.is_some(),
            "{engine}: a cancelled waiter still kept its permits"
        );
        drop((one, held));
    }
}
