//! Where the locks are: options, then `LEASEHOLD_*` variables, then the `--config` file, then
//! defaults, checked before connecting so that a bad option is a usage error (exit 2) and only
//! the engine itself can fail with exit 3.

use std::time::Duration;

use leasehold::{Deployment, LockConfig, Locker, DEFAULT_PREFIX};

use crate::args::Global;
use crate::exit::{self, Failure};

/// The Redis server used when neither `--url`, `LEASEHOLD_URL` nor the config file name where
/// the locks are.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";
/// The bound on each call to the engine when neither `--timeout`, `LEASEHOLD_OP_TIMEOUT` nor
/// the config file set one: longer than the library's 1 s, since an operator's tool may run
/// over slow links and a retry costs a person's time.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// The variable naming where the locks are (any engine's URL).
const URL_VAR: &str = "LEASEHOLD_URL";
/// The scheme of a ZooKeeper ensemble given where a URL goes:
/// `zookeeper://host:port,host:port`.
pub(crate) const ZOOKEEPER_SCHEME: &str = "zookeeper://";
/// The scheme of an etcd cluster given where a URL goes: `etcd://host:port,host:port`, each
/// endpoint as [`LockerBuilder::etcd`](leasehold::LockerBuilder::etcd) takes it
/// (`[http[s]://][user:password@]host:port`).
pub(crate) const ETCD_SCHEME: &str = "etcd://";

/// The resolved settings: one engine's URL, one prefix, two bounds, the fence offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The engine's URL (`redis://`, `zookeeper://`, `etcd://`, `postgres://`, `mysql://`), credentials
    /// included (never printed as is).
    pub(crate) url: String,
    /// The key prefix of the applications' locks.
    pub(crate) prefix: String,
    /// The bound on each call to the engine.
    pub(crate) op_timeout: Duration,
    /// The bound on connecting.
    pub(crate) connect_timeout: Duration,
    /// The deployment's fence offset (from the config file or `LEASEHOLD_FENCE_OFFSET`), so
    /// that fences show as its applications see them.
    pub(crate) fence_offset: u64,
}

impl Target {
    /// Resolves the settings from the options, the process environment and the config file.
    ///
    /// # Errors
    /// A usage [`Failure`] for an unreadable or invalid config file, a bad `LEASEHOLD_*`
    /// variable or a bad prefix.
    pub(crate) fn resolve(global: &Global) -> Result<Target, Failure> {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Target::resolve_with(global, vars)
    }

    /// [`resolve`](Self::resolve) with the given variables instead of the environment's.
    ///
    /// # Errors
    /// As [`resolve`](Self::resolve).
    pub(crate) fn resolve_with(
        global: &Global,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Target, Failure> {
        let config = match &global.config {
            Some(path) => LockConfig::from_toml_file(path).map_err(config_failure)?,
            None => LockConfig::default(),
        };
        // The URL is taken aside: a bad one is found on connecting, with exit status 3
        // wherever it came from, and without the config's own check first.
        let mut env_url = None;
        let vars: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(name, value)| {
                if name == URL_VAR {
                    env_url = Some(value.trim().to_owned()).filter(|v| !v.is_empty());
                    false
                } else {
                    true
                }
            })
            .collect();
        let config = config.with_vars(vars).map_err(config_failure)?;
        // A deployment this tool does not reach must not turn into the default Redis server.
        let unreached = [
            ("redlock", !config.redlock.is_empty()),
            ("cluster", !config.cluster.is_empty()),
            ("[sentinel]", config.sentinel.is_some()),
        ]
        .into_iter()
        .find(|(_, named)| *named)
        .map(|(name, _)| name);
        if let (Some(name), None, None) = (unreached, &global.url, &env_url) {
            return Err(Failure::usage(format!(
                "the config names its deployment with {name}, which this command does not \
                 reach; give --url redis://host:port of one server (for RedLock, each master \
                 in turn; for a Cluster, the node of the key's slot; for Sentinel, the master)"
            )));
        }
        let op_timeout = global
            .timeout
            .or(config.op_timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        let target = Target {
            url: global
                .url
                .clone()
                .or(env_url)
                .or(config.url)
                .or(config
                    .zookeeper
                    .map(|hosts| format!("{ZOOKEEPER_SCHEME}{hosts}")))
                .or((!config.etcd.is_empty())
                    .then(|| format!("{ETCD_SCHEME}{}", config.etcd.join(","))))
                .or(config.postgres)
                .or(config.mysql)
                .unwrap_or_else(|| DEFAULT_URL.to_owned()),
            prefix: global
                .prefix
                .clone()
                .or(config.prefix)
                .unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            op_timeout,
            connect_timeout: config.connect_timeout.unwrap_or(op_timeout),
            fence_offset: config.fence_offset.unwrap_or(0),
        };
        // The same checks as a real connection, without one.
        Locker::builder()
            .prefix(&target.prefix)
            .op_timeout(target.op_timeout)
            .connect_timeout(target.connect_timeout)
            .build_in_memory()
            .map_err(config_failure)?;
        Ok(target)
    }

    /// Connects to the server.
    ///
    /// # Errors
    /// A [`Failure`] with exit status 3 when the URL does not parse or the server cannot be
    /// reached (or refuses the credentials) within the connect timeout.
    pub(crate) async fn connect(&self) -> Result<Locker, Failure> {
        self.build(false).await
    }

    /// Connects in the background: the locker is returned while the server may still be
    /// unreachable, and its calls fail until it answers (`top` shows that, and goes on).
    ///
    /// # Errors
    /// A [`Failure`] with exit status 3 when the URL does not parse.
    pub(crate) async fn connect_lazily(&self) -> Result<Locker, Failure> {
        self.build(true).await
    }

    async fn build(&self, lazily: bool) -> Result<Locker, Failure> {
        // The library's one reading of a URL: the same engines, schemes and checks as an
        // application's `Deployment::parse`.
        let deployment =
            Deployment::parse(&self.url).map_err(|e| Failure::connect(e, &self.url))?;
        Locker::builder()
            .deployment(deployment)
            .prefix(&self.prefix)
            .op_timeout(self.op_timeout)
            .connect_timeout(self.connect_timeout)
            .fence_offset(self.fence_offset)
            .lazy_connect(lazily)
            .build()
            .await
            .map_err(|e| Failure::connect(e, &self.url))
    }

    /// Turns a failed call into a [`Failure`] (the runtime's message names the server).
    pub(crate) fn failure(&self, e: leasehold::LockError) -> Failure {
        Failure::lock(e)
    }

    /// The engine and its servers, for messages: `redis 127.0.0.1:6379`,
    /// `postgres db:5432`, `mysql db:3306`, ...
    pub(crate) fn endpoint(&self) -> String {
        exit::endpoint(&self.url)
    }
}

/// A configuration error: the runtime's message names the field or variable and the value.
fn config_failure(e: leasehold::LockError) -> Failure {
    Failure::usage(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn options_win_over_the_environment_over_defaults() {
        let t = Target::resolve_with(&Global::default(), vars(&[])).unwrap();
        assert_eq!(t.url, DEFAULT_URL);
        assert_eq!(t.prefix, "leasehold");
        assert_eq!(
            (t.op_timeout, t.connect_timeout),
            (DEFAULT_TIMEOUT, DEFAULT_TIMEOUT)
        );

        let env = vars(&[
            ("LEASEHOLD_URL", "redis://env:1"),
            ("LEASEHOLD_PREFIX", "envp"),
            ("LEASEHOLD_OP_TIMEOUT", "300ms"),
        ]);
        let t = Target::resolve_with(&Global::default(), env.clone()).unwrap();
        assert_eq!(
            (t.url.as_str(), t.prefix.as_str()),
            ("redis://env:1", "envp")
        );
        assert_eq!(t.op_timeout, Duration::from_millis(300));
        let flags = Global {
            url: Some("redis://flag:2".into()),
            prefix: Some("flagp".into()),
            timeout: Some(Duration::from_secs(5)),
            config: None,
        };
        let t = Target::resolve_with(&flags, env).unwrap();
        assert_eq!(
            (t.url.as_str(), t.prefix.as_str()),
            ("redis://flag:2", "flagp")
        );
        assert_eq!(t.op_timeout, Duration::from_secs(5));
    }

    #[test]
    fn bad_settings_are_usage_errors() {
        let e = Target::resolve_with(
            &Global::default(),
            vars(&[("LEASEHOLD_OP_TIMEOUT", "soon")]),
        )
        .unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        assert!(e.message.contains("LEASEHOLD_OP_TIMEOUT"), "{}", e.message);
        let bad_prefix = Global {
            prefix: Some("a{b}".into()),
            ..Global::default()
        };
        let e = Target::resolve_with(&bad_prefix, vars(&[])).unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        let missing = Global {
            config: Some("/nonexistent/leasehold.toml".into()),
            ..Global::default()
        };
        let e = Target::resolve_with(&missing, vars(&[])).unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        assert!(
            e.message.contains("/nonexistent/leasehold.toml"),
            "{}",
            e.message
        );
        // A bad URL is left for the connection to find (exit status 3).
        let t = Target::resolve_with(&Global::default(), vars(&[("LEASEHOLD_URL", "x")]));
        assert_eq!(t.unwrap().url, "x");
    }

    #[test]
    fn a_config_naming_a_deployment_this_tool_does_not_reach_is_a_usage_error() {
        let env = vars(&[("LEASEHOLD_REDLOCK", "redis://a:1,redis://b:1,redis://c:1")]);
        let e = Target::resolve_with(&Global::default(), env.clone()).unwrap_err();
        assert_eq!(e.code, exit::USAGE);
        assert!(
            e.message.contains("redlock") && e.message.contains("--url"),
            "{}",
            e.message
        );
        // With a URL given, that server is the one asked.
        let flags = Global {
            url: Some("redis://a:1".into()),
            ..Global::default()
        };
        assert_eq!(
            Target::resolve_with(&flags, env).unwrap().url,
            "redis://a:1"
        );
    }

    #[test]
    fn an_etcd_cluster_from_the_config_reads_as_an_etcd_url() {
        let env = vars(&[("LEASEHOLD_ETCD", "e1:2379, http://e2:2379")]);
        let t = Target::resolve_with(&Global::default(), env).unwrap();
        assert_eq!(t.url, "etcd://e1:2379,http://e2:2379");
        assert_eq!(t.endpoint(), "etcd e1:2379,e2:2379");
    }
}
