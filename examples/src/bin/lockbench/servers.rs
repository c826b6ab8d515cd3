//! The throwaway servers a run needs, started once for all its scenarios: Redis at once (and
//! RedLock's five nodes when scenario 4 or a RedLock row of 11 runs), ZooKeeper, etcd and
//! PostgreSQL and MariaDB in the background while the Redis scenarios run; a scenario whose server did
//! not start is skipped, saying why.

use leasehold_tests::harness::{EtcdServer, MysqlServer, PgServer, RedisServer, ZkServer};
use tokio::task::JoinHandle;

use crate::cli::Scenario;
use crate::engine::{Place, Target};

pub(crate) struct Servers {
    /// The single-node scenarios' Redis.
    pub(crate) redis: RedisServer,
    /// Scenario 4's five nodes (the first three for scenario 11's RedLock rows); empty when
    /// neither runs.
    pub(crate) redlock_nodes: Vec<RedisServer>,
    zookeeper: Starting<ZkServer>,
    etcd: Starting<EtcdServer>,
    postgres: Starting<PgServer>,
    mysql: Starting<MysqlServer>,
}

/// A server started in the background: awaited once by the first scenario that needs it,
/// then kept for the others.
enum Starting<S> {
    NotNeeded,
    Pending(JoinHandle<S>),
    Started(S),
    Failed,
}

impl<S> Starting<S> {
    fn new(needed: bool, start: impl std::future::Future<Output = S> + Send + 'static) -> Self
    where
        S: Send + 'static,
    {
        match needed {
            true => Starting::Pending(tokio::spawn(start)),
            false => Starting::NotNeeded,
        }
    }

    /// The server once started, or `None` after printing `skipped`.
    async fn get(&mut self, skipped: &str) -> Option<&S> {
        if let Starting::Pending(handle) = self {
            *self = match handle.await {
                Ok(server) => Starting::Started(server),
                Err(_) => Starting::Failed,
            };
        }
        match self {
            Starting::Started(server) => Some(server),
            Starting::NotNeeded => panic!("a server the chosen scenarios did not ask for"),
            _ => {
                println!("{skipped}");
                None
            }
        }
    }
}

impl Servers {
    /// Starts what `scenarios` need, on `targets` for the per-engine scenarios (11, 12).
    pub(crate) async fn start(scenarios: &[Scenario], targets: &[Target]) -> Servers {
        eprintln!("starting redis-servers...");
        let runs = |s| scenarios.contains(&s);
        let per_engine = runs(Scenario::Leader) || runs(Scenario::Permits);
        let on = |t| per_engine && targets.contains(&t);
        // The JVM takes seconds to start: in the background, while the Redis scenarios run. A
        // harness panic (no java, no ZooKeeper jar) has printed its reason when this is awaited.
        let zookeeper = Starting::new(
            runs(Scenario::ZooKeeper) || on(Target::ZooKeeper),
            ZkServer::start(),
        );
        // Likewise etcd, which serves within a second or so.
        let etcd = Starting::new(
            runs(Scenario::Etcd) || on(Target::Etcd),
            EtcdServer::start(),
        );
        // And PostgreSQL (initdb, then the server), a second or two.
        let postgres = Starting::new(
            runs(Scenario::Postgres) || on(Target::Postgres),
            PgServer::start(),
        );
        // And MariaDB (its install, then the server), a second or two.
        let mysql = Starting::new(runs(Scenario::Mysql), MysqlServer::start());
        let redis = RedisServer::start().await;
        let redlock = runs(Scenario::Leader) && targets.contains(&Target::RedLock);
        let redlock_nodes = if runs(Scenario::Redlock) || redlock {
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
            mysql,
        }
    }

    /// The throwaway ZooKeeper, once it has started; `None`, said, if it did not.
    pub(crate) async fn zookeeper(&mut self) -> Option<&ZkServer> {
        self.zookeeper
            .get(
                "zookeeper: skipped, the throwaway ZooKeeper did not start (the reason is above; \
                 scripts/ensure-zookeeper installs it)",
            )
            .await
    }

    /// The throwaway etcd, once it has started; `None`, said, if it did not.
    pub(crate) async fn etcd(&mut self) -> Option<&EtcdServer> {
        self.etcd
            .get(
                "etcd: skipped, the throwaway etcd did not start (the reason is above; \
                 scripts/ensure-etcd installs it)",
            )
            .await
    }

    /// The throwaway PostgreSQL, once it has started; `None`, said, if it did not.
    pub(crate) async fn postgres(&mut self) -> Option<&PgServer> {
        self.postgres
            .get(
                "postgres: skipped, the throwaway PostgreSQL did not start (the reason is above; \
                 scripts/ensure-postgres installs it)",
            )
            .await
    }

    /// The throwaway MariaDB, once it has started; `None`, said, if it did not.
    pub(crate) async fn mysql(&mut self) -> Option<&MysqlServer> {
        self.mysql
            .get(
                "mysql: skipped, the throwaway MariaDB did not start (the reason is above; \
                 scripts/ensure-mysql installs it)",
            )
            .await
    }

    /// Where `target`'s locks live in this run; `None`, said, when its server did not start.
    /// Memory is a fresh in-memory store.
    pub(crate) async fn place(&mut self, target: Target) -> Option<Place> {
        Some(match target {
            Target::Redis => Place::Redis(self.redis.url()),
            Target::Memory => Place::Memory(crate::engine::in_memory()),
            Target::RedLock => {
                Place::RedLock(self.redlock_nodes[..3].iter().map(|n| n.url()).collect())
            }
            Target::ZooKeeper => Place::ZooKeeper(self.zookeeper().await?.connect_string()),
            Target::Etcd => Place::Etcd(self.etcd().await?.endpoint()),
            Target::Postgres => Place::Postgres(self.postgres().await?.url()),
        })
    }
}
