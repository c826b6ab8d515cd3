//! Where locks are stored: one Redis node, or process memory. Every backend speaks the same
//! small protocol (acquire, release, hand over, renew, wait for a release), so the locker
//! above it does not care which one it talks to.

mod batch;
pub(crate) mod memory;
pub(crate) mod redis;
pub(crate) mod redlock;
mod revive;
#[cfg(test)]
pub(crate) mod scripted;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::LockError;
use crate::key::LockKeys;
use crate::token::OwnerToken;

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

/// A storage for locks.
pub(crate) enum Backend {
    Redis(redis::RedisBackend),
    RedLock(redlock::RedLockBackend),
    Memory(memory::MemoryBackend),
    /// A store whose answers a test scripts (see [`scripted`]).
    #[cfg(test)]
    Scripted(scripted::ScriptedBackend),
}

impl Backend {
    /// The session of the connection leases are granted over, for backends where one
    /// connection's drop can mean lost locks (a single server that may restart empty).
    /// RedLock tolerates a minority of nodes losing their data; memory never loses it.
    pub(crate) fn session(&self) -> Option<crate::lease::Session> {
        match self {
            Backend::Redis(b) => b.session(),
            #[cfg(test)]
            Backend::Scripted(b) => b.session(),
            _ => None,
        }
    }

    /// Takes the lock if it is free, reserving `fences` fencing tokens. One round trip.
    ///
    /// The future is boxed: the deployments' futures are deep types (RedLock joins one per
    /// node), and boxing here keeps the acquire future above it small.
    pub(crate) fn acquire<'a>(
        &'a self,
        req: &'a AcquireRequest<'_>,
    ) -> Pin<Box<dyn Future<Output = Result<Attempt, LockError>> + Send + 'a>> {
        Box::pin(async move {
            match self {
                Backend::Redis(b) => b.acquire(req).await,
                Backend::RedLock(b) => b.acquire(req).await,
                Backend::Memory(b) => Ok(b.acquire(req)),
                #[cfg(test)]
                Backend::Scripted(b) => b.acquire(req).await,
            }
        })
    }

    /// Deletes the lock if `token` still owns it and wakes its waiters. `Ok(false)` when it
    /// was not ours any more.
    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        match self {
            Backend::Redis(b) => b.release(keys, token).await,
            Backend::RedLock(b) => b.release(keys, token).await,
            Backend::Memory(b) => Ok(b.release(keys, token)),
            #[cfg(test)]
            Backend::Scripted(b) => b.release(keys, token).await,
        }
    }

    /// Extends each lease that its token still owns; one entry per renewal, in order.
    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let yes_no = |flags: Vec<bool>| {
            flags
                .into_iter()
                .map(|ok| if ok { Renewed::Yes } else { Renewed::No })
                .collect()
        };
        match self {
            Backend::Redis(b) => b.renew(batch).await,
            Backend::RedLock(b) => Ok(b.renew(batch).await),
            Backend::Memory(b) => Ok(yes_no(b.renew(batch))),
            #[cfg(test)]
            Backend::Scripted(b) => b.renew(batch).await.map(yes_no),
        }
    }

    /// Starts listening for releases of one lock. Returns once the subscription is active,
    /// so a release that happens after this returns is never missed.
    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        match self {
            Backend::Redis(b) => b.subscribe(keys).await,
            Backend::RedLock(b) => b.subscribe(keys).await,
            Backend::Memory(b) => Ok(b.subscribe(keys)),
            #[cfg(test)]
            Backend::Scripted(b) => b.subscribe(keys).await,
        }
    }
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
