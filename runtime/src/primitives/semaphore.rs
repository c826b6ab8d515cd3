//! Semaphores: at most `permits` holders of one key at a time, across processes. Every
//! permit has its own owner token and lease in the store, renewed by the watchdog, so a
//! holder that crashed gives its permits back when its lease ends; the guard, the renewals,
//! the loss detection and the release are the locks' own ([`LockGuard`] underneath).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::options::Options;
use crate::engine::turns::ActiveTurn;
use crate::error::LockError;
use crate::locker::{LockRequest, Locker};
use crate::primitives::guard::LockGuard;
use crate::store::keys::{validate_key, LockKeys};
use crate::store::kind::LeaseKind;
use crate::store::PermitWaiter;

/// The most permits a semaphore may have: every permit held is an entry of its own in the
/// store (about 100 bytes on Redis, with its own lease), and taking or renewing `n` permits
/// touches `n` entries in one script call, so the bound keeps each call short.
pub const MAX_PERMITS: u32 = 10_000;

impl Locker {
    /// Describes taking permits of the semaphore `key`, which lets at most `permits` holders
    /// (across every process using the store) in at a time; finish with
    /// [`acquire`](SemaphoreRequest::acquire) (one permit) or
    /// [`acquire_many`](SemaphoreRequest::acquire_many).
    ///
    /// Every permit has its own owner token and lease, renewed by the watchdog while its
    /// guard lives: a holder that crashed gives its permits back when its lease ends, and
    /// nothing is left behind once nobody holds one (but the fence counter, for `fence_ttl`,
    /// as a lock's). Waiters wake on a release (no polling)
    /// and queue first come, first served inside the process. Across processes, a request
    /// for several permits that waits takes its turn: while it waits, the permits that come
    /// free are kept for it rather than taken by later requests (under steady load of single
    /// permits it would otherwise wait as long as the load lasts), and it leaves the turn
    /// however it stops waiting; one that vanishes without leaving (a killed process) holds
    /// the others back for 2 s at most. Each holder gets a fencing token
    /// ([`PermitGuard::fence`]). The limit is part of every
    /// request: while permits are held, a request with another limit fails with
    /// [`LockError::Config`] instead of changing it silently (the limit can change once no
    /// permit of the old one is held). A semaphore and a lock of the same key are
    /// independent.
    ///
    /// On one Redis server, Sentinel, Redis Cluster and in memory; other engines refuse it
    /// with [`LockError::Config`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let a = locker.semaphore("partner-api", 2).acquire().await?;
    /// let b = locker.semaphore("partner-api", 2).acquire().await?;
    /// assert!(locker.semaphore("partner-api", 2).try_acquire().await?.is_none());
    /// drop(a); // a permit comes back
    /// let c = locker.semaphore("partner-api", 2).acquire().await?;
    /// # drop((b, c));
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, key: impl Into<String>, permits: u32) -> SemaphoreRequest<'_> {
        SemaphoreRequest {
            request: self.lock(key),
            permits,
        }
    }

    /// Who holds permits of the semaphore `key` now: the limit they agreed on and each
    /// holder's permits and remaining lease (never owner tokens). Works on every engine
    /// with semaphores, in memory too.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the store fails, [`LockError::InvalidKey`] for a bad
    /// key, [`LockError::Config`] on an engine without semaphores.
    pub async fn inspect_semaphore(&self, key: &str) -> Result<SemaphoreInfo, LockError> {
        validate_key(key)?;
        let keys = LockKeys::semaphore(&self.inner.prefix, key);
        let state = self.inner.store.inspect_permits(&keys).await?;
        Ok(SemaphoreInfo {
            key: key.to_owned(),
            limit: state.limit,
            holders: state
                .holders
                .into_iter()
                .map(|(permits, remaining)| PermitHolder { permits, remaining })
                .collect(),
        })
    }

    /// Re-enter a held permit of the scope, else queue in the process, then contend in the
    /// store.
    pub(crate) async fn acquire_permits_traced(
        &self,
        user_key: String,
        limit: u32,
        count: u32,
        opts: Options,
        waited: &mut bool,
    ) -> Result<LockGuard, LockError> {
        validate_key(&user_key)?;
        check_permits(limit, count)?;
        let inner = &self.inner;
        let keys = LockKeys::semaphore(&inner.prefix, &user_key);
        if let Some(reentered) = self.reenter(&user_key, &keys, &opts) {
            return reentered;
        }
        let deadline = Instant::now() + opts.wait;
        // First come, first served in the process: only the front of the line contends in
        // the store; the next one follows as soon as it got its permits or gave up.
        let line = inner.semaphore_lines.enter(keys.lock());
        let _turn = match line.front().try_lock() {
            Ok(turn) => turn,
            Err(_) if opts.wait.is_zero() => return Err(LockError::Busy { retry_after: None }),
            Err(_) => {
                *waited = true;
                match tokio::time::timeout_at(deadline, line.front().lock()).await {
                    Ok(turn) => turn,
                    Err(_) => return Err(LockError::Busy { retry_after: None }),
                }
            }
        };
        // A request for several permits that waits takes its turn in the store (see
        // `Store::acquire_permits`): single permits that come free are kept for it. Its seat
        // leaves the queue however it stops waiting without them (Busy, an error,
        // cancellation); granted, the store took it out.
        let waiter = (count > 1 && deadline > Instant::now()).then(|| PermitWaiter {
            name: waiter_name(),
            until: deadline,
        });
        let turn = ActiveTurn::own(inner, &keys, opts.kind, waiter);
        self.contend(user_key, &keys, opts, deadline, turn, waited)
            .await
    }
}

/// A random name for a waiter's place in a semaphore's queue.
fn waiter_name() -> u128 {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).expect("the OS random source failed");
    u128::from_le_bytes(raw)
}

/// Checks a semaphore's limit and the permits asked for.
fn check_permits(limit: u32, count: u32) -> Result<(), LockError> {
    if limit == 0 {
        return Err(LockError::config(
            "a semaphore of 0 permits could never be acquired; give it at least 1 (with 1 it \
             is an exclusive lock)",
        ));
    }
    if limit > MAX_PERMITS {
        return Err(LockError::config(format!(
            "a semaphore of {limit} permits is above the limit of {MAX_PERMITS}: every permit \
             held is an entry with its own lease in the store; for a rate rather than a \
             number of holders, use a rate limiter"
        )));
    }
    if count == 0 {
        return Err(LockError::config(
            "acquire_many(0) would take no permit; ask for at least 1",
        ));
    }
    if count > limit {
        return Err(LockError::config(format!(
            "acquire_many({count}) asks for more permits than the semaphore has ({limit}), \
             which could never be granted"
        )));
    }
    Ok(())
}

/// One acquisition of permits being described: key, limit, lease, wait and watchdog. Made
/// by [`Locker::semaphore`].
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

    /// Takes one permit, waiting up to `wait` for one to come free. Waiters of one process
    /// queue first come, first served.
    ///
    /// Dropping the returned future at any point leaves no permit and no renewal behind.
    ///
    /// # Errors
    /// [`LockError::Busy`] when no permit came free within the wait,
    /// [`LockError::Config`] when the limit is 0 or above [`MAX_PERMITS`], when the
    /// semaphore's holders agreed on another limit, or on an engine without semaphores,
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
        let request = self.request.of_kind(LeaseKind::Permits { limit, count: n });
        let opts = request.options()?;
        let guard = request.locker.acquire_with(request.key, opts).await?;
        Ok(PermitGuard {
            guard,
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
    /// The semaphore's key, as given to [`Locker::semaphore`].
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
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
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

/// Who holds permits of one semaphore, from [`Locker::inspect_semaphore`]. Owner tokens are
/// never shown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInfo {
    /// The semaphore's key, as given to [`Locker::semaphore`].
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitHolder {
    /// How many permits it holds.
    pub permits: u32,
    /// Its remaining lease.
    pub remaining: Duration,
}

#[cfg(test)]
mod tests {
    use super::check_permits;
    use crate::LockError;

    #[test]
    fn hostile_limits_are_config_errors() {
        for (limit, count, says) in [
            (0, 1, "0 permits"),
            (super::MAX_PERMITS + 1, 1, "above the limit"),
            (u32::MAX, 1, "above the limit"),
            (8, 0, "acquire_many(0)"),
            (8, 9, "more permits than the semaphore has"),
        ] {
            let e = check_permits(limit, count).unwrap_err();
            assert!(matches!(e, LockError::Config { .. }), "{e:?}");
            assert!(e.to_string().contains(says), "{e}");
        }
        assert!(check_permits(super::MAX_PERMITS, super::MAX_PERMITS).is_ok());
    }
}
