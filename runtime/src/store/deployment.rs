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

/// One engine and where it runs: what [`LockerBuilder::deployment`](crate::LockerBuilder::deployment)
/// takes, what a config file names (`LockConfig::deployment`, with the `serde` feature),
/// and what [`Deployment::parse`] reads from one URL. The builder's `.url(...)`,
/// `.redlock(...)`, `.zookeeper(...)` and friends are shorthands for it.
///
/// Its `Debug` hides every credential. Which engines a build can connect depends on its
/// features (`cluster`, `sentinel`, `zookeeper`, `etcd`, `postgres`, `mysql`): one whose feature is
/// off is refused at `build` with [`LockError::Config`] naming the feature.
///
/// ```
/// use leasehold::Deployment;
///
/// let d = Deployment::parse("zookeeper://zk1:2181,zk2:2181")?;
/// assert!(matches!(d, Deployment::ZooKeeper { .. }));
/// assert!(d.capabilities().read_locks);
/// assert!(!Deployment::parse("redis://127.0.0.1:6379")?.capabilities().max_lease.is_some());
/// # Ok::<(), leasehold::LockError>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Deployment {
    /// One Redis server: `redis://[user:password@]host:port[/db]`, `rediss://` with TLS,
    /// `redis+unix:///path`.
    Redis(String),
    /// RedLock over independent Redis masters (an odd number, at least 3).
    RedLock(Vec<String>),
    /// A Redis Cluster reached through these nodes.
    Cluster(Vec<String>),
    /// A ZooKeeper ensemble, with the session timeout that bounds how long a crashed holder
    /// keeps its locks.
    ZooKeeper {
        /// The connect string: `host:port,host:port[/chroot]`, with credentials before it
        /// and TLS after it when the ensemble needs them:
        /// `[user:password@]host:port,...[/chroot][?tls&ca=...&cert=...&key=...&auth=...]`
        /// (see `LockerBuilder::zookeeper`). Its `Debug` hides the credentials.
        hosts: String,
        /// The session timeout asked for (the server may grant less).
        session_timeout: Duration,
    },
    /// An etcd cluster reached through these endpoints (`[http[s]://][user:password@]host:port`),
    /// with the TTL of the locker's etcd lease, which bounds how long a crashed holder keeps
    /// its locks.
    Etcd {
        /// The endpoints.
        endpoints: Vec<String>,
        /// The TTL of the locker's etcd lease.
        session_timeout: Duration,
    },
    /// A PostgreSQL database (`postgres://user:password@host:port/database`), its locks rows
    /// of a lease table.
    Postgres(String),
    /// A MySQL 8 or MariaDB database (`mysql://user:password@host:port/database`, or
    /// `mariadb://`), its locks rows of a lease table.
    Mysql(String),
    /// The master that these Sentinels monitor under `master`.
    Sentinel {
        /// The Sentinels' URLs.
        sentinels: Vec<String>,
        /// The master: its name in the sentinels' configuration (`mymaster`), or, when the
        /// master needs credentials, a database or TLS, a URL whose host is that name:
        /// `redis://[user:]password@mymaster[/db]`, `rediss://...` with the `tls` feature.
        /// The sentinels' own credentials and TLS are in their URLs. `Debug` hides it.
        master: String,
        /// Replicas that must acknowledge an acquire before it counts.
        min_replicas: u32,
    },
}

impl Deployment {
    /// The deployment one URL names: `redis://`, `rediss://` or `redis+unix://` (one Redis
    /// server), `zookeeper://[user:password@]host:port,host:port[/chroot][?tls&ca=...]` (an
    /// ensemble, its connect string as `LockerBuilder::zookeeper` takes it), `etcd://e1,e2`
    /// (each endpoint as `LockerBuilder::etcd` takes it), or
    /// `postgres://` / `postgresql://` (a PostgreSQL database), or `mysql://` / `mariadb://`
    /// (a MySQL or MariaDB database). Session timeouts are the default
    /// ([`DEFAULT_SESSION_TIMEOUT`](crate::DEFAULT_SESSION_TIMEOUT)); RedLock, Cluster and
    /// Sentinel take several URLs and have no one-URL form. The deployment is checked as
    /// `build` would check it, without connecting.
    ///
    /// # Errors
    /// [`LockError::Config`] for a scheme it does not know, or a deployment that does not
    /// pass its checks (an empty host list, a build without the engine's feature).
    pub fn parse(url: &str) -> Result<Deployment, LockError> {
        let url = url.trim();
        let session_timeout = crate::store::settings::DEFAULT_SESSION_TIMEOUT;
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let deployment = match scheme {
            "redis" | "rediss" | "redis+unix" => Deployment::Redis(url.to_owned()),
            "zookeeper" => Deployment::ZooKeeper {
                hosts: rest.to_owned(),
                session_timeout,
            },
            "etcd" => Deployment::Etcd {
                endpoints: rest.split(',').map(str::to_owned).collect(),
                session_timeout,
            },
            "postgres" | "postgresql" => Deployment::Postgres(url.to_owned()),
            "mysql" | "mariadb" => Deployment::Mysql(url.to_owned()),
            _ => {
                return Err(LockError::config(format!(
                    "{:?} names no engine: give redis://host:port (or rediss://, \
                     redis+unix://), zookeeper://host:port,host:port, etcd://host:port,host:port, \
                     postgres://user:password@host:port/database or \
                     mysql://user:password@host:port/database",
                    redact(url)
                )))
            }
        };
        deployment.validate()?;
        Ok(deployment)
    }

    /// The engine it names.
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Deployment::Redis(_) => Engine::Redis,
            Deployment::RedLock(_) => Engine::RedLock,
            Deployment::Cluster(_) => Engine::Cluster,
            Deployment::ZooKeeper { .. } => Engine::ZooKeeper,
            Deployment::Etcd { .. } => Engine::Etcd,
            Deployment::Postgres(_) => Engine::Postgres,
            Deployment::Mysql(_) => Engine::Mysql,
            Deployment::Sentinel { .. } => Engine::Sentinel,
        }
    }

    /// What its engine offers, as configured: the same as
    /// [`Locker::capabilities`](crate::Locker::capabilities) of a locker connected to it,
    /// except that ZooKeeper's server may grant a shorter session (and so a shorter
    /// `max_lease`) than asked.
    pub fn capabilities(&self) -> Capabilities {
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
    ///
    /// # Errors
    /// [`LockError::Config`] saying what is wrong.
    pub fn validate(&self) -> Result<(), LockError> {
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
                #[cfg(feature = "zookeeper")]
                super::zookeeper::Ensemble::parse(hosts).map_err(LockError::config)?;
                let _ = hosts;
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
            Deployment::Mysql(url) => {
                if !cfg!(feature = "mysql") {
                    return Err(LockError::config(
                        "mysql: this build of leasehold has no MySQL support; enable its \
                         `mysql` feature",
                    ));
                }
                #[cfg(feature = "mysql")]
                super::mysql::validate(url)?;
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
                #[cfg(feature = "sentinel")]
                super::redis::SentinelMaster::parse(master).map_err(LockError::config)?;
                Ok(())
            }
        }
    }

    /// Checks a locker's prefix against what this engine can store apart (after
    /// [`validate_prefix`](super::keys::validate_prefix), which every engine needs): each
    /// engine owns the form its names are stored in.
    ///
    /// # Errors
    /// [`LockError::Config`] saying what is wrong.
    pub(crate) fn check_prefix(&self, prefix: &str) -> Result<(), LockError> {
        match self {
            #[cfg(feature = "postgres")]
            Deployment::Postgres(_) => super::postgres::check_prefix(prefix),
            #[cfg(feature = "mysql")]
            Deployment::Mysql(_) => super::mysql::check_prefix(prefix),
            _ => {
                let _ = prefix;
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
            #[cfg(feature = "mysql")]
            Deployment::Mysql(url) => {
                Arc::new(super::mysql::MysqlStore::connect(url, settings).await?)
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
            Deployment::Mysql(url) => f.debug_tuple("Mysql").field(&redact(url)).finish(),
            Deployment::Sentinel {
                sentinels,
                master,
                min_replicas,
            } => f
                .debug_struct("Sentinel")
                .field("sentinels", &list(sentinels))
                .field("master", &redact(master))
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
    fn one_url_names_one_engine() {
        let d = Deployment::parse("redis://:pw@h:6379/2").unwrap();
        assert!(matches!(&d, Deployment::Redis(url) if url == "redis://:pw@h:6379/2"));
        for url in ["rediss://h:6380", "redis+unix:///tmp/r.sock"] {
            assert!(
                matches!(Deployment::parse(url).unwrap(), Deployment::Redis(_)),
                "{url}"
            );
        }
        #[cfg(feature = "zookeeper")]
        assert!(matches!(
            Deployment::parse("zookeeper://a:2181,b:2181").unwrap(),
            Deployment::ZooKeeper { hosts, .. } if hosts == "a:2181,b:2181"
        ));
        #[cfg(feature = "etcd")]
        assert!(matches!(
            Deployment::parse("etcd://a:2379,http://b:2379").unwrap(),
            Deployment::Etcd { endpoints, .. } if endpoints == ["a:2379", "http://b:2379"]
        ));
        #[cfg(feature = "postgres")]
        for url in ["postgres://u@h/db", "postgresql://u@h/db"] {
            assert!(
                matches!(Deployment::parse(url).unwrap(), Deployment::Postgres(_)),
                "{url}"
            );
        }
        #[cfg(feature = "mysql")]
        for url in ["mysql://u@h/db", "mariadb://u@h/db"] {
            assert!(
                matches!(Deployment::parse(url).unwrap(), Deployment::Mysql(_)),
                "{url}"
            );
        }
        let e = Deployment::parse("http://user:s3cret@h:80")
            .unwrap_err()
            .to_string();
        assert!(e.contains("names no engine"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
        let e = Deployment::parse("zookeeper://").unwrap_err().to_string();
        assert!(e.contains("zookeeper"), "{e}");
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
