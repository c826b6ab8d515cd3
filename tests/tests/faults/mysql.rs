//! MySQL (MariaDB) under faults, with worker processes and the history checker, as
//! `postgres.rs` does for PostgreSQL: a holder process frozen past its lease, the server
//! restarted under load (normal shutdown and `kill -9`), every connection cut and then stalled
//! by the proxy for longer than a lease, and the database restored from an older dump under
//! load. The checker finds any overlap of believed holdings, any fence that goes back, any stale
//! write the fenced resource accepted and any update it lost. The resource is a PostgreSQL
//! database (another server, never faulted), claimed with `postgres::claim_fence`.

use std::time::Duration;

use leasehold_tests::harness::{MysqlServer, PgServer, ProxyMode, TcpProxy};
use leasehold_tests::history::{monotonic_ns, Rule, Run, WorkerSpec};
use tokio::time::sleep;

use crate::scenarios::s8_restored::{acquisitions_after, check_across_restore};

/// Locks granted more than `at` (ns), over every worker of a run of `workers`.
fn granted_after(history: &leasehold_tests::history::History, workers: usize, at: u64) -> usize {
    (0..workers)
        .flat_map(|w| history.holds_of(w))
        .filter(|h| h.ok.is_some_and(|(t, _)| t > at))
        .count()
}

/// The holder's process is frozen past its lease: its row expires on the server's clock, the
/// next holder takes the row over with a higher fence, and the frozen one, once thawed, is
/// told of its loss and cannot write with its stale fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_process_frozen_past_its_lease_is_deposed_and_told() {
    let db = MysqlServer::start().await;
    let resource = PgServer::start().await;
    let lease = Duration::from_secs(1);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .mysql(&db.url())
        .lease(lease)
        .op_timeout(Duration::from_millis(500))
        .hold(Duration::from_millis(500), 3)
        .duration(Duration::from_secs(10));
    crate::frozen::a_frozen_holder_is_deposed_and_told("mysql-pause", &spec, lease).await;
}

/// The server is restarted twice while 3 worker processes contend (one of them taking both
/// keys with `lock_all`), once with a normal shutdown (SIGTERM) and once killed (SIGKILL: crash
/// recovery from InnoDB's redo log). No overlap, no stale write, fences increasing across both
/// restarts, and locks granted after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_restarted_under_load_breaks_no_rule_of_the_history() {
    let db = MysqlServer::start().await;
    let resource = PgServer::start().await;
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .mysql(&db.url())
        .keys(&["a", "b"])
        .tasks(2)
        .lease(Duration::from_secs(1))
        .op_timeout(Duration::from_millis(500))
        .hold(Duration::from_millis(30), 2)
        .duration(Duration::from_secs(16));
    let mut run = Run::new("mysql-restart");
    run.spawn(&spec);
    run.spawn(&spec);
    run.spawn(&spec.clone().multi(2));
    sleep(Duration::from_secs(3)).await;
    let normal = run.fault("restart", "mysql normal shutdown");
    db.restart_fast().await;
    run.heal("restart", "mysql normal shutdown");
    sleep(Duration::from_secs(4)).await;
    let killed = run.fault("kill", "mysql");
    db.restart().await;
    run.heal("kill", "mysql");
    run.wait_all(Duration::from_secs(40)).await;
    let (history, report) = run.check_and_record("mysql-restart");
    assert!(report.operations() > 0);
    assert!(
        granted_after(&history, 3, normal) > 0,
        "no lock granted after the normal restart"
    );
    assert!(
        granted_after(&history, 3, killed + 1_000_000_000) > 0,
        "no lock granted after the crash restart"
    );
}

/// Every connection of every worker is cut by the proxy, and new ones refused, for three
/// leases; then every connection stalls (bytes held, no error) for three leases: holders learn
/// their loss on their own clocks, nothing overlaps, calls end in time, and the workers lock
/// again once the proxy passes bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_cut_and_stalled_by_the_proxy_break_no_rule_of_the_history() {
    let db = MysqlServer::start().await;
    let proxy = TcpProxy::start(db.addr()).await;
    let resource = PgServer::start().await;
    let lease = Duration::from_secs(1);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .mysql(&db.url_at(proxy.addr()))
        .lease(lease)
        .op_timeout(Duration::from_millis(500))
        .hold(Duration::from_millis(200), 2)
        // Longer than any run needs: the test ends the workers once each recovered.
        .duration(Duration::from_secs(120));
    let mut run = Run::new("mysql-cut");
    for _ in 0..3 {
        run.spawn(&spec);
    }
    // The cut comes once the workers are under way, whatever the machine's speed.
    let under_way = run
        .wait_for(Duration::from_secs(45), |history| history.granted() >= 3)
        .await;
    assert!(under_way, "the workers took no lock before the faults");
    let cut = run.fault("cut", "proxy");
    proxy.set_mode(ProxyMode::Cut);
    sleep(lease * 3).await;
    proxy.set_mode(ProxyMode::Pass);
    let healed = run.heal("cut", "proxy");
    sleep(lease).await;
    let stall = run.fault("stall", "proxy");
    proxy.set_mode(ProxyMode::Stall);
    sleep(lease * 3).await;
    proxy.set_mode(ProxyMode::Pass);
    let unstalled = run.heal("stall", "proxy");
    // Recovery judged by what the workers did (as on PostgreSQL): each is granted the lock
    // after the proxy healed, within 45 s.
    let recovered = run
        .run_until_each_granted_after(unstalled, Duration::from_secs(45))
        .await;
    let (history, report) = run.check_and_record("mysql-cut");
    assert!(report.operations() > 0);
    assert!(cut < healed && healed < stall);
    // No lock can be granted while no byte reaches the server (beyond a call answered just
    // before the fault, within the op timeout): a grant then would mean the workers reached
    // the server some other way than the proxy (the server's Unix socket, say).
    let op = Duration::from_millis(500).as_nanos() as u64;
    for (from, to) in [(cut + op, healed), (stall + op, unstalled)] {
        let during = granted_after(&history, 3, from) - granted_after(&history, 3, to);
        assert_eq!(
            during, 0,
            "{during} locks granted while the proxy passed nothing"
        );
    }
    if let Err(after) = recovered {
        panic!(
            "not every worker was granted the lock within 45 s of the proxy healing (grants \
             after it, by worker: {after:?})"
        );
    }
}

/// The lock database is restored from a dump taken under load, while 3 workers contend:
/// every lock, guard row and fence floor committed since the dump is gone. Fences must still
/// never go back across the restore (checked first, per key), no stale write may be accepted,
/// and locks are granted after it. Holdings may overlap across the restore itself (a holder's
/// row is gone while it still believes its lease, as after any restore of a lock store): that
/// is what fences are for, so only the overlap rule is waived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_from_an_older_dump_sends_no_fence_back() {
    let db = MysqlServer::start().await;
    let resource = PgServer::start().await;
    let lease = Duration::from_millis(500);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .mysql(&db.url())
        .lease(lease)
        .op_timeout(Duration::from_millis(500))
        .hold(Duration::from_millis(40), 2)
        // Longer than any run needs: the test ends the workers once each locked again.
        .duration(Duration::from_secs(120));
    let mut run = Run::new("mysql-restore");
    run.spawn(&spec);
    // Two tasks: a local handover uses fences of its own.
    run.spawn(&spec.clone().tasks(2).current_thread(false));
    run.spawn(&spec);
    let warm = acquisitions_after(&run, 0, 10, Duration::from_secs(5)).await;
    assert!(warm >= 10, "only {warm} acquisitions before the dump");
    let dump = db.dump("older").await;
    let mark = monotonic_ns();
    // These acquisitions are in no dump.
    let lost = acquisitions_after(&run, mark, 6, Duration::from_secs(5)).await;
    assert!(lost >= 6, "only {lost} acquisitions after the dump");

    let at = run.fault("restore", "mysql older dump");
    db.restore_dump(&dump).await;
    let healed = run.heal("restore", "mysql older dump");
    // Judged by what the workers did: each is granted a lock after the restore, within 45 s.
    let recovered = run
        .run_until_each_granted_after(healed, Duration::from_secs(45))
        .await;
    let report = check_across_restore(
        &mut run,
        "mysql-restore",
        "a restore from an older dump",
        (at, healed),
        &[Rule::Overlap],
    );
    assert!(report.holds > 0);
    if let Err(after) = recovered {
        panic!("not every worker was granted a lock within 45 s of the restore: {after:?}");
    }
}
