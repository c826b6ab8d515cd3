//! [`LockConfig`]: a [`Locker`](crate::Locker)'s settings and the middleware's route rules, declared in a
//! TOML file, in the environment, or in any serde format, with durations written as `"30s"`.
//!
//! By job: this file holds the two public types; [`document`] reads a TOML (or any serde)
//! document, [`env`] the `LEASEHOLD_*` variables, [`checks`] holds the one check of each kind
//! of value both share, and [`setup`] turns a config into a deployment, a builder and route
//! middleware.

mod checks;
mod document;
mod env;
mod setup;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::Deserialize;

use self::checks::redact;
use self::document::RawConfig;
use crate::web::RouteRule;

/// Settings of a [`Locker`](crate::Locker) and route rules of [`RouteLocks`](crate::RouteLocks), so that
/// locking can be declared in a configuration file instead of code (feature `serde`).
///
/// Every field is optional, but [`Locker::from_config`](crate::Locker::from_config) needs the
/// config to name exactly one deployment: `url` (one Redis server), `redlock`, `cluster`,
/// `[sentinel]`, `zookeeper`, `etcd`, `postgres` or `mysql`. Unset fields keep the builder's defaults.
/// Unknown fields are errors, and every error names the field and the bad value.
///
/// ```toml
/// url = "redis://127.0.0.1:6379"   # LEASEHOLD_URL; one Redis server (or one of the below)
/// prefix = "shop"                  # LEASEHOLD_PREFIX; default "leasehold"
/// service = "checkout"             # LEASEHOLD_SERVICE; who holds locks, as operators see it
/// lease = "30s"                    # LEASEHOLD_LEASE; default lease of a lock
/// wait = "3s"                      # LEASEHOLD_WAIT; default wait for a busy lock
/// op_timeout = "2s"                # LEASEHOLD_OP_TIMEOUT; bound on every call to the engine
/// connect_timeout = "2s"           # LEASEHOLD_CONNECT_TIMEOUT
/// watchdog = true                  # LEASEHOLD_WATCHDOG; renew leases in the background
/// lazy_connect = false             # LEASEHOLD_LAZY_CONNECT; start while the engine is down
/// retry_unavailable = true         # LEASEHOLD_RETRY_UNAVAILABLE; waiting rides out outages
///
/// # instead of url, one of:
/// # redlock = ["redis://a:6379", "redis://b:6379", "redis://c:6379"]   # LEASEHOLD_REDLOCK
/// # cluster = ["redis://node1:7000", "redis://node2:7000"]               # LEASEHOLD_CLUSTER
/// # [sentinel]                     # LEASEHOLD_SENTINEL, LEASEHOLD_SENTINEL_MASTER
/// # urls = ["redis://s1:26379"]
/// # master = "mymaster"
/// # min_replicas = 1
/// # zookeeper = "zk1:2181,zk2:2181,zk3:2181"                            # LEASEHOLD_ZOOKEEPER
/// # etcd = ["http://user:password@etcd1:2379", "http://etcd2:2379"]    # LEASEHOLD_ETCD
/// # session_timeout = "10s"       # LEASEHOLD_SESSION_TIMEOUT; with zookeeper or etcd
/// # postgres = "postgres://user:password@db:5432/app"                   # LEASEHOLD_POSTGRES
/// # mysql = "mysql://user:password@db:3306/app"                         # LEASEHOLD_MYSQL
/// clock_drift = 0.01               # LEASEHOLD_CLOCK_DRIFT
/// fence_offset = 0                 # LEASEHOLD_FENCE_OFFSET; after a move from another engine
///
/// [status_codes]                   # optional, for RouteLocks: the status of each LockError
/// busy = 423                       # default 409; also unavailable (503), lost (503),
///                                  # invalid_key (400), config (500); 400 to 599 only
///
/// [profiles.payments]             # named settings: #[distributed_lock(profile = "payments")],
/// lease = "45s"                    # LockRequest::profile("payments"), a rule's profile;
/// wait = "0s"                      # optional: lease, wait, watchdog, fair, limit (a
/// [profiles.partner-api]           # semaphore's permits); they override the call site's own
/// limit = 3
///
/// [[rules]]                        # applied by RouteLocks, first match wins
/// method = "POST"                  # optional; "*" or absent for any method
/// path = "/orders/{sku}"
/// key = "stock:<sku>"              # <param> from the path, <header.X-Name> from headers
/// lease = "10s"                    # optional: lease, wait, watchdog, on_lost, fair, profile
/// wait = "2s"
/// on_lost = "cancel"               # or "continue"
/// ```
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// use leasehold::LockConfig;
/// use std::time::Duration;
///
/// let config = LockConfig::from_toml_str(r#"
///     url = "redis://127.0.0.1:6379"
///     lease = "30s"
///     rules = [{ method = "POST", path = "/orders/{sku}", key = "stock:<sku>", lease = "10s" }]
/// "#)?;
/// assert_eq!(config.lease, Some(Duration::from_secs(30)));
/// assert_eq!(config.rules[0].path(), "/orders/{sku}");
///
/// let err = LockConfig::from_toml_str(r#"lease = "30x""#).unwrap_err();
/// assert!(err.to_string().contains(r#"lease: "30x" is not a duration"#));
/// // let locker = leasehold::Locker::from_config(&config).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default, Deserialize)]
#[serde(try_from = "RawConfig")]
#[non_exhaustive]
pub struct LockConfig {
    /// One Redis server, `redis://[user:password@]host:port[/db]` (`rediss://` for TLS,
    /// `redis+unix://` for a socket). [`Locker::from_config`](crate::Locker::from_config)
    /// needs exactly one deployment: this, or one of `redlock`, `cluster`, `sentinel`,
    /// `zookeeper`, `etcd`, `postgres`, `mysql`. Only Redis URLs go here; the other engines have
    /// fields of their own.
    pub url: Option<String>,
    /// RedLock over these independent masters (an odd number, at least 3) instead of `url`;
    /// see [`LockerBuilder::redlock`](crate::LockerBuilder::redlock).
    pub redlock: Vec<String>,
    /// A Redis Cluster reached through these nodes instead of `url` (feature `cluster`).
    pub cluster: Vec<String>,
    /// The master that these Sentinels monitor, instead of `url` (feature `sentinel`).
    pub sentinel: Option<SentinelConfig>,
    /// A ZooKeeper ensemble, `"host:port,host:port"`, instead of `url` (feature `zookeeper`);
    /// `"user:password@host:port,...[/chroot][?ca=/path/ca.pem]"` with credentials and TLS
    /// (see [`LockerBuilder::zookeeper`](crate::LockerBuilder)). The credentials never show
    /// in this config's `Debug`.
    pub zookeeper: Option<String>,
    /// An etcd cluster's endpoints, `[http[s]://][user:password@]host:port`, instead of `url`
    /// (feature `etcd`); see [`LockerBuilder::etcd`](crate::LockerBuilder). Credentials go in
    /// the endpoints, and never show in this config's `Debug`.
    pub etcd: Vec<String>,
    /// A PostgreSQL database, `postgres://user:password@host:port/database`, instead of `url`
    /// (feature `postgres`); see [`LockerBuilder::postgres`](crate::LockerBuilder). The
    /// password never shows in this config's `Debug`.
    pub postgres: Option<String>,
    /// A MySQL 8 or MariaDB database, `mysql://user:password@host:port/database` (or
    /// `mariadb://`), instead of `url` (feature `mysql`); see
    /// [`LockerBuilder::mysql`](crate::LockerBuilder). The password never shows in this
    /// config's `Debug`.
    pub mysql: Option<String>,
    /// With `zookeeper`: the session timeout; with `etcd`: the TTL of the locker's etcd lease.
    /// Defaults to 10 s; see [`LockerBuilder::session_timeout`](crate::LockerBuilder).
    pub session_timeout: Option<Duration>,
    /// The clock drift allowance as a fraction of the lease. Defaults to 0.01.
    pub clock_drift: Option<f64>,
    /// Added to every fence and leader term, after a move from another engine; see
    /// [`LockerBuilder::fence_offset`](crate::LockerBuilder::fence_offset). Defaults to 0.
    pub fence_offset: Option<u64>,
    /// The prefix of every name the locker writes in its engine; see
    /// [`LockerBuilder::prefix`](crate::LockerBuilder::prefix). Defaults to `"leasehold"`.
    pub prefix: Option<String>,
    /// The service name the locker describes itself with, as operators see it beside the
    /// locks it holds; see [`LockerBuilder::service_name`](crate::LockerBuilder::service_name).
    /// Defaults to the name of the running binary.
    pub service: Option<String>,
    /// The default lease. Defaults to 30 s.
    pub lease: Option<Duration>,
    /// The default wait for a busy lock. Defaults to 3 s.
    pub wait: Option<Duration>,
    /// The bound on every call to the engine; see
    /// [`LockerBuilder::op_timeout`](crate::LockerBuilder::op_timeout). Defaults to 2 s.
    pub op_timeout: Option<Duration>,
    /// The bound on connecting to the engine. Defaults to 2 s.
    pub connect_timeout: Option<Duration>,
    /// Whether leases are renewed in the background by default. Defaults to `true`.
    pub watchdog: Option<bool>,
    /// Start while the engine is down and connect in the background; see
    /// [`LockerBuilder::lazy_connect`](crate::LockerBuilder::lazy_connect). Defaults to `false`.
    pub lazy_connect: Option<bool>,
    /// Whether waiting acquires ride out an engine outage until their wait is over; see
    /// [`LockerBuilder::retry_unavailable`](crate::LockerBuilder::retry_unavailable).
    /// Defaults to `true`.
    pub retry_unavailable: Option<bool>,
    /// The HTTP status of each [`LockError`](crate::LockError) answered by [`RouteLocks`](crate::RouteLocks)
    /// built with [`RouteLocks::from_config`](crate::RouteLocks::from_config); the defaults of
    /// [`StatusCodes`](crate::StatusCodes) when absent.
    pub status_codes: Option<crate::web::StatusCodes>,
    /// Named lock settings (`[profiles.NAME]` tables: `lease`, `wait`, `watchdog`, `fair`,
    /// `limit`) that attributes (`profile = "NAME"`), requests
    /// ([`LockRequest::profile`](crate::LockRequest::profile)) and route rules name instead
    /// of literals in code; see [`Profile`](crate::Profile). Empty by default.
    pub profiles: std::collections::BTreeMap<String, crate::Profile>,
    /// The route rules for [`RouteLocks`](crate::RouteLocks), in order. Empty by default.
    pub rules: Vec<RouteRule>,
}

/// Endpoints may carry passwords: `Debug` shows every URL with its credentials hidden.
impl std::fmt::Debug for LockConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |urls: &[String]| urls.iter().map(|u| redact(u)).collect::<Vec<_>>();
        f.debug_struct("LockConfig")
            .field("url", &self.url.as_deref().map(redact))
            .field("redlock", &list(&self.redlock))
            .field("cluster", &list(&self.cluster))
            .field("sentinel", &self.sentinel)
            .field("zookeeper", &self.zookeeper.as_deref().map(redact))
            .field("etcd", &list(&self.etcd))
            .field("postgres", &self.postgres.as_deref().map(redact))
            .field("mysql", &self.mysql.as_deref().map(redact))
            .field("session_timeout", &self.session_timeout)
            .field("clock_drift", &self.clock_drift)
            .field("fence_offset", &self.fence_offset)
            .field("prefix", &self.prefix)
            .field("service", &self.service)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("op_timeout", &self.op_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("watchdog", &self.watchdog)
            .field("lazy_connect", &self.lazy_connect)
            .field("status_codes", &self.status_codes)
            .field("profiles", &self.profiles)
            .field("rules", &self.rules)
            .finish()
    }
}

/// A Sentinel deployment in a [`LockConfig`]:
///
/// ```toml
/// [sentinel]
/// urls = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
/// master = "mymaster"      # or "redis://lockapp:secret@mymaster/0" for a master with a password
/// min_replicas = 1          # optional; see LockerBuilder::min_replicas
/// ```
///
/// Its `Debug` hides every credential.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// The sentinels, `redis://host:port`.
    pub urls: Vec<String>,
    /// The master's name in the sentinels' configuration, or, for a master that needs a
    /// password, a database or TLS, a URL whose host is that name:
    /// `redis://lockapp:secret@mymaster/0` (`rediss://` with the `tls` feature).
    pub master: String,
    /// Replicas that must acknowledge each acquire. Defaults to 0.
    #[serde(default)]
    pub min_replicas: u32,
}

/// URLs may carry passwords: `Debug` shows them hidden.
impl std::fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConfig")
            .field(
                "urls",
                &self.urls.iter().map(|u| redact(u)).collect::<Vec<_>>(),
            )
            .field("master", &redact(&self.master))
            .field("min_replicas", &self.min_replicas)
            .finish()
    }
}
