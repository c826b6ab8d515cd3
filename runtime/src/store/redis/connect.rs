//! Connecting the Redis engine: a single server, a cluster (a Sentinel master is connected in
//! [`sentinel`](super::sentinel)); loading the scripts, which proves the server answers; and
//! the warning about a server that may evict live locks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::aio::ConnectionManager;
use redis::{Client, IntoConnectionInfo, ProtocolVersion, PushInfo};
use tokio::sync::{mpsc, watch, Notify};

use super::conn::{bounded, connection_config, describe, unavailable, Conn};
use super::items::Core;
use super::scripts::{ACQUIRE, RAISE_FENCE, RELEASE, RENEW};
#[cfg(feature = "sentinel")]
use super::sentinel::SentinelConn;
use super::session::{watch_lock_conn, DropSender};
use super::wakes::{dispatch_wakes, Wakes};
use super::RedisStore;
use crate::error::{Endpoint, LockError};
use crate::store::batch::Queue;
use crate::store::Settings;

impl RedisStore {
    /// Connects both connections; fails with `Unavailable` when the server does not answer
    /// within the connect timeout (unless `allow_down`: then it connects later, on first use),
    /// and with `Config` when the URL is not a Redis URL.
    pub(crate) async fn connect(
        url: &str,
        settings: &Settings,
        allow_down: bool,
    ) -> Result<Self, LockError> {
        let info = url.into_connection_info().map_err(|e| LockError::Config {
            message: if url.starts_with("rediss://") && !cfg!(feature = "tls") {
                "rediss:// (TLS) needs leasehold's `tls` feature; enable it in Cargo.toml"
                    .to_owned()
            } else {
                format!(
                    "the Redis URL is not valid ({}); write it as redis://host:port/db, \
                     rediss://host:port for TLS or redis+unix:///path/to/socket",
                    e.detail().unwrap_or("unparsable")
                )
            },
            source: Some(Box::new(e)),
        })?;
        #[cfg(feature = "tls")]
        if url.starts_with("rediss://") {
            // Our crypto provider, unless the application installed one: with two providers
            // compiled in, rustls cannot choose by itself and panics at the first handshake.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let endpoint = describe(info.addr());
        let config = connection_config(settings);
        let lazy = |client, config| {
            ConnectionManager::new_lazy_with_config(client, config)
                .map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))
        };

        // RESP3, for a push channel that reports the connection's drops: each one ends the
        // session that the leases granted over it belong to.
        let resp3 = info.clone().set_redis_settings(
            info.redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3),
        );
        let (drops_tx, drops_rx) = mpsc::unbounded_channel();
        let epoch = Arc::new(watch::channel(0u64).0);
        let drops = DropSender {
            epoch: epoch.clone(),
            forward: drops_tx,
        };
        let client = Client::open(resp3.clone())
            .map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))?;
        let conn = Conn::Single(lazy(client, config.clone().set_push_sender(drops))?);
        let down_at_connect = match preload(&conn, &endpoint, settings).await {
            Ok(()) => None,
            Err(e) if allow_down => {
                tracing::warn!(error = %e, "redis node is down; will connect on first use");
                Some(e)
            }
            Err(e) => return Err(e),
        };

        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let sub_client =
            Client::open(resp3).map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))?;
        let sub_config = config
            .set_push_sender(push_tx)
            .set_automatic_resubscription();
        let sub_conn = Conn::Single(lazy(sub_client, sub_config)?);
        let down = down_at_connect.is_some();
        let mut backend =
            RedisStore::assemble(conn, sub_conn, push_rx, endpoint, settings, down_at_connect);
        // Drops that came before this point wait in the channel.
        tokio::spawn(watch_lock_conn(
            Arc::downgrade(&backend.core),
            drops_rx,
            down,
        ));
        backend.epoch = Some(epoch);
        Ok(backend)
    }

    /// Connects to a Redis Cluster through any of its nodes. Every key of one lock shares a
    /// slot, so each script runs on one node; wake-ups use sharded pub/sub.
    #[cfg(feature = "cluster")]
    pub(crate) async fn connect_cluster(
        urls: &[String],
        settings: &Settings,
    ) -> Result<Self, LockError> {
        use redis::cluster::ClusterClient;
        let endpoint = Endpoint(format!("cluster {}", urls.join(",")));
        let builder = || {
            ClusterClient::builder(urls.to_vec())
                .connection_timeout(settings.connect_timeout)
                .response_timeout(settings.op_timeout)
                .retries(2)
        };
        let config_error = |e: redis::RedisError| LockError::Config {
            message: format!(
                "the Redis Cluster URLs are not valid ({e}); give one or more \
                 redis://host:port of cluster nodes"
            ),
            source: Some(Box::new(e)),
        };
        let client = builder().build().map_err(config_error)?;
        let connect = client.get_async_connection();
        let conn = Conn::Cluster(bounded(&endpoint, settings.connect_timeout, connect).await?);
        preload(&conn, &endpoint, settings).await?;

        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let sub_client = builder()
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(push_tx)
            .build()
            .map_err(config_error)?;
        let connect = sub_client.get_async_connection();
        let sub_conn = Conn::Cluster(bounded(&endpoint, settings.connect_timeout, connect).await?);
        Ok(RedisStore::assemble(
            conn, sub_conn, push_rx, endpoint, settings, None,
        ))
    }

    pub(super) fn assemble(
        conn: Conn,
        sub_conn: Conn,
        push_rx: mpsc::UnboundedReceiver<PushInfo>,
        endpoint: Endpoint,
        settings: &Settings,
        down_at_connect: Option<LockError>,
    ) -> Self {
        let broken = Arc::new(Notify::new());
        let wakes = Arc::new(Wakes {
            conn: sub_conn,
            channels: Mutex::new(HashMap::new()),
            serial: tokio::sync::Mutex::new(()),
            endpoint: endpoint.clone(),
            op_timeout: settings.op_timeout,
            broken: broken.clone(),
        });
        tokio::spawn(dispatch_wakes(Arc::downgrade(&wakes), push_rx, broken));
        let batching = !conn.is_cluster();
        RedisStore {
            core: Arc::new(Core {
                conn,
                endpoint,
                op_timeout: settings.op_timeout,
                batching,
                acquires: Queue::default(),
                releases: Queue::default(),
                contender: settings.locker_id.clone(),
            }),
            #[cfg(feature = "sentinel")]
            min_replicas: 0,
            wakes,
            down_at_connect,
            epoch: None,
            queued: Default::default(),
        }
    }

    /// Connects to the master that the Sentinels at `sentinels` know as `master`, and follows
    /// it through failovers. With `min_replicas > 0`, an acquire counts only once that many
    /// replicas acknowledged it (`WAIT`).
    #[cfg(feature = "sentinel")]
    pub(crate) async fn connect_sentinel(
        sentinels: &[String],
        master: &str,
        min_replicas: u32,
        settings: &Settings,
    ) -> Result<Self, LockError> {
        let master = super::sentinel::Master::parse(master).map_err(LockError::config)?;
        let endpoint = Endpoint(format!(
            "master {:?} of sentinels {}",
            master.name,
            sentinels
                .iter()
                .map(|s| crate::store::settings::redact(s))
                .collect::<Vec<_>>()
                .join(",")
        ));
        let config = connection_config(settings);
        let config_error = |e: redis::RedisError| LockError::Config {
            message: format!(
                "the Sentinel settings are not valid ({e}); give redis://host:port URLs of the \
                 sentinels and the master's name as configured in them"
            ),
            source: Some(Box::new(e)),
        };
        let conn = Conn::Sentinel(Arc::new(
            SentinelConn::new(
                sentinels,
                &master,
                false,
                config.clone(),
                settings.connect_timeout,
            )
            .map_err(config_error)?,
        ));
        preload(&conn, &endpoint, settings).await?;
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let sub_config = config
            .set_push_sender(push_tx)
            .set_automatic_resubscription();
        let sub_conn = Conn::Sentinel(Arc::new(
            SentinelConn::new(
                sentinels,
                &master,
                true,
                sub_config,
                settings.connect_timeout,
            )
            .map_err(config_error)?,
        ));
        let mut backend = RedisStore::assemble(conn, sub_conn, push_rx, endpoint, settings, None);
        backend.min_replicas = min_replicas;
        Ok(backend)
    }
}

/// Loads the scripts: it proves the server answers, and the first lock does not pay a
/// NOSCRIPT round trip. After a server restart they are reloaded on demand. Then warns if
/// the server may evict live locks. Connecting and loading together take at most the
/// connect timeout.
pub(super) async fn preload(
    conn: &Conn,
    endpoint: &Endpoint,
    settings: &Settings,
) -> Result<(), LockError> {
    let load_all = async {
        for script in [&*ACQUIRE, &*RELEASE, &*RENEW, &*RAISE_FENCE] {
            conn.load(script).await?;
        }
        Ok(())
    };
    bounded(endpoint, settings.connect_timeout, load_all).await?;
    if !conn.is_cluster() {
        // INFO memory, not CONFIG GET: an ACL user can be granted `+info|memory` alone,
        // while CONFIG GET would also let it read requirepass and masterauth.
        let mut cmd = redis::cmd("INFO");
        cmd.arg("memory");
        let get = conn.query::<String>(&cmd);
        match tokio::time::timeout(settings.op_timeout, get).await {
            Ok(Ok(info)) => {
                let config = memory_settings(&info);
                if let Some(warning) = eviction_risk(&config) {
                    tracing::warn!(server = %endpoint, "{warning}");
                }
            }
            // An ACL user without `+info|memory` only loses the warning.
            Ok(Err(e)) => tracing::debug!(error = %e, "could not read maxmemory-policy"),
            Err(_) => tracing::debug!("reading maxmemory-policy timed out"),
        }
    }
    Ok(())
}

/// `maxmemory` and `maxmemory-policy` (the names of the configuration) from `INFO memory`.
fn memory_settings(info: &str) -> HashMap<String, String> {
    info.lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .filter_map(|(name, value)| match name {
            "maxmemory" => Some(("maxmemory".to_owned(), value.to_owned())),
            "maxmemory_policy" => Some(("maxmemory-policy".to_owned(), value.to_owned())),
            _ => None,
        })
        .collect()
}

/// Whether a server with this configuration may evict keys, locks among them: with a memory
/// limit, every policy but `noeviction` evicts (the `volatile-*` ones pick keys with a TTL,
/// which every lock has).
fn eviction_risk(config: &HashMap<String, String>) -> Option<String> {
    let limit = config.get("maxmemory").map(String::as_str).unwrap_or("0");
    let policy = config
        .get("maxmemory-policy")
        .map(String::as_str)
        .unwrap_or("noeviction");
    (limit != "0" && policy != "noeviction").then(|| {
        format!(
            "maxmemory-policy is {policy} with maxmemory {limit}: under memory pressure Redis \
             may evict live locks, letting a second holder in; use maxmemory-policy noeviction \
             (or a Redis instance of its own for locks)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(limit: &str, policy: &str) -> HashMap<String, String> {
        HashMap::from([
            ("maxmemory".to_owned(), limit.to_owned()),
            ("maxmemory-policy".to_owned(), policy.to_owned()),
        ])
    }

    #[test]
    fn only_a_memory_limit_with_eviction_is_a_risk() {
        assert!(eviction_risk(&config("0", "allkeys-lru")).is_none());
        assert!(eviction_risk(&config("104857600", "noeviction")).is_none());
        for policy in [
            "allkeys-lru",
            "volatile-ttl",
            "volatile-lru",
            "allkeys-random",
        ] {
            let warning = eviction_risk(&config("104857600", policy)).expect(policy);
            assert!(warning.contains("noeviction"), "{warning}");
        }
    }

    #[test]
    fn memory_settings_are_read_from_info_memory() {
        let info = "# Memory\r\nused_memory:1050000\r\nmaxmemory:104857600\r\n\
                    maxmemory_human:100.00M\r\nmaxmemory_policy:allkeys-lru\r\n\
                    mem_fragmentation_ratio:9.05\r\n";
        let settings = memory_settings(info);
        assert_eq!(settings, config("104857600", "allkeys-lru"));
        assert!(eviction_risk(&settings).is_some());
        assert!(memory_settings("# Memory\r\n").is_empty());
    }
}
