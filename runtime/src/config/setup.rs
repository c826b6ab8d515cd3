//! What a [`LockConfig`] sets up: the one deployment it names, a builder with its settings,
//! and [`RouteLocks`] with its rules.

use super::checks::{check_prefix, check_service, check_url, checked_urls, invalid};
use super::LockConfig;
use crate::error::LockError;
use crate::locker::Locker;
use crate::store::Deployment;
use crate::web::RouteLocks;

impl LockConfig {
    /// A builder with every setting of the config; unset ones keep the builder's defaults.
    pub(crate) fn builder(&self) -> Result<crate::LockerBuilder, LockError> {
        let config = self;
        let mut builder = Locker::builder().deployment(config.deployment()?);
        if let Some(prefix) = &config.prefix {
            builder = builder.prefix(check_prefix("prefix", prefix).map_err(invalid)?);
        }
        if let Some(service) = &config.service {
            builder = builder.service_name(check_service("service", service).map_err(invalid)?);
        }
        if let Some(lease) = config.lease {
            builder = builder.default_lease(lease);
        }
        if let Some(wait) = config.wait {
            builder = builder.default_wait(wait);
        }
        if let Some(timeout) = config.op_timeout {
            builder = builder.op_timeout(timeout);
        }
        if let Some(timeout) = config.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(on) = config.lazy_connect {
            builder = builder.lazy_connect(on);
        }
        if let Some(on) = config.retry_unavailable {
            builder = builder.retry_unavailable(on);
        }
        if let Some(on) = config.watchdog {
            builder = builder.default_watchdog(on);
        }
        if let Some(drift) = config.clock_drift {
            builder = builder.clock_drift(drift);
        }
        if let Some(offset) = config.fence_offset {
            builder = builder.fence_offset(offset);
        }
        for (name, profile) in &config.profiles {
            builder = builder.profile(name.clone(), profile.clone());
        }
        Ok(builder)
    }
}

impl RouteLocks {
    /// Middleware with the route rules of `config` (its `rules`) and its `status_codes`,
    /// through `locker`, usually built from the same config with [`Locker::from_config`].
    pub fn from_config(locker: Locker, config: &LockConfig) -> Self {
        let locks = RouteLocks::new(locker).rules(config.rules.iter().cloned());
        match config.status_codes {
            Some(codes) => locks.status_codes(codes),
            None => locks,
        }
    }
}

impl LockConfig {
    /// The one deployment the config names (`url`, `redlock`, `cluster`, `[sentinel]`,
    /// `zookeeper`, `etcd`, `postgres` or `mysql`), checked as `build` would check it (where the
    /// builder's is, [`Deployment::validate`], so both say the same).
    ///
    /// # Errors
    /// [`LockError::Config`] when none or several are set, or the one set is invalid.
    pub fn deployment(&self) -> Result<Deployment, LockError> {
        let given: Vec<&str> = [
            ("url", self.url.is_some()),
            ("redlock", !self.redlock.is_empty()),
            ("cluster", !self.cluster.is_empty()),
            ("sentinel", self.sentinel.is_some()),
            ("zookeeper", self.zookeeper.is_some()),
            ("etcd", !self.etcd.is_empty()),
            ("postgres", self.postgres.is_some()),
            ("mysql", self.mysql.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
        let deployment = match given.as_slice() {
            [] => {
                return Err(LockError::config(
                    "invalid leasehold config: no deployment named; set one of url = \
                     \"redis://127.0.0.1:6379\" (one Redis server), redlock, cluster, [sentinel], \
                     zookeeper, etcd, postgres or mysql in the config, or its variable in the \
                     environment (LEASEHOLD_URL, LEASEHOLD_REDLOCK, LEASEHOLD_CLUSTER, \
                     LEASEHOLD_SENTINEL, LEASEHOLD_ZOOKEEPER, LEASEHOLD_ETCD, LEASEHOLD_POSTGRES, \
                     LEASEHOLD_MYSQL)",
                ))
            }
            ["url"] => {
                let url = self.url.as_deref().expect("given");
                Deployment::Redis(check_url("url", url).map_err(invalid)?)
            }
            ["redlock"] => Deployment::RedLock(checked_urls("redlock", &self.redlock)?),
            ["cluster"] => Deployment::Cluster(checked_urls("cluster", &self.cluster)?),
            ["zookeeper"] => Deployment::ZooKeeper {
                hosts: self.zookeeper.clone().expect("given"),
                session_timeout: self
                    .session_timeout
                    .unwrap_or(crate::DEFAULT_SESSION_TIMEOUT),
            },
            ["etcd"] => Deployment::Etcd {
                endpoints: self.etcd.clone(),
                session_timeout: self
                    .session_timeout
                    .unwrap_or(crate::DEFAULT_SESSION_TIMEOUT),
            },
            ["postgres"] => Deployment::Postgres(self.postgres.clone().expect("given")),
            ["mysql"] => Deployment::Mysql(self.mysql.clone().expect("given")),
            ["sentinel"] => {
                let sentinel = self.sentinel.as_ref().expect("given");
                Deployment::Sentinel {
                    sentinels: checked_urls("sentinel.urls", &sentinel.urls)?,
                    master: sentinel.master.clone(),
                    min_replicas: sentinel.min_replicas,
                }
            }
            several => {
                return Err(LockError::config(format!(
                    "invalid leasehold config: {} are all set; name one deployment",
                    several.join(", ")
                )))
            }
        };
        deployment.validate().map_err(invalid)?;
        Ok(deployment)
    }
}
