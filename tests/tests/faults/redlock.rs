//! RedLock's readers and leaders in the history suite: worker processes on three masters take
//! read and write locks, or campaign for a leadership, in a loop while a master is killed; the
//! checker finds no writer overlapping anyone, no reader's fence outside its writers', no two
//! leaders at once and no term going back.

use std::time::Duration;

use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::{History, Run, WorkerSpec};

/// How long a run may take to reach what its test asks for after the kill: far more than it
/// needs on a quiet machine (about a second), so that a loaded one only makes it slower.
const ENOUGH_WITHIN: Duration = Duration::from_secs(45);

/// How many of `history`'s holds began after `at`, and how many of those were shared.
fn holds_after(history: &History, at: u64) -> (usize, usize) {
    let after: Vec<_> = history
        .holds
        .iter()
        .filter(|h| h.ok.is_some_and(|(t, _)| t > at))
        .collect();
    (after.len(), after.iter().filter(|h| h.shared).count())
}

/// Four workers over three masters and a resource server; master 0 is killed once the workers
/// hold, and stays down. The run goes on until `enough(history, kill)` says the history holds
/// what the test needs (judged by the holds the workers logged, not by a clock: a loaded
/// machine only takes longer), or [`ENOUGH_WITHIN`] passed; then the workers are killed.
/// Returns the run's report after the checker passed it, and how many holds (and of them
/// shared ones) began after the kill.
async fn run_with_a_killed_master(
    name: &str,
    spec: impl FnOnce(WorkerSpec) -> WorkerSpec,
    enough: impl Fn(&History, u64) -> bool,
) -> (leasehold_tests::history::Report, (usize, usize)) {
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
            // Longer than any run needs: the test ends the workers once enough happened.
            .duration(Duration::from_secs(120)),
    );
    let mut run = Run::new(name);
    for _ in 0..4 {
        run.spawn(&spec);
    }
    // The kill comes once the workers are under way (ten holds), whatever the machine's speed.
    run.wait_for(ENOUGH_WITHIN, |history| history.granted() >= 10)
        .await;
    let at = run.fault("kill", "master 0");
    servers[0].kill9();
    run.run_until(ENOUGH_WITHIN, |history| enough(history, at))
        .await;
    run.wait_all(Duration::from_secs(10)).await;
    let (history, report) = run.check_and_record(name);
    (report, holds_after(&history, at))
}

/// Readers and writers of four processes on a RedLock, one master killed mid-run: the
/// remaining two are a majority, so readers keep their shares, writers stay excluded, and
/// readers' fences stay between their writers' (the checker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_readers_and_writers_through_a_killed_master() {
    let (report, (after, shared)) = run_with_a_killed_master(
        "redlock-rw-kill",
        |spec| spec.keys(&["doc:{7}"]).read_write(70),
        // Readers and writers both, before and after the kill.
        |history, at| {
            let (after, shared) = holds_after(history, at);
            let reads = history
                .holds
                .iter()
                .filter(|h| h.ok.is_some() && h.shared)
                .count();
            let all = history.granted();
            reads >= 30 && all - reads >= 10 && shared >= 5 && after - shared >= 5
        },
    )
    .await;
    assert!(
        report.read_holds >= 30 && report.holds - report.read_holds >= 10,
        "too little happened: {report}"
    );
    assert!(
        shared >= 5 && after - shared >= 5,
        "only {shared} read and {} write holds after the kill: {report}",
        after - shared
    );
}

/// Campaigns of four processes on a RedLock, one master killed mid-run: one leader at a time,
/// terms increasing (the checker), and leaders elected after the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_leaders_through_a_killed_master() {
    let (report, (after, _)) = run_with_a_killed_master(
        "redlock-leader-kill",
        |spec| spec.keys(&["scheduler"]).leader(),
        |history, at| {
            let all = history.granted();
            all >= 20 && holds_after(history, at).0 >= 5
        },
    )
    .await;
    assert!(report.holds >= 20, "too few leaderships: {report}");
    assert!(
        after >= 5,
        "only {after} leaderships after the kill: {report}"
    );
}
