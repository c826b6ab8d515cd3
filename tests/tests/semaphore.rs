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
