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
