//! A connection to whichever server the Sentinels currently call the master. A plain
//! auto-reconnecting connection would reconnect to the old address after a failover (and
//! find a replica, or nothing); this one asks the Sentinels again whenever the master it
//! knows fails, refuses writes (`READONLY`) or disappears.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ProtocolVersion, RedisConnectionInfo, RedisError, ServerErrorKind};

use crate::store::settings::percent_decode;

/// The master as a Sentinel deployment names it: its name in the sentinels' configuration, and
/// what connecting to the server the sentinels point at takes. Written as the plain name
/// (`mymaster`: no credentials, no TLS, database 0), or as a URL whose host is the name:
/// `redis://[user:]password@mymaster[/db]`, `rediss://...` for TLS (feature `tls`). The
/// sentinels' own credentials and TLS are their URLs'.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Master {
    pub(crate) name: String,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    tls: bool,
}

impl Master {
    /// Reads `master`; the error never quotes it (it may carry a password).
    pub(crate) fn parse(master: &str) -> Result<Master, String> {
        let master = master.trim();
        let (tls, rest) = match master.split_once("://") {
            None => {
                return Ok(Master {
                    name: master.to_owned(),
                    username: None,
                    password: None,
                    db: 0,
                    tls: false,
                })
            }
            Some(("redis", rest)) => (false, rest),
            Some(("rediss", rest)) => (true, rest),
            Some(_) => {
                return Err("the sentinel master is its name (mymaster), or \
                            redis://[user:]password@mymaster[/db] (rediss:// for TLS)"
                    .into())
            }
        };
        if tls && !cfg!(feature = "tls") {
            return Err("a rediss:// sentinel master needs leasehold's `tls` feature".into());
        }
        let (userinfo, rest) = match rest.rsplit_once('@') {
            Some((userinfo, rest)) => (Some(userinfo), rest),
            None => (None, rest),
        };
        let (name, db) = match rest.split_once('/') {
            Some((name, db)) if !db.is_empty() => (
                name,
                db.parse::<i64>().map_err(|_| {
                    format!("the sentinel master's database {db:?} is not a number")
                })?,
            ),
            Some((name, _)) => (name, 0),
            None => (rest, 0),
        };
        if name.is_empty() {
            return Err(
                "the sentinel master URL names no master: redis://:password@mymaster".into(),
            );
        }
        let what = "the sentinel master's credentials";
        let (username, password) = match userinfo {
            None => (None, None),
            Some(userinfo) => match userinfo.split_once(':') {
                Some((user, password)) => (
                    Some(percent_decode(user, what)?).filter(|u| !u.is_empty()),
                    Some(percent_decode(password, what)?),
                ),
                None => (None, Some(percent_decode(userinfo, what)?)),
            },
        };
        Ok(Master {
            name: name.to_owned(),
            username,
            password,
            db,
            tls,
        })
    }

    /// How to connect to the server the sentinels name, over `protocol`.
    fn node(&self, protocol: ProtocolVersion) -> SentinelNodeConnectionInfo {
        let mut info = RedisConnectionInfo::default()
            .set_protocol(protocol)
            .set_db(self.db);
        if let Some(username) = &self.username {
            info = info.set_username(username);
        }
        if let Some(password) = &self.password {
            info = info.set_password(password);
        }
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        #[cfg(feature = "tls")]
        if self.tls {
            return node.set_tls_mode(redis::TlsMode::Secure);
        }
        node
    }
}

/// Credentials never show.
impl std::fmt::Debug for Master {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Master")
            .field("name", &self.name)
            .field("credentials", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("tls", &self.tls)
            .finish()
    }
}

pub(crate) struct SentinelConn {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
    connect_timeout: Duration,
    current: Mutex<Option<ConnectionManager>>,
}

impl SentinelConn {
    /// A connection to the master `master` that the Sentinels at `sentinels` know of; it
    /// connects on first use.
    pub(crate) fn new(
        sentinels: &[String],
        master: &Master,
        resp3: bool,
        config: ConnectionManagerConfig,
        connect_timeout: Duration,
    ) -> redis::RedisResult<Self> {
        let protocol = if resp3 {
            ProtocolVersion::RESP3
        } else {
            ProtocolVersion::RESP2
        };
        let node = master.node(protocol);
        // The client takes the name as `String`, or as `impl AsRef<str>` when built with TLS
        // support: an owned `String` fits both.
        #[allow(clippy::unnecessary_to_owned)]
        let client = SentinelClient::build(
            sentinels.to_vec(),
            master.name.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(SentinelConn {
            sentinels: tokio::sync::Mutex::new(client),
            config,
            connect_timeout,
            current: Mutex::new(None),
        })
    }

    /// The connection to the current master, asking the Sentinels first if needed.
    pub(crate) async fn get(&self) -> redis::RedisResult<ConnectionManager> {
        if let Some(conn) = self.current.lock().unwrap().clone() {
            return Ok(conn);
        }
        let mut sentinels = self.sentinels.lock().await;
        // Another caller may have resolved it while this one waited.
        if let Some(conn) = self.current.lock().unwrap().clone() {
            return Ok(conn);
        }
        let client = sentinels.async_get_client().await?;
        let connect = ConnectionManager::new_with_config(client, self.config.clone());
        let conn = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(conn) => conn?,
            Err(_) => {
                return Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the master named by the sentinels did not answer",
                )))
            }
        };
        *self.current.lock().unwrap() = Some(conn.clone());
        Ok(conn)
    }

    /// Looks at a failed call: when it suggests the master moved, forget the connection so
    /// the next call asks the Sentinels again.
    pub(crate) fn observe(&self, error: &RedisError) {
        let moved = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_timeout()
            || matches!(
                error.kind(),
                redis::ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
            );
        if moved {
            tracing::debug!(error = %error, "asking the sentinels for the master again");
            *self.current.lock().unwrap() = None;
        }
    }
}
