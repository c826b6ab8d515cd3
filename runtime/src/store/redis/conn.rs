//! The connections of the Redis engine: one enum over a single server, a cluster and a
//! Sentinel-tracked master, so every command goes out the same way whatever the deployment
//! (and a Sentinel connection learns of every failure, whichever command met it). Every call
//! is bounded here.

use std::future::Future;
#[cfg(feature = "sentinel")]
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::ConnectionAddr;

use crate::error::{Endpoint, LockError};
use crate::store::Settings;

/// A multiplexed connection: to one server, or to a cluster (which routes each script by its
/// first key and follows MOVED/ASK redirections).
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<super::sentinel::SentinelConn>),
}

/// A script call as it is built, then sent as one `EVALSHA` (and, when the server does not
/// know the script, loaded and sent again). Its keys and its arguments are each packed into
/// one buffer as they are added, where `redis::ScriptInvocation` allocates a vector per key
/// and per argument. With the unfenced `SET` built at its size too, that took about ten
/// allocations and 8–13 % of the client's CPU out of each lock cycle
/// (`lockbench --profile unfenced 16`).
pub(super) struct ScriptCall<'s> {
    script: &'s redis::Script,
    keys: redis::Cmd,
    args: redis::Cmd,
}

impl<'s> ScriptCall<'s> {
    /// A call of `script`, with no keys or arguments yet.
    pub(super) fn new(script: &'s redis::Script) -> Self {
        ScriptCall {
            script,
            keys: redis::Cmd::with_capacity(4, 128),
            args: redis::Cmd::with_capacity(8, 192),
        }
    }

    /// Adds a key (`KEYS[i]` in the script).
    pub(super) fn key<T: redis::ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.keys.arg(key);
        self
    }

    /// Adds an argument (`ARGV[i]` in the script).
    pub(super) fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.arg(arg);
        self
    }

    /// The `EVALSHA` command, allocated once at its size.
    fn command(&self) -> redis::Cmd {
        // Keys and arguments are only ever added with `arg`: every part is a simple one.
        let parts = || {
            self.keys
                .args_iter()
                .chain(self.args.args_iter())
                .filter_map(|part| match part {
                    redis::Arg::Simple(bytes) => Some(bytes),
                    _ => None,
                })
        };
        let bytes: usize = parts().map(<[u8]>::len).sum();
        let keys = self.keys.args_iter().len();
        let mut cmd = redis::Cmd::with_capacity(3 + keys + self.args.args_iter().len(), bytes + 64);
        cmd.arg("EVALSHA").arg(self.script.get_hash()).arg(keys);
        for part in parts() {
            cmd.arg(part);
        }
        cmd
    }

    /// Sends the call on `con`; a server that does not have the script (restarted, flushed, a
    /// new replica promoted) is given it, and the call sent again: `NOSCRIPT` means nothing ran.
    async fn invoke_async<T: redis::FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let cmd = self.command();
        match cmd.query_async(con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.load_async(con).await?;
                cmd.query_async(con).await
            }
            answer => answer,
        }
    }
}

impl Conn {
    /// Runs a script. A single server's call is a small future, awaited in place (it is on
    /// every lock's path); the Sentinel's, a deep one (finding the master), is boxed, so that
    /// it does not make every future above it as large as itself (and copied into every box
    /// of a [`StoreFuture`](crate::store::StoreFuture)).
    pub(super) async fn invoke<T: redis::FromRedisValue + Send>(
        &self,
        invocation: &ScriptCall<'_>,
    ) -> redis::RedisResult<T> {
        match self {
            Conn::Single(c) => invocation.invoke_async(&mut c.clone()).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => Box::pin(invocation.invoke_async(&mut c.clone())).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                Box::pin(async {
                    let result = async { invocation.invoke_async(&mut s.get().await?).await };
                    observed(s, result.await)
                })
                .await
            }
        }
    }

    /// Sends one plain command (small in place on a single server, like
    /// [`invoke`](Self::invoke)).
    pub(super) async fn query<T: redis::FromRedisValue + Send>(
        &self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        match self {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(c) => Box::pin(cmd.query_async(&mut c.clone())).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                Box::pin(async {
                    let result = async { cmd.query_async(&mut s.get().await?).await };
                    observed(s, result.await)
                })
                .await
            }
        }
    }

    /// Waits until `replicas` replicas acknowledged this connection's writes, or `timeout`.
    #[cfg(feature = "sentinel")]
    pub(super) async fn wait_replicas(
        &self,
        replicas: u32,
        timeout: Duration,
    ) -> redis::RedisResult<u32> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        self.query(&wait).await
    }

    pub(super) async fn load(&self, script: &redis::Script) -> redis::RedisResult<String> {
        match self.clone() {
            Conn::Single(mut c) => script.load_async(&mut c).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => script.load_async(&mut c).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                let result = async { script.load_async(&mut s.get().await?).await };
                observed(&s, result.await)
            }
        }
    }

    pub(super) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self.clone() {
            Conn::Single(mut c) => c.subscribe(channel).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => c.ssubscribe(channel).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                let result = async { s.get().await?.subscribe(channel).await };
                observed(&s, result.await)
            }
        }
    }

    pub(super) async fn unsubscribe(&self, channels: &[String]) -> redis::RedisResult<()> {
        match self.clone() {
            Conn::Single(mut c) => c.unsubscribe(channels).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => {
                // Sharded channels of different slots cannot share one SUNSUBSCRIBE.
                for channel in channels {
                    c.sunsubscribe(channel).await?;
                }
                Ok(())
            }
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                let result = async { s.get().await?.unsubscribe(channels).await };
                observed(&s, result.await)
            }
        }
    }

    /// The command a release publishes its wake-up with.
    pub(super) fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }

    pub(super) fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Conn::Cluster(_) = self {
            return true;
        }
        false
    }
}

/// Hands a Sentinel connection's failure to it, whichever command met it: a master that
/// moved is looked up again on the next call.
#[cfg(feature = "sentinel")]
fn observed<T>(
    conn: &super::sentinel::SentinelConn,
    result: redis::RedisResult<T>,
) -> redis::RedisResult<T> {
    if let Err(e) = &result {
        conn.observe(e);
    }
    result
}

/// Whether the server answers a PING within `op_timeout`.
pub(super) async fn ping(conn: &Conn, endpoint: &Endpoint, op_timeout: Duration) -> bool {
    let cmd = redis::cmd("PING");
    let ping = conn.query::<redis::Value>(&cmd);
    bounded(endpoint, op_timeout, ping).await.is_ok()
}

/// Every setting of a connection, explicit: the client's defaults are not ours.
pub(super) fn connection_config(settings: &Settings) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.op_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(500))
        .set_pipeline_buffer_size(1024)
}

pub(super) fn describe(addr: &ConnectionAddr) -> Endpoint {
    Endpoint(match addr {
        ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => other.to_string(),
    })
}

pub(super) fn unavailable(endpoint: &Endpoint, limit: Duration, e: redis::RedisError) -> LockError {
    let what = if e.is_timeout() {
        format!("did not answer within {limit:?}")
    } else if e.is_connection_refusal() {
        "refused the connection (is redis-server running there?)".to_owned()
    } else if e.is_io_error() || e.is_connection_dropped() {
        "could not be reached".to_owned()
    } else {
        format!("answered with an error: {e}")
    };
    LockError::unavailable(format!("redis at {endpoint} {what}"), Some(Box::new(e)))
}

/// Runs one Redis call with a hard deadline.
pub(super) async fn bounded<T>(
    endpoint: &Endpoint,
    limit: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(unavailable(endpoint, limit, e)),
        Err(_) => Err(LockError::unavailable(
            format!("redis at {endpoint} did not answer within {limit:?}"),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::ScriptCall;

    #[test]
    fn a_script_call_is_one_evalsha_with_its_keys_then_its_arguments() {
        let script = redis::Script::new("return KEYS[1]");
        let mut call = ScriptCall::new(&script);
        // Keys and arguments added interleaved, of every kind the engine sends.
        call.arg("PUBLISH")
            .key("p:lock:{k}")
            .arg(b"h1.token".as_slice())
            .key("p:queue:{k}")
            .arg(30_000_u64)
            .arg(String::new())
            .arg(u8::from(true));
        let mut expected = redis::cmd("EVALSHA");
        expected
            .arg(script.get_hash())
            .arg(2)
            .arg("p:lock:{k}")
            .arg("p:queue:{k}")
            .arg("PUBLISH")
            .arg("h1.token")
            .arg("30000")
            .arg("")
            .arg("1");
        assert_eq!(
            String::from_utf8(call.command().get_packed_command()).unwrap(),
            String::from_utf8(expected.get_packed_command()).unwrap()
        );
    }
}
