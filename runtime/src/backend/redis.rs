//! One Redis deployment (a server, or a Redis Cluster): a multiplexed, auto-reconnecting
//! connection for the lock scripts, and a second RESP3 connection that carries the wake-up
//! subscriptions of every waiter in the process (sharded pub/sub on a cluster). Every call is
//! bounded by the locker's operation timeout.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind};
use tokio::sync::{mpsc, watch, Notify};

use super::batch::{self, Item, Queue};
use super::revive::{Revival, Step};
use super::{AcquireRequest, Attempt, Renewal, Renewed, WakeSubscription};
use crate::error::{Endpoint, LockError};
use crate::key::LockKeys;
use crate::token::OwnerToken;

static ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("../scripts/clock.lua"),
        include_str!("../scripts/fence.lua"),
        include_str!("../scripts/acquire.lua")
    ))
});
static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("../scripts/clock.lua"),
        include_str!("../scripts/release.lua")
    ))
});
static RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/renew.lua")));
static RAISE_FENCE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/raise_fence.lua")));
static INSPECT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/inspect.lua")));
static FORCE_RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../scripts/force_release.lua")));

/// How long the next process in line has to take a lock that a release left to it (the key
/// holds its name meanwhile). Its waiter needs the wake-up and one round trip; a process that
/// stopped waiting without leaving the queue costs the other waiters this much, once.
const YIELD_WINDOW: Duration = Duration::from_millis(200);

/// The longest a waiting process stays in the queue without asking again. Waiters ask again
/// at least every second (a wake-up, or `MAX_SLEEP` in acquire.rs).
const MAX_INTEREST: Duration = Duration::from_secs(2);

/// How long the queue keys outlive their last use (more than any interest).
const QUEUE_TTL: Duration = Duration::from_secs(6);

/// How long an idle wake subscription is kept before it is dropped: hot keys are waited on
/// again and again, and re-subscribing each time would cost a round trip per wait.
const SUBSCRIPTION_LINGER: Duration = Duration::from_secs(2);

/// Connection settings, all explicit: the client's defaults are not ours.
#[derive(Clone, Debug)]
pub(crate) struct RedisSettings {
    pub(crate) op_timeout: Duration,
    pub(crate) connect_timeout: Duration,
}

/// A multiplexed connection: to one server, or to a cluster (which routes each script by its
/// first key and follows MOVED/ASK redirections).
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<super::sentinel::SentinelConn>),
}

impl Conn {
    /// Runs a script. The future is boxed: the client's futures for clusters and sentinels
    /// are deep types, and boxing here keeps every future above it small.
    fn invoke<'a, T: redis::FromRedisValue + Send + 'a>(
        &'a self,
        invocation: &'a redis::ScriptInvocation<'_>,
    ) -> Pin<Box<dyn Future<Output = redis::RedisResult<T>> + Send + 'a>> {
        Box::pin(async move {
            match self.clone() {
                Conn::Single(mut c) => invocation.invoke_async(&mut c).await,
                #[cfg(feature = "cluster")]
                Conn::Cluster(mut c) => invocation.invoke_async(&mut c).await,
                #[cfg(feature = "sentinel")]
                Conn::Sentinel(s) => {
                    let result = invocation.invoke_async(&mut s.get().await?).await;
                    if let Err(e) = &result {
                        s.observe(e);
                    }
                    result
                }
            }
        })
    }

    /// Sends one plain command.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        match self.clone() {
            Conn::Single(mut c) => cmd.query_async(&mut c).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => cmd.query_async(&mut c).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => cmd.query_async(&mut s.get().await?).await,
        }
    }

    /// Waits until `replicas` replicas acknowledged this connection's writes, or `timeout`.
    #[cfg(feature = "sentinel")]
    async fn wait_replicas(&self, replicas: u32, timeout: Duration) -> redis::RedisResult<u32> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        self.query(&wait).await
    }

    async fn load(&self, script: &redis::Script) -> redis::RedisResult<String> {
        match self.clone() {
            Conn::Single(mut c) => script.load_async(&mut c).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => script.load_async(&mut c).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => script.load_async(&mut s.get().await?).await,
        }
    }

    async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self.clone() {
            Conn::Single(mut c) => c.subscribe(channel).await,
            #[cfg(feature = "cluster")]
            Conn::Cluster(mut c) => c.ssubscribe(channel).await,
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(s) => {
                let result = s.get().await?.subscribe(channel).await;
                if let Err(e) = &result {
                    s.observe(e);
                }
                result
            }
        }
    }

    async fn unsubscribe(&self, channels: &[String]) -> redis::RedisResult<()> {
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
            Conn::Sentinel(s) => s.get().await?.unsubscribe(channels).await,
        }
    }

    /// The command a release publishes its wake-up with.
    fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }

    fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Conn::Cluster(_) = self {
            return true;
        }
        false
    }
}

pub(crate) struct RedisBackend {
    core: Arc<Core>,
    /// Replicas that must acknowledge an acquire before it counts (Sentinel deployments).
    #[cfg(feature = "sentinel")]
    min_replicas: u32,
    wakes: Arc<Wakes>,
    /// Why the server did not answer when the backend was built, if it did not.
    pub(crate) down_at_connect: Option<LockError>,
    /// Bumped each time the lock connection drops (single server only).
    epoch: Option<Arc<watch::Sender<u64>>>,
}

/// The connection and its bounds, shared with the tasks that send batches.
pub(crate) struct Core {
    conn: Conn,
    endpoint: Endpoint,
    op_timeout: Duration,
    /// Acquires and releases of concurrent tasks go to Redis together. Off on a cluster,
    /// where one script may only touch one slot.
    batching: bool,
    acquires: Queue<AcquireItem, Core>,
    releases: Queue<ReleaseItem, Core>,
    /// This process's name in the queues of waiting processes (random, per locker).
    contender: String,
}

impl Core {
    async fn run<T: redis::FromRedisValue + Send>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, LockError> {
        bounded(
            &self.endpoint,
            self.op_timeout,
            self.conn.invoke(&invocation),
        )
        .await
    }

    /// Sends one request, batched with concurrent ones where possible.
    async fn request<T: Item<Core>>(self: &Arc<Self>, item: T) -> Result<T::Out, LockError> {
        if self.batching {
            // The op timeout bounds the whole request, also the time it waited for a slot.
            let deadline = tokio::time::Instant::now() + self.op_timeout;
            let late = || {
                LockError::unavailable(
                    format!(
                        "redis at {} did not answer within {:?}",
                        self.endpoint, self.op_timeout
                    ),
                    None,
                )
            };
            batch::submit(self, item, deadline, late).await
        } else {
            let mut outs = T::send(self, std::slice::from_ref(&item)).await?;
            Ok(outs.pop().expect("one answer per request"))
        }
    }

    /// [`Core::request`] for items that answer each caller with a result of its own.
    async fn request_each<O, T: Item<Core, Out = Result<O, LockError>>>(
        self: &Arc<Self>,
        item: T,
    ) -> Result<O, LockError> {
        self.request(item).await?
    }
}

/// One acquire, as it waits for its batch.
struct AcquireItem {
    keys: LockKeys,
    token: OwnerToken,
    lease_ms: u64,
    fence_ttl_ms: u64,
    fences: u64,
    /// 0: not waiting.
    interest_ms: u64,
    queued: bool,
}

impl Item<Core> for AcquireItem {
    /// Each caller's own outcome: one lock's failure is not the batch's.
    type Out = Result<Attempt, LockError>;

    fn queue(core: &Core) -> &Queue<Self, Core> {
        &core.acquires
    }

    async fn send(core: &Arc<Core>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        let mut inv = ACQUIRE.prepare_invoke();
        inv.arg(items[0].fence_ttl_ms)
            .arg(&core.contender)
            .arg(millis(QUEUE_TTL));
        for it in items {
            inv.key(&it.keys.lock)
                .key(&it.keys.fence)
                .key(&it.keys.queue)
                .key(&it.keys.interest)
                .arg(it.token.as_bytes())
                .arg(it.lease_ms)
                .arg(it.fences)
                .arg(it.interest_ms)
                .arg(u8::from(it.queued));
        }
        let flat: Vec<redis::Value> = core.run(inv).await?;
        if flat.len() != items.len() * 2 {
            return Err(malformed(&core.endpoint, "acquire"));
        }
        Ok(flat
            .chunks(2)
            .map(|answer| match answer {
                [redis::Value::Int(1), redis::Value::Int(top)] => {
                    Ok(Attempt::Granted { top: *top as u64 })
                }
                [redis::Value::Int(0), redis::Value::Int(pttl)] => Ok(Attempt::Held {
                    remaining: (*pttl >= 0).then(|| Duration::from_millis(*pttl as u64)),
                }),
                [_, failure] => Err(refused(&core.endpoint, "acquire", failure)),
                _ => unreachable!("chunks of two"),
            })
            .collect())
    }

    fn abandoned(core: &Arc<Core>, item: Self, out: Self::Out) {
        // The caller is gone, but the lock is taken in its name: give it back.
        if let Ok(Attempt::Granted { .. }) = out {
            let core = core.clone();
            let release = ReleaseItem {
                keys: item.keys,
                token: item.token,
            };
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { core.request_each(release).await });
            }
        }
    }
}

/// One release, as it waits for its batch.
struct ReleaseItem {
    keys: LockKeys,
    token: OwnerToken,
}

impl Item<Core> for ReleaseItem {
    /// Each caller's own outcome: one lock's failure is not the batch's.
    type Out = Result<bool, LockError>;

    fn queue(core: &Core) -> &Queue<Self, Core> {
        &core.releases
    }

    async fn send(core: &Arc<Core>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        let mut inv = RELEASE.prepare_invoke();
        inv.arg(core.conn.publish_command())
            .arg(&core.contender)
            .arg(millis(YIELD_WINDOW));
        for it in items {
            inv.key(&it.keys.lock)
                .key(&it.keys.queue)
                .key(&it.keys.interest)
                .arg(it.token.as_bytes())
                .arg(&it.keys.wake);
        }
        let released: Vec<redis::Value> = core.run(inv).await?;
        if released.len() != items.len() {
            return Err(malformed(&core.endpoint, "release"));
        }
        Ok(released
            .iter()
            .map(|answer| match answer {
                redis::Value::Int(r) => Ok(*r == 1),
                failure => Err(refused(&core.endpoint, "release", failure)),
            })
            .collect())
    }

    fn abandoned(_: &Arc<Core>, _: Self, _: Self::Out) {}
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
        let client = Client::open(resp3.clone())
            .map_err(|e| unavailable(&endpoint, settings.connect_timeout, e))?;
        let conn = Conn::Single(lazy(client, config.clone().set_push_sender(drops_tx))?);
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
            RedisBackend::assemble(conn, sub_conn, push_rx, endpoint, settings, down_at_connect);
        // Drops that came before this point wait in the channel.
        let epoch = Arc::new(watch::channel(0u64).0);
        tokio::spawn(watch_lock_conn(
            Arc::downgrade(&epoch),
            Arc::downgrade(&backend.core),
            drops_rx,
            down,
        ));
        backend.epoch = Some(epoch);
        Ok(backend)
    }

    /// The current session of the lock connection (single server only).
    pub(crate) fn session(&self) -> Option<crate::lease::Session> {
        self.epoch.as_deref().map(crate::lease::Session::current)
    }

    /// Connects to a Redis Cluster through any of its nodes. Every key of one lock shares a
    /// slot, so each script runs on one node; wake-ups use sharded pub/sub.
    #[cfg(feature = "cluster")]
    pub(crate) async fn connect_cluster(
        urls: &[String],
        settings: &RedisSettings,
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
        Ok(RedisBackend::assemble(
            conn, sub_conn, push_rx, endpoint, settings, None,
        ))
    }

    fn assemble(
        conn: Conn,
        sub_conn: Conn,
        push_rx: mpsc::UnboundedReceiver<PushInfo>,
        endpoint: Endpoint,
        settings: &RedisSettings,
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
        RedisBackend {
            core: Arc::new(Core {
                conn,
                endpoint,
                op_timeout: settings.op_timeout,
                batching,
                acquires: Queue::default(),
                releases: Queue::default(),
                contender: crate::token::contender_name(),
            }),
            #[cfg(feature = "sentinel")]
            min_replicas: 0,
            wakes,
            down_at_connect,
            epoch: None,
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
        settings: &RedisSettings,
    ) -> Result<Self, LockError> {
        use super::sentinel::SentinelConn;
        let endpoint = Endpoint(format!(
            "master {master:?} of sentinels {}",
            sentinels.join(",")
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
                master,
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
                master,
                true,
                sub_config,
                settings.connect_timeout,
            )
            .map_err(config_error)?,
        ));
        let mut backend = RedisBackend::assemble(conn, sub_conn, push_rx, endpoint, settings, None);
        backend.min_replicas = min_replicas;
        Ok(backend)
    }

    /// Host and port (or socket path) of the server, for messages.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.core.endpoint
    }

    async fn run<T: redis::FromRedisValue + Send>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, LockError> {
        self.core.run(invocation).await
    }

    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let item = AcquireItem {
            keys: req.keys.clone(),
            token: req.token.clone(),
            lease_ms: millis(req.lease),
            fence_ttl_ms: millis(req.fence_ttl),
            fences: req.fences,
            interest_ms: if req.interest.is_zero() {
                0
            } else {
                millis(req.interest.min(MAX_INTEREST))
            },
            queued: req.queued,
        };
        let attempt = self.core.request_each(item).await?;
        #[cfg(feature = "sentinel")]
        if let Attempt::Granted { .. } = attempt {
            if self.min_replicas > 0 {
                self.await_replicas(req).await?;
            }
        }
        Ok(attempt)
    }

    /// Waits until `min_replicas` replicas have the new lock; if they do not in time, gives
    /// the lock back and fails: a failover now could lose it.
    #[cfg(feature = "sentinel")]
    async fn await_replicas(&self, req: &AcquireRequest<'_>) -> Result<(), LockError> {
        let (conn, endpoint, op_timeout) =
            (&self.core.conn, &self.core.endpoint, self.core.op_timeout);
        // The server gives up a little before the client does, so that the answer (how many
        // replicas did acknowledge) still arrives within the op timeout.
        let wait = conn.wait_replicas(self.min_replicas, op_timeout.mul_f64(0.8));
        let acked = bounded(endpoint, op_timeout, wait).await;
        match acked {
            Ok(n) if n >= self.min_replicas => Ok(()),
            other => {
                let _ = self.release(req.keys, req.token).await;
                let seen = other.as_ref().map_or(0, |n| *n);
                Err(LockError::unavailable(
                    format!(
                        "only {seen} of the {} required replicas acknowledged the lock within \
                         {:?} (min_replicas); check the replicas' health and lag",
                        self.min_replicas, op_timeout
                    ),
                    other.err().map(|e| Box::new(e) as crate::error::BoxError),
                ))
            }
        }
    }

    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let item = ReleaseItem {
            keys: keys.clone(),
            token: token.clone(),
        };
        self.core.request_each(item).await
    }

    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        if !self.core.conn.is_cluster() {
            return self.renew_together(batch).await;
        }
        // A script may only touch keys of one slot: one call per slot, all in parallel.
        let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
        for (i, r) in batch.iter().enumerate() {
            by_slot
                .entry(crate::key::slot(&r.keys.lock))
                .or_default()
                .push(i);
        }
        let groups: Vec<Vec<usize>> = by_slot.into_values().collect();
        let calls = groups.iter().map(|group| async move {
            let part: Vec<Renewal<'_>> = group
                .iter()
                .map(|&i| Renewal {
                    keys: batch[i].keys,
                    token: batch[i].token,
                    lease: batch[i].lease,
                })
                .collect();
            self.renew_together(&part).await
        });
        let answers = super::redlock::join_all(calls).await;
        let mut renewed = vec![Renewed::Unknown; batch.len()];
        for (group, answer) in groups.iter().zip(answers) {
            for (&i, ok) in group.iter().zip(answer?) {
                renewed[i] = ok;
            }
        }
        Ok(renewed)
    }

    async fn renew_together(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut inv = RENEW.prepare_invoke();
        for r in batch {
            inv.key(&r.keys.lock)
                .arg(r.token.as_bytes())
                .arg(millis(r.lease));
        }
        let renewed: Vec<redis::Value> = self.run(inv).await?;
        if renewed.len() != batch.len() {
            return Err(malformed(&self.core.endpoint, "renew"));
        }
        Ok(renewed
            .iter()
            .map(|answer| match answer {
                redis::Value::Int(1) => Renewed::Yes,
                redis::Value::Int(_) => Renewed::No,
                failure => {
                    let e = refused(&self.core.endpoint, "renew", failure);
                    tracing::warn!(error = %e, "a renewal failed; trying again while the lease lasts");
                    Renewed::Unknown
                }
            })
            .collect())
    }

    /// `(held, pttl, waiters, fence, queued)` of one lock (see inspect.lua).
    pub(crate) async fn inspect(
        &self,
        keys: &LockKeys,
    ) -> Result<(i64, i64, i64, i64, i64), LockError> {
        let mut inv = INSPECT.prepare_invoke();
        inv.key(&keys.lock).key(&keys.fence).key(&keys.queue);
        self.run(inv).await
    }

    /// Deletes a lock whoever holds it; true when there was one.
    pub(crate) async fn force_release(&self, keys: &LockKeys) -> Result<bool, LockError> {
        let mut inv = FORCE_RELEASE.prepare_invoke();
        inv.key(&keys.lock)
            .arg(&keys.wake)
            .arg(self.core.conn.publish_command());
        let deleted: i64 = self.run(inv).await?;
        Ok(deleted == 1)
    }

    /// The names matching `pattern`, with `SCAN` (never `KEYS`), each call bounded.
    pub(crate) async fn scan(&self, pattern: &str) -> Result<Vec<String>, LockError> {
        if self.core.conn.is_cluster() {
            return Err(LockError::config(
                "listing locks on a Redis Cluster is not supported yet: inspect keys one by one",
            ));
        }
        let mut names = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000);
            let (next, batch): (u64, Vec<String>) = bounded(
                &self.core.endpoint,
                self.core.op_timeout,
                self.core.conn.query(&cmd),
            )
            .await?;
            names.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        names.sort();
        names.dedup();
        Ok(names)
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

    /// Listens for releases of one lock; fails when the server did not confirm the
    /// subscription (the waiter then polls).
    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        match self.subscribe_or_later(keys).await {
            (subscription, None) => Ok(subscription),
            (_, Some(e)) => Err(e),
        }
    }

    /// Listens for releases of one lock. When the server did not confirm the subscription,
    /// also returns why; the subscription is then made as soon as the server answers again,
    /// and its waiters are woken at that moment (a release in between was not heard).
    pub(crate) async fn subscribe_or_later(
        &self,
        keys: &LockKeys,
    ) -> (WakeSubscription, Option<LockError>) {
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
        let subscription = WakeSubscription::new(rx, Some(Box::new(interest)));
        if confirmed {
            return (subscription, None);
        }
        // Everything below shares one bound: the serial lock can be held by a revival probe
        // or a sweep whose own calls are bounded, but a waiter never waits longer than one
        // operation for its turn and its SUBSCRIBE together.
        let op_timeout = self.core.op_timeout;
        let subscribe = async {
            let _serial = self.wakes.serial.lock().await;
            self.wakes.conn.subscribe(&channel).await
        };
        match bounded(&self.core.endpoint, op_timeout, subscribe).await {
            Ok(()) => {
                if let Some(entry) = self.wakes.channels.lock().unwrap().get_mut(&channel) {
                    entry.confirmed = true;
                }
                (subscription, None)
            }
            Err(e) => {
                // The subscription stays registered: the connection is probed until it
                // works, then subscribed again, and the waiter woken to look.
                self.wakes.broken.notify_one();
                (subscription, Some(e))
            }
        }
    }
}

/// The wake-up side of the backend: which channels this process listens to, and for whom.
struct Wakes {
    conn: Conn,
    channels: Mutex<HashMap<String, Channel>>,
    /// SUBSCRIBE and UNSUBSCRIBE go out one at a time, so an unsubscribe of an idle channel
    /// can never overtake a newer subscribe to the same channel.
    serial: tokio::sync::Mutex<()>,
    endpoint: Endpoint,
    op_timeout: Duration,
    /// Signalled when a SUBSCRIBE failed: the connection needs reviving.
    broken: Arc<Notify>,
}

impl Wakes {
    /// Whether some channel has had nobody waiting on it for [`SUBSCRIPTION_LINGER`].
    fn has_idle_channels(&self, now: tokio::time::Instant) -> bool {
        let channels = self.channels.lock().unwrap();
        channels
            .values()
            .any(|c| c.idle_since.is_some_and(|t| now - t >= SUBSCRIPTION_LINGER))
    }

    /// Subscribes again every channel that waiters still listen to but the server does not
    /// know (after a drop, or a failed SUBSCRIBE), and wakes its waiters: a release may have
    /// gone unheard meanwhile. With no such channel, a PING proves the connection works.
    async fn resubscribe(self: Arc<Self>) -> bool {
        let Ok(_serial) = tokio::time::timeout(self.op_timeout, self.serial.lock()).await else {
            return false;
        };
        let pending: Vec<String> = {
            let channels = self.channels.lock().unwrap();
            channels
                .iter()
                .filter(|(_, c)| !c.confirmed && c.interest > 0)
                .map(|(name, _)| name.clone())
                .collect()
        };
        if pending.is_empty() {
            return ping(&self.conn, &self.endpoint, self.op_timeout).await;
        }
        for name in pending {
            let subscribe = self.conn.subscribe(&name);
            if bounded(&self.endpoint, self.op_timeout, subscribe)
                .await
                .is_err()
            {
                return false;
            }
            if let Some(entry) = self.channels.lock().unwrap().get_mut(&name) {
                entry.confirmed = true;
                entry.tx.send_modify(|n| *n += 1);
            }
        }
        true
    }
}

/// Whether the server answers a PING within `op_timeout`.
async fn ping(conn: &Conn, endpoint: &Endpoint, op_timeout: Duration) -> bool {
    let cmd = redis::cmd("PING");
    let ping = conn.query::<redis::Value>(&cmd);
    bounded(endpoint, op_timeout, ping).await.is_ok()
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

/// Ends the lock connection's session each time it drops, and brings the connection back as
/// soon as the server answers again (see [`Revival`]).
async fn watch_lock_conn(
    epoch: std::sync::Weak<watch::Sender<u64>>,
    core: std::sync::Weak<Core>,
    mut drops: mpsc::UnboundedReceiver<PushInfo>,
    down_at_connect: bool,
) {
    let mut revival = Revival::default();
    if down_at_connect {
        revival.dropped();
    }
    loop {
        tokio::select! {
            push = drops.recv() => {
                let Some(push) = push else { return };
                if push.kind != PushKind::Disconnection {
                    continue;
                }
                let Some(epoch) = epoch.upgrade() else { return };
                epoch.send_modify(|n| *n += 1);
                tracing::warn!(
                    "the connection to redis dropped: leases granted over it count as lost \
                     (the server may have restarted without them)"
                );
                revival.dropped();
            }
            step = revival.step(), if revival.active() => {
                if step == Step::Due {
                    let Some(core) = core.upgrade() else { return };
                    revival.probe(Box::pin(async move {
                        ping(&core.conn, &core.endpoint, core.op_timeout).await
                    }));
                }
            }
        }
    }
}

/// Routes release messages to waiters, wakes everybody when the subscription connection
/// dropped (messages may have been missed), and unsubscribes channels idle for a while.
async fn dispatch_wakes(
    wakes: std::sync::Weak<Wakes>,
    mut push_rx: mpsc::UnboundedReceiver<PushInfo>,
    broken: Arc<Notify>,
) {
    let mut sweep = tokio::time::interval(SUBSCRIPTION_LINGER);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut revival = Revival::default();
    loop {
        tokio::select! {
            () = broken.notified() => revival.dropped(),
            step = revival.step(), if revival.active() => {
                if step == Step::Due {
                    let Some(wakes) = wakes.upgrade() else { return };
                    revival.probe(Box::pin(wakes.resubscribe()));
                }
            }
            push = push_rx.recv() => {
                let Some(push) = push else { return };
                let Some(wakes) = wakes.upgrade() else { return };
                let mut channels = wakes.channels.lock().unwrap();
                match push.kind {
                    PushKind::Message | PushKind::SMessage => {
                        if let Some(redis::Value::BulkString(name)) = push.data.first() {
                            let name = String::from_utf8_lossy(name);
                            if let Some(entry) = channels.get(name.as_ref()) {
                                entry.tx.send_modify(|n| *n += 1);
                            }
                        }
                    }
                    PushKind::Disconnection => {
                        // Messages may have been missed: wake everybody to look again, and
                        // have the next waiter of each channel subscribe afresh (after a
                        // failover the new server knows nothing of our subscriptions).
                        for entry in channels.values_mut() {
                            entry.confirmed = false;
                            entry.tx.send_modify(|n| *n += 1);
                        }
                        revival.dropped();
                    }
                    _ => {}
                }
            }
            _ = sweep.tick() => {
                let Some(wakes) = wakes.upgrade() else { return };
                // In a task of its own: this loop must never wait for `serial`, which a
                // revival probe polled only by this very loop may hold (a waiter would then
                // hang on `serial` forever). Only when there is something to sweep.
                if wakes.has_idle_channels(tokio::time::Instant::now()) {
                    tokio::spawn(unsubscribe_idle(wakes));
                }
            }
        }
    }
}

/// Unsubscribes the channels that nobody waited on for [`SUBSCRIPTION_LINGER`].
async fn unsubscribe_idle(wakes: Arc<Wakes>) {
    // Held across removal and UNSUBSCRIBE: a waiter that re-creates a removed channel must
    // subscribe after this unsubscribe, never before it. Bounded, like every holder of it.
    let Ok(_serial) = tokio::time::timeout(wakes.op_timeout, wakes.serial.lock()).await else {
        return; // busy with a probe; the next sweep tries again
    };
    // Chosen and removed under one lock: a waiter may take a channel up again meanwhile.
    let now = tokio::time::Instant::now();
    let mut idle = Vec::new();
    wakes.channels.lock().unwrap().retain(|name, c| {
        let gone = c.idle_since.is_some_and(|t| now - t >= SUBSCRIPTION_LINGER);
        if gone {
            idle.push(name.clone());
        }
        !gone
    });
    if !idle.is_empty() {
        let unsubscribe = wakes.conn.unsubscribe(&idle);
        if tokio::time::timeout(wakes.op_timeout, unsubscribe)
            .await
            .is_err()
        {
            tracing::debug!(channels = idle.len(), "unsubscribe timed out");
        }
    }
}

/// Every setting of a connection, explicit: the client's defaults are not ours.
fn connection_config(settings: &RedisSettings) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.op_timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(500))
        .set_pipeline_buffer_size(1024)
}

/// Loads the scripts: it proves the server answers, and the first lock does not pay a
/// NOSCRIPT round trip. After a server restart they are reloaded on demand. Then warns if
/// the server may evict live locks. Connecting and loading together take at most the
/// connect timeout.
async fn preload(
    conn: &Conn,
    endpoint: &Endpoint,
    settings: &RedisSettings,
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
pub(crate) fn eviction_risk(config: &HashMap<String, String>) -> Option<String> {
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

/// A reply of a lock script that does not have the documented shape.
fn malformed(endpoint: &Endpoint, script: &str) -> LockError {
    LockError::unavailable(
        format!("redis at {endpoint} answered the {script} script with a malformed reply"),
        None,
    )
}

/// The error of one lock in a batched script: the server refused one of its commands (out
/// of memory, a key of the wrong type under the prefix). Only that lock's caller gets it.
fn refused(endpoint: &Endpoint, script: &str, failure: &redis::Value) -> LockError {
    let detail = match failure {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    LockError::unavailable(
        format!(
            "redis at {endpoint} refused a command of the {script} script for this lock: \
             {detail} (is the server out of memory, or does another program write keys under \
             the lock prefix?)"
        ),
        None,
    )
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
