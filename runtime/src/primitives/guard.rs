//! [`LockGuard`]: proof of holding a lock, with its fencing token, its liveness, and release
//! on every path (explicit, drop, panic, cancellation).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Span;

use crate::error::LockError;
use crate::kernel::lease::Lease;
use crate::kernel::observe;
use crate::kernel::reentrant;
use crate::kernel::state::Inner;
use crate::store::kind::LeaseKind;

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
    inner: Arc<Inner>,
    lease: Arc<Lease>,
    fence: u64,
    /// `leasehold.hold`, open while the guard lives.
    span: Span,
    since: Instant,
    /// False for a re-entered guard: the outer guard owns the lock and releases it.
    owner: bool,
    /// A read lock taken inside the write lock of the same key (a downgrade): it holds the
    /// lease on with the write guard, and the last of the two to be done ends it.
    downgraded: bool,
    /// What this guard holds, as its scope tells re-entry: the lease's kind for a holder, a
    /// read for a downgrade (the write's lease, held as a read), and for a re-entered guard
    /// what the scope it re-entered holds.
    kind: LeaseKind,
    released: bool,
    /// The lock stays taken until then, even if released sooner
    /// ([`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least)).
    hold_until: Option<Instant>,
}

impl LockGuard {
    /// A guard for a lease that this holder got (acquired, or handed over); keeps the
    /// lease on the renewal schedule.
    pub(crate) fn new(inner: Arc<Inner>, lease: Arc<Lease>, fence: u64) -> Self {
        let kind = lease.kind;
        lease.begin_holding(fence);
        if lease.watchdog {
            inner.start_background();
            inner.schedule.watch(&lease);
        } else if !inner.store.capabilities().leases_expire {
            inner.start_background();
            inner.schedule.watch_expiry(&lease);
        }
        observe::hold_started();
        LockGuard {
            inner,
            lease,
            fence,
            // Opened by `open_span` in the caller's context, beside the acquire span.
            span: Span::none(),
            since: Instant::now(),
            owner: true,
            downgraded: false,
            kind,
            released: false,
            hold_until: None,
        }
    }

    /// Opens this holder's span in the current context: `leasehold.hold` for a holder, the
    /// caller's own span for a re-entered guard. Called once the acquire span has closed, so
    /// that the two are siblings under the caller's span.
    pub(crate) fn open_span(&mut self) {
        self.span = if self.owner {
            observe::hold_span(
                self.inner.trace_keys,
                &self.lease.user_key,
                self.traced_fence(),
            )
        } else {
            Span::current()
        };
    }

    /// A guard for a lock that the surrounding scope already holds (as `kind`).
    pub(crate) fn reentered(
        inner: Arc<Inner>,
        lease: Arc<Lease>,
        fence: u64,
        kind: LeaseKind,
    ) -> Self {
        LockGuard {
            inner,
            lease,
            fence,
            span: Span::none(),
            since: Instant::now(),
            owner: false,
            downgraded: false,
            kind,
            released: false,
            hold_until: None,
        }
    }

    /// A read lock taken inside a held write lock of the same key: a downgrade. It shares
    /// the write's lease (and fence), and keeps the lock when the write guard is released:
    /// the lease ends once both are done, so reading goes on with no gap and no writer gets
    /// in meanwhile. Its scope holds a read: a write inside it is refused, as inside any
    /// read.
    pub(crate) fn downgraded(inner: Arc<Inner>, lease: Arc<Lease>, fence: u64) -> Self {
        lease.join_downgrade();
        let mut guard = LockGuard::reentered(inner, lease, fence, LeaseKind::Read);
        guard.downgraded = true;
        guard
    }

    /// Keeps the lock taken for at least `hold` from now, whenever this guard is released.
    /// A re-entered guard releases nothing, so it holds nothing either; the guards of a
    /// downgrade (the write, its reads) each keep their hold, whichever of them ends the
    /// lease.
    pub(crate) fn hold_at_least(&mut self, hold: Duration) {
        if self.owner || self.downgraded {
            self.hold_until = Some(Instant::now() + hold);
        }
    }

    /// The fence for traces: none for an unfenced lease, whose tokens are local numbers.
    pub(crate) fn traced_fence(&self) -> Option<u64> {
        self.lease.fenced.then_some(self.fence)
    }

    /// The `leasehold.hold` span of this holder.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// This guard as a lock held by an enclosing scope (see [`LockGuard::scope`]).
    pub(crate) fn held_entry(&self) -> reentrant::Held {
        reentrant::Held {
            locker: self.inner.id,
            lease: self.lease.clone(),
            fence: self.fence,
            kind: self.kind,
        }
    }

    /// The lock's name in the store (`P:lock:{K}`), for fence checks made in the store.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn store_key(&self) -> &str {
        self.lease.keys.lock()
    }

    /// The fence as the store handed it out (without the locker's
    /// [`fence_offset`](crate::LockerBuilder::fence_offset)), for fence checks made in the
    /// store.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn store_fence(&self) -> u64 {
        self.fence - self.inner.fence_offset
    }

    /// The store that holds this guard's lock, for checks only its engine can make (a
    /// PostgreSQL fence check refuses another engine's guard).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn store(&self) -> &dyn crate::store::Store {
        &*self.inner.store
    }

    /// The owner token of this guard's lease, for store calls made on its behalf.
    pub(crate) fn owner_token(&self) -> &crate::store::token::OwnerToken {
        &self.lease.token
    }

    /// The error for this guard's lost lease, with the reason.
    pub(crate) fn lost_error(&self) -> LockError {
        LockError::Lost {
            reason: self.lease.loss_reason(),
        }
    }

    /// Reports that the lease was lost while this guard held it.
    pub(crate) fn report_lost(&self, why: &'static str) {
        self.lease.report_lost(why);
    }

    /// The store (or a fenced resource) showed this guard's lease is over: lost for every
    /// guard of the lease.
    pub(crate) fn refused_by_store(&self, why: &'static str) {
        self.lease.mark_lost();
        self.lease.report_lost(why);
    }

    /// The key this guard holds, as given to [`Locker::lock`](crate::Locker::lock).
    pub fn key(&self) -> &str {
        &self.lease.user_key
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
        self.fence
    }

    /// Whether the lease is still trusted: not released, not reported lost, and within its
    /// validity on this process's monotonic clock (the last successful renewal's send time
    /// plus the lease, minus a safety margin).
    pub fn is_held(&self) -> bool {
        !self.released && self.lease.is_held_by(self.fence)
    }

    /// True when this guard re-entered a lock that an enclosing scope holds; releasing it
    /// does nothing, the outer guard releases the lock.
    pub fn is_reentrant(&self) -> bool {
        !self.owner && !self.downgraded
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
        self.lease.lost_for(Some(self.fence)).await
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
        reentrant::scope(self.held_entry(), fut)
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
    pub async fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        let last = match (self.owner, self.downgraded) {
            // The write guard of a downgrade: the read guards hold on, and the last of them
            // ends the lease.
            (true, _) => self.lease.writer_done(),
            (false, true) => self.lease.leave_downgrade(),
            (false, false) => return Ok(()),
        };
        if !last {
            // The guard that ends the lease keeps this one's hold too.
            self.lease.keep_hold(self.hold_until);
            return match self.lease.is_held_by(self.fence) {
                true => Ok(()),
                false => Err(self.lost_error()),
            };
        }
        let hold_until = self.lease.last_hold(self.hold_until);
        observe::hold_ended(self.since.elapsed());
        // A holder that was told its lease is lost hears it again here, whatever the store
        // answers (it may not answer at all): its work ran unprotected. The lock is still
        // deleted if it is ours, so that nobody waits for it.
        let lost_before = !self.lease.is_held_by(self.fence);
        // Boxed for the same reason as `LockRequest::acquire`.
        let release = self
            .inner
            .release_lease(self.lease.clone(), self.fence, hold_until);
        let mut result = Box::pin(release).await;
        if lost_before && !matches!(result, Err(LockError::Lost { .. })) {
            result = Err(LockError::Lost {
                reason: self.lease.loss_reason(),
            });
        }
        if let Err(LockError::Lost { .. }) = &result {
            self.report_lost("the lock was not ours any more at release");
        }
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let last = match (self.owner, self.downgraded) {
            (true, _) => self.lease.writer_done(),
            (false, true) => self.lease.leave_downgrade(),
            (false, false) => return,
        };
        if !last {
            self.lease.keep_hold(self.hold_until);
            return;
        }
        let hold_until = self.lease.last_hold(self.hold_until);
        // At once, not when the background release runs: guards re-entered under this one
        // stop counting as held now.
        self.lease.end_holding(self.fence);
        observe::hold_ended(self.since.elapsed());
        if !self
            .inner
            .release_in_background(self.lease.clone(), self.fence, hold_until)
        {
            tracing::debug!(
                fence = self.fence,
                "guard dropped without a runtime; the lock frees itself when its lease ends"
            );
        }
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
            .field("fence", &self.fence)
            .field("held", &self.is_held())
            .field("reentrant", &!self.owner)
            .finish_non_exhaustive()
    }
}
