//! Scenario 11: read-write locks, semaphores, multi-key locks and leader terms across a
//! restore from persistence, the fence counters' expiry and a Sentinel failover.

use std::time::Duration;

use leasehold_tests::harness::{RedisServer, Sentinels};
use leasehold_tests::history::{monotonic_ns, Report, Rule, Run, WorkerSpec};
use tokio::time::{sleep, Instant};

use super::s8_restored::{aof_file, check_across_restore, Persistence};
use super::support::{admin, runs, Deployment};

/// The primitives besides `lock` that hand out fences, each judged by the checker's one fence
/// rule (readers and permits included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Primitive {
    /// Read-write locks of two keys, 30 % of the holds readers.
    ReadWrite,
    /// A semaphore of 3 permits.
    Semaphore,
    /// `lock_all` of 2 keys among 3.
    Multi,
    /// A leader election; its fences are the terms.
    Leader,
}

impl Primitive {
    fn name(self) -> &'static str {
        match self {
            Primitive::ReadWrite => "rw",
            Primitive::Semaphore => "sem",
            Primitive::Multi => "multi",
            Primitive::Leader => "leader",
        }
    }

    fn keys(self) -> &'static [&'static str] {
        match self {
            Primitive::ReadWrite => &["rw-a", "rw-b"],
            Primitive::Semaphore => &["permits"],
            Primitive::Multi => &["m-a", "m-b", "m-c"],
            Primitive::Leader => &["election"],
        }
    }

    /// `spec`, taking this primitive.
    fn load(self, spec: WorkerSpec) -> WorkerSpec {
        let spec = spec.keys(self.keys());
        match self {
            Primitive::ReadWrite => spec.read_write(30),
            Primitive::Semaphore => spec.semaphore(3),
            Primitive::Multi => spec.multi(2),
            Primitive::Leader => spec.leader(),
        }
    }

    /// The worker that takes the first holds after a fault. For read-write locks one that
    /// only reads: a reader's fence reads the counter, where a writer's reservation first
    /// lifts it to the server clock, which would hide a reader's fence that went back with
    /// the counter. Every hold of the other primitives reserves.
    fn first_after(self, spec: WorkerSpec) -> WorkerSpec {
        match self {
            Primitive::ReadWrite => spec.keys(self.keys()).read_write(100),
            _ => self.load(spec),
        }
    }
}

/// The settings of every worker of scenario 11: leases of 500 ms, holds of 40 ms with two
/// writes (none for readers and permit holders).
fn primitive_spec(spec: WorkerSpec) -> WorkerSpec {
    spec.lease(Duration::from_millis(500))
        .hold(Duration::from_millis(40), 2)
}

/// Starts the load before a fault: two workers (one with two tasks on a multi-thread
/// runtime: the local queue and handovers) that run for `duration`; returns their indexes.
fn first_wave(run: &mut Run, p: Primitive, spec: &WorkerSpec, duration: Duration) -> Vec<usize> {
    let spec = p.load(spec.clone().duration(duration));
    vec![
        run.spawn(&spec),
        run.spawn(&spec.tasks(2).current_thread(false)),
    ]
}

/// The load after a fault: two more workers for 1.5 s.
fn second_wave(run: &mut Run, p: Primitive, spec: &WorkerSpec) {
    let spec = p.load(spec.clone().duration(Duration::from_millis(1500)));
    run.spawn(&spec);
    run.spawn(&spec.tasks(2).current_thread(false));
}

/// Waits (up to `within`) until each of `workers` has exited by itself; whether they did.
async fn exited(run: &mut Run, workers: &[usize], within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        if workers.iter().all(|&w| !run.is_running(w)) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to `within`) until `n` holds that reserve fences (not readers) were granted
/// after `t`; how many were.
async fn reserved_after(run: &Run, t: u64, n: usize, within: Duration) -> usize {
    let until = Instant::now() + within;
    loop {
        let count = run
            .history()
            .holds
            .iter()
            .filter(|h| !h.shared && h.ok.is_some_and(|(ok, _)| ok > t))
            .count();
        if count >= n || Instant::now() >= until {
            return count;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to `within`) until worker `w` has been granted each of `p`'s keys after `t`;
/// the keys it has not (empty when it took them all).
async fn took_each_key_after(
    run: &Run,
    w: usize,
    p: Primitive,
    t: u64,
    within: Duration,
) -> Vec<&'static str> {
    let until = Instant::now() + within;
    loop {
        let history = run.history();
        let missing: Vec<&'static str> = p
            .keys()
            .iter()
            .copied()
            .filter(|key| {
                !history
                    .holds_of(w)
                    .any(|h| h.ok.is_some_and(|(ok, _)| ok > t) && h.keys.iter().any(|k| k == key))
            })
            .collect();
        // Multi-key holds take 2 keys of 3: one of them may wait its turn.
        let enough = match p {
            Primitive::Multi => missing.len() < p.keys().len(),
            _ => missing.is_empty(),
        };
        if enough || Instant::now() >= until {
            return if enough { Vec::new() } else { missing };
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// After a fault (healed at `healed`) that may have taken the fence counters back: worker
/// `first` (running since before) takes each key first, before any other worker takes a
/// lock again (the first wave has exited), then the second wave runs; then `first` is
/// killed (it runs longer than needed, so that it lasts through the fault whatever the
/// fault took) and the run's history is checked: the fences of every hold after the fault
/// are above every fence before it, whatever the kind of either (the checker's one fence
/// rule, and a plain per-key comparison first).
async fn after_the_fault(
    mut run: Run,
    p: Primitive,
    spec: &WorkerSpec,
    first: usize,
    (scenario, what): (&str, &str),
    (at, healed): (u64, u64),
    known: &[Rule],
) -> Report {
    let missing = took_each_key_after(&run, first, p, healed, Duration::from_secs(8)).await;
    assert!(
        missing.is_empty(),
        "{scenario}: worker {first} took no hold of {missing:?} within 8 s of {what}"
    );
    let second: Vec<usize> = {
        let before = run.workers().len();
        second_wave(&mut run, p, spec);
        (before..run.workers().len()).collect()
    };
    let done = exited(&mut run, &second, Duration::from_secs(20)).await;
    run.kill9(first);
    run.wait_all(Duration::from_secs(10)).await;
    let report = check_across_restore(&mut run, scenario, what, (at, healed), known);
    let history = run.history();
    assert!(done, "{scenario}: the second wave did not finish\n{report}");
    let after = |w: usize| {
        history
            .holds_of(w)
            .filter(|h| h.ok.is_some_and(|(ok, _)| ok > healed))
            .count()
    };
    assert!(
        second.iter().all(|&w| after(w) > 0),
        "{scenario}: a worker of the second wave took nothing: {report}"
    );
    if p == Primitive::ReadWrite {
        let writers = history
            .holds
            .iter()
            .filter(|h| !h.shared && h.ok.is_some_and(|(ok, _)| ok > healed))
            .count();
        assert!(writers > 0, "{scenario}: no writer after {what}: {report}");
    }
    report
}

/// Scenario 11a: `p` under load on one Redis server; an RDB snapshot (or the AOF's length,
/// for a machine crash) is taken, more holds reserve fences, then the first wave ends and the
/// server is killed and restarted from its files while `first` keeps taking the keys. Its
/// holds come first after the restart; a reader's fence read from the restored counter would
/// go back.
async fn primitive_restored(p: Primitive, persistence: Persistence) {
    assert_ne!(
        persistence,
        Persistence::Aof,
        "nothing goes back with a full AOF"
    );
    for round in 0..runs() {
        let d = Deployment::start_with(1, persistence.options()).await;
        let mut run = Run::new(&format!("restore-{}", p.name()));
        let spec = primitive_spec(d.spec());
        let wave = first_wave(&mut run, p, &spec, Duration::from_secs(3));
        let first = run.spawn(&p.first_after(spec.clone().duration(Duration::from_secs(30))));
        let warm = reserved_after(&run, 0, 10, Duration::from_secs(5)).await;
        assert!(
            warm >= 10,
            "only {warm} holds reserved fences before the snapshot"
        );

        let node = &d.nodes[0];
        let length = match persistence {
            Persistence::Rdb => {
                admin(node, &["SAVE"]).await;
                None
            }
            _ => Some(std::fs::metadata(aof_file(node)).expect("AOF").len()),
        };
        let mark = monotonic_ns();
        // These holds' fences are in no snapshot (and not yet synced).
        let lost = reserved_after(&run, mark, 10, Duration::from_secs(5)).await;
        assert!(
            lost >= 10,
            "only {lost} holds reserved fences after the snapshot"
        );
        assert!(
            exited(&mut run, &wave, Duration::from_secs(8)).await,
            "the first wave did not finish"
        );

        let target = persistence.name();
        let at = run.fault("restore", target);
        node.kill9();
        if let Some(len) = length {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(aof_file(node))
                .expect("open the AOF");
            file.set_len(len).expect("cut the AOF back");
        }
        node.restart_from_disk().await;
        let healed = run.heal("restore", target);
        let scenario = format!("11-restore-{}-{}#{round}", persistence.name(), p.name());
        let what = match persistence {
            Persistence::Rdb => "a restart from an RDB snapshot",
            _ => "a restart from an AOF that lost its unsynced tail",
        };
        let report =
            after_the_fault(run, p, &spec, first, (&scenario, what), (at, healed), &[]).await;
        assert!(report.holds > 0);
    }
}

/// Read-write locks across a restart from an RDB snapshot: readers' fences included. Failed
/// before the fix of issue 27's bug 2 (readers read the restored counter as it was): "`rw-a`
/// got 1751…, which is below … before it".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_read_write_fences_keep_increasing_across_a_restart_from_an_rdb_snapshot() {
    primitive_restored(Primitive::ReadWrite, Persistence::Rdb).await;
}

/// Read-write locks across a machine crash that cost the AOF its unsynced tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_read_write_fences_keep_increasing_across_a_restart_from_an_aof_that_lost_its_tail() {
    primitive_restored(Primitive::ReadWrite, Persistence::AofMachineCrash).await;
}

/// Permit holders' fences across a restart from an RDB snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_permit_fences_keep_increasing_across_a_restart_from_an_rdb_snapshot() {
    primitive_restored(Primitive::Semaphore, Persistence::Rdb).await;
}

/// Each key's fence of multi-key holds across a restart from an RDB snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_multi_key_fences_keep_increasing_across_a_restart_from_an_rdb_snapshot() {
    primitive_restored(Primitive::Multi, Persistence::Rdb).await;
}

/// Leader terms across a restart from an RDB snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_leader_terms_keep_increasing_across_a_restart_from_an_rdb_snapshot() {
    primitive_restored(Primitive::Leader, Persistence::Rdb).await;
}

/// Scenario 11b: `p` with a `fence_ttl` of 1 s (the shortest the locker takes); the load
/// stops, nothing touches the keys until every fence counter has expired (checked), then
/// `first` takes each key first and the second wave follows. A reader's fence read from the
/// missing counter would be 0.
async fn primitive_counters_expired(p: Primitive) {
    for round in 0..runs() {
        let d = Deployment::start(1).await;
        let mut run = Run::new(&format!("expiry-{}", p.name()));
        let ttl = Duration::from_secs(1);
        let spec = primitive_spec(d.spec()).fence_ttl(ttl);
        let wave = first_wave(&mut run, p, &spec, Duration::from_millis(1500));
        assert!(
            exited(&mut run, &wave, Duration::from_secs(10)).await,
            "the first wave did not finish"
        );
        let at = run.fault("expiry", "fence-counters");
        let before = run.history().check();
        assert!(
            before.holds >= 10,
            "too little happened before the gap: {before}"
        );
        // The counters go fence_ttl after their last use (a reservation, at most 1.5 s ago).
        let until = Instant::now() + ttl * 5;
        let mut left = d.nodes[0].keys("*fence*").await;
        while !left.is_empty() && Instant::now() < until {
            sleep(Duration::from_millis(50)).await;
            left = d.nodes[0].keys("*fence*").await;
        }
        assert!(
            left.is_empty(),
            "fence counters still there {:?} after their fence_ttl: {left:?}",
            ttl * 5
        );
        let healed = run.heal("expiry", "fence-counters");
        let first = run.spawn(&p.first_after(spec.clone().duration(Duration::from_secs(30))));
        let scenario = format!("11-expiry-{}#{round}", p.name());
        let report = after_the_fault(
            run,
            p,
            &spec,
            first,
            (&scenario, "the fence counters' expiry"),
            (at, healed),
            &[],
        )
        .await;
        assert!(report.holds > 0);
    }
}

/// Failed before the fix of issue 27's bug 2: a reader after the counter expired got
/// fence 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_read_write_fences_keep_increasing_after_the_fence_counters_expired() {
    primitive_counters_expired(Primitive::ReadWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_permit_fences_keep_increasing_after_the_fence_counter_expired() {
    primitive_counters_expired(Primitive::Semaphore).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_multi_key_fences_keep_increasing_after_the_fence_counters_expired() {
    primitive_counters_expired(Primitive::Multi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_leader_terms_keep_increasing_after_the_fence_counter_expired() {
    primitive_counters_expired(Primitive::Leader).await;
}

/// Scenario 11c: `p` through Sentinel; replication stops, holds reserve fences on the master
/// only, the first wave ends, then the master is killed and the sentinels promote the
/// replica, whose counters are older than those fences, while `first` keeps taking the keys.
async fn primitive_failover(p: Primitive) {
    for round in 0..runs() {
        let setup = Sentinels::start().await;
        let resource = RedisServer::start().await;
        let mut run = Run::new(&format!("failover-{}", p.name()));
        let spec = primitive_spec(
            WorkerSpec::new(&setup.master().url(), &resource.url())
                .sentinel(&setup.sentinel_urls(), setup.master_name()),
        );
        let wave = first_wave(&mut run, p, &spec, Duration::from_secs(3));
        let first = run.spawn(&p.first_after(spec.clone().duration(Duration::from_secs(60))));
        let warm = reserved_after(&run, 0, 10, Duration::from_secs(5)).await;
        assert!(
            warm >= 10,
            "only {warm} holds reserved fences before the fault"
        );

        setup.pause_replication().await;
        let mark = monotonic_ns();
        let lost = reserved_after(&run, mark, 10, Duration::from_secs(5)).await;
        assert!(
            lost >= 10,
            "only {lost} holds reserved fences while replication was off"
        );
        assert!(
            exited(&mut run, &wave, Duration::from_secs(8)).await,
            "the first wave did not finish"
        );

        let at = run.fault("failover", "master");
        setup
            .kill_master_and_wait_failover(Duration::from_secs(20))
            .await;
        let healed = run.heal("failover", "master");
        let scenario = format!("11-failover-{}#{round}", p.name());
        // A lease granted by the old master and not replicated is gone with it: a second
        // holder may overlap the first (the documented limit of Sentinel without
        // `min_replicas`, as in scenario 9; the fence is what protects the resource then).
        let report = after_the_fault(
            run,
            p,
            &spec,
            first,
            (
                &scenario,
                "a failover to a replica that missed the last increments",
            ),
            (at, healed),
            &[Rule::Overlap, Rule::Permits],
        )
        .await;
        assert!(report.holds > 0);
    }
}

/// Failed before the fix of issue 27's bug 2: readers read the promoted replica's counter as
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_read_write_fences_keep_increasing_across_a_failover_to_a_lagging_replica() {
    primitive_failover(Primitive::ReadWrite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_permit_fences_keep_increasing_across_a_failover_to_a_lagging_replica() {
    primitive_failover(Primitive::Semaphore).await;
}
