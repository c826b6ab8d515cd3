//! The engines leasehold runs on in the benchmark, and the one way each scenario builds a
//! locker for one: the same prefix and wait everywhere, so that only the engine differs.

use std::time::Duration;

use leasehold::Locker;

/// The session timeout (ZooKeeper) and lease TTL (etcd) of ours and of the baselines on those
/// engines alike: leasehold's default.
pub(crate) const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The operation timeout of ours on every engine, RedLock's nodes included: longer than the
/// default 2 s, so that a machine busy with other work shows as a low rate rather than ending
/// the run (etcd on a loaded 2-core machine took over 2 s to answer under 16 tasks of
/// `lock_all`; RedLock's nodes, bounded at 50 ms before, failed a release of the smoke run
/// beside the test suites). No node is down in these scenarios, so the bound is never waited
/// out on a quiet machine and the figures do not depend on it. Leases stay at three times this
/// bound or more (the default lease is 30 s).
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the locks live.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Engine {
    Redis,
    ZooKeeper,
    Etcd,
    Postgres,
    Mysql,
}

impl Engine {
    /// leasehold on this engine at `address` (a Redis, PostgreSQL or MySQL URL, ZooKeeper hosts, an
    /// etcd endpoint), with the prefix `bench` and a 120 s wait, so that no waiter of a hot key
    /// gives up.
    pub(crate) async fn locker(self, address: &str) -> Locker {
        let wait = Duration::from_secs(120);
        match self {
            Engine::Redis => Locker::builder()
                .op_timeout(OP_TIMEOUT)
                .url(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("locker"),
            Engine::ZooKeeper => Locker::builder()
                .op_timeout(OP_TIMEOUT)
                .session_timeout(SESSION_TIMEOUT)
                .zookeeper(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on zookeeper"),
            Engine::Etcd => Locker::builder()
                .op_timeout(OP_TIMEOUT)
                .session_timeout(SESSION_TIMEOUT)
                .etcd([address])
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on etcd"),
            Engine::Postgres => Locker::builder()
                .op_timeout(OP_TIMEOUT)
                .postgres(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on PostgreSQL"),
            Engine::Mysql => Locker::builder()
                .op_timeout(OP_TIMEOUT)
                .mysql(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on MySQL"),
        }
    }
}

/// Where the per-engine scenarios (11, leader handover; 12, semaphores) run: every engine
/// leasehold has, RedLock and process memory included. `--engines` picks some.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Target {
    Redis,
    Memory,
    RedLock,
    ZooKeeper,
    Etcd,
    Postgres,
}

impl Target {
    /// Every target, in the order the scenarios visit them.
    pub(crate) const ALL: [Target; 6] = [
        Target::Redis,
        Target::Memory,
        Target::RedLock,
        Target::ZooKeeper,
        Target::Etcd,
        Target::Postgres,
    ];

    /// Its name on the command line and in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::Redis => "redis",
            Target::Memory => "memory",
            Target::RedLock => "redlock",
            Target::ZooKeeper => "zookeeper",
            Target::Etcd => "etcd",
            Target::Postgres => "postgres",
        }
    }

    /// The target named `s`; `None` for an unknown name.
    pub(crate) fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// Where one target's locks live, resolved: what its lockers connect to.
#[derive(Clone)]
pub(crate) enum Place {
    Redis(String),
    /// The nodes' URLs.
    RedLock(Vec<String>),
    ZooKeeper(String),
    Etcd(String),
    Postgres(String),
    /// One in-memory store: every locker of the place is a clone of this one (separate
    /// `Locker::in_memory()` calls would be separate stores).
    Memory(Locker),
}

impl Place {
    /// A locker on this place, as [`Engine::locker`] builds them (RedLock with the 50 ms
    /// per-node timeout of scenario 4).
    pub(crate) async fn locker(&self) -> Locker {
        match self {
            Place::Redis(url) => Engine::Redis.locker(url).await,
            Place::ZooKeeper(hosts) => Engine::ZooKeeper.locker(hosts).await,
            Place::Etcd(endpoint) => Engine::Etcd.locker(endpoint).await,
            Place::Postgres(url) => Engine::Postgres.locker(url).await,
            Place::RedLock(urls) => Locker::builder()
                .redlock(urls.clone())
                .prefix("bench")
                .op_timeout(OP_TIMEOUT)
                .default_wait(Duration::from_secs(120))
                .build()
                .await
                .expect("leasehold on RedLock"),
            Place::Memory(locker) => locker.clone(),
        }
    }
}

/// leasehold in this process's memory, with the prefix and wait of [`Engine::locker`].
pub(crate) fn in_memory() -> Locker {
    Locker::builder()
        .prefix("bench")
        .default_wait(Duration::from_secs(120))
        .build_in_memory()
        .expect("leasehold in memory")
}
