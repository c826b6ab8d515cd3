//! The baseline without faults, and the checker's own test: a lock that does not exclude is
//! caught.

use std::time::Duration;

use leasehold_tests::history::{Rule, Run};

use super::support::{admin, Deployment};

async fn baseline(nodes: usize) {
    let d = Deployment::start(nodes).await;
    let mut run = Run::new("baseline");
    // Longer than any run needs: the run ends once 30 holds were granted (at least 3 s), for
    // 45 s at most, however slow the machine (a fixed 3 s of a loaded CI run's made 29).
    let spec = d.spec().duration(Duration::from_secs(120));
    run.spawn(&spec);
    run.spawn(&spec);
    // Two tasks in one process: the local queue and the handover without a round trip.
    run.spawn(&spec.clone().tasks(2).current_thread(false));
    let started = tokio::time::Instant::now();
    run.run_until(Duration::from_secs(45), |history| {
        started.elapsed() >= Duration::from_secs(3) && history.granted() >= 30
    })
    .await;
    run.wait_all(Duration::from_secs(10)).await;
    let (_, report) = run.check_and_record(&format!("0-baseline-{}", d.name()));
    assert!(report.holds >= 30, "too little happened: {report}");
    assert_eq!(
        report.writes_refused, 0,
        "no fault, no stale write: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_without_faults_single() {
    baseline(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_without_faults_redlock() {
    baseline(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_a_lock_that_does_not_exclude() {
    // Two prefixes are two unrelated locks on the same resource: the history must show it.
    let d = Deployment::start(1).await;
    let mut run = Run::new("broken");
    let mut spec = d
        .spec()
        .hold(Duration::from_millis(20), 4)
        .gap(Duration::ZERO)
        .duration(Duration::from_secs(2));
    run.spawn(&spec);
    spec.prefix = "other".into();
    // Fences follow the server clock, so two unrelated counters would hand out tokens in
    // real-time order; one far ahead makes their interleaving show as fences out of order.
    admin(
        &d.nodes[0],
        &["SET", "other:fence:{hist}", "4503599627370496"],
    )
    .await;
    run.spawn(&spec);
    run.wait_all(Duration::from_secs(20)).await;
    let report = run.full_history().check();
    assert!(!report.violations_of(Rule::Overlap).is_empty(), "{report}");
    assert!(
        !report.violations_of(Rule::FenceOrder).is_empty(),
        "{report}"
    );
    assert!(report.writes_refused > 0, "{report}");
}
