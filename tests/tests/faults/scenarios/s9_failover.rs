//! Scenario 9: a Sentinel failover to a replica that missed the last increments.

use std::time::Duration;

use leasehold_tests::harness::{RedisServer, Sentinels};
use leasehold_tests::history::{monotonic_ns, Rule, Run, WorkerSpec};

use super::s8_restored::{acquisitions_after, check_across_restore};
use super::support::runs;

/// Replication stops (the master shuts its replica out), locks are taken on the master only,
/// then the master is killed and the sentinels promote the replica, whose fence counters are
/// older than the fences handed out since. Failed before finding 10's fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_fences_keep_increasing_across_a_failover_to_a_lagging_replica() {
    for round in 0..runs() {
        let setup = Sentinels::start().await;
        let resource = RedisServer::start().await;
        let mut run = Run::new("failover");
        let lease = Duration::from_millis(500);
        let spec = WorkerSpec::new(&setup.master().url(), &resource.url())
            .sentinel(&setup.sentinel_urls(), setup.master_name())
            .lease(lease)
            .hold(Duration::from_millis(40), 2)
            // The failover takes 2 to 5 s (down-after 1 s, an election); then a tail.
            .duration(Duration::from_secs(12));
        run.spawn(&spec);
        run.spawn(&spec.clone().tasks(2).current_thread(false));
        run.spawn(&spec);
        let warm = acquisitions_after(&run, 0, 10, Duration::from_secs(5)).await;
        assert!(warm >= 10, "only {warm} acquisitions before the fault");

        setup.pause_replication().await;
        let mark = monotonic_ns();
        let lost = acquisitions_after(&run, mark, 6, Duration::from_secs(5)).await;
        assert!(
            lost >= 6,
            "only {lost} acquisitions while replication was off"
        );

        let at = run.fault("failover", "master");
        setup
            .kill_master_and_wait_failover(Duration::from_secs(20))
            .await;
        let healed = run.heal("failover", "master");
        run.wait_all(Duration::from_secs(25)).await;
        let scenario = format!("9-failover-lagging-replica#{round}");
        // A lease granted by the old master and not replicated is gone with it: a second
        // holder may overlap the first (the documented limit of Sentinel without
        // `min_replicas`; the fence is what protects the resource then).
        let report = check_across_restore(
            &mut run,
            &scenario,
            "a failover to a replica that missed the last increments",
            (at, healed),
            &[Rule::Overlap],
        );
        assert!(report.holds > 0);
    }
}
