//! [`LockGuard`]: proof of holding a lock, with its fencing token, its liveness, and release
//! on every path (explicit, drop, panic, cancellation).

use std::fmt;
use std::future::Future;

use crate::error::LockError;
use crate::kernel::hold::Hold;

/// A held lock. While it lives (and its lease is not lost) no other owner holds the same key.
///
/// - [`release`](Self::release) gives the lock back: `Ok(())` when it was still ours,
///   [`LockError::Lost`] when it was not (or this guard had been told of its loss), and
///   [`LockError::Unavailable`] when the store did not answer.
/// - Dropping the guard releases it in the background (also on panic, `?` and cancellation);
///   if the engine is unreachable then, that release is retried while the lease could be valid.
/// - The watchdog renews the lease while the guard lives, unless the request turned it off;
///   [`lost`](Self::lost) resolves if the lease is lost anyway (the engine unreachable for
///   longer than the lease, the process paused, the lock deleted by hand).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let guard = locker.lock("invoice:9").acquire().await?;
/// let fence = guard.fence(); // pass it to storage that rejects writes with older fences
/// assert!(guard.is_held());
/// guard.release().await?;
/// let next = locker.lock("invoice:9").acquire().await?;
/// assert!(next.fence() > fence);
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    hold: Hold,
}

impl From<Hold> for LockGuard {
    fn from(hold: Hold) -> Self {
        LockGuard { hold }
    }
}

impl LockGuard {
    /// The hold this guard is, for the primitives and checks built on it.
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// The key this guard holds, as given to [`Locker::lock`](crate::Locker::lock).
    pub fn key(&self) -> &str {
        self.hold.key()
    }

    /// The fencing token of this acquisition: strictly greater than the token of every
    /// earlier acquisition of the same key, by any process. Give it to the resource you
    /// modify and let it refuse writes that carry a smaller token than one it has seen: that
    /// turns a holder that lost its lease (pause, partition) into a refused write instead of
    /// a corrupted one.
    ///
    /// On Redis (and in memory), tokens keep increasing also after the server restarts from
    /// an RDB snapshot or an AOF, or fails over to a replica that missed the last increments:
    /// each reservation lifts the counter to at least the server clock in microseconds. This
    /// assumes the server clocks do not step back by more than the restart or failover takes,
    /// and that a key takes fewer than 10^6 tokens per second on average. On PostgreSQL a
    /// token is `slot × 32 + n`, the slot drawn from a sequence lifted to the server clock in
    /// 32 µs units, so it also survives a restored backup or a promoted standby. A token is
    /// positive and below 2^53, so storage that counts in doubles (Lua, JavaScript) compares
    /// it exactly.
    ///
    /// On ZooKeeper the token is the holder's znode creation zxid × 32 (plus the place of a
    /// holder the lease was handed to inside the process): zxids strictly increase across the
    /// ensemble, its restarts and leader changes, with no clock involved. It stays below 2^53
    /// while the ensemble's leader epoch is below 2^16. On etcd it is the holder's key's
    /// create revision × 32 (plus the same place): revisions strictly increase across the
    /// cluster, its restarts and leader changes.
    ///
    /// A locker's [`fence_offset`](crate::LockerBuilder::fence_offset) is added to every
    /// token.
    pub fn fence(&self) -> u64 {
        self.hold.fence()
    }

    /// Whether the lease is still trusted: not released, not reported lost, and within its
    /// validity on this process's monotonic clock (the last successful renewal's send time
    /// plus the lease, minus a safety margin).
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// True when this guard re-entered a lock that an enclosing scope holds; releasing it
    /// does nothing, the outer guard releases the lock.
    pub fn is_reentrant(&self) -> bool {
        self.hold.is_reentrant()
    }

    /// Resolves when the lease is lost: the watchdog found the lock taken over or gone, or
    /// the lease's validity ran out without a successful renewal (with the watchdog off, at
    /// the end of the lease). Cancel-safe; use it in `tokio::select!` to stop work in time.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker
    ///     .lock("report")
    ///     .lease(Duration::from_millis(50))
    ///     .watchdog(false)
    ///     .acquire()
    ///     .await?;
    /// tokio::select! {
    ///     _ = guard.lost() => println!("lease over; stop writing"),
    ///     _ = tokio::time::sleep(Duration::from_secs(5)) => unreachable!(),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        self.hold.lost().await
    }

    /// Runs `fut` with this lock marked as held by the enclosing scope: inside it, acquiring
    /// the same key through the same locker re-enters (no round trip, no deadlock) instead
    /// of waiting for itself. Other tasks, even on the same thread, are other owners.
    /// (`#[distributed_lock]` bodies run in such a scope already.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let outer = locker.lock("account:1").acquire().await?;
    /// outer
    ///     .scope(async {
    ///         let inner = locker.lock("account:1").acquire().await?;
    ///         assert!(inner.is_reentrant());
    ///         Ok::<_, leasehold::LockError>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        self.hold.scope(fut)
    }

    /// Gives the lock back: to the next waiter of this process if there is one (no round
    /// trip), else by deleting it in the engine and waking the waiters of other processes.
    /// The release goes through even if this future is dropped.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock was not ours any more: the lease had expired and
    /// maybe another owner took it (which is left untouched), or this guard had already been
    /// told its lease was lost (whatever the store answers now: the work since then ran
    /// unprotected). [`LockError::Unavailable`] when the store failed while the lease was
    /// still held; the lock then frees itself when the lease runs out.
    pub async fn release(self) -> Result<(), LockError> {
        self.hold.release().await
    }
}

/// What happens to the work done under a lock when its lease is lost while it runs: for
/// `#[distributed_lock]` (its `on_lost` argument) and for a
/// [`RouteRule`](crate::RouteRule).
///
/// Defaults to [`OnLost::Cancel`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the request's handler and answer 503 `{"error": "lock_lost"}`.
    #[default]
    Cancel,
    /// Let the handler run to its end.
    Continue,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("fence", &self.fence())
            .field("held", &self.is_held())
            .field("reentrant", &!self.hold.is_owner())
            .finish_non_exhaustive()
    }
}
