//! Scenario 7: leasehold on etcd against etcd's own Lock service, through the client the engine
//! uses, on the same throwaway server, in the same run: uncontended cycles, and one hot key in
//! one process and in four; and ours alone: `lock_all` of free keys against a single lock, and
//! a reservation (a read lock and seat locks) at once against one lock after another.
//!
//! Both hold their locks with etcd leases of the same TTL (leasehold's default session timeout,
//! 10 s) kept alive by one stream. Requests are not counted: the service's own reads and writes
//! happen inside the server, where etcd's metrics would not count them alike.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::EtcdServer;

use crate::baselines::{
    EtcdFencedTxn, EtcdLockService, ETCD_FENCED_TXN, ETCD_KEYS_BY_HAND, ETCD_LOCK_SERVICE,
};
use crate::engine::Engine;
use crate::hot_key::{
    handover_p50, report_against, run_each, Contender, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
use crate::measure::in_turns;
use crate::report::Report;
use crate::versus::{self, Against, ByHand};

/// Scenario 7: uncontended cycles at 1 and 16 tasks, then one hot key, in one process and in
/// four.
pub(crate) async fn scenario(
    report: &mut Report,
    etcd: &EtcdServer,
    duration: Duration,
    rounds: usize,
) {
    uncontended(report, etcd, duration).await;
    hot_key(report, etcd, rounds).await;
}

async fn uncontended(report: &mut Report, etcd: &EtcdServer, duration: Duration) {
    let endpoint = &etcd.endpoint();
    let locker = Engine::Etcd.locker(endpoint).await;
    // One lease for the process: the tasks never share a lock name here, so the service never
    // sees one lease ask twice for the same lock.
    let service = EtcdLockService::connect(endpoint).await;
    let by_hand = EtcdFencedTxn::connect(endpoint).await;
    // Against both, on etcd's history as its default (no auto-compaction) leaves it, then
    // compacted every second, as a server run with auto-compaction keeps it. Each of our
    // acquisitions puts a key of its own (its tag), and until a compaction each one's
    // deletion stays in etcd's index, where every later check that the lock's range is empty
    // walks over it; the service and the transactions by hand put one key per lock and lease
    // again and again.
    for (compacted, history) in [(false, ""), (true, ", history compacted every second")] {
        let _compacting = match compacted {
            true => Some(compacting(etcd, COMPACT_EVERY).await),
            false => None,
        };
        let against = Against {
            name: ETCD_LOCK_SERVICE,
            metric: history,
        };
        let service = (&locker, &service);
        let service_key = |t, k| format!("u-{t}-{k}");
        let pid = etcd.pid();
        versus::uncontended_against(
            report,
            "7 etcd",
            service,
            service_key,
            against,
            duration,
            pid,
        )
        .await;
        let metric = format!(" vs the same transactions by hand{history}");
        let against = Against {
            name: ETCD_FENCED_TXN,
            metric: &metric,
        };
        let by_hand = (&locker, &by_hand);
        let by_hand_key = |t, k| format!("f-{t}-{k}");
        versus::uncontended_against(
            report,
            "7 etcd",
            by_hand,
            by_hand_key,
            against,
            duration,
            pid,
        )
        .await;
    }
    versus::several_keys(report, "7 etcd", &locker, duration).await;
    let floor = ByHand {
        all: &by_hand,
        name: ETCD_KEYS_BY_HAND,
        one: &by_hand,
        one_name: ETCD_FENCED_TXN,
        baseline_key: |t, k| format!("a-{t}-{k}"),
        metric: ", history compacted every second",
    };
    // Compacted, so that the rows compare the work of a cycle, not the deleted keys that the
    // rows before left in our locks' ranges (the rows above measure that).
    let compacted = compacting(etcd, COMPACT_EVERY).await;
    versus::several_keys_by_hand(report, "7 etcd", &locker, floor, duration, etcd.pid()).await;
    drop(compacted);
    reservation(report, &locker, duration).await;
}

/// Seats of a reservation: write locks taken beside the show's read lock.
const SEATS: usize = 4;

/// A reservation, as a booking request takes it: the show's read lock (shared by every task)
/// and [`SEATS`] seat locks, all in one `lock_all`, against the same locks taken one after
/// another (the read lock, then each seat in order; what `lock_all` did on etcd before it took
/// free keys in one transaction), at 1 and 16 tasks, taking turns. Issue 49 asks for 5 times
/// the rate of taking them one after another.
async fn reservation(report: &mut Report, locker: &Locker, duration: Duration) {
    for tasks in [1usize, 16] {
        let seats = |t: usize, i: u64| -> Vec<String> {
            (0..SEATS)
                .map(|s| format!("seat:{t}:{}:{s}", i % 16))
                .collect()
        };
        let l = locker.clone();
        let at_once = move |t: usize, i: u64| {
            let l = l.clone();
            async move {
                let guard = l
                    .lock_all(seats(t, i))
                    .read_keys(["show"])
                    .acquire()
                    .await
                    .expect("reservation");
                guard.release().await.expect("release");
            }
        };
        let l = locker.clone();
        let one_by_one = move |t: usize, i: u64| {
            let l = l.clone();
            async move {
                let show = l.read_lock("show").acquire().await.expect("read lock");
                let mut held = Vec::with_capacity(SEATS);
                for seat in seats(t, i) {
                    held.push(l.lock(seat).acquire().await.expect("seat"));
                }
                for guard in held {
                    guard.release().await.expect("release");
                }
                show.release().await.expect("release");
            }
        };
        let (ours, by_hand) = in_turns(tasks, duration, at_once, one_by_one).await;
        report.add(
            &format!("7 etcd uncontended, {tasks} tasks"),
            &format!("reservation (1 read + {SEATS} write locks), cycles/s"),
            ours,
            by_hand,
            "the same locks taken one after another, ours",
            "cycles/s",
        );
    }
}

/// Scenario 7's hot key, in one process and in four.
async fn hot_key(report: &mut Report, etcd: &EtcdServer, rounds: usize) {
    let rounds = ROUNDS_AT_16_TASKS * rounds;
    let endpoint = etcd.endpoint();
    let contenders = [Contender::Ours(Engine::Etcd), Contender::EtcdLockService];
    for shape in ENGINE_SHAPES {
        let measured = run_each(&endpoint, shape, rounds, &contenders, &()).await;
        let [(ours, ()), (service, ())] = &measured[..] else {
            unreachable!("two contenders")
        };
        report_against(
            report,
            &format!("7 etcd hot key, {}", shape.label()),
            (ours, service),
            ETCD_LOCK_SERVICE,
            &[handover_p50(ours, service)],
        );
    }
}

/// How often the compacted rows compact etcd's history.
const COMPACT_EVERY: Duration = Duration::from_secs(1);

/// Compacts `etcd`'s history to its current revision every `every` until the handle is
/// dropped, as a server run with `--auto-compaction-mode=periodic` does.
pub(crate) async fn compacting(etcd: &EtcdServer, every: Duration) -> Compacting {
    let connecting = etcd_client::Client::connect([etcd.endpoint()], None);
    let mut client = crate::baselines::bounded("a connection to compact etcd", connecting)
        .await
        .expect("an etcd client");
    let task = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Ok(now) = client.get("compaction-probe", None).await else {
                continue;
            };
            let revision = now.header().map_or(0, |h| h.revision());
            // A compaction that fails (one at the same revision already) is the next one's.
            let _ = client.compact(revision, None).await;
        }
    });
    Compacting(task.abort_handle())
}

/// Compacting etcd's history, until dropped.
pub(crate) struct Compacting(tokio::task::AbortHandle);

impl Drop for Compacting {
    fn drop(&mut self) {
        self.0.abort();
    }
}
