//! Scenario 12: a semaphore of 8 permits, 64 tasks each taking one permit for 1 ms in a loop
//! (as scenario 9), on every engine, ours against the same operations done by hand with the
//! engine's own client (`baselines/permits/`), measured by `run.rs`.

mod run;

use std::time::Duration;

pub(crate) use run::{compare, OursPermits, Permits, PERMITS};

use crate::baselines::permits as raw;
use crate::engine::{Place, Target};
use crate::report::Report;

/// Scenario 12 on `target` at `place`, `duration` per side. RedLock has no row: the brief of
/// this scenario is the engines with a semaphore of their own to compare against.
pub(crate) async fn scenario(
    report: &mut Report,
    target: Target,
    place: &Place,
    duration: Duration,
) {
    let scenario = format!("12 semaphore, {}", target.name());
    let scenario = scenario.as_str();
    let ours = OursPermits::on(place.locker().await, "sem12").await;
    match place {
        Place::Redis(url) => {
            let raw = raw::RedisZset::connect(url, "hand:sem12").await;
            compare(report, scenario, ours, raw, raw::REDIS_ZSET, duration).await
        }
        Place::Memory(_) => {
            let raw = raw::TokioPermits::new();
            compare(report, scenario, ours, raw, raw::TOKIO_SEMAPHORE, duration).await
        }
        Place::RedLock(_) => {
            println!("{scenario}: no row (semaphores on RedLock are not part of this scenario)")
        }
        Place::ZooKeeper(hosts) => {
            let raw = raw::ZooKeeperPermits::connect(hosts, "sem12").await;
            compare(
                report,
                scenario,
                ours,
                raw,
                raw::ZOOKEEPER_SEMAPHORE,
                duration,
            )
            .await
        }
        Place::Etcd(endpoint) => {
            let raw = raw::EtcdPermits::connect(endpoint, "sem12").await;
            compare(report, scenario, ours, raw, raw::ETCD_SEMAPHORE, duration).await
        }
        Place::Postgres(url) => {
            let raw = raw::PostgresPermits::connect(url, "sem12").await;
            compare(
                report,
                scenario,
                ours,
                raw,
                raw::POSTGRES_SEMAPHORE,
                duration,
            )
            .await
        }
    }
}
