//! Locks without fencing tokens ([`LockRequest::unfenced`]): for callers that never hand a
//! token to the resource they protect, the cheapest lock the store offers (on Redis a native
//! `SET NX PX`, no script), with a guard that has no token to read, so that its absence can
//! never be mistaken for one.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::error::LockError;
use crate::primitives::guard::LockGuard;
use crate::primitives::request::LockRequest;

impl<'a> LockRequest<'a> {
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
    /// # Errors
    /// The acquire fails with [`LockError::Config`] for a read lock: unfenced reads are not
    /// offered (every reader's fence orders it among the writers, and the store takes it
    /// anyway), so neither is the downgrade of an unfenced write (its read would need a
    /// fence the unfenced hold does not have).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("cache:rebuild").unfenced().acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn unfenced(self) -> UnfencedRequest<'a> {
        UnfencedRequest::new(LockRequest {
            fenced: false,
            ..self
        })
    }
}

/// A request for a lock without a fencing token: [`LockRequest::unfenced`]. The same options
/// as a [`LockRequest`]; [`acquire`](Self::acquire) gives an [`UnfencedGuard`].
#[derive(Debug)]
#[must_use = "a request does nothing until it is acquired"]
pub struct UnfencedRequest<'a> {
    request: LockRequest<'a>,
}

impl<'a> UnfencedRequest<'a> {
    pub(crate) fn new(request: LockRequest<'a>) -> Self {
        UnfencedRequest { request }
    }

    /// As [`LockRequest::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        Self::new(self.request.lease(lease))
    }

    /// As [`LockRequest::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        Self::new(self.request.wait(wait))
    }

    /// As [`LockRequest::watchdog`].
    pub fn watchdog(self, on: bool) -> Self {
        Self::new(self.request.watchdog(on))
    }

    /// As [`LockRequest::fair`].
    pub fn fair(self, on: bool) -> Self {
        Self::new(self.request.fair(on))
    }

    /// As [`LockRequest::hold_at_least`].
    pub fn hold_at_least(self, hold: Duration) -> Self {
        Self::new(self.request.hold_at_least(hold))
    }

    /// Uses the settings of the locker's profile `name`; see
    /// [`LockRequest::profile`](crate::LockRequest::profile).
    pub fn profile(self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        Self::new(self.request.profile(name))
    }

    /// Takes the lock, as [`LockRequest::acquire`] does, without a fencing token.
    ///
    /// # Errors
    /// As [`LockRequest::acquire`].
    pub async fn acquire(self) -> Result<UnfencedGuard, LockError> {
        let guard = self.request.acquire().await?;
        Ok(UnfencedGuard { guard })
    }

    /// Takes the lock if it is free right now; `Ok(None)` when it is not. Never waits.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), but never [`LockError::Busy`].
    pub async fn try_acquire(self) -> Result<Option<UnfencedGuard>, LockError> {
        let guard = self.request.try_acquire().await?;
        Ok(guard.map(|guard| UnfencedGuard { guard }))
    }
}

/// A held lock without a fencing token ([`LockRequest::unfenced`]). Everything a
/// [`LockGuard`] does (lease renewal, [`lost`](Self::lost), release on every path) except
/// [`LockGuard::fence`]: there is no token to read, so none can be passed to a resource by
/// mistake. A resource that must refuse a paused holder's late writes needs a fenced lock.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let guard = locker.lock("cache:rebuild").unfenced().acquire().await?;
/// assert!(guard.is_held());
/// // guard.fence() does not exist: an unfenced guard has no token.
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// # async fn f(locker: leasehold::Locker) -> Result<(), leasehold::LockError> {
/// let guard = locker.lock("cache:rebuild").unfenced().acquire().await?;
/// let token = guard.fence(); // error: no method named `fence`
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct UnfencedGuard {
    guard: LockGuard,
}

impl UnfencedGuard {
    /// The key this guard holds, as given to [`Locker::lock`](crate::Locker::lock).
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// As [`LockGuard::is_held`].
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// As [`LockGuard::is_reentrant`].
    pub fn is_reentrant(&self) -> bool {
        self.guard.is_reentrant()
    }

    /// As [`LockGuard::lost`]: resolves when the lease is lost. Cancel-safe.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// As [`LockGuard::scope`]: inside `fut`, acquiring the same key unfenced through the
    /// same locker re-enters. A fenced acquire of the key there fails with
    /// [`LockError::Config`] (this hold has no fencing token to give it).
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        self.guard.scope(fut)
    }

    /// As [`LockGuard::release`].
    ///
    /// # Errors
    /// As [`LockGuard::release`].
    pub async fn release(self) -> Result<(), LockError> {
        self.guard.release().await
    }

    /// The guard inside, for the attribute's expansion.
    pub(crate) fn inner(&self) -> &LockGuard {
        &self.guard
    }

    /// The guard inside, by value, for the attribute's expansion.
    pub(crate) fn into_inner(self) -> LockGuard {
        self.guard
    }
}

impl fmt::Debug for UnfencedGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnfencedGuard")
            .field("key", &self.key())
            .field("held", &self.is_held())
            .field("reentrant", &self.is_reentrant())
            .finish_non_exhaustive()
    }
}
