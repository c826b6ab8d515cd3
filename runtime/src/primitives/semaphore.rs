//! Semaphores: at most `permits` holders of one key at a time, across processes. Every
//! permit has its own owner token and lease in the store, renewed by the watchdog, so a
//! holder that crashed gives its permits back when its lease ends; the guard, the renewals,
//! the loss detection and the release are the locks' own ([`LockGuard`] underneath).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::error::LockError;
use crate::kernel::options::check_permits;
use crate::primitives::guard::LockGuard;
use crate::primitives::request::LockRequest;
use crate::store::kind::LeaseKind;

/// One acquisition of permits being described: key, limit, lease, wait and watchdog. Made
/// by [`Locker::semaphore`](crate::Locker::semaphore).
#[derive(Debug)]
#[must_use = "a semaphore request does nothing until .acquire().await or .try_acquire().await"]
pub struct SemaphoreRequest<'a> {
    request: LockRequest<'a>,
    permits: u32,
}

impl<'a> LockRequest<'a> {
    /// This request's options for permits of the semaphore of `limit` permits under its key.
    pub(crate) fn into_semaphore(self, limit: u32) -> SemaphoreRequest<'a> {
        SemaphoreRequest {
            request: self,
            permits: limit,
        }
    }
}

impl SemaphoreRequest<'_> {
    /// How long the store keeps a permit if this process stops renewing it (crash, pause,
    /// partition). Defaults to the locker's default lease; at least 10 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.request = self.request.lease(lease);
        self
    }

    /// How long to wait for free permits before failing with [`LockError::Busy`]; zero
    /// fails at once. Defaults to the locker's default wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// Whether to renew the permits' lease in the background (every lease/3) while the guard
    /// lives. Defaults to the locker's setting (on).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.request = self.request.watchdog(on);
        self
    }

    /// A short label operators see beside this holder of permits
    /// ([`Locker::inspect_semaphore`](crate::Locker::inspect_semaphore)); see
    /// [`LockRequest::label`](crate::LockRequest::label), whose rules and errors it follows.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.request = self.request.label(label);
        self
    }

    /// Uses the settings of the locker's profile `name`: its lease, wait and watchdog as
    /// [`LockRequest::profile`](crate::LockRequest::profile) says, and its `limit`, when it
    /// sets one, instead of this request's number of permits (so every caller of the
    /// semaphore can take its limit from the one configuration). Settings given after
    /// `.profile(...)` override the profile's. A profile's `fair` is left out: a semaphore
    /// has no fair mode (its waiters queue first come, first served in their process).
    ///
    /// # Errors
    /// The acquire fails with [`LockError::Config`] when the locker has no such profile.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use leasehold::{Locker, Profile};
    ///
    /// let locker = Locker::builder()
    ///     .profile("partner-api", Profile::new().limit(3))
    ///     .build_in_memory()?;
    /// let permit = locker.semaphore("partner", 1).profile("partner-api").acquire().await?;
    /// assert_eq!(permit.limit(), 3);
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        let name = name.into();
        if let Some(limit) = self
            .request
            .profiles
            .get(&*name)
            .and_then(|profile| profile.limit)
        {
            self.permits = limit;
        }
        self.request = self.request.profile(name);
        self
    }

    /// Takes one permit, waiting up to `wait` for one to come free. Waiters of one process
    /// queue first come, first served.
    ///
    /// Dropping the returned future at any point leaves no permit and no renewal behind.
    ///
    /// # Errors
    /// [`LockError::Busy`] when no permit came free within the wait,
    /// [`LockError::Config`] when the limit is 0 or above [`MAX_PERMITS`](crate::MAX_PERMITS),
    /// when the semaphore's holders agreed on another limit, or on an engine without semaphores,
    /// [`LockError::InvalidKey`] for a bad key, [`LockError::Unavailable`] when the store
    /// failed or did not answer.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let permit = locker
    ///     .semaphore("partner-api", 8)
    ///     .lease(Duration::from_secs(10))
    ///     .wait(Duration::from_secs(2))
    ///     .acquire()
    ///     .await?;
    /// assert_eq!(permit.permits(), 1);
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<PermitGuard, LockError> {
        self.acquire_many(1).await
    }

    /// Takes `n` permits at once (all or none), waiting up to `wait` for them.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); [`LockError::Config`] also when `n` is 0 or more than
    /// the semaphore's permits.
    pub async fn acquire_many(self, n: u32) -> Result<PermitGuard, LockError> {
        let limit = self.permits;
        check_permits(limit, n)?;
        let request = self.request.of_kind(LeaseKind::Permits { limit, count: n });
        let opts = request.options()?;
        let guard = request.inner.acquire_with(request.key, opts).await?;
        Ok(PermitGuard {
            guard: guard.into(),
            limit,
            count: n,
        })
    }

    /// Takes one permit if one is free right now; `Ok(None)` when none is. Never waits.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), but never [`LockError::Busy`].
    pub async fn try_acquire(self) -> Result<Option<PermitGuard>, LockError> {
        self.try_acquire_many(1).await
    }

    /// Takes `n` permits if that many are free right now; `Ok(None)` when not. Never waits.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many), but never [`LockError::Busy`].
    pub async fn try_acquire_many(self, n: u32) -> Result<Option<PermitGuard>, LockError> {
        match self.wait(Duration::ZERO).acquire_many(n).await {
            Ok(permit) => Ok(Some(permit)),
            Err(LockError::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Held permits of a semaphore. While it lives (and its lease is not lost) its permits count
/// against the semaphore's limit.
///
/// - [`release`](Self::release) gives the permits back: `Ok(())` when they were still ours,
///   [`LockError::Lost`] when their lease had ended, [`LockError::Unavailable`] when the
///   store did not answer.
/// - Dropping the guard gives them back in the background (also on panic, `?` and
///   cancellation).
/// - The watchdog renews the lease while the guard lives, unless the request turned it off;
///   [`lost`](Self::lost) resolves if the lease is lost anyway.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let permits = locker.semaphore("exports", 4).acquire_many(3).await?;
/// assert_eq!((permits.permits(), permits.limit()), (3, 4));
/// assert!(permits.is_held());
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "the permits are given back as soon as the guard is dropped"]
pub struct PermitGuard {
    guard: LockGuard,
    limit: u32,
    count: u32,
}

impl PermitGuard {
    /// The semaphore's key, as given to [`Locker::semaphore`](crate::Locker::semaphore).
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u32 {
        self.count
    }

    /// The semaphore's limit (its number of permits).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The fencing token of this holder (one per guard, whatever its permits): strictly
    /// greater than the token of every earlier holder of the same semaphore, by any process,
    /// by the same rule as [`LockGuard::fence`] (also across restarts from a snapshot or AOF,
    /// failovers and the counter's expiry). Several holders hold permits at once, so a
    /// resource cannot refuse every smaller token as it does for a lock; it can refuse one
    /// below the oldest token it still honours, or tell the holders' writes apart and order
    /// them. A re-entered guard has its outer guard's token.
    pub fn fence(&self) -> u64 {
        self.guard.fence()
    }

    /// Whether the permits' lease is still trusted: not released, not reported lost, and
    /// within its validity on this process's monotonic clock.
    pub fn is_held(&self) -> bool {
        self.guard.is_held()
    }

    /// True when this guard re-entered permits that an enclosing scope holds (inside a
    /// `#[distributed_lock(permits = ...)]` body, or [`scope`](Self::scope)); releasing it
    /// does nothing, the outer guard gives them back.
    pub fn is_reentrant(&self) -> bool {
        self.guard.is_reentrant()
    }

    /// Resolves when the lease is lost (the watchdog found the permits gone, or their
    /// validity ran out without a renewal). Cancel-safe.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// Runs `fut` with these permits marked as held by the enclosing scope: inside it, a
    /// request for the same semaphore through the same locker re-enters instead of taking
    /// (or waiting for) more permits.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        self.guard.scope(fut)
    }

    /// Gives the permits back and wakes the semaphore's waiters. Goes through even if this
    /// future is dropped.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the permits were not ours any more (their lease ended), or
    /// this guard had been told of its loss; [`LockError::Unavailable`] when the store
    /// failed (the permits then come back when their lease ends).
    pub async fn release(self) -> Result<(), LockError> {
        self.guard.release().await
    }

    /// The lock guard underneath, for the attribute's runtime.
    pub(crate) fn guard(&self) -> &LockGuard {
        &self.guard
    }
}

impl fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("permits", &self.count)
            .field("limit", &self.limit)
            .field("held", &self.is_held())
            .field("reentrant", &self.is_reentrant())
            .finish_non_exhaustive()
    }
}

/// Who holds permits of one semaphore, from [`Locker::inspect_semaphore`](crate::Locker::inspect_semaphore). Owner tokens are
/// never shown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The semaphore's key, as given to [`Locker::semaphore`](crate::Locker::semaphore).
    pub key: String,
    /// The limit the holders agreed on; `None` when nobody holds a permit.
    pub limit: Option<u32>,
    /// Each holder, the soonest lease to end first.
    pub holders: Vec<PermitHolder>,
}

impl SemaphoreInfo {
    /// The permits held now, by all holders together.
    pub fn in_use(&self) -> u32 {
        self.holders.iter().map(|h| h.permits).sum()
    }
}

/// One holder of a semaphore's permits.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitHolder {
    /// How many permits it holds.
    pub permits: u32,
    /// Its remaining lease.
    pub remaining: Duration,
    /// Who holds them: its locker and that locker's description, since when, its label
    /// (see [`Holder`](crate::Holder) for what each engine can tell; in memory, nothing).
    pub holder: crate::inspect::Holder,
}
