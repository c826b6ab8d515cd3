//! The killed leader, written once for the engines that run as a 3-member cluster with one
//! leader (ZooKeeper, etcd): the leader dies under load and the history keeps every rule.

use std::future::Future;
use std::time::Duration;

use leasehold_tests::history::{Run, WorkerSpec};
use tokio::time::sleep;

/// Three worker processes contend over `spec`; after 3 s, `find_leader` names the cluster's
/// leader and hands back how to kill it, which happens right after the fault is marked in the
/// history (as `what`). The checker finds no overlap, no fence going back and no stale write
/// accepted, and locks are granted again after the election (a second after the kill).
pub async fn a_killed_leader_breaks_no_rule<F, Fut, K>(
    name: &str,
    spec: &WorkerSpec,
    what: &str,
    find_leader: F,
) where
    F: FnOnce() -> Fut,
    Fut: Future<Output = K>,
    K: FnOnce(),
{
    let mut run = Run::new(name);
    for _ in 0..3 {
        run.spawn(spec);
    }
    sleep(Duration::from_secs(3)).await;
    let kill = find_leader().await;
    let at = run.fault("kill", what);
    kill();
    run.wait_all(Duration::from_secs(40)).await;
    let (history, _report) = run.check_and_record(name);
    let after = history
        .holds_of(0)
        .chain(history.holds_of(1))
        .chain(history.holds_of(2))
        .filter(|h| h.ok.is_some_and(|(t, _)| t > at + 1_000_000_000))
        .count();
    assert!(after > 0, "no lock granted after the election");
}
