//! [`Locker`], the handle users keep: where locks live, their defaults, and the entry point
//! of every primitive.

mod builder;
mod close;
pub(crate) mod defaults;
pub(crate) mod global;
mod health;
mod operators;
mod primitives;
mod profiles;
pub(crate) mod sites;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::kernel::state::{Inner, LockerSettings};
use crate::primitives::profile::Profiles;
use crate::store::identity::Identity;
use crate::store::kind::LeaseKind;
use crate::store::{self, Capabilities, Connection, Store};

pub(crate) use crate::primitives::request::LockRequest;
pub use builder::LockerBuilder;
pub use defaults::*;

/// A handle to a lock store (one of the engines: Redis, RedLock, Redis Cluster, Sentinel,
/// ZooKeeper, etcd, PostgreSQL, or process memory) with default lock options.
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
    /// The named profiles its requests may use
    /// ([`LockRequest::profile`](crate::LockRequest::profile)).
    pub(crate) profiles: Arc<Profiles>,
}

impl Locker {
    /// Connects to one Redis server with the default options. Accepts `redis://`,
    /// `rediss://` (TLS, with the `tls` feature) and `redis+unix://` URLs. For the other
    /// engines use [`builder`](Self::builder) (or [`Deployment::parse`](crate::Deployment::parse)
    /// with [`LockerBuilder::deployment`], which reads any engine's URL).
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

    /// A locker whose locks live in this process's memory, with the same semantics as the
    /// engines (leases, fences, wake-ups, the watchdog): for tests, and for programs that run
    /// as one process. Each call makes a separate store; clones share it.
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

    pub(crate) fn with_store(store: Arc<dyn Store>, b: LockerBuilder) -> Locker {
        let identity = Arc::new(Identity::new(b.service_name.as_deref()));
        Locker::with_identity(Connection::Ready(store), b, identity)
    }

    /// A locker on `engine`, which was connected (or is being connected) with `identity`'s
    /// locker id.
    pub(crate) fn with_identity(
        engine: Connection,
        b: LockerBuilder,
        identity: Arc<Identity>,
    ) -> Locker {
        let settings = LockerSettings {
            prefix: b.prefix,
            default_lease: b.default_lease,
            default_wait: b.default_wait,
            default_watchdog: b.default_watchdog,
            retry_unavailable: b.retry_unavailable,
            fence_ttl: b.fence_ttl,
            fence_offset: b.fence_offset,
            drift: b.drift,
            trace_keys: b.trace_keys,
        };
        Locker {
            inner: Inner::new(engine, identity, settings),
            profiles: Arc::new(b.profiles),
        }
    }

    /// Starts describing an acquisition of `key`; finish with
    /// [`acquire`](LockRequest::acquire) or [`try_acquire`](LockRequest::try_acquire).
    ///
    /// Any non-empty string up to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes is a key; braces,
    /// colons and other bytes are escaped, so a key can never name another lock's data.
    pub fn lock(&self, key: impl Into<String>) -> LockRequest<'_> {
        LockRequest::new(&self.inner, &self.profiles, key.into())
    }

    /// Describes one acquisition of the read side of a read-write lock on `key`: any number
    /// of readers hold it together, and no writer while they do. Every reader has a lease of
    /// its own, renewed by the watchdog, so a reader that crashed frees its share when its
    /// lease runs out. A writer that waits for readers blocks new readers (writers do not
    /// starve): a new reader waits while a writer holds the lock or waits for it, so readers
    /// may wait as long as writers keep queueing. The guard's [`fence`](crate::LockGuard::fence) is
    /// at or above every fence any writer of the key had been given when the reader got in,
    /// and below every later writer's, so a resource can tell which version a reader saw (on
    /// ZooKeeper and etcd it is the last writer's fence; on Redis and in memory the fence
    /// counter lifted to the server clock in microseconds, as writers' are, so that it never
    /// goes back after a restore, a failover or the counter's expiry; on PostgreSQL a fence of
    /// the reader's own, drawn by the writers' rule).
    ///
    /// Inside a scope holding a read of the key, a read re-enters at once; a write inside a
    /// held read is refused at once ([`LockError::Config`]), since it would wait for itself.
    ///
    /// **Downgrading.** A read inside a scope holding the write lock of the key is granted at
    /// once, as a hold of its own on the write's lease (same fence; not
    /// [`is_reentrant`](crate::LockGuard::is_reentrant)): the write guard can then be
    /// released and the read goes on with no gap. The lock stays taken, exclusively, until
    /// the read is released too: writers that wait (of any process) stay blocked, and so do
    /// new readers, until then. (A downgrade that let other readers in at once would need
    /// every engine to turn its writer into a reader in one step; on ZooKeeper and etcd a
    /// writer queued behind the holder would then get in beside the downgraded reader.)
    /// Whichever of the two guards ends last, by release or drop, ends the lease, and keeps
    /// the [`hold_at_least`](LockRequest::hold_at_least) of both: the lock stays taken until
    /// the later of their holds ends. The read's scope holds a read: a write inside it is
    /// refused as inside any read (and so is a write inside the write's scope once its guard
    /// was released and only the read holds on).
    ///
    /// A read lock has no fair mode and no unfenced one: [`fair(true)`](LockRequest::fair)
    /// and [`unfenced()`](LockRequest::unfenced) on it are refused with
    /// [`LockError::Config`] (a [profile](LockRequest::profile)'s `fair` is left out).
    /// [`hold_at_least`](LockRequest::hold_at_least) keeps the reader's share, writers
    /// out, until the hold ends.
    ///
    /// On every engine whose [`Capabilities::read_locks`](crate::Capabilities::read_locks)
    /// says so; the others refuse it with [`LockError::Config`].
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
        self.lock(key).of_kind(LeaseKind::Read)
    }

    /// Describes one acquisition of the write side of a read-write lock on `key`: the same
    /// as [`lock`](Self::lock) (a write lock and a plain lock on one key exclude each
    /// other), which also waits for the key's readers to leave.
    pub fn write_lock(&self, key: impl Into<String>) -> LockRequest<'_> {
        self.lock(key)
    }

    /// The prefix of every name this locker writes in its engine (Redis keys, etcd keys,
    /// ZooKeeper container znodes, PostgreSQL rows' keys): `PREFIX:lock:{key}`.
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

    /// Connects to the one deployment the config names (`url`, `redlock`, `cluster`,
    /// `[sentinel]`, `zookeeper`, `etcd` or `postgres`; see
    /// [`LockConfig::deployment`](crate::LockConfig::deployment)) with the config's settings;
    /// unset ones keep the builder's defaults. The route rules are for
    /// [`RouteLocks::from_config`](crate::RouteLocks::from_config).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), leasehold::LockError> {
    /// use leasehold::{LockConfig, Locker};
    /// let config = LockConfig::from_toml_file("leasehold.toml")?.with_env()?;
    /// let locker = Locker::from_config(&config).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] when the config names no deployment, or several, or a setting
    /// is invalid; [`LockError::Unavailable`] when the engine cannot be reached.
    #[cfg(feature = "serde")]
    pub async fn from_config(config: &crate::LockConfig) -> Result<Locker, LockError> {
        config.builder()?.build().await
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

    /// How this locker describes itself to operators: its locker id, service name, host,
    /// process id, start and version, as it stores them in the engine (see
    /// [`LockerBuilder::service_name`]). Inspection shows it beside every lock it holds or
    /// waits for.
    pub fn description(&self) -> &crate::inspect::LockerDescription {
        &self.inner.identity.description
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
