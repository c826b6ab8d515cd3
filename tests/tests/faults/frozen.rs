//! The frozen holder, written once for every engine whose locks outlive a paused process only
//! as long as a lease or session: ZooKeeper, etcd and PostgreSQL (Redis's is a scenario of
//! its own, `scenarios`, among its failovers).

use std::time::Duration;

use leasehold_tests::history::{monotonic_ns, Run, WorkerSpec};
use tokio::time::sleep;

/// Three worker processes contend over `spec`; one holder's process is frozen (SIGSTOP) early
/// in a hold for three times `expiry` (the lease, or the session timeout: past it and past the
/// client's own expiry), then thawed. The checker finds no overlap, no fence going back, no
/// stale write accepted; the next holder got the lock with a higher fence while the holder was
/// frozen, and the frozen one was told of its loss once thawed.
pub async fn a_frozen_holder_is_deposed_and_told(name: &str, spec: &WorkerSpec, expiry: Duration) {
    // The workers run until each was granted a lock after the thaw (45 s at most), whatever
    // duration the engine's spec gives them.
    let spec = spec.clone().duration(Duration::from_secs(120));
    let mut run = Run::new(name);
    for _ in 0..3 {
        run.spawn(&spec);
    }
    sleep(Duration::from_secs(2)).await;
    let (w, victim) = run.young_hold().await.expect("no hold to freeze");
    let at = monotonic_ns();
    run.pause(w);
    sleep(expiry * 3).await;
    let thawed = run.resume(w);
    let recovered = run
        .run_until_each_granted_after(thawed, Duration::from_secs(45))
        .await;
    let (history, report) = run.check_and_record(name);
    if let Err(after) = recovered {
        panic!("not every worker was granted a lock within 45 s of the thaw: {after:?}");
    }
    let hold = history.hold(&victim).expect("victim in history");
    // Frozen 50 ms at most into a 500 ms hold: the freeze lands inside it.
    assert!(
        hold.rel.is_none_or(|(t, _)| t >= at),
        "the freeze missed the hold: {hold:?}"
    );
    assert!(
        hold.lost.is_some()
            || hold.rel.is_some_and(|(_, held)| !held)
            || hold
                .rel_done
                .as_ref()
                .is_some_and(|(_, how)| how == "rlost" || how == "runav"),
        "the frozen holder was never told: {hold:?}"
    );
    let next = history
        .first_acquired_after(&hold.key, at)
        .expect("nobody took over while the holder was frozen");
    assert!(next.fence() > hold.fence());
    assert!(report.operations() > 0);
}
