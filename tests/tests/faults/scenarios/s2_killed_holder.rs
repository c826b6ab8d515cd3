//! Scenario 2: a holder killed with SIGKILL; its lock is free after the lease.

use std::time::Duration;

use leasehold_tests::history::Run;
use tokio::time::{sleep, Instant};

use super::support::{ms, runs, some_open_hold, Deployment};

async fn killed_holder(nodes: usize) {
    for round in 0..runs() {
        let d = Deployment::start(nodes).await;
        let mut run = Run::new("kill");
        let lease = Duration::from_millis(600);
        let total = Duration::from_secs(7);
        let started = Instant::now();
        let spec = d
            .spec()
            .lease(lease)
            .hold(Duration::from_millis(40), 2)
            .duration(total);
        for _ in 0..3 {
            run.spawn(&spec);
        }
        sleep(Duration::from_millis(800)).await;
        let mut kills = Vec::new();
        while started.elapsed() < Duration::from_secs(5) {
            let Some((w, hold)) = some_open_hold(&mut run).await else {
                continue;
            };
            let at = run.kill9(w);
            kills.push((hold, at));
            // A replacement, so that three keep contending.
            let left = total.saturating_sub(started.elapsed());
            run.spawn(&spec.clone().duration(left));
            sleep(lease + Duration::from_millis(400)).await;
        }
        run.wait_all(Duration::from_secs(20)).await;
        let (history, _) = run.check_and_record(&format!("2-kill-{}#{round}", d.name()));
        assert!(!kills.is_empty());
        let margin = 500_000_000;
        for (id, at) in &kills {
            let hold = history.hold(id).expect("victim in history");
            if hold.rel.is_some() {
                continue; // killed just after it let go
            }
            let next = history
                .first_acquired_after(&hold.key, *at)
                .unwrap_or_else(|| panic!("nobody acquired after {id} was killed"));
            let (ok, fence) = next.ok.expect("acquired");
            let free_after = ok - at;
            eprintln!(
                "killed {id}: next holder {} after {:.0} ms",
                next.id,
                ms(free_after)
            );
            assert!(
                free_after <= lease.as_nanos() as u64 + margin,
                "the lock of killed {id} stayed taken {:.0} ms (lease {lease:?})",
                ms(free_after)
            );
            assert!(Some(fence) > hold.fence());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_a_killed_holders_lock_is_free_after_the_lease_single() {
    killed_holder(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_a_killed_holders_lock_is_free_after_the_lease_redlock() {
    killed_holder(3).await;
}
