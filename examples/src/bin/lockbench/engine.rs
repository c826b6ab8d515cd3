//! The engines leasehold runs on in the benchmark, and the one way each scenario builds a
//! locker for one: the same prefix and wait everywhere, so that only the engine differs.

use std::time::Duration;

use leasehold::Locker;

/// The session timeout (ZooKeeper) and lease TTL (etcd) of ours and of the baselines on those
/// engines alike: leasehold's default.
pub(crate) const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the locks live.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Engine {
    Redis,
    ZooKeeper,
    Etcd,
    Postgres,
}

impl Engine {
    /// leasehold on this engine at `address` (a Redis or PostgreSQL URL, ZooKeeper hosts, an
    /// etcd endpoint), with the prefix `bench` and a 120 s wait, so that no waiter of a hot key
    /// gives up.
    pub(crate) async fn locker(self, address: &str) -> Locker {
        let wait = Duration::from_secs(120);
        match self {
            Engine::Redis => Locker::builder()
                .url(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("locker"),
            Engine::ZooKeeper => Locker::builder()
                .session_timeout(SESSION_TIMEOUT)
                .zookeeper(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on zookeeper"),
            Engine::Etcd => Locker::builder()
                .session_timeout(SESSION_TIMEOUT)
                .etcd([address])
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on etcd"),
            Engine::Postgres => Locker::builder()
                .postgres(address)
                .prefix("bench")
                .default_wait(wait)
                .build()
                .await
                .expect("leasehold on PostgreSQL"),
        }
    }
}
