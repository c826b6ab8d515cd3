//! [`Locker`], the handle users keep: where locks live, their defaults, and
//! [`LockRequest`], the builder of one acquisition.

pub(crate) mod global;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::engine::lease::DEFAULT_DRIFT;
use crate::engine::observe::TraceKeys;
use crate::engine::options::Options;
use crate::engine::state::Inner;
use crate::error::LockError;
use crate::primitives::guard::LockGuard;
use crate::store::keys::validate_prefix;
use crate::store::kind::LeaseKind;
use crate::store::{self, Capabilities, Deployment, Feature, Settings, Store};

/// The default prefix of every Redis key the library writes.
pub const DEFAULT_PREFIX: &str = "leasehold";
/// The default lease: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default time to wait for a busy lock: 3 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The default bound on one Redis call: 1 s.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(1);
/// The default bound on establishing a connection: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The default lifetime of an unused fence counter: 7 days.
pub const DEFAULT_FENCE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default session timeout of ZooKeeper sessions and etcd leases: 10 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest lease accepted: 10 ms.
pub const MIN_LEASE: Duration = Duration::from_millis(10);

static NEXT_LOCKER_ID: AtomicU64 = AtomicU64::new(1);

/// A handle to a lock store (Redis, or process memory) with default lock options.
///
/// Cheap to clone: clones share the connections, the background task that renews leases, and
/// the local queues of waiters. Build one per process and share it (for example with
/// [`set_global_default`](crate::set_global_default), which the attribute uses).
///
/// A `Locker` belongs to the Tokio runtime it was built on (its connections and background
/// task run there); it can be used from other runtimes as long as that one keeps running.
///
/// ```no_run
/// # async fn run() -> Result<(), leasehold::LockError> {
/// use leasehold::Locker;
/// use std::time::Duration;
///
/// let locker = Locker::connect("redis://127.0.0.1:6379").await?;
/// let guard = locker.lock("order:42").lease(Duration::from_secs(10)).acquire().await?;
/// // ... only one holder in the whole system runs here ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locker {
    pub(crate) inner: Arc<Inner>,
}

impl Locker {
    /// Connects to one Redis server with the default options. Accepts `redis://`,
    /// `rediss://` (TLS, with the `tls` feature) and `redis+unix://` URLs.
    ///
    /// # Errors
    /// [`LockError::Config`] for a URL that does not parse, [`LockError::Unavailable`] when the
    /// server cannot be reached within the connect timeout.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Locker, LockError> {
        Locker::builder().url(url).build().await
    }

    /// A builder for every option; see [`LockerBuilder`].
    pub fn builder() -> LockerBuilder {
        LockerBuilder::default()
    }

    /// A locker whose locks live in this process's memory, with the same semantics as Redis
    /// (leases, fences, wake-ups, the watchdog): for tests, and for programs that run as one
    /// process. Each call makes a separate store; clones share it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("job:7").acquire().await?;
    /// assert!(locker.lock("job:7").try_acquire().await?.is_none());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn in_memory() -> Locker {
        Locker::with_store(store::in_memory(), LockerBuilder::default())
    }

    /// A locker on a store whose answers the test scripts; lockers built on clones of one
    /// [`ScriptedStore`](crate::store::scripted::ScriptedStore) stand for processes
    /// sharing one Redis.
    #[cfg(test)]
    pub(crate) fn scripted(store: crate::store::scripted::ScriptedStore) -> Locker {
        Locker::with_store(Arc::new(store), LockerBuilder::default())
    }

    fn with_store(store: Arc<dyn Store>, b: LockerBuilder) -> Locker {
        Locker {
            inner: Arc::new(Inner {
                id: NEXT_LOCKER_ID.fetch_add(1, Ordering::Relaxed),
                store,
                prefix: b.prefix,
                default_lease: b.default_lease,
                default_wait: b.default_wait,
                default_watchdog: b.default_watchdog,
                fence_ttl: b.fence_ttl,
                drift: b.drift,
                trace_keys: b.trace_keys,
                queues: Default::default(),
                semaphore_lines: Default::default(),
                schedule: Arc::default(),
                jobs: OnceLock::new(),
            }),
        }
    }

    /// Starts describing an acquisition of `key`; finish with
    /// [`acquire`](LockRequest::acquire) or [`try_acquire`](LockRequest::try_acquire).
    ///
    /// Any non-empty string up to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes is a key; braces,
    /// colons and other bytes are escaped, so a key can never name another lock's data.
    pub fn lock(&self, key: impl Into<String>) -> LockRequest<'_> {
        LockRequest {
            locker: self,
            key: key.into(),
            lease: None,
            wait: None,
            watchdog: None,
            kind: LeaseKind::Exclusive,
            fair: false,
            hold_at_least: None,
            fenced: true,
        }
    }

    /// Describes one acquisition of the read side of a read-write lock on `key`: any number
    /// of readers hold it together, and no writer while they do. Every reader has a lease of
    /// its own, renewed by the watchdog, so a reader that crashed frees its share when its
    /// lease runs out. A writer that waits for readers blocks new readers (writers do not
    /// starve): a new reader waits while a writer holds the lock or waits for it, so readers
    /// may wait as long as writers keep queueing. The guard's [`fence`](LockGuard::fence) is
    /// at or above every fence any writer of the key had been given when the reader got in,
    /// and below every later writer's, so a resource can tell which version a reader saw (on
    /// ZooKeeper and etcd it is the last writer's fence; on Redis and in memory the fence
    /// counter lifted to the server clock in microseconds, as writers' are, so that it never
    /// goes back after a restore, a failover or the counter's expiry).
    ///
    /// Inside a scope holding the key (read or write) a read re-enters at once; a write
    /// inside a held read is refused at once ([`LockError::Config`]), since it would wait
    /// for itself. On one Redis server, Sentinel, Redis Cluster, ZooKeeper, etcd and in
    /// memory; RedLock and PostgreSQL refuse it with [`LockError::Config`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let a = locker.read_lock("doc:7").acquire().await?;
    /// let b = locker.read_lock("doc:7").acquire().await?; // readers share
    /// assert!(locker.write_lock("doc:7").try_acquire().await?.is_none());
    /// drop((a, b));
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, key: impl Into<String>) -> LockRequest<'_> {
        LockRequest {
            kind: LeaseKind::Read,
            ..self.lock(key)
        }
    }

    /// Describes one acquisition of the write side of a read-write lock on `key`: the same
    /// as [`lock`](Self::lock) (a write lock and a plain lock on one key exclude each
    /// other), which also waits for the key's readers to leave.
    pub fn write_lock(&self, key: impl Into<String>) -> LockRequest<'_> {
        self.lock(key)
    }

    /// The prefix of every Redis key this locker writes.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The lease used when a request does not set one.
    pub fn default_lease(&self) -> Duration {
        self.inner.default_lease
    }

    /// How long a request waits for a busy lock when it does not say.
    pub fn default_wait(&self) -> Duration {
        self.inner.default_wait
    }

    /// What this locker's engine offers: read locks, semaphores, leader election, how fair
    /// locks queue, the longest lease it honours. For a service whose engine comes from
    /// configuration, to decide what it may use; a request for something the engine lacks
    /// fails with [`LockError::Config`] all the same.
    ///
    /// Current: on ZooKeeper, `max_lease` is the session timeout the server granted (which
    /// may be shorter than asked). A [lazily connected](LockerBuilder::lazy_connect) locker
    /// answers from its configuration until it is connected.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// if locker.capabilities().read_locks {
    ///     let reader = locker.read_lock("doc:7").acquire().await?;
    ///     reader.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn capabilities(&self) -> Capabilities {
        self.inner.store.capabilities()
    }
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = self.inner.store.describe();
        f.debug_struct("Locker")
            .field("store", &store)
            .field("prefix", &self.inner.prefix)
            .field("default_lease", &self.inner.default_lease)
            .field("default_wait", &self.inner.default_wait)
            .finish()
    }
}

/// Options of a [`Locker`]. Start with [`Locker::builder`], finish with
/// [`build`](LockerBuilder::build).
///
/// ```no_run
/// # async fn run() -> Result<(), leasehold::LockError> {
/// use std::time::Duration;
/// let locker = leasehold::Locker::builder()
///     .url("redis://127.0.0.1:6379")
///     .prefix("shop")
///     .default_lease(Duration::from_secs(30))
///     .default_wait(Duration::from_secs(3))
///     .op_timeout(Duration::from_millis(500))
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until .build().await"]
pub struct LockerBuilder {
    /// Every engine named, in order: more than one is an error at `build`.
    deployments: Vec<Deployment>,
    min_replicas: u32,
    #[cfg_attr(not(any(feature = "zookeeper", feature = "etcd")), allow(dead_code))]
    session_timeout: Duration,
    prefix: String,
    default_lease: Duration,
    default_wait: Duration,
    default_watchdog: bool,
    op_timeout: Duration,
    connect_timeout: Duration,
    fence_ttl: Duration,
    drift: f64,
    trace_keys: TraceKeys,
    lazy_connect: bool,
}

impl Default for LockerBuilder {
    fn default() -> Self {
        LockerBuilder {
            deployments: Vec::new(),
            min_replicas: 0,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            prefix: DEFAULT_PREFIX.to_owned(),
            default_lease: DEFAULT_LEASE,
            default_wait: DEFAULT_WAIT,
            default_watchdog: true,
            op_timeout: DEFAULT_OP_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            fence_ttl: DEFAULT_FENCE_TTL,
            drift: DEFAULT_DRIFT,
            trace_keys: TraceKeys::Plain,
            lazy_connect: false,
        }
    }
}

impl LockerBuilder {
    /// The Redis server: `redis://[user:password@]host:port[/db]`, `rediss://...` for TLS,
    /// or `redis+unix:///path/to/socket`. Required for [`build`](Self::build).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.deployments.push(Deployment::Redis(url.into()));
        self
    }

    /// The engine named by a configuration file (see [`LockConfig`](crate::LockConfig)).
    #[cfg(feature = "serde")]
    pub(crate) fn deployment(mut self, deployment: Deployment) -> Self {
        match &deployment {
            Deployment::Sentinel { min_replicas, .. } => self.min_replicas = *min_replicas,
            Deployment::ZooKeeper {
                session_timeout, ..
            }
            | Deployment::Etcd {
                session_timeout, ..
            } => self.session_timeout = *session_timeout,
            _ => {}
        }
        self.deployments.push(deployment);
        self
    }

    /// Lock over several independent Redis masters with the RedLock algorithm instead of one
    /// server: an odd number, at least three, of servers that do not replicate each other.
    /// A lock is held while a majority of them granted it within the lease; every call goes to
    /// all of them in parallel, each bounded by [`op_timeout`](Self::op_timeout) (keep it
    /// short, such as 50 ms: a hung node then costs little of the lease). Fencing tokens stay
    /// strictly increasing across the quorum. Replaces [`url`](Self::url).
    ///
    /// Nodes that are down when the locker is built are connected later, on first use, as
    /// long as a majority is up.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::builder()
    ///     .redlock(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .op_timeout(Duration::from_millis(50))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn redlock<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = urls.into_iter().map(Into::into).collect();
        self.deployments.push(Deployment::RedLock(urls));
        self
    }

    /// Lock on a Redis Cluster, reached through any of these nodes (the client discovers the
    /// rest and follows MOVED/ASK redirections and failovers). The keys of one lock share a
    /// hash tag, so each lock lives in one slot; wake-ups use sharded pub/sub (Redis 7).
    /// Replaces [`url`](Self::url). Needs the `cluster` feature.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::builder()
    ///     .cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "cluster")]
    pub fn cluster<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = urls.into_iter().map(Into::into).collect();
        self.deployments.push(Deployment::Cluster(urls));
        self
    }

    /// Lock on the master that these Redis Sentinels monitor under the name `master`, and
    /// follow it through failovers without restarting the application. Replaces
    /// [`url`](Self::url). Needs the `sentinel` feature.
    ///
    /// Replication is asynchronous: a lock granted by the old master and not yet copied to the
    /// replica that takes over is gone after a failover, and a second holder can get it. Use
    /// [`min_replicas`](Self::min_replicas) to make each acquire wait for replicas, and use
    /// fencing tokens where it matters.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::builder()
    ///     .sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "mymaster")
    ///     .min_replicas(1)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sentinel")]
    pub fn sentinel<I, S>(mut self, sentinels: I, master: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deployments.push(Deployment::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            master: master.into(),
            min_replicas: 0,
        });
        self
    }

    /// Lock on a ZooKeeper ensemble, `"host:port,host:port,..."`: each acquisition is an
    /// ephemeral sequential znode, the lowest holds, and every other contender watches only
    /// the one ahead of it, so waiting is first come, first served across processes. The
    /// session is the lease: see [`session_timeout`](Self::session_timeout). Fencing tokens
    /// come from the znode's creation zxid (strictly increasing across the ensemble, its
    /// restarts and leader changes). Replaces [`url`](Self::url). Needs the `zookeeper`
    /// feature.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::builder()
    ///     .zookeeper("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181")
    ///     .session_timeout(Duration::from_secs(10))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "zookeeper")]
    pub fn zookeeper(mut self, hosts: impl Into<String>) -> Self {
        self.deployments.push(Deployment::ZooKeeper {
            hosts: hosts.into(),
            session_timeout: self.session_timeout,
        });
        self
    }

    /// Lock on an etcd cluster (v3 API) reached through these endpoints,
    /// `[http[s]://][user:password@]host:port` (`http://` when no scheme is given): each
    /// acquisition is a key attached to this locker's etcd lease, the key with the lowest
    /// create revision holds, and every other contender watches only the deletion of the one
    /// ahead of it, so waiting is first come, first served across processes. The lease is the
    /// locker's, one for all its locks, with a TTL of
    /// [`session_timeout`](Self::session_timeout); a lock is lost when no keep-alive of it was
    /// acknowledged for the lock's lease, counted on this process's clock from the send time of
    /// the last acknowledged one. Fencing tokens come from the key's create revision (strictly
    /// increasing across the cluster, its restarts and leader changes). Replaces
    /// [`url`](Self::url). Needs the `etcd` feature (whose client is built with `protoc`).
    ///
    /// Credentials go in the endpoints, percent-encoded where needed, the same on each (etcd's
    /// user/password authentication); they never appear in `Debug`, logs or errors.
    /// `https://` endpoints need the `tls` feature too: the server's certificate is checked
    /// against the operating system's roots, or the file named by `SSL_CERT_FILE`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::builder()
    ///     .etcd(["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"])
    ///     .session_timeout(Duration::from_secs(10))
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "etcd")]
    pub fn etcd<I, S>(mut self, endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deployments.push(Deployment::Etcd {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            session_timeout: self.session_timeout,
        });
        self
    }

    /// Lock in a PostgreSQL database, `postgres://user:password@host:5432/database`: each lock
    /// is a row of the table `leasehold_locks` (created on first use with its sequence and
    /// functions, or applied by an operator from [`postgres::SCHEMA`](crate::postgres::SCHEMA)),
    /// its lease expiring on the database server's clock and judged lost on this process's
    /// monotonic clock, as on Redis. Fencing tokens come from a sequence, strictly increasing
    /// across holders, keys and server restarts; [`postgres::check_fence`](crate::postgres::check_fence)
    /// checks one inside your own transaction, so that the write and the fence check commit
    /// together. Waiters wake on `LISTEN`/`NOTIFY`. Replaces [`url`](Self::url). Needs the
    /// `postgres` feature.
    ///
    /// The URL takes tokio-postgres's parameters (`application_name`, `options`,
    /// `connect_timeout`, ...); the password never appears in `Debug`, logs or errors. TLS
    /// (`sslmode=require`) is not supported yet and refused.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::builder()
    ///     .postgres("postgres://shop:secret@10.0.0.5:5432/shop")
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "postgres")]
    pub fn postgres(mut self, url: impl Into<String>) -> Self {
        self.deployments.push(Deployment::Postgres(url.into()));
        self
    }

    /// With [`zookeeper`](Self::zookeeper): the session timeout; with [`etcd`](Self::etcd):
    /// the TTL of the locker's etcd lease (rounded up to whole seconds, as etcd counts; at least
    /// 1 s). Either way, how long a holder that crashed or was cut off keeps its locks. Leases
    /// there are at most this long (a longer lease is shortened to it, and the watchdog renews
    /// at a third of it). Defaults to 10 s; a ZooKeeper server may narrow it to its own
    /// `minSessionTimeout..maxSessionTimeout`, an etcd server may raise the TTL to its minimum.
    #[cfg(any(feature = "zookeeper", feature = "etcd"))]
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// With [`sentinel`](Self::sentinel): how many replicas must acknowledge a new lock
    /// (Redis `WAIT`, bounded by the operation timeout) before it counts. When fewer do, the
    /// lock is given back and the acquire fails with [`LockError::Unavailable`]. This narrows
    /// the window in which a failover loses a lock; it does not close it. Defaults to 0.
    #[cfg(feature = "sentinel")]
    pub fn min_replicas(mut self, replicas: u32) -> Self {
        self.min_replicas = replicas;
        self
    }

    /// The prefix of every Redis key written: `PREFIX:lock:{key}`. Defaults to `"leasehold"`.
    /// Must be non-empty, without `{` or `}`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The lease of requests that do not set one. Defaults to 30 s; at least 10 ms.
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.default_lease = lease;
        self
    }

    /// How long requests wait for a busy lock when they do not say. Defaults to 3 s.
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// Whether held leases are renewed in the background unless a request says otherwise.
    /// Defaults to `true`.
    pub fn default_watchdog(mut self, on: bool) -> Self {
        self.default_watchdog = on;
        self
    }

    /// The bound on every single Redis call (acquire, release, renew, subscribe), counted
    /// from the moment the call is made (also while it waits to share a batch). Defaults to
    /// 1 s. A dead or hung server makes calls fail with [`LockError::Unavailable`] after at
    /// most this long; an acquire with `wait = W` returns within `W + op_timeout` on one
    /// server, `W + 3 × op_timeout` on a RedLock.
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// The bound on establishing a connection and loading the scripts, together: `build()`
    /// fails with [`LockError::Unavailable`] after at most this long (plus `op_timeout` for
    /// the optional maxmemory check). Defaults to 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a lock's fence counter outlives its last use; after that it is re-seeded from
    /// the server clock (still increasing). Defaults to 7 days.
    pub fn fence_ttl(mut self, ttl: Duration) -> Self {
        self.fence_ttl = ttl;
        self
    }

    /// How lock keys appear in tracing spans: as given (the default), hashed, or not at all.
    /// Keys may carry user data; see [`TraceKeys`].
    pub fn trace_keys(mut self, how: TraceKeys) -> Self {
        self.trace_keys = how;
        self
    }

    /// How far the clocks of this process and Redis may drift apart during one lease, as a
    /// fraction of the lease: a lease counts as held for `lease − (lease × drift + 2 ms)`
    /// after the request that took or renewed it was sent (and RedLock refuses a quorum
    /// reached later than that). Defaults to 0.01; must be in `0.0..0.5`.
    pub fn clock_drift(mut self, drift: f64) -> Self {
        self.drift = drift;
        self
    }

    fn check(&self) -> Result<(), LockError> {
        if !(0.0..0.5).contains(&self.drift) {
            return Err(LockError::config(format!(
                "clock_drift of {} is out of range; it is a fraction of the lease, from 0.0 \
                 to below 0.5 (the default is 0.01)",
                self.drift
            )));
        }
        validate_prefix(&self.prefix)?;
        check_lease(self.default_lease, "default_lease")?;
        for (value, name) in [
            (self.op_timeout, "op_timeout"),
            (self.connect_timeout, "connect_timeout"),
        ] {
            if value.is_zero() {
                return Err(LockError::config(format!(
                    "{name} is zero; every Redis call needs a bound, e.g. 500ms"
                )));
            }
        }
        if self.fence_ttl < Duration::from_secs(1) {
            return Err(LockError::config(format!(
                "fence_ttl of {:?} is too short; fence counters should outlive leases by far \
                 (the default is 7 days)",
                self.fence_ttl
            )));
        }
        Ok(())
    }

    /// Lets [`build`](Self::build) succeed while the engine is down (a service can start
    /// before its Redis): the locker connects in the background, retrying with backoff (up to
    /// every 5 s), and until it has connected every lock call fails at once with
    /// [`LockError::Unavailable`] (503 over HTTP) saying why; the first success is logged at
    /// `info`. Options are still checked at `build`; a refusal that retrying cannot mend
    /// (credentials, a missing database) is returned as [`LockError::Config`] by the calls.
    /// Off by default: `build` connects, and fails when the engine cannot be reached.
    pub fn lazy_connect(mut self, on: bool) -> Self {
        self.lazy_connect = on;
        self
    }

    /// Checks the options and connects.
    ///
    /// # Errors
    /// [`LockError::Config`] when an option is invalid or no URL was given,
    /// [`LockError::Unavailable`] when Redis cannot be reached.
    pub async fn build(self) -> Result<Locker, LockError> {
        // Boxed: connecting nests the deployments' futures (RedLock over Redis over the
        // client) deeply, and the caller's future stays shallow and quick to compile.
        let build: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(self.connect_all());
        build.await
    }

    async fn connect_all(self) -> Result<Locker, LockError> {
        self.check()?;
        let deployment = self.chosen_deployment()?;
        let settings = Settings {
            op_timeout: self.op_timeout,
            connect_timeout: self.connect_timeout,
        };
        let store: Arc<dyn store::Store> = if self.lazy_connect {
            Arc::new(store::LazyStore::start(deployment, settings))
        } else {
            deployment.connect(&settings).await?
        };
        let locker = Locker::with_store(store, self);
        locker.inner.start_background();
        Ok(locker)
    }

    /// The one engine named, with the options that belong to it.
    fn chosen_deployment(&self) -> Result<Deployment, LockError> {
        match self.deployments.as_slice() {
            [] => Err(LockError::config(
                "no Redis URL: call .url(\"redis://127.0.0.1:6379\") on the builder (or \
                 .redlock([...]) for several masters), or use Locker::in_memory() for a \
                 process-local store",
            )),
            [one] => {
                let mut one = one.clone();
                match &mut one {
                    Deployment::Sentinel { min_replicas, .. } => *min_replicas = self.min_replicas,
                    Deployment::ZooKeeper {
                        session_timeout, ..
                    }
                    | Deployment::Etcd {
                        session_timeout, ..
                    } => *session_timeout = self.session_timeout,
                    _ => {}
                }
                one.validate()?;
                Ok(one)
            }
            _ => Err(LockError::config(
                "more than one of .url(...), .redlock([...]), .cluster([...]), .sentinel(...), \
                 .zookeeper(...), .etcd([...]) and .postgres(...) was given; use one of them",
            )),
        }
    }

    /// Checks the options and builds a process-local locker, like [`Locker::in_memory`].
    ///
    /// # Errors
    /// [`LockError::Config`] when an option is invalid.
    pub fn build_in_memory(self) -> Result<Locker, LockError> {
        self.check()?;
        Ok(Locker::with_store(store::in_memory(), self))
    }
}

pub(crate) fn check_lease(lease: Duration, name: &str) -> Result<(), LockError> {
    if lease < MIN_LEASE {
        return Err(LockError::config(format!(
            "{name} of {lease:?} is too short; a lease must be at least {MIN_LEASE:?} (Redis \
             counts in milliseconds, and the client keeps a safety margin)"
        )));
    }
    Ok(())
}

/// One acquisition being described: key, lease, wait and watchdog. Made by
/// [`Locker::lock`].
#[derive(Debug)]
#[must_use = "a lock request does nothing until .acquire().await or .try_acquire().await"]
pub struct LockRequest<'a> {
    pub(crate) locker: &'a Locker,
    pub(crate) key: String,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) watchdog: Option<bool>,
    /// The lock, or the read side of a read-write lock ([`Locker::read_lock`]); a
    /// semaphore's request sets its permits.
    pub(crate) kind: LeaseKind,
    /// First come, first served across processes ([`LockRequest::fair`]).
    pub(crate) fair: bool,
    /// Keep the lock at least this long after it was taken ([`LockRequest::hold_at_least`]).
    pub(crate) hold_at_least: Option<Duration>,
    /// Takes a fencing token; false once [`unfenced`](LockRequest::unfenced) was called.
    pub(crate) fenced: bool,
}

impl<'a> LockRequest<'a> {
    /// This request for a lease of `kind` (the attribute's options carry it).
    pub(crate) fn of_kind(mut self, kind: LeaseKind) -> Self {
        self.kind = kind;
        self
    }

    /// How long Redis keeps the lock if this process stops renewing it (crash, pause,
    /// partition). Defaults to the locker's default lease; at least 10 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long to wait for a busy lock before failing with [`LockError::Busy`]; zero fails
    /// at once. Defaults to the locker's default wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Whether to renew the lease in the background (every lease/3) while the guard lives.
    /// With `false` the lease is a hard maximum: the guard counts as lost when it ends.
    /// Defaults to the locker's setting (on).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = Some(on);
        self
    }

    /// First come, first served across every task of every process. By default a release
    /// hands the lock straight to the next waiter of the same process, without a round trip,
    /// up to 16 times in a row before another process gets its turn: faster, less fair.
    ///
    /// On Redis (one server, Sentinel, Cluster) and PostgreSQL a fair request waits in the
    /// store's queue under a name of its own, a release leaves the lock to the request that waited longest
    /// (for 200 ms only it can take it), and the wake-up names it, so only that request asks
    /// again. So requests get the lock in the order they first found it taken, whichever
    /// process they come from. A request that gives up or is cancelled leaves the queue at
    /// once; one whose process died holds the others up once, for at most 1.2 s (the window,
    /// then the 1 s the others sleep at most between attempts), and only while its place
    /// lasts (2 s after its last attempt).
    ///
    /// On RedLock, ZooKeeper, etcd and in memory, fair requests queue in the process first
    /// (first come, first served) and the store's queue orders processes: processes take
    /// turns in the order they started waiting.
    ///
    /// A fair release costs a round trip to the store every time.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    /// Keeps the lock for at least `hold` after it was taken, even when the guard is
    /// released (or dropped) sooner: for a job that must run once per window across a fleet
    /// whose schedulers fire at slightly different moments, so that an instance triggered a
    /// moment after the job finished elsewhere still finds the lock taken. Released later
    /// than that, the lock is released at once, as usual. Defaults to no minimum (zero).
    ///
    /// How the lock stays taken after an early release:
    /// - Where locks expire by themselves (one Redis server, Sentinel, Redis Cluster, RedLock,
    ///   PostgreSQL, in memory), the release sets the lock to expire at the end of the hold,
    ///   if it is still ours (one owner-checked call, the one a renewal makes), and stops
    ///   renewing it; the lock is then not deleted. The hold survives this process: if it
    ///   dies, the lock still frees itself at the end of the hold, not before.
    /// - On ZooKeeper and etcd, where a lock lives as long as the session that took it, the
    ///   lock is kept (and renewed) by the locker's background task and released at the end
    ///   of the hold. If this process dies before then, the lock frees itself when its
    ///   session ends (ZooKeeper: the session timeout; etcd: the lease's TTL), which may be
    ///   before the end of the hold.
    ///
    /// The local waiters of the key are not handed the lock meanwhile: they wait in the
    /// store like anyone else. `#[distributed_lock(hold_at_least = "30s")]` is this.
    ///
    /// # Errors
    /// [`acquire`](Self::acquire) fails with [`LockError::Config`] when `hold` is longer than
    /// a lease that is not renewed (`.watchdog(false)`): the lock would end before the hold.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let job = locker
    ///     .lock("job:nightly-report")
    ///     .hold_at_least(Duration::from_secs(30))
    ///     .try_acquire()
    ///     .await?;
    /// if let Some(guard) = job {
    ///     // ... the job, done in a second ...
    ///     guard.release().await?;
    /// }
    /// // 30 s after the job started, the lock is still taken: a late trigger skips it.
    /// assert!(locker.lock("job:nightly-report").try_acquire().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.hold_at_least = Some(hold);
        self
    }

    /// The same lock without a fencing token: for callers that never pass a token to the
    /// resource they protect (a cache rebuild, a job whose effects are idempotent), and want
    /// the cheapest lock the store offers. On Redis (one server, Sentinel, Cluster, RedLock)
    /// a free lock is taken with a native `SET NX PX`, one command and no script; a taken one
    /// goes the usual way (the script that queues waiters). Renewal, release, re-entry,
    /// waiting and handover inside the process are the same.
    ///
    /// The guard is an [`UnfencedGuard`](crate::UnfencedGuard), which has no `fence()`: the
    /// absence of a token is a type, not a zero that could be stored as one. Inside an
    /// unfenced hold, a fenced acquire of the same key fails with [`LockError::Config`]
    /// rather than re-enter without a token; a fenced waiter of the process is never handed
    /// an unfenced lease. `#[distributed_lock(fencing = false)]` is this.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("cache:rebuild").unfenced().acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn unfenced(self) -> crate::UnfencedRequest<'a> {
        crate::UnfencedRequest::new(LockRequest {
            fenced: false,
            ..self
        })
    }

    /// Takes the lock, waiting up to `wait` for the current holder to release it. Waiters in
    /// one process queue in order (first come, first served) and a release hands the lock
    /// straight to the next one.
    ///
    /// A nested acquire of a key that the surrounding scope already holds (inside a
    /// `#[distributed_lock]` body, or [`LockGuard::scope`]) re-enters without a round trip.
    ///
    /// Dropping the returned future at any point leaves no lock and no renewal behind.
    ///
    /// # Errors
    /// [`LockError::Busy`] when the lock stayed taken for the whole wait,
    /// [`LockError::Unavailable`] when Redis failed or did not answer within the operation
    /// timeout, [`LockError::InvalidKey`] and [`LockError::Config`] for bad input.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker
    ///     .lock("stock:sku-7")
    ///     .lease(Duration::from_secs(10))
    ///     .wait(Duration::from_millis(500))
    ///     .acquire()
    ///     .await?;
    /// assert!(guard.is_held());
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let opts = self.options()?;
        self.locker.acquire_with(self.key, opts).await
    }

    /// Takes the lock if it is free right now; `Ok(None)` when it is not. Never waits.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), but never [`LockError::Busy`].
    pub async fn try_acquire(mut self) -> Result<Option<LockGuard>, LockError> {
        self.wait = Some(Duration::ZERO);
        match self.acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn options(&self) -> Result<Options, LockError> {
        let inner = &self.locker.inner;
        let mut lease = self.lease.unwrap_or(inner.default_lease);
        check_lease(lease, "lease")?;
        let caps = inner.store.capabilities();
        if let Some(bound) = caps.max_lease {
            lease = lease.min(bound);
        }
        // What the lease holds is checked against what the engine offers here, once.
        let needs = match self.kind {
            LeaseKind::Exclusive => None,
            LeaseKind::Read => Some(Feature::ReadLocks),
            LeaseKind::Permits { .. } => Some(Feature::Semaphores),
        };
        if let Some(feature) = needs {
            store::require(feature, &caps, &inner.store.describe())?;
        }
        let watchdog = self.watchdog.unwrap_or(inner.default_watchdog);
        let hold_at_least = self.hold_at_least.filter(|hold| !hold.is_zero());
        if let Some(hold) = hold_at_least {
            if !watchdog && hold > lease {
                return Err(LockError::config(format!(
                    "hold_at_least of {hold:?} is longer than the lease of {lease:?}, which is \
                     not renewed (watchdog off): the lock would end before the hold; shorten \
                     the hold, lengthen the lease, or turn the watchdog on"
                )));
            }
        }
        Ok(Options {
            lease,
            wait: self.wait.unwrap_or(inner.default_wait),
            watchdog,
            fair: self.fair,
            kind: self.kind,
            hold_at_least,
            fenced: self.fenced,
        })
    }
}
