//! A connection to whichever server the Sentinels currently call the master. A plain
//! auto-reconnecting connection would reconnect to the old address after a failover (and
//! find a replica, or nothing); this one asks the Sentinels again whenever the master it
//! knows fails, refuses writes (`READONLY`) or disappears.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ProtocolVersion, RedisConnectionInfo, RedisError, ServerErrorKind};

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
        master: &str,
        resp3: bool,
        config: ConnectionManagerConfig,
        connect_timeout: Duration,
    ) -> redis::RedisResult<Self> {
        let protocol = if resp3 {
            ProtocolVersion::RESP3
        } else {
            ProtocolVersion::RESP2
        };
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(RedisConnectionInfo::default().set_protocol(protocol));
        // The client takes the name as `String`, or as `impl AsRef<str>` when built with TLS
        // support: an owned `String` fits both.
        #[allow(clippy::unnecessary_to_owned)]
        let client = SentinelClient::build(
            sentinels.to_vec(),
            master.to_owned(),
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
