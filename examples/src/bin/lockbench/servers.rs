//! The throwaway servers a run needs, started once for all its scenarios: Redis at once (and
//! RedLock's five nodes when scenario 4 runs), ZooKeeper, etcd and PostgreSQL in the
//! background while the Redis scenarios run; a scenario whose server did not start is skipped,
//! saying why.

use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer, ZkServer};
use tokio::task::JoinHandle;

use crate::cli::Scenario;

pub(crate) struct Servers {
    /// The single-node scenarios' Redis.
    pub(crate) redis: RedisServer,
    /// Scenario 4's five nodes; empty when it does not run.
    pub(crate) redlock_nodes: Vec<RedisServer>,
    zookeeper: Option<JoinHandle<ZkServer>>,
    etcd: Option<JoinHandle<EtcdServer>>,
    postgres: Option<JoinHandle<PgServer>>,
}

impl Servers {
    /// Starts what `scenarios` need.
    pub(crate) async fn start(scenarios: &[Scenario]) -> Servers {
        eprintln!("starting redis-servers...");
        let runs = |s| scenarios.contains(&s);
        // The JVM takes seconds to start: in the background, while the Redis scenarios run. A
        // harness panic (no java, no ZooKeeper jar) has printed its reason when this is awaited.
        let zookeeper = runs(Scenario::ZooKeeper).then(|| tokio::spawn(ZkServer::start()));
        // Likewise etcd, which serves within a second or so.
        let etcd = runs(Scenario::Etcd).then(|| tokio::spawn(EtcdServer::start()));
        // And PostgreSQL (initdb, then the server), a second or two.
        let postgres = runs(Scenario::Postgres).then(|| tokio::spawn(PgServer::start()));
        let redis = RedisServer::start().await;
        let redlock_nodes = if runs(Scenario::Redlock) {
            RedisServer::start_many(5).await
        } else {
            Vec::new()
        };
        Servers {
            redis,
            redlock_nodes,
            zookeeper,
            etcd,
            postgres,
        }
    }

    /// Scenario 6's ZooKeeper, once it has started; `None`, said, if it did not.
    pub(crate) async fn zookeeper(&mut self) -> Option<ZkServer> {
        started(
            &mut self.zookeeper,
            "6 zookeeper: skipped, the throwaway ZooKeeper did not start (the reason is above; \
             scripts/ensure-zookeeper installs it)",
        )
        .await
    }

    /// Scenario 7's etcd, once it has started; `None`, said, if it did not.
    pub(crate) async fn etcd(&mut self) -> Option<EtcdServer> {
        started(
            &mut self.etcd,
            "7 etcd: skipped, the throwaway etcd did not start (the reason is above; \
             scripts/ensure-etcd installs it)",
        )
        .await
    }

    /// Scenario 8's PostgreSQL, once it has started; `None`, said, if it did not.
    pub(crate) async fn postgres(&mut self) -> Option<PgServer> {
        started(
            &mut self.postgres,
            "8 postgres: skipped, the throwaway PostgreSQL did not start (the reason is above; \
             scripts/ensure-postgres installs it)",
        )
        .await
    }
}

/// The server `starting` gives once started, or `None` after printing `skipped`.
async fn started<S>(starting: &mut Option<JoinHandle<S>>, skipped: &str) -> Option<S> {
    match starting.take().expect("started for its scenario").await {
        Ok(server) => Some(server),
        Err(_) => {
            println!("{skipped}");
            None
        }
    }
}
