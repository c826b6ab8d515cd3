//! One Redis node: a multiplexed, auto-reconnecting connection for the lock scripts, and a
//! second RESP3 connection that carries the wake-up subscriptions of every waiter in the
//! process. Every call is bounded by the locker's operation timeout.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::{mpsc, watch};

use super::{AcquireRequest, Attempt, Renewal, WakeSubscription};
use crate::error::{Endpoint, LockError};
use crate::key::LockKeys;
use crate::token::OwnerToken;

static ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("../scripts/fence.lua"),
        include_str!("../scripts/acquire.lua")
    ))
});
static RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/release.lua")));
static RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/renew.lua")));
static RAISE_FENCE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/raise_fence.lua")));

/// How long an idle wake subscription is kept before it is dropped: hot keys are waited on
/// again and again, and re-subscribing each time would cost a round trip per wait.
const SUBSCRIPTION_LINGER: Duration = Duration::from_secs(2);

/// Connection settings, all explicit: the client's defaults are not ours.
#[derive(Clone, Debug)]
pub(crate) struct RedisSettings {
    pub(crate) op_timeout: Duration,
    pub(crate) connect_timeout: Duration,
}

pub(crate) struct RedisBackend {
    conn: ConnectionManager,
    endpoint: Endpoint,
    op_timeout: Duration,
    wakes: Arc<Wakes>,
    /// Why the server did not answer when the backend was built, if it did not.
    pub(crate) down_at_connect: Option<LockError>,
}

impl RedisBackend {
    /// Connects both connections; fails with `Unavailable` when the server does not answer
    /// within the connect timeout (unless `allow_down`: then it connects later, on first use),
    /// and with `Config` when the URL is not a Redis URL.
    pub(crate) async fn connect(
        url: &str,
        settings: &RedisSettings,
        allow_down: bool,
    ) -> Result<Self, LockError> {
        let info = url.into_connection_info().map_err(|e| LockError::Config {
            message: format!(
                "the Redis URL is not valid ({}); write it as redis://host:port/db, \
                 rediss://host:port for TLS or redis+unix:///path/to/socket",
                e.detail().unwrap_or("unparsable")
            ),
            source: Some(Box::new(e)),
        })?;
        let endpoint = describe(info.addr());
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.op_timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500))
            .set_pipeline_buffer_size(1024);
        let lazy = |client, config| {
            ConnectionManager::new_lazy_with_config(client, config)
                .map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))
        };

        let client = Client::open(info.clone())
            .map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))?;
        let mut conn = lazy(client, config.clone())?;
        // Load the scripts now: it proves the server answers, and the first lock does not pay
        // a NOSCRIPT round trip. After a server restart they are reloaded on demand.
        let preload = async {
            for script in [&*ACQUIRE, &*RELEASE, &*RENEW, &*RAISE_FENCE] {
                let load = script.load_async(&mut conn);
                bounded(&endpoint, settings.connect_timeout * 3, load).await?;
            }
            Ok::<_, LockError>(())
        };
        let down_at_connect = match preload.await {
            Ok(()) => None,
            Err(e) if allow_down => {
                tracing::warn!(error = %e, "redis node is down; will connect on first use");
                Some(e)
            }
            Err(e) => return Err(e),
        };

        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let resp3 = info.clone().set_redis_settings(
            info.redis_settings()
                .clone()
                .set_protocol(ProtocolVersion::RESP3),
        );
        let sub_client =
            Client::open(resp3).map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))?;
        let sub_config = config
            .set_push_sender(push_tx)
            .set_automatic_resubscription();
        let sub_conn = lazy(sub_client, sub_config)?;

        let wakes = Arc::new(Wakes {
            conn: sub_conn,
            channels: Mutex::new(HashMap::new()),
            serial: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(dispatch_wakes(Arc::downgrade(&wakes), push_rx));
        Ok(RedisBackend {
            conn,
            endpoint,
            op_timeout: settings.op_timeout,
            wakes,
            down_at_connect,
        })
    }

    /// Host and port (or socket path) of the server, for messages.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, LockError> {
        let mut conn = self.conn.clone();
        bounded(
            &self.endpoint,
            self.op_timeout,
            invocation.invoke_async(&mut conn),
        )
        .await
    }

    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let mut inv = ACQUIRE.prepare_invoke();
        inv.key(&req.keys.lock)
            .key(&req.keys.fence)
            .arg(req.token.as_bytes())
            .arg(millis(req.lease))
            .arg(millis(req.fence_ttl))
            .arg(req.fences);
        let (granted, value): (i64, i64) = self.run(inv).await?;
        Ok(if granted == 1 {
            Attempt::Granted { top: value as u64 }
        } else {
            Attempt::Held {
                remaining: (value >= 0).then(|| Duration::from_millis(value as u64)),
            }
        })
    }

    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let mut inv = RELEASE.prepare_invoke();
        inv.key(&keys.lock).arg(token.as_bytes()).arg(&keys.wake);
        let released: i64 = self.run(inv).await?;
        Ok(released == 1)
    }

    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Result<Vec<bool>, LockError> {
        let mut inv = RENEW.prepare_invoke();
        for r in batch {
            inv.key(&r.keys.lock)
                .arg(r.token.as_bytes())
                .arg(millis(r.lease));
        }
        let renewed: Vec<i64> = self.run(inv).await?;
        Ok(renewed.into_iter().map(|r| r == 1).collect())
    }

    /// Raises the fence counter of a lock to at least `top`.
    pub(crate) async fn raise_fence(
        &self,
        keys: &LockKeys,
        top: u64,
        fence_ttl: Duration,
    ) -> Result<(), LockError> {
        let mut inv = RAISE_FENCE.prepare_invoke();
        inv.key(&keys.fence).arg(top).arg(millis(fence_ttl));
        let _: i64 = self.run(inv).await?;
        Ok(())
    }

    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        let channel = keys.wake.clone();
        let (rx, confirmed) = {
            let mut channels = self.wakes.channels.lock().unwrap();
            let entry = channels.entry(channel.clone()).or_insert_with(|| Channel {
                tx: watch::channel(0).0,
                interest: 0,
                idle_since: None,
                confirmed: false,
            });
            entry.interest += 1;
            entry.idle_since = None;
            (entry.tx.subscribe(), entry.confirmed)
        };
        let interest = Interest {
            wakes: self.wakes.clone(),
            channel: channel.clone(),
        };
        if !confirmed {
            let _serial = self.wakes.serial.lock().await;
            let mut conn = self.wakes.conn.clone();
            bounded(&self.endpoint, self.op_timeout, conn.subscribe(&channel)).await?;
            if let Some(entry) = self.wakes.channels.lock().unwrap().get_mut(&channel) {
                entry.confirmed = true;
            }
        }
        Ok(WakeSubscription::new(rx, Some(Box::new(interest))))
    }
}

/// The wake-up side of the backend: which channels this process listens to, and for whom.
struct Wakes {
    conn: ConnectionManager,
    channels: Mutex<HashMap<String, Channel>>,
    /// SUBSCRIBE and UNSUBSCRIBE go out one at a time, so an unsubscribe of an idle channel
    /// can never overtake a newer subscribe to the same channel.
    serial: tokio::sync::Mutex<()>,
}

struct Channel {
    /// Bumped on every release message; each waiter holds a receiver.
    tx: watch::Sender<u64>,
    /// How many waiters currently care.
    interest: usize,
    /// When interest dropped to zero.
    idle_since: Option<tokio::time::Instant>,
    /// The server confirmed the subscription.
    confirmed: bool,
}

/// One waiter's interest in a channel; dropping it lets the channel go idle.
struct Interest {
    wakes: Arc<Wakes>,
    channel: String,
}

impl Drop for Interest {
    fn drop(&mut self) {
        if let Some(entry) = self.wakes.channels.lock().unwrap().get_mut(&self.channel) {
            entry.interest -= 1;
            if entry.interest == 0 {
                entry.idle_since = Some(tokio::time::Instant::now());
            }
        }
    }
}

/// Routes release messages to waiters, wakes everybody when the subscription connection
/// dropped (messages may have been missed), and unsubscribes channels idle for a while.
async fn dispatch_wakes(
    wakes: std::sync::Weak<Wakes>,
    mut push_rx: mpsc::UnboundedReceiver<PushInfo>,
) {
    let mut sweep = tokio::time::interval(SUBSCRIPTION_LINGER);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            push = push_rx.recv() => {
                let Some(push) = push else { return };
                let Some(wakes) = wakes.upgrade() else { return };
                let channels = wakes.channels.lock().unwrap();
                match push.kind {
                    PushKind::Message => {
                        if let Some(redis::Value::BulkString(name)) = push.data.first() {
                            let name = String::from_utf8_lossy(name);
                            if let Some(entry) = channels.get(name.as_ref()) {
                                entry.tx.send_modify(|n| *n += 1);
                            }
                        }
                    }
                    PushKind::Disconnection => {
                        for entry in channels.values() {
                            entry.tx.send_modify(|n| *n += 1);
                        }
                    }
                    _ => {}
                }
            }
            _ = sweep.tick() => {
                let Some(wakes) = wakes.upgrade() else { return };
                // Held across removal and UNSUBSCRIBE: a waiter that re-creates a removed
                // channel must subscribe after this unsubscribe, never before it.
                let _serial = wakes.serial.lock().await;
                let idle: Vec<String> = {
                    let mut channels = wakes.channels.lock().unwrap();
                    let now = tokio::time::Instant::now();
                    let idle: Vec<String> = channels
                        .iter()
                        .filter(|(_, c)| c.idle_since.is_some_and(|t| now - t >= SUBSCRIPTION_LINGER))
                        .map(|(name, _)| name.clone())
                        .collect();
                    for name in &idle {
                        channels.remove(name);
                    }
                    idle
                };
                if !idle.is_empty() {
                    let mut conn = wakes.conn.clone();
                    let unsubscribe = conn.unsubscribe(&idle);
                    if tokio::time::timeout(Duration::from_secs(1), unsubscribe).await.is_err() {
                        tracing::debug!(channels = idle.len(), "unsubscribe timed out");
                    }
                }
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

fn describe(addr: &ConnectionAddr) -> Endpoint {
    Endpoint(match addr {
        ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => other.to_string(),
    })
}

fn unavailable(endpoint: &Endpoint, limit: Duration, e: redis::RedisError) -> LockError {
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
async fn bounded<T>(
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
