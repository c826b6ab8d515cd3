//! A connection to whichever server the Sentinels currently call the master. A plain
//! auto-reconnecting connection would reconnect to the old address after a failover (and
//! find a replica, or nothing); this one asks the Sentinels again whenever the master it
//! knows fails, refuses writes (`READONLY`) or disappears. A call that timed out asks the
//! Sentinels too, but keeps the connection while they name the same master: a call whose
//! outcome is unknown stays on it, so the give-back, sent later on it, runs after it.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionAddr, ProtocolVersion, RedisConnectionInfo, RedisError, ServerErrorKind};

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
    current: Mutex<Option<Current>>,
}

/// The connection to the master the Sentinels last named, and that master's address.
#[derive(Clone)]
struct Current {
    conn: ConnectionManager,
    addr: ConnectionAddr,
    /// A call timed out on it: the next call asks the Sentinels whether the master moved.
    recheck: bool,
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
        if let Some(known) = self.known() {
            return Ok(known);
        }
        let mut sentinels = self.sentinels.lock().await;
        // Another caller may have resolved it while this one waited.
        if let Some(known) = self.known() {
            return Ok(known);
        }
        let kept = self.current.lock().unwrap().clone();
        let asked = tokio::time::timeout(self.connect_timeout, sentinels.async_get_client()).await;
        let client = match (asked, &kept) {
            (Ok(Ok(client)), _) => client,
            // A call timed out, and the Sentinels cannot say whether the master moved: the
            // connection it timed out on is kept, so that what follows runs after it.
            (_, Some(kept)) => return Ok(kept.conn.clone()),
            (Ok(Err(e)), None) => return Err(e),
            (Err(_), None) => return Err(timed_out("the sentinels did not answer")),
        };
        let addr = client.get_connection_info().addr().clone();
        if let Some(kept) = kept.filter(|kept| kept.addr == addr) {
            // The same master: the call that timed out may still run there, and every later
            // call must come behind it on the same connection (Redis runs one connection's
            // commands in order); a new connection would let a give-back overtake it.
            if let Some(current) = self.current.lock().unwrap().as_mut() {
                current.recheck = false;
            }
            return Ok(kept.conn);
        }
        let connect = ConnectionManager::new_with_config(client, self.config.clone());
        let conn = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(conn) => conn?,
            Err(_) => {
                return Err(timed_out(
                    "the master named by the sentinels did not answer",
                ))
            }
        };
        *self.current.lock().unwrap() = Some(Current {
            conn: conn.clone(),
            addr,
            recheck: false,
        });
        Ok(conn)
    }

    /// The current connection, unless a call timed out on it since the Sentinels were asked.
    fn known(&self) -> Option<ConnectionManager> {
        let current = self.current.lock().unwrap();
        current
            .as_ref()
            .filter(|current| !current.recheck)
            .map(|current| current.conn.clone())
    }

    /// Looks at a failed call: when it suggests the master moved, forget the connection so
    /// the next call asks the Sentinels again.
    pub(crate) fn observe(&self, error: &RedisError) {
        // A timeout is an I/O error too, but says nothing of where the master is: the
        // connection stays until the Sentinels name another master (see `get`).
        let moved = (error.is_io_error() && !error.is_timeout())
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || matches!(
                error.kind(),
                redis::ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
            );
        let mut current = self.current.lock().unwrap();
        if moved {
            tracing::debug!(error = %error, "asking the sentinels for the master again");
            *current = None;
        } else if error.is_timeout() {
            tracing::debug!(error = %error, "asking the sentinels whether the master moved");
            if let Some(current) = current.as_mut() {
                current.recheck = true;
            }
        }
    }
}

/// A timeout as the client reports one.
fn timed_out(what: &'static str) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}
