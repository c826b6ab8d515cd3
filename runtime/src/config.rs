//! [`LockConfig`]: a [`Locker`]'s settings and the middleware's route rules, declared in a
//! TOML file, in the environment, or in any serde format, with durations written as `"30s"`.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::LockError;
use crate::locker::{Locker, MIN_LEASE};
use crate::primitives::guard::OnLost;
use crate::store::keys::validate_prefix;
use crate::store::Deployment;
use crate::web::{RouteLocks, RouteRule};

/// Settings of a [`Locker`] and route rules of [`RouteLocks`](crate::RouteLocks), so that
/// locking can be declared in a configuration file instead of code (feature `serde`).
///
/// Every field is optional except `url` (for [`Locker::from_config`]); unset fields keep the
/// builder's defaults. Unknown fields are errors, and every error names the field and the
/// bad value.
///
/// ```toml
/// url = "redis://127.0.0.1:6379"   # LEASEHOLD_URL
/// prefix = "shop"                  # LEASEHOLD_PREFIX; default "leasehold"
/// lease = "30s"                    # LEASEHOLD_LEASE; default lease of a lock
/// wait = "3s"                      # LEASEHOLD_WAIT; default wait for a busy lock
/// op_timeout = "500ms"             # LEASEHOLD_OP_TIMEOUT; bound on every Redis call
/// connect_timeout = "2s"           # LEASEHOLD_CONNECT_TIMEOUT
/// watchdog = true                  # LEASEHOLD_WATCHDOG; renew leases in the background
/// lazy_connect = false             # LEASEHOLD_LAZY_CONNECT; start while the engine is down
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
/// clock_drift = 0.01               # LEASEHOLD_CLOCK_DRIFT
///
/// [status_codes]                   # optional, for RouteLocks: the status of each LockError
/// busy = 423                       # default 409; also unavailable (503), lost (503),
///                                  # invalid_key (400), config (500); 400 to 599 only
///
/// [[rules]]                        # applied by RouteLocks, first match wins
/// method = "POST"                  # optional; "*" or absent for any method
/// path = "/orders/{sku}"
/// key = "stock:<sku>"              # <param> from the path, <header.X-Name> from headers
/// lease = "10s"                    # optional: lease, wait, watchdog, on_lost, fair
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
    /// The Redis server, `redis://[user:password@]host:port[/db]`. [`Locker::from_config`]
    /// needs this or one of `redlock`, `cluster`, `sentinel`.
    pub url: Option<String>,
    /// RedLock over these independent masters (an odd number, at least 3) instead of `url`;
    /// see [`LockerBuilder::redlock`](crate::LockerBuilder::redlock).
    pub redlock: Vec<String>,
    /// A Redis Cluster reached through these nodes instead of `url` (feature `cluster`).
    pub cluster: Vec<String>,
    /// The master that these Sentinels monitor, instead of `url` (feature `sentinel`).
    pub sentinel: Option<SentinelConfig>,
    /// A ZooKeeper ensemble, `"host:port,host:port"`, instead of `url` (feature `zookeeper`).
    pub zookeeper: Option<String>,
    /// An etcd cluster's endpoints, `[http[s]://][user:password@]host:port`, instead of `url`
    /// (feature `etcd`); see [`LockerBuilder::etcd`](crate::LockerBuilder). Credentials go in
    /// the endpoints, and never show in this config's `Debug`.
    pub etcd: Vec<String>,
    /// A PostgreSQL database, `postgres://user:password@host:port/database`, instead of `url`
    /// (feature `postgres`); see [`LockerBuilder::postgres`](crate::LockerBuilder). The
    /// password never shows in this config's `Debug`.
    pub postgres: Option<String>,
    /// With `zookeeper`: the session timeout; with `etcd`: the TTL of the locker's etcd lease.
    /// Defaults to 10 s; see [`LockerBuilder::session_timeout`](crate::LockerBuilder).
    pub session_timeout: Option<Duration>,
    /// The clock drift allowance as a fraction of the lease. Defaults to 0.01.
    pub clock_drift: Option<f64>,
    /// The prefix of every Redis key written. Defaults to `"leasehold"`.
    pub prefix: Option<String>,
    /// The default lease. Defaults to 30 s.
    pub lease: Option<Duration>,
    /// The default wait for a busy lock. Defaults to 3 s.
    pub wait: Option<Duration>,
    /// The bound on every Redis call. Defaults to 1 s.
    pub op_timeout: Option<Duration>,
    /// The bound on establishing a connection. Defaults to 2 s.
    pub connect_timeout: Option<Duration>,
    /// Whether leases are renewed in the background by default. Defaults to `true`.
    pub watchdog: Option<bool>,
    /// Start while the engine is down and connect in the background; see
    /// [`LockerBuilder::lazy_connect`](crate::LockerBuilder::lazy_connect). Defaults to `false`.
    pub lazy_connect: Option<bool>,
    /// The HTTP status of each [`LockError`] answered by [`RouteLocks`](crate::RouteLocks)
    /// built with [`RouteLocks::from_config`]; the defaults of
    /// [`StatusCodes`](crate::StatusCodes) when absent.
    pub status_codes: Option<crate::web::StatusCodes>,
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
            .field(
                "sentinel",
                &self.sentinel.as_ref().map(|s| SentinelConfig {
                    urls: list(&s.urls),
                    ..s.clone()
                }),
            )
            .field("zookeeper", &self.zookeeper.as_deref().map(redact))
            .field("etcd", &list(&self.etcd))
            .field("postgres", &self.postgres.as_deref().map(redact))
            .field("session_timeout", &self.session_timeout)
            .field("clock_drift", &self.clock_drift)
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("op_timeout", &self.op_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("watchdog", &self.watchdog)
            .field("lazy_connect", &self.lazy_connect)
            .field("status_codes", &self.status_codes)
            .field("rules", &self.rules)
            .finish()
    }
}

/// A Sentinel deployment in a [`LockConfig`]:
///
/// ```toml
/// [sentinel]
/// urls = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]
/// master = "mymaster"
/// min_replicas = 1          # optional; see LockerBuilder::min_replicas
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SentinelConfig {
    /// The sentinels, `redis://host:port`.
    pub urls: Vec<String>,
    /// The master's name in the sentinels' configuration.
    pub master: String,
    /// Replicas that must acknowledge each acquire. Defaults to 0.
    #[serde(default)]
    pub min_replicas: u32,
}

/// The names of the environment variables [`LockConfig::from_env`] reads, with their fields.
const ENV_VARS: [(&str, &str); 17] = [
    ("LEASEHOLD_URL", "url"),
    ("LEASEHOLD_REDLOCK", "redlock"),
    ("LEASEHOLD_CLUSTER", "cluster"),
    ("LEASEHOLD_SENTINEL", "sentinel"),
    ("LEASEHOLD_SENTINEL_MASTER", "sentinel_master"),
    ("LEASEHOLD_ZOOKEEPER", "zookeeper"),
    ("LEASEHOLD_ETCD", "etcd"),
    ("LEASEHOLD_POSTGRES", "postgres"),
    ("LEASEHOLD_SESSION_TIMEOUT", "session_timeout"),
    ("LEASEHOLD_PREFIX", "prefix"),
    ("LEASEHOLD_LEASE", "lease"),
    ("LEASEHOLD_WAIT", "wait"),
    ("LEASEHOLD_OP_TIMEOUT", "op_timeout"),
    ("LEASEHOLD_CONNECT_TIMEOUT", "connect_timeout"),
    ("LEASEHOLD_WATCHDOG", "watchdog"),
    ("LEASEHOLD_LAZY_CONNECT", "lazy_connect"),
    ("LEASEHOLD_CLOCK_DRIFT", "clock_drift"),
];

impl LockConfig {
    /// Parses a TOML document.
    ///
    /// # Errors
    /// [`LockError::Config`] naming the field and the bad value: a syntax error (with line and
    /// column), an unknown field, a value of the wrong type, a duration that does not parse,
    /// a lease under 10 ms, a bad prefix, or a rule whose path or key does not parse.
    pub fn from_toml_str(text: &str) -> Result<LockConfig, LockError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| LockError::Config {
            message: format!("invalid leasehold config: {}", e.to_string().trim_end()),
            source: Some(Box::new(e)),
        })?;
        LockConfig::try_from(raw).map_err(invalid)
    }

    /// Reads and parses a TOML file.
    ///
    /// # Errors
    /// [`LockError::Config`] when the file cannot be read (naming the path), or as
    /// [`from_toml_str`](Self::from_toml_str).
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<LockConfig, LockError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| LockError::Config {
            message: format!(
                "cannot read the leasehold config file {}: {e}",
                path.display()
            ),
            source: Some(Box::new(e)),
        })?;
        LockConfig::from_toml_str(&text).map_err(|e| match e {
            LockError::Config { message, source } => LockError::Config {
                message: format!("{}: {message}", path.display()),
                source,
            },
            other => other,
        })
    }

    /// Reads the process environment: `LEASEHOLD_URL`, `LEASEHOLD_PREFIX`, `LEASEHOLD_LEASE`,
    /// `LEASEHOLD_WAIT`, `LEASEHOLD_OP_TIMEOUT`, `LEASEHOLD_CONNECT_TIMEOUT` and
    /// `LEASEHOLD_WATCHDOG` (`true`/`false`); unset ones stay unset. Route rules come from files.
    ///
    /// # Errors
    /// [`LockError::Config`] naming the variable and its bad value.
    pub fn from_env() -> Result<LockConfig, LockError> {
        LockConfig::default().with_vars(std::env::vars_os().filter_map(|(k, v)| {
            Some((k.into_string().ok()?, v.into_string().unwrap_or_default()))
        }))
    }

    /// This config with the fields that the environment sets replaced: a file for the rules
    /// and defaults, the environment for the deployment (`LEASEHOLD_URL` ...).
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
        for (name, value) in vars {
            let Some((var, field)) = ENV_VARS.iter().find(|(var, _)| *var == name) else {
                continue;
            };
            let value = value.trim();
            let duration = || parse_duration(var, value);
            match *field {
                "url" => self.url = Some(check_url(var, value)?),
                "prefix" => self.prefix = Some(check_prefix(var, value)?),
                "lease" => self.lease = Some(check_lease(var, value, duration()?)?),
                "wait" => self.wait = Some(duration()?),
                "op_timeout" => self.op_timeout = Some(check_bound(var, value, duration()?)?),
                "connect_timeout" => {
                    self.connect_timeout = Some(check_bound(var, value, duration()?)?)
                }
                "watchdog" => self.watchdog = Some(parse_bool(var, value)?),
                "lazy_connect" => self.lazy_connect = Some(parse_bool(var, value)?),
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
                "zookeeper" => self.zookeeper = Some(value.to_owned()),
                "postgres" => self.postgres = Some(value.to_owned()),
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

impl LockConfig {
    /// A builder with every setting of the config; unset ones keep the builder's defaults.
    pub(crate) fn builder(&self) -> Result<crate::LockerBuilder, LockError> {
        let config = self;
        let mut builder = Locker::builder().deployment(config.deployment()?);
        if let Some(prefix) = &config.prefix {
            builder = builder.prefix(check_prefix("prefix", prefix).map_err(invalid)?);
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
        if let Some(on) = config.watchdog {
            builder = builder.default_watchdog(on);
        }
        if let Some(drift) = config.clock_drift {
            builder = builder.clock_drift(drift);
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
    /// A builder pointed at the one deployment the config names. The deployment itself is
    /// checked where the builder's is ([`Deployment::validate`]), so both say the same.
    /// The one deployment the config names (`url`, `redlock`, `cluster`, `[sentinel]`,
    /// `zookeeper`, `etcd` or `postgres`), checked as `build` would check it.
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
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| *name)
        .collect();
        let deployment =
            match given.as_slice() {
                [] => return Err(LockError::config(
                    "invalid leasehold config: url: missing; set url = \"redis://127.0.0.1:6379\" \
                     (or redlock, cluster, [sentinel], zookeeper, etcd or postgres) in the config, or LEASEHOLD_URL in the \
                     environment",
                )),
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

fn checked_urls(field: &str, urls: &[String]) -> Result<Vec<String>, LockError> {
    urls.iter()
        .map(|url| check_url(field, url).map_err(invalid))
        .collect()
}

/// Prefixes a field error with what it is about.
fn invalid(e: LockError) -> LockError {
    match e {
        LockError::Config { message, source } => LockError::Config {
            message: format!("invalid leasehold config: {message}"),
            source,
        },
        other => other,
    }
}

/// The document as written: strings for durations, checked in [`TryFrom`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    url: Option<String>,
    #[serde(default)]
    redlock: Vec<String>,
    #[serde(default)]
    cluster: Vec<String>,
    sentinel: Option<SentinelConfig>,
    zookeeper: Option<String>,
    #[serde(default)]
    etcd: Vec<String>,
    postgres: Option<String>,
    session_timeout: Option<String>,
    clock_drift: Option<f64>,
    prefix: Option<String>,
    lease: Option<String>,
    wait: Option<String>,
    op_timeout: Option<String>,
    connect_timeout: Option<String>,
    watchdog: Option<bool>,
    lazy_connect: Option<bool>,
    status_codes: Option<crate::web::StatusCodes>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    method: Option<String>,
    path: String,
    key: String,
    lease: Option<String>,
    wait: Option<String>,
    watchdog: Option<bool>,
    on_lost: Option<String>,
    #[serde(default)]
    fair: bool,
}

impl TryFrom<RawConfig> for LockConfig {
    type Error = LockError;

    fn try_from(raw: RawConfig) -> Result<Self, LockError> {
        let opt = |field: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| parse_duration(field, v))
                .transpose()
        };
        let lease = opt("lease", &raw.lease)?;
        if let (Some(lease), Some(text)) = (lease, &raw.lease) {
            check_lease("lease", text, lease)?;
        }
        let mut bounds = [None, None];
        for (slot, (field, value)) in bounds.iter_mut().zip([
            ("op_timeout", &raw.op_timeout),
            ("connect_timeout", &raw.connect_timeout),
        ]) {
            if let Some(text) = value {
                *slot = Some(check_bound(field, text, parse_duration(field, text)?)?);
            }
        }
        let rules = raw
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| rule.into_rule(i))
            .collect::<Result<_, _>>()?;
        if let Some(drift) = raw.clock_drift {
            parse_drift("clock_drift", &drift.to_string())?;
        }
        Ok(LockConfig {
            url: raw.url.map(|u| check_url("url", &u)).transpose()?,
            redlock: urls("redlock", raw.redlock)?,
            cluster: urls("cluster", raw.cluster)?,
            sentinel: raw
                .sentinel
                .map(|s| {
                    Ok::<_, LockError>(SentinelConfig {
                        urls: urls("sentinel.urls", s.urls)?,
                        ..s
                    })
                })
                .transpose()?,
            zookeeper: raw.zookeeper,
            etcd: raw.etcd,
            postgres: raw.postgres,
            session_timeout: opt("session_timeout", &raw.session_timeout)?,
            clock_drift: raw.clock_drift,
            prefix: raw.prefix.map(|p| check_prefix("prefix", &p)).transpose()?,
            lease,
            wait: opt("wait", &raw.wait)?,
            op_timeout: bounds[0],
            connect_timeout: bounds[1],
            watchdog: raw.watchdog,
            lazy_connect: raw.lazy_connect,
            status_codes: raw.status_codes,
            rules,
        })
    }
}

impl RawRule {
    fn into_rule(self, index: usize) -> Result<RouteRule, LockError> {
        let at = |field: &str| format!("rules[{index}].{field}");
        let method = self.method.as_deref().unwrap_or("*");
        let mut rule = RouteRule::new(method, &self.path, &self.key).map_err(|e| {
            // Say which of the three strings was refused.
            let message = e.to_string();
            let field = if message.starts_with("method") {
                "method"
            } else if message.starts_with("path") {
                "path"
            } else {
                "key"
            };
            LockError::config(format!("{}: {message}", at(field)))
        })?;
        if let Some(text) = &self.lease {
            let lease = parse_duration(&at("lease"), text)?;
            rule = rule.lease(check_lease(&at("lease"), text, lease)?);
        }
        if let Some(text) = &self.wait {
            rule = rule.wait(parse_duration(&at("wait"), text)?);
        }
        if let Some(on) = self.watchdog {
            rule = rule.watchdog(on);
        }
        rule = rule.fair(self.fair);
        if let Some(text) = &self.on_lost {
            rule = rule.on_lost(match text.as_str() {
                "cancel" => OnLost::Cancel,
                "continue" => OnLost::Continue,
                _ => {
                    return Err(LockError::config(format!(
                        "{}: {text:?} is not an option; write \"cancel\" (stop the request, 503) \
                         or \"continue\" (let it finish)",
                        at("on_lost")
                    )))
                }
            });
        }
        Ok(rule)
    }
}

fn parse_duration(field: &str, text: &str) -> Result<Duration, LockError> {
    humantime::parse_duration(text.trim()).map_err(|e| LockError::Config {
        message: format!(
            "{field}: {text:?} is not a duration ({e}); write a number and a unit, e.g. \"30s\", \
             \"500ms\", \"2m\""
        ),
        source: Some(Box::new(e)),
    })
}

/// Checks each URL of a list.
fn urls(field: &str, list: Vec<String>) -> Result<Vec<String>, LockError> {
    list.iter().map(|url| check_url(field, url)).collect()
}

/// A comma-separated list of Redis URLs.
fn url_list(field: &str, text: &str) -> Result<Vec<String>, LockError> {
    text.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| check_url(field, url))
        .collect()
}

fn parse_drift(field: &str, text: &str) -> Result<f64, LockError> {
    match text.parse::<f64>() {
        Ok(drift) if (0.0..0.5).contains(&drift) => Ok(drift),
        _ => Err(LockError::config(format!(
            "{field}: {text:?} is not a clock drift; write a fraction of the lease from 0.0 to \
             below 0.5, e.g. 0.01"
        ))),
    }
}

fn parse_bool(field: &str, text: &str) -> Result<bool, LockError> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(LockError::config(format!(
            "{field}: {text:?} is not a boolean; write \"true\" or \"false\""
        ))),
    }
}

fn check_lease(field: &str, text: &str, lease: Duration) -> Result<Duration, LockError> {
    if lease < MIN_LEASE {
        return Err(LockError::config(format!(
            "{field}: {text:?} is too short; a lease must be at least {MIN_LEASE:?}"
        )));
    }
    Ok(lease)
}

fn check_bound(field: &str, text: &str, bound: Duration) -> Result<Duration, LockError> {
    if bound.is_zero() {
        return Err(LockError::config(format!(
            "{field}: {text:?} is zero; every Redis call needs a bound, e.g. \"500ms\""
        )));
    }
    Ok(bound)
}

fn check_prefix(field: &str, prefix: &str) -> Result<String, LockError> {
    validate_prefix(prefix)
        .map_err(|e| LockError::config(format!("{field}: {prefix:?} is refused: {e}")))?;
    Ok(prefix.to_owned())
}

/// Checks the scheme only (the client checks the rest when it connects), and never echoes a
/// password.
fn check_url(field: &str, url: &str) -> Result<String, LockError> {
    const SCHEMES: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];
    if SCHEMES.iter().any(|s| url.starts_with(s)) {
        return Ok(url.to_owned());
    }
    Err(LockError::config(format!(
        "{field}: {:?} is not a Redis URL; write redis://host:port, rediss://host:port (TLS) \
         or redis+unix:///path/to/socket",
        redact(url)
    )))
}

/// `scheme://***@host...` for a URL with credentials.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        (None, Some(at)) => format!("***{}", &url[at..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        match LockConfig::from_toml_str(text) {
            Err(e @ LockError::Config { .. }) => e.to_string(),
            other => panic!("expected a config error for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn a_full_config_parses() {
        let config = LockConfig::from_toml_str(
            r#"
            url = "redis://127.0.0.1:6379/2"
            prefix = "shop"
            lease = "30s"
            wait = "1500ms"
            op_timeout = "500ms"
            connect_timeout = "2s"
            watchdog = false

            [[rules]]
            method = "POST"
            path = "/orders/{sku}"
            key = "stock:<sku>"
            lease = "10s"
            wait = "2s"
            watchdog = true
            on_lost = "continue"

            [[rules]]
            path = "/carts/{id}"
            key = "cart:<header.X-Tenant>:<id>"
            "#,
        )
        .unwrap();
        assert_eq!(config.url.as_deref(), Some("redis://127.0.0.1:6379/2"));
        assert_eq!(config.prefix.as_deref(), Some("shop"));
        assert_eq!(config.lease, Some(Duration::from_secs(30)));
        assert_eq!(config.wait, Some(Duration::from_millis(1500)));
        assert_eq!(config.op_timeout, Some(Duration::from_millis(500)));
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(2)));
        assert_eq!(config.watchdog, Some(false));
        assert_eq!(config.rules.len(), 2);
        let spec = config.rules[0].spec();
        assert_eq!(spec.lease, Some(Duration::from_secs(10)));
        assert_eq!(spec.wait, Some(Duration::from_secs(2)));
        assert_eq!(spec.watchdog, Some(true));
        assert_eq!(config.rules[1].method(), None);
    }

    #[test]
    fn etcd_endpoints_parse_from_toml_and_env_and_never_show_passwords() {
        let config = LockConfig::from_toml_str(
            r#"
            etcd = ["http://root:s3cret@e1:2379", "http://e2:2379"]
            session_timeout = "4s"
            "#,
        )
        .unwrap();
        assert_eq!(config.etcd.len(), 2);
        assert_eq!(config.session_timeout, Some(Duration::from_secs(4)));
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("e2:2379"),
            "{shown}"
        );
        let env = LockConfig::default()
            .with_vars([("LEASEHOLD_ETCD".to_owned(), "e1:2379, e2:2379".to_owned())])
            .unwrap();
        assert_eq!(env.etcd, ["e1:2379", "e2:2379"]);
        let both = LockConfig {
            url: Some("redis://a:6379".into()),
            ..env
        };
        let e = both.deployment().unwrap_err().to_string();
        assert!(e.contains("url, etcd are all set"), "{e}");
    }

    #[test]
    fn deployments_beyond_one_server_parse() {
        let config = LockConfig::from_toml_str(
            r#"
            redlock = ["redis://a:6379", "redis://b:6379", "redis://c:6379"]
            clock_drift = 0.02
            "#,
        )
        .unwrap();
        assert_eq!(config.redlock.len(), 3);
        assert_eq!(config.clock_drift, Some(0.02));
        let config = LockConfig::from_toml_str(
            r#"
            [sentinel]
            urls = ["redis://s1:26379"]
            master = "mymaster"
            min_replicas = 1
            "#,
        )
        .unwrap();
        let sentinel = config.sentinel.unwrap();
        assert_eq!(
            (sentinel.master.as_str(), sentinel.min_replicas),
            ("mymaster", 1)
        );
        let env = LockConfig::default()
            .with_vars([
                (
                    "LEASEHOLD_CLUSTER".to_owned(),
                    "redis://n1:7000, redis://n2:7000".to_owned(),
                ),
                ("LEASEHOLD_CLOCK_DRIFT".to_owned(), "0.05".to_owned()),
            ])
            .unwrap();
        assert_eq!(env.cluster, ["redis://n1:7000", "redis://n2:7000"]);
        assert!(err(r#"clock_drift = 0.7"#).contains("clock_drift"));
        assert!(err(r#"redlock = ["http://a"]"#).contains("not a Redis URL"));
        let both = LockConfig::from_toml_str(
            r#"
            url = "redis://a:6379"
            cluster = ["redis://b:7000"]
            "#,
        )
        .unwrap();
        let e = both.deployment().unwrap_err().to_string();
        assert!(e.contains("url, cluster are all set"), "{e}");
    }

    #[tokio::test]
    async fn status_codes_come_from_the_config_and_bad_ones_are_named() {
        let config =
            LockConfig::from_toml_str("[status_codes]\nbusy = 423\nunavailable = 500").unwrap();
        let locks = RouteLocks::from_config(Locker::in_memory(), &config);
        let busy = LockError::Busy { retry_after: None };
        assert_eq!(locks.response(&busy).status, 423);
        let down = LockError::unavailable("down", None);
        assert_eq!(locks.response(&down).status, 500);
        let defaults = RouteLocks::from_config(Locker::in_memory(), &LockConfig::default());
        assert_eq!(defaults.response(&busy).status, 409);

        let e = err("[status_codes]\nbusy = 204");
        assert!(e.contains("busy = 204") && e.contains("400 to 599"), "{e}");
        let e = err("[status_codes]\nbussy = 423");
        assert!(e.contains("bussy"), "{e}");
    }

    #[test]
    fn an_empty_config_is_all_defaults() {
        let config = LockConfig::from_toml_str("").unwrap();
        assert!(config.url.is_none() && config.lease.is_none() && config.rules.is_empty());
    }

    #[test]
    fn errors_name_the_field_and_the_value() {
        let e = err(r#"lease = "30x""#);
        assert!(e.contains(r#"lease: "30x" is not a duration"#), "{e}");
        let e = err(r#"lease = "5ms""#);
        assert!(e.contains(r#"lease: "5ms" is too short"#), "{e}");
        let e = err(r#"op_timeout = "0s""#);
        assert!(e.contains(r#"op_timeout: "0s" is zero"#), "{e}");
        let e = err(r#"wait = 30"#);
        assert!(e.contains("wait") && e.contains("30"), "{e}");
        let e = err(r#"leese = "30s""#);
        assert!(e.contains("unknown field `leese`"), "{e}");
        let e = err(r#"prefix = "a{b}""#);
        assert!(e.contains(r#"prefix: "a{b}" is refused"#), "{e}");
        let e = err(r#"url = "http://user:hunter2@cache:6379""#);
        assert!(
            e.contains("url: \"http://***@cache:6379\" is not a Redis URL"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = err(r#"rules = [{ path = "/orders/{sku}", key = "stock:<skux>" }]"#);
        assert!(e.contains("rules[0].key:") && e.contains("`skux`"), "{e}");
        let e = err(r#"rules = [{ path = "orders", key = "k" }]"#);
        assert!(e.contains(r#"rules[0].path: path pattern "orders""#), "{e}");
        let e = err(r#"rules = [{ method = "PO ST", path = "/", key = "k" }]"#);
        assert!(e.contains(r#"rules[0].method: method "PO ST""#), "{e}");
        let e =
            err(r#"rules = [{ path = "/", key = "k" }, { path = "/", key = "k", lease = "1h!" }]"#);
        assert!(
            e.contains(r#"rules[1].lease: "1h!" is not a duration"#),
            "{e}"
        );
        let e = err(r#"rules = [{ path = "/", key = "k", on_lost = "panic" }]"#);
        assert!(
            e.contains(r#"rules[0].on_lost: "panic" is not an option"#),
            "{e}"
        );
        let e = err(r#"rules = [{ path = "/", key = "k", lock = "x" }]"#);
        assert!(e.contains("unknown field `lock`"), "{e}");
        let e = err(r#"rules = [{ path = "/" }]"#);
        assert!(e.contains("missing field `key`"), "{e}");
    }

    #[test]
    fn the_environment_overrides_and_names_the_variable() {
        let vars = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>()
        };
        let config = LockConfig::from_toml_str(
            r#"url = "redis://a:1"
            lease = "30s""#,
        )
        .unwrap()
        .with_vars(vars(&[
            ("LEASEHOLD_URL", "redis://b:2"),
            ("LEASEHOLD_WAIT", "2s"),
            ("LEASEHOLD_OP_TIMEOUT", "250ms"),
            ("LEASEHOLD_CONNECT_TIMEOUT", "3s"),
            ("LEASEHOLD_WATCHDOG", "off"),
            ("LEASEHOLD_PREFIX", "p"),
            ("LEASEHOLD_REDIS_SERVER", "/usr/bin/redis-server"),
            ("PATH", "/bin"),
        ]))
        .unwrap();
        assert_eq!(config.url.as_deref(), Some("redis://b:2"));
        assert_eq!(config.lease, Some(Duration::from_secs(30)));
        assert_eq!(config.wait, Some(Duration::from_secs(2)));
        assert_eq!(config.op_timeout, Some(Duration::from_millis(250)));
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.watchdog, Some(false));
        assert_eq!(config.prefix.as_deref(), Some("p"));
        let e = LockConfig::default()
            .with_vars(vars(&[("LEASEHOLD_LEASE", "soon")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"LEASEHOLD_LEASE: "soon" is not a duration"#),
            "{e}"
        );
        let e = LockConfig::default()
            .with_vars(vars(&[("LEASEHOLD_URL", "localhost:6379")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"LEASEHOLD_URL: "localhost:6379" is not a Redis URL"#),
            "{e}"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://u:pw@h:1"), "redis://***@h:1");
        assert_eq!(redact("u:pw@h:1"), "***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }
}
