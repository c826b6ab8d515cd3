//! Which engine a [`Locker`](crate::Locker) uses, named once: the builder's `.url(...)`,
//! `.redlock([...])`, `.cluster([...])`, `.sentinel(...)` and the config file's fields all
//! become one [`Deployment`], which is checked here (for the builder and the config alike)
//! and connected here. Nothing else in the crate names an engine.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::redis::{RedLock, RedisStore};
use super::settings::redact;
use super::{Capabilities, Engine, Settings, Store};
use crate::error::LockError;

/// One engine and where it runs.
#[derive(Clone)]
pub(crate) enum Deployment {
    /// One Redis server.
    Redis(String),
    /// RedLock over independent Redis masters.
    RedLock(Vec<String>),
    /// A Redis Cluster reached through these nodes. (Named by the builder with the `cluster`
    /// feature, by a config file with `serde`.)
    #[cfg_attr(not(any(feature = "cluster", feature = "serde")), allow(dead_code))]
    Cluster(Vec<String>),
    /// A ZooKeeper ensemble (`host:port,host:port`), with the session timeout that bounds
    /// how long a crashed holder keeps its locks.
    #[cfg_attr(not(any(feature = "zookeeper", feature = "serde")), allow(dead_code))]
    ZooKeeper {
        hosts: String,
        session_timeout: Duration,
    },
    /// An etcd cluster reached through these endpoints (`[http[s]://][user:password@]host:port`),
    /// with the TTL of the locker's etcd lease, which bounds how long a crashed holder keeps
    /// its locks.
    #[cfg_attr(not(any(feature = "etcd", feature = "serde")), allow(dead_code))]
    Etcd {
        endpoints: Vec<String>,
        session_timeout: Duration,
    },
    /// A PostgreSQL database (`postgres://user:password@host:port/database`), its locks rows
    /// of a lease table.
    #[cfg_attr(not(any(feature = "postgres", feature = "serde")), allow(dead_code))]
    Postgres(String),
    /// The master that these Sentinels monitor under `master`.
    #[cfg_attr(not(any(feature = "sentinel", feature = "serde")), allow(dead_code))]
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        min_replicas: u32,
    },
}

impl Deployment {
    /// The engine it names.
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Deployment::Redis(_) => Engine::Redis,
            Deployment::RedLock(_) => Engine::RedLock,
            Deployment::Cluster(_) => Engine::Cluster,
            Deployment::ZooKeeper { .. } => Engine::ZooKeeper,
            Deployment::Etcd { .. } => Engine::Etcd,
            Deployment::Postgres(_) => Engine::Postgres,
            Deployment::Sentinel { .. } => Engine::Sentinel,
        }
    }

    /// What its engine offers, as configured (before connecting: ZooKeeper's server may
    /// grant a shorter session than asked, and its store then says so).
    pub(crate) fn capabilities(&self) -> Capabilities {
        let session = match self {
            Deployment::ZooKeeper {
                session_timeout, ..
            }
            | Deployment::Etcd {
                session_timeout, ..
            } => *session_timeout,
            _ => Duration::ZERO,
        };
        self.engine().capabilities(session)
    }

    /// Everything that can be checked without connecting. The messages name what to fix, as
    /// the builder's methods name it; the config file prefixes them with its own field.
    pub(crate) fn validate(&self) -> Result<(), LockError> {
        match self {
            Deployment::Redis(_) => Ok(()),
            Deployment::RedLock(urls) => {
                let n = urls.len();
                if n < 3 || n % 2 == 0 {
                    return Err(LockError::config(format!(
                        "redlock needs an odd number of at least 3 independent Redis masters; \
                         got {n}"
                    )));
                }
                Ok(())
            }
            Deployment::Cluster(urls) => {
                if !cfg!(feature = "cluster") {
                    return Err(LockError::config(
                        "cluster: this build of leasehold has no Redis Cluster support; enable \
                         its `cluster` feature",
                    ));
                }
                if urls.is_empty() {
                    return Err(LockError::config(
                        "cluster needs at least one redis://host:port of a cluster node",
                    ));
                }
                Ok(())
            }
            Deployment::ZooKeeper {
                hosts,
                session_timeout,
            } => {
                if !cfg!(feature = "zookeeper") {
                    return Err(LockError::config(
                        "zookeeper: this build of leasehold has no ZooKeeper support; enable its \
                         `zookeeper` feature",
                    ));
                }
                if hosts.trim().is_empty() || hosts.contains("://") {
                    return Err(LockError::config(format!(
                        "zookeeper needs its servers as host:port[,host:port...] (no scheme); \
                         got {:?}",
                        redact(hosts)
                    )));
                }
                if *session_timeout < Duration::from_millis(500) {
                    return Err(LockError::config(format!(
                        "a zookeeper session_timeout of {session_timeout:?} is too short; it is \
                         how long a crashed holder keeps its locks, e.g. 10s"
                    )));
                }
                Ok(())
            }
            Deployment::Etcd {
                endpoints,
                session_timeout,
            } => {
                if !cfg!(feature = "etcd") {
                    return Err(LockError::config(
                        "etcd: this build of leasehold has no etcd support; enable its `etcd` \
                         feature",
                    ));
                }
                #[cfg(feature = "etcd")]
                super::etcd::Endpoints::parse(endpoints).map_err(LockError::config)?;
                let _ = endpoints;
                if *session_timeout < Duration::from_secs(1) {
                    return Err(LockError::config(format!(
                        "an etcd session_timeout of {session_timeout:?} is too short; it is the \
                         TTL of the locker's etcd lease (etcd counts it in whole seconds), how \
                         long a crashed holder keeps its locks, e.g. 10s"
                    )));
                }
                Ok(())
            }
            Deployment::Postgres(url) => {
                if !cfg!(feature = "postgres") {
                    return Err(LockError::config(
                        "postgres: this build of leasehold has no PostgreSQL support; enable its \
                         `postgres` feature",
                    ));
                }
                #[cfg(feature = "postgres")]
                super::postgres::validate(url)?;
                let _ = url;
                Ok(())
            }
            Deployment::Sentinel {
                sentinels, master, ..
            } => {
                if !cfg!(feature = "sentinel") {
                    return Err(LockError::config(
                        "sentinel: this build of leasehold has no Sentinel support; enable its \
                         `sentinel` feature",
                    ));
                }
                if sentinels.is_empty() || master.is_empty() {
                    return Err(LockError::config(
                        "sentinel needs at least one sentinel URL and the master's name",
                    ));
                }
                Ok(())
            }
        }
    }

    /// Connects the engine (after [`validate`](Self::validate)).
    pub(crate) async fn connect(&self, settings: &Settings) -> Result<Arc<dyn Store>, LockError> {
        self.validate()?;
        Ok(match self {
            Deployment::Redis(url) => Arc::new(RedisStore::connect(url, settings, false).await?),
            Deployment::RedLock(urls) => Arc::new(RedLock::connect(urls, settings).await?),
            #[cfg(feature = "zookeeper")]
            Deployment::ZooKeeper {
                hosts,
                session_timeout,
            } => Arc::new(
                super::zookeeper::ZooKeeperStore::connect(hosts, *session_timeout, settings)
                    .await?,
            ),
            #[cfg(feature = "etcd")]
            Deployment::Etcd {
                endpoints,
                session_timeout,
            } => Arc::new(
                super::etcd::EtcdStore::connect(endpoints, *session_timeout, settings).await?,
            ),
            #[cfg(feature = "postgres")]
            Deployment::Postgres(url) => {
                Arc::new(super::postgres::PostgresStore::connect(url, settings).await?)
            }
            #[cfg(feature = "cluster")]
            Deployment::Cluster(urls) => {
                Arc::new(RedisStore::connect_cluster(urls, settings).await?)
            }
            #[cfg(feature = "sentinel")]
            Deployment::Sentinel {
                sentinels,
                master,
                min_replicas,
            } => Arc::new(
                RedisStore::connect_sentinel(sentinels, master, *min_replicas, settings).await?,
            ),
            #[allow(unreachable_patterns)]
            _ => unreachable!("validate refuses engines whose feature is off"),
        })
    }
}

/// URLs may carry passwords: `Debug` shows the deployment with every credential hidden.
impl fmt::Debug for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |urls: &[String]| urls.iter().map(|u| redact(u)).collect::<Vec<_>>();
        match self {
            Deployment::Redis(url) => f.debug_tuple("Redis").field(&redact(url)).finish(),
            Deployment::RedLock(urls) => f.debug_tuple("RedLock").field(&list(urls)).finish(),
            Deployment::Cluster(urls) => f.debug_tuple("Cluster").field(&list(urls)).finish(),
            Deployment::ZooKeeper {
                hosts,
                session_timeout,
            } => f
                .debug_struct("ZooKeeper")
                .field("hosts", &redact(hosts))
                .field("session_timeout", session_timeout)
                .finish(),
            Deployment::Etcd {
                endpoints,
                session_timeout,
            } => f
                .debug_struct("Etcd")
                .field("endpoints", &list(endpoints))
                .field("session_timeout", session_timeout)
                .finish(),
            Deployment::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
            Deployment::Sentinel {
                sentinels,
                master,
                min_replicas,
            } => f
                .debug_struct("Sentinel")
                .field("sentinels", &list(sentinels))
                .field("master", master)
                .field("min_replicas", min_replicas)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_passwords() {
        let d = Deployment::RedLock(vec![
            "redis://:s3cret@a:6379".into(),
            "redis://user:pw@b:6379".into(),
            "redis://c:6379".into(),
        ]);
        let shown = format!("{d:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("pw@"),
            "{shown}"
        );
        assert!(shown.contains("c:6379"), "{shown}");
    }

    #[test]
    fn etcd_debug_hides_credentials() {
        let d = Deployment::Etcd {
            endpoints: vec!["http://root:s3cret@a:2379".into(), "b:2379".into()],
            session_timeout: Duration::from_secs(10),
        };
        let shown = format!("{d:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("root"),
            "{shown}"
        );
        assert!(shown.contains("b:2379"), "{shown}");
    }

    #[test]
    fn redlock_needs_an_odd_majority() {
        for n in [0, 1, 2, 4] {
            let urls = vec!["redis://a".to_owned(); n];
            assert!(Deployment::RedLock(urls).validate().is_err(), "{n} nodes");
        }
        assert!(Deployment::RedLock(vec!["redis://a".to_owned(); 3])
            .validate()
            .is_ok());
    }
}
