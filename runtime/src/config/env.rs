//! A [`LockConfig`] read from, or overridden by, the `LEASEHOLD_*` environment variables.

use super::checks::{
    check_bound, check_fence_offset, check_lease, check_prefix, check_service, check_url,
    parse_bool, parse_drift, parse_duration, url_list,
};
use super::{LockConfig, SentinelConfig};
use crate::error::LockError;

/// The names of the environment variables [`LockConfig::from_env`] reads, with their fields.
const ENV_VARS: [(&str, &str); 21] = [
    ("LEASEHOLD_URL", "url"),
    ("LEASEHOLD_REDLOCK", "redlock"),
    ("LEASEHOLD_CLUSTER", "cluster"),
    ("LEASEHOLD_SENTINEL", "sentinel"),
    ("LEASEHOLD_SENTINEL_MASTER", "sentinel_master"),
    ("LEASEHOLD_ZOOKEEPER", "zookeeper"),
    ("LEASEHOLD_ETCD", "etcd"),
    ("LEASEHOLD_POSTGRES", "postgres"),
    ("LEASEHOLD_MYSQL", "mysql"),
    ("LEASEHOLD_SESSION_TIMEOUT", "session_timeout"),
    ("LEASEHOLD_PREFIX", "prefix"),
    ("LEASEHOLD_SERVICE", "service"),
    ("LEASEHOLD_LEASE", "lease"),
    ("LEASEHOLD_WAIT", "wait"),
    ("LEASEHOLD_OP_TIMEOUT", "op_timeout"),
    ("LEASEHOLD_CONNECT_TIMEOUT", "connect_timeout"),
    ("LEASEHOLD_WATCHDOG", "watchdog"),
    ("LEASEHOLD_LAZY_CONNECT", "lazy_connect"),
    ("LEASEHOLD_RETRY_UNAVAILABLE", "retry_unavailable"),
    ("LEASEHOLD_CLOCK_DRIFT", "clock_drift"),
    ("LEASEHOLD_FENCE_OFFSET", "fence_offset"),
];

impl LockConfig {
    /// Reads the process environment; unset variables leave their fields unset. Route rules
    /// and profiles come from files.
    ///
    /// | variable | field |
    /// | --- | --- |
    /// | `LEASEHOLD_URL` | `url` (one Redis server) |
    /// | `LEASEHOLD_REDLOCK` | `redlock` (comma-separated URLs) |
    /// | `LEASEHOLD_CLUSTER` | `cluster` (comma-separated URLs) |
    /// | `LEASEHOLD_SENTINEL`, `LEASEHOLD_SENTINEL_MASTER` | `sentinel.urls` (comma-separated), `sentinel.master` |
    /// | `LEASEHOLD_ZOOKEEPER` | `zookeeper` |
    /// | `LEASEHOLD_ETCD` | `etcd` (comma-separated endpoints) |
    /// | `LEASEHOLD_POSTGRES` | `postgres` |
    /// | `LEASEHOLD_MYSQL` | `mysql` |
    /// | `LEASEHOLD_SESSION_TIMEOUT` | `session_timeout` (ZooKeeper, etcd) |
    /// | `LEASEHOLD_PREFIX` | `prefix` |
    /// | `LEASEHOLD_LEASE` | `lease` |
    /// | `LEASEHOLD_WAIT` | `wait` |
    /// | `LEASEHOLD_OP_TIMEOUT` | `op_timeout` |
    /// | `LEASEHOLD_CONNECT_TIMEOUT` | `connect_timeout` |
    /// | `LEASEHOLD_WATCHDOG` | `watchdog` (`true`/`false`) |
    /// | `LEASEHOLD_LAZY_CONNECT` | `lazy_connect` (`true`/`false`) |
    /// | `LEASEHOLD_RETRY_UNAVAILABLE` | `retry_unavailable` (`true`/`false`) |
    /// | `LEASEHOLD_CLOCK_DRIFT` | `clock_drift` |
    /// | `LEASEHOLD_FENCE_OFFSET` | `fence_offset` |
    ///
    /// Durations are written `500ms`, `30s`, `2m`. Credentials in these URLs never show in
    /// this config's `Debug`.
    ///
    /// # Errors
    /// [`LockError::Config`] naming the variable and its bad value.
    pub fn from_env() -> Result<LockConfig, LockError> {
        LockConfig::default().with_vars(std::env::vars_os().filter_map(|(k, v)| {
            Some((k.into_string().ok()?, v.into_string().unwrap_or_default()))
        }))
    }

    /// This config with the fields that the environment sets replaced: a file for the rules
    /// and defaults, the environment for the deployment. A variable naming a deployment
    /// (`LEASEHOLD_URL`, `LEASEHOLD_REDLOCK`, `LEASEHOLD_CLUSTER`, `LEASEHOLD_SENTINEL*`,
    /// `LEASEHOLD_ZOOKEEPER`, `LEASEHOLD_ETCD`, `LEASEHOLD_POSTGRES`) replaces the file's
    /// deployment, whichever engine the file names.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn with_env(self) -> Result<LockConfig, LockError> {
        self.with_vars(std::env::vars_os().filter_map(|(k, v)| {
            Some((k.into_string().ok()?, v.into_string().unwrap_or_default()))
        }))
    }

    /// This config with the fields that `vars` set replaced, as [`with_env`](Self::with_env)
    /// does with the process environment; for tests and for other sources of variables.
    /// Variables not named `LEASEHOLD_...` (as listed in [`from_env`](Self::from_env)) are
    /// ignored.
    ///
    /// ```
    /// use leasehold::LockConfig;
    /// use std::time::Duration;
    ///
    /// let config = LockConfig::default().with_vars([
    ///     ("LEASEHOLD_URL".to_owned(), "redis://cache:6379".to_owned()),
    ///     ("LEASEHOLD_WAIT".to_owned(), "250ms".to_owned()),
    /// ])?;
    /// assert_eq!(config.wait, Some(Duration::from_millis(250)));
    /// let err = LockConfig::default()
    ///     .with_vars([("LEASEHOLD_WATCHDOG".to_owned(), "maybe".to_owned())])
    ///     .unwrap_err();
    /// assert!(err.to_string().contains(r#"LEASEHOLD_WATCHDOG: "maybe""#));
    /// # Ok::<(), leasehold::LockError>(())
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] naming the variable and its bad value.
    pub fn with_vars(
        mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LockConfig, LockError> {
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        // A variable naming a deployment replaces the document's deployment: the other
        // engines' fields are cleared, so `LEASEHOLD_URL` over a file that says `postgres`
        // moves the service to Redis (two deployments named by the variables themselves are
        // still an error, as in a file).
        let named: Vec<&str> = vars
            .iter()
            .filter_map(|(name, _)| ENV_VARS.iter().find(|(var, _)| var == name))
            .filter_map(|(_, field)| deployment_of(field))
            .collect();
        if !named.is_empty() {
            self.keep_deployments(&named);
        }
        for (name, value) in vars {
            let Some((var, field)) = ENV_VARS.iter().find(|(var, _)| *var == name) else {
                continue;
            };
            let value = value.trim();
            let duration = || parse_duration(var, value);
            match *field {
                "url" => self.url = Some(check_url(var, value)?),
                "prefix" => self.prefix = Some(check_prefix(var, value)?),
                "service" => self.service = Some(check_service(var, value)?),
                "lease" => self.lease = Some(check_lease(var, value, duration()?)?),
                "wait" => self.wait = Some(duration()?),
                "op_timeout" => self.op_timeout = Some(check_bound(var, value, duration()?)?),
                "connect_timeout" => {
                    self.connect_timeout = Some(check_bound(var, value, duration()?)?)
                }
                "watchdog" => self.watchdog = Some(parse_bool(var, value)?),
                "lazy_connect" => self.lazy_connect = Some(parse_bool(var, value)?),
                "retry_unavailable" => self.retry_unavailable = Some(parse_bool(var, value)?),
                "redlock" => self.redlock = url_list(var, value)?,
                "cluster" => self.cluster = url_list(var, value)?,
                "sentinel" => {
                    self.sentinel
                        .get_or_insert_with(SentinelConfig::default)
                        .urls = url_list(var, value)?
                }
                "sentinel_master" => {
                    self.sentinel
                        .get_or_insert_with(SentinelConfig::default)
                        .master = value.to_owned()
                }
                "clock_drift" => self.clock_drift = Some(parse_drift(var, value)?),
                "fence_offset" => {
                    let offset = value.parse::<u64>().map_err(|_| {
                        LockError::config(format!(
                            "{var}: {value:?} is not a whole number; write the fence ceiling \
                             of the deployment moved from, e.g. 1790000000000000"
                        ))
                    })?;
                    self.fence_offset = Some(check_fence_offset(var, offset)?)
                }
                "zookeeper" => self.zookeeper = Some(value.to_owned()),
                "postgres" => self.postgres = Some(value.to_owned()),
                "mysql" => self.mysql = Some(value.to_owned()),
                "etcd" => {
                    self.etcd = value
                        .split(',')
                        .map(str::trim)
                        .filter(|e| !e.is_empty())
                        .map(str::to_owned)
                        .collect()
                }
                "session_timeout" => self.session_timeout = Some(duration()?),
                _ => unreachable!("every variable has a field"),
            }
        }
        Ok(self)
    }
}

/// The deployment a variable's field belongs to, if it names one.
fn deployment_of(field: &str) -> Option<&'static str> {
    match field {
        "url" => Some("url"),
        "redlock" => Some("redlock"),
        "cluster" => Some("cluster"),
        "sentinel" | "sentinel_master" => Some("sentinel"),
        "zookeeper" => Some("zookeeper"),
        "etcd" => Some("etcd"),
        "postgres" => Some("postgres"),
        "mysql" => Some("mysql"),
        _ => None,
    }
}

impl LockConfig {
    /// Clears every deployment but the ones named.
    fn keep_deployments(&mut self, named: &[&str]) {
        let keep = |name: &str| named.contains(&name);
        if !keep("url") {
            self.url = None;
        }
        if !keep("redlock") {
            self.redlock.clear();
        }
        if !keep("cluster") {
            self.cluster.clear();
        }
        if !keep("sentinel") {
            self.sentinel = None;
        }
        if !keep("zookeeper") {
            self.zookeeper = None;
        }
        if !keep("etcd") {
            self.etcd.clear();
        }
        if !keep("postgres") {
            self.postgres = None;
        }
        if !keep("mysql") {
            self.mysql = None;
        }
    }
}
