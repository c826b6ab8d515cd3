//! Scenario 7: leasehold on etcd against etcd's own Lock service, through the client the engine
//! uses, on the same throwaway server, in the same run: uncontended cycles, and one hot key in
//! one process and in four.
//!
//! Both hold their locks with etcd leases of the same TTL (leasehold's default session timeout,
//! 10 s) kept alive by one stream. Requests are not counted: the service's own reads and writes
//! happen inside the server, where etcd's metrics would not count them alike.

use std::time::Duration;

use leasehold_tests::harness::EtcdServer;

use crate::baselines::{EtcdLockService, ETCD_LOCK_SERVICE};
use crate::engine::Engine;
use crate::hot_key::{
    handover_p50, report_against, run_each, Contender, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
use crate::report::Report;
use crate::versus;

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
    versus::uncontended(
        report,
        "7 etcd",
        (&locker, &service),
        |t, k| format!("u-{t}-{k}"),
        ETCD_LOCK_SERVICE,
        duration,
        etcd.pid(),
    )
    .await;
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
