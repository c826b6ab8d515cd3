//! RedLock's readers and leaders in the history suite: worker processes on three masters take
//! read and write locks, or campaign for a leadership, in a loop while a master is killed; the
//! checker finds no writer overlapping anyone, no reader's fence outside its writers', no two
//! leaders at once and no term going back.

use std::time::Duration;

use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::{Run, WorkerSpec};
use tokio::time::sleep;

/// Four workers over three masters and a resource server; master 0 is killed `kill_after`
/// into the run and stays down. Returns the run's report after the checker passed it, and how
/// many holds began after the kill.
async fn run_with_a_killed_master(
    name: &str,
    spec: impl FnOnce(WorkerSpec) -> WorkerSpec,
) -> (leasehold_tests::history::Report, usize) {
    let mut servers = RedisServer::start_many(4).await;
    let resource = servers.pop().expect("started");
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let spec = spec(
        WorkerSpec::new(&urls[0], &resource.url())
            .urls(&urls)
            .lease(Duration::from_millis(600))
            .wait(Duration::from_secs(5))
            .hold(Duration::from_millis(20), 2)
            .gap(Duration::from_millis(10))
            // Six seconds after the kill at 2 s: on a loaded machine (CI runs the suites side
            // by side) a round of campaigns can take seconds.
            .duration(Duration::from_secs(8)),
    );
    let mut run = Run::new(name);
    for _ in 0..4 {
        run.spawn(&spec);
    }
    sleep(Duration::from_secs(2)).await;
    let at = run.fault("kill", "master 0");
    servers[0].kill9();
    run.wait_all(Duration::from_secs(30)).await;
    let (history, report) = run.check_and_record(name);
    let after = (0..4)
        .flat_map(|w| history.holds_of(w).collect::<Vec<_>>())
        .filter(|h| h.ok.is_some_and(|(t, _)| t > at))
        .count();
    (report, after)
}

/// Readers and writers of four processes on a RedLock, one master killed mid-run: the
/// remaining two are a majority, so readers keep their shares, writers stay excluded, and
/// readers' fences stay between their writers' (the checker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_readers_and_writers_through_a_killed_master() {
    let (report, after) = run_with_a_killed_master("redlock-rw-kill", |spec| {
        spec.keys(&["doc:{7}"]).read_write(70)
    })
    .await;
    assert!(
        report.read_holds >= 30 && report.holds - report.read_holds >= 10,
        "too little happened: {report}"
    );
    assert!(after >= 10, "only {after} holds after the kill: {report}");
}

/// Campaigns of four processes on a RedLock, one master killed mid-run: one leader at a time,
/// terms increasing (the checker), and leaders elected after the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_leaders_through_a_killed_master() {
    let (report, after) = run_with_a_killed_master("redlock-leader-kill", |spec| {
        spec.keys(&["scheduler"]).leader()
    })
    .await;
    assert!(report.holds >= 20, "too few leaderships: {report}");
    assert!(
        after >= 5,
        "only {after} leaderships after the kill: {report}"
    );
}
