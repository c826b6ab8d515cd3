//! Where locks are stored. Everything above this module talks to a [`Store`]: one small
//! protocol (acquire, release, renew, wait for a release, the session leases are granted
//! over) that every engine speaks, so the locker, its queues, its watchdog and the web
//! integration never learn which engine holds their locks. Each engine lives in a module of
//! its own and imports no sibling; [`Deployment`] names one, and is the only place that
//! connects them.
//!
//! The trait is crate-private on purpose: the protocol still grows with the primitives to
//! come (reserved fence ranges for in-process handovers, the cross-process queue of
//! waiters), and a public trait would freeze it. The in-memory store is the smallest
//! complete engine, and the one to read first.

mod deployment;
#[cfg(feature = "etcd")]
mod etcd;
mod join;
mod lazy;
pub(crate) mod memory;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod redis;
#[cfg(test)]
pub(crate) mod scripted;
mod settings;
#[cfg(feature = "zookeeper")]
mod zookeeper;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::LockError;
use crate::key::LockKeys;
use crate::lease::Session;
use crate::token::OwnerToken;

pub(crate) use deployment::Deployment;
pub(crate) use join::join_all;
pub(crate) use lazy::LazyStore;
pub(crate) use settings::Settings;

/// A store in this process's memory, with the semantics of the others.
pub(crate) fn in_memory() -> std::sync::Arc<dyn Store> {
    std::sync::Arc::new(memory::MemoryStore::new())
}

/// What an acquire attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The lock was free and is ours now; the fencing tokens `top - reserved + 1 ..= top`
    /// are ours to hand out.
    Granted { top: u64 },
    /// Someone else holds it; their remaining lease, when known.
    Held { remaining: Option<Duration> },
}

/// One acquire attempt.
pub(crate) struct AcquireRequest<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a OwnerToken,
    pub(crate) lease: Duration,
    /// How much of the lease the client counts on, from `sent`; RedLock refuses a quorum
    /// reached later.
    pub(crate) validity: Duration,
    /// When the request was sent: the lease's validity counts from here.
    pub(crate) sent: tokio::time::Instant,
    pub(crate) fence_ttl: Duration,
    /// How many fencing tokens to reserve: one for this holder, plus one for each holder of
    /// this process it may hand the lock to before releasing it.
    pub(crate) fences: u64,
    /// How long this contender still waits if the lock is taken: the store queues this
    /// process for that long, so that a release lets it in. Zero: it will not wait.
    pub(crate) interest: Duration,
    /// This contender may be queued already (an earlier attempt of this wait was).
    pub(crate) queued: bool,
}

/// One lease to renew in a watchdog batch.
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a OwnerToken,
    pub(crate) lease: Duration,
    /// A read lease (one of the lock's shared holders), not the exclusive one.
    pub(crate) shared: bool,
}

/// What a renewal found for one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Extended.
    Yes,
    /// Not ours any more: the lease is lost.
    No,
    /// Could not tell (nodes failed or did not answer): try again while the lease is valid.
    Unknown,
}

/// The future of one store call. Boxed: engines' futures are deep types (RedLock joins one
/// per node, clusters route), and boxing here keeps every future above the store small.
pub(crate) type StoreFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, LockError>> + Send + 'a>>;

/// A lock engine. Every call is bounded by the engine's operation timeout and fails with
/// [`LockError::Unavailable`] when the engine did not answer.
pub(crate) trait Store: Send + Sync + 'static {
    /// Where the locks are, for `Debug` and messages: never credentials.
    fn describe(&self) -> String;

    /// The session leases are granted over, for engines where its end can mean lost locks
    /// (a single server that may restart empty). `None`: only the clock and renewals tell.
    fn session(&self) -> Option<Session> {
        None
    }

    /// The longest lease this engine can honour, if it bounds leases: on ZooKeeper the
    /// session is the lease, and a lease longer than the session timeout could outlive it.
    /// Requests ask for at most this much.
    fn lease_bound(&self) -> Option<Duration> {
        None
    }

    /// Whether a lock frees itself when its lease runs out (a Redis key's TTL). False where
    /// it lives as long as a session does (ZooKeeper): a lease that lapses without the
    /// watchdog is then given back by the locker.
    fn locks_expire(&self) -> bool {
        true
    }

    /// Takes the lock if it is free, reserving `req.fences` fencing tokens. One round trip.
    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt>;

    /// Deletes the lock if `token` still owns it and wakes its waiters. `Ok(false)` when it
    /// was not ours any more.
    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool>;

    /// Whether the engine queues waiting processes and lets a release go to the one that
    /// waited longest (what a fair lock relies on).
    fn queues_processes(&self) -> bool {
        true
    }

    /// Takes a read (shared) lock if no writer holds the lock or waits for it: the lease is
    /// this reader's own, and `Granted { top }` carries the fence of the last writer (at
    /// least 1). `req.fences` and `req.interest` are not used. Engines without read locks
    /// refuse with [`LockError::Config`].
    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        let _ = req;
        Box::pin(std::future::ready(Err(self.no_read_locks())))
    }

    /// Ends a read lease if `token` still holds it, waking the lock's waiters when it was
    /// the last reader. `Ok(false)` when it was not held any more.
    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        let _ = (keys, token);
        Box::pin(std::future::ready(Err(self.no_read_locks())))
    }

    /// The error of an engine without read locks.
    fn no_read_locks(&self) -> LockError {
        LockError::config(format!(
            "read locks are not supported on {} yet; they are on one Redis server, Sentinel, \
             Redis Cluster, ZooKeeper, etcd and in memory",
            self.describe()
        ))
    }

    /// Extends each lease that its token still owns; one entry per renewal, in order.
    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>>;

    /// Starts listening for releases of one lock. Resolves once the subscription is active,
    /// so a release that happens after it resolved is never missed.
    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription>;

    /// The contender at the front of this process's queue for `keys` stopped contending
    /// without the lock (gave up, timed out, was cancelled): an engine that queues
    /// contenders by itself (ZooKeeper's znodes) leaves that queue now. Never blocks.
    fn withdraw(&self, keys: &LockKeys) {
        let _ = keys;
    }

    /// The operator's part (inspection, listing, forced release), where the engine has one;
    /// otherwise a [`LockError::Config`] that says why.
    fn admin(&self) -> Result<&dyn Admin, LockError> {
        Err(LockError::config(format!(
            "inspecting locks is not supported on {}",
            self.describe()
        )))
    }
}

impl dyn Store {
    /// Ends `lease` in the store: a read lease leaves the readers, an exclusive one deletes
    /// the lock; `Ok(false)` when it was not held any more.
    pub(crate) fn end_lease<'a>(&'a self, lease: &'a crate::lease::Lease) -> StoreFuture<'a, bool> {
        if lease.shared {
            self.release_shared(&lease.keys, &lease.token)
        } else {
            self.release(&lease.keys, &lease.token)
        }
    }
}

/// What an engine knows of one lock, for operators. Owner tokens are never part of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockState {
    pub(crate) held: bool,
    pub(crate) remaining: Option<Duration>,
    pub(crate) waiters: bool,
    pub(crate) waiting_processes: u64,
    pub(crate) last_fence: Option<u64>,
}

/// Inspection and forced release, for operators and the CLI.
pub(crate) trait Admin: Send + Sync {
    /// The state of one lock.
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState>;

    /// The keys (as users gave them) of the locks stored under `prefix`, held or recently
    /// held; the caller filters and inspects them.
    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>>;

    /// Deletes a lock whoever holds it, and wakes its waiters; true when there was one.
    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool>;
}

/// A live subscription to one lock's releases. Dropping it ends the interest; the backend
/// unsubscribes when nobody else in the process listens to the same lock.
pub(crate) struct WakeSubscription {
    rx: watch::Receiver<u64>,
    _interest: Option<Box<dyn Send + Sync>>,
}

impl WakeSubscription {
    pub(crate) fn new(rx: watch::Receiver<u64>, interest: Option<Box<dyn Send + Sync>>) -> Self {
        WakeSubscription {
            rx,
            _interest: interest,
        }
    }

    /// Resolves at the next release seen after the previous call (or after subscribing).
    pub(crate) async fn released(&mut self) {
        if self.rx.changed().await.is_err() {
            // The backend is gone; never resolve, the caller's timers take over.
            std::future::pending::<()>().await;
        }
    }
}
