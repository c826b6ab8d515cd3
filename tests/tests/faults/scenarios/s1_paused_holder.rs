//! Scenario 1: a holder paused (SIGSTOP) past its lease cannot write, renew or release.

use std::time::Duration;

use leasehold_tests::history::{monotonic_ns, Run};
use tokio::time::{sleep, Instant};

use super::support::{assert_reported_lost, runs, some_open_hold, Deployment};

async fn paused_holder(nodes: usize) {
    for round in 0..runs() {
        let d = Deployment::start(nodes).await;
        let mut run = Run::new("pause");
        let lease = Duration::from_millis(400);
        let spec = d
            .spec()
            .lease(lease)
            .hold(Duration::from_millis(40), 2)
            .duration(Duration::from_secs(7));
        for _ in 0..4 {
            run.spawn(&spec);
        }
        sleep(Duration::from_millis(1000)).await;
        let mut victims = Vec::new();
        let stop_at = Instant::now() + Duration::from_secs(4);
        while Instant::now() < stop_at {
            let Some((w, hold)) = some_open_hold(&mut run).await else {
                continue;
            };
            let at = monotonic_ns();
            run.pause(w);
            // Well past the lease: another worker takes over meanwhile.
            sleep(lease * 5 / 2).await;
            run.resume(w);
            victims.push((hold, at));
            sleep(Duration::from_millis(300)).await;
        }
        run.wait_all(Duration::from_secs(20)).await;
        let (history, report) = run.check_and_record(&format!("1-pause-{}#{round}", d.name()));
        let mut hit = 0;
        for (id, at) in &victims {
            let hold = history.hold(id).expect("victim in history");
            // The pause may have landed just after the release was invoked.
            if hold.rel.is_some_and(|(t, _)| t < *at) {
                continue;
            }
            hit += 1;
            // It resumed, tried to write (refused), to renew (failed) and to release (failed).
            assert_reported_lost(&history, id, *at);
            let next = history
                .first_acquired_after(&hold.key, *at)
                .expect("someone took over during the pause");
            assert!(next.fence() > hold.fence());
        }
        assert!(hit > 0, "no pause landed inside a hold");
        assert!(
            report.blind_refused > 0,
            "no resumed holder tried its stale fence: {report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_a_holder_paused_past_its_lease_cannot_write_renew_or_release_single() {
    paused_holder(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_a_holder_paused_past_its_lease_cannot_write_renew_or_release_redlock() {
    paused_holder(3).await;
}
