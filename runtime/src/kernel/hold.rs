//! [`Hold`]: one holder's hold of a lease, what every guard of the primitives stands on: its
//! fence, whether it owns the lease or re-entered a scope's, its liveness, and the release on
//! every path (explicit, drop, panic, cancellation).

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

/// A held lease as one holder holds it: acquired, handed over, re-entered or downgraded.
/// Dropped without [`release`](Self::release), it releases the lease in the background.
pub(crate) struct Hold {
    inner: Arc<Inner>,
    lease: Arc<Lease>,
    fence: u64,
    /// `leasehold.hold`, open while the hold lives.
    span: Span,
    since: Instant,
    /// False for a re-entered hold: the outer one owns the lease and releases it.
    owner: bool,
    /// A read lock taken inside the write lock of the same key (a downgrade): it holds the
    /// lease on with the write's hold, and the last of the two to be done ends it.
    downgraded: bool,
    /// What this hold holds, as its scope tells re-entry: the lease's kind for a holder, a
    /// read for a downgrade (the write's lease, held as a read), and for a re-entered hold
    /// what the scope it re-entered holds.
    kind: LeaseKind,
    released: bool,
    /// The lock stays taken until then, even if released sooner
    /// ([`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least)).
    hold_until: Option<Instant>,
}

impl Hold {
    /// The hold of a lease that this holder got (acquired, or handed over); keeps the lease
    /// on the renewal schedule.
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
        Hold {
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
    /// caller's own span for a re-entered hold. Called once the acquire span has closed, so
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

    /// The hold of a lease that the surrounding scope already holds (as `kind`).
    pub(crate) fn reentered(
        inner: Arc<Inner>,
        lease: Arc<Lease>,
        fence: u64,
        kind: LeaseKind,
    ) -> Self {
        Hold {
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
    /// the write's lease (and fence), and keeps the lock when the write is released: the
    /// lease ends once both are done, so reading goes on with no gap and no writer gets in
    /// meanwhile. Its scope holds a read: a write inside it is refused, as inside any read.
    pub(crate) fn downgraded(inner: Arc<Inner>, lease: Arc<Lease>, fence: u64) -> Self {
        lease.join_downgrade();
        let mut hold = Hold::reentered(inner, lease, fence, LeaseKind::Read);
        hold.downgraded = true;
        hold
    }

    /// Keeps the lock taken for at least `hold` from now, whenever this hold is released. A
    /// re-entered hold releases nothing, so it keeps nothing either; the holds of a
    /// downgrade (the write, its reads) each keep theirs, whichever of them ends the lease.
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

    /// This hold as a lock held by an enclosing scope (see [`Hold::scope`]).
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
        self.inner.store_fence(self.fence)
    }

    /// The store that holds this lease, for checks only its engine can make (a PostgreSQL
    /// fence check refuses another engine's guard).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn store(&self) -> &crate::kernel::health::Calls {
        &self.inner.store
    }

    /// The owner token of this lease, for store calls made on its behalf.
    pub(crate) fn owner_token(&self) -> &crate::store::token::OwnerToken {
        &self.lease.token
    }

    /// The error for this hold's lost lease, with the reason.
    pub(crate) fn lost_error(&self) -> LockError {
        LockError::Lost {
            reason: self.lease.loss_reason(),
        }
    }

    /// Reports that the lease was lost while this hold held it.
    pub(crate) fn report_lost(&self, why: &'static str) {
        self.lease.report_lost(why);
    }

    /// The store (or a fenced resource) showed this hold's lease is over: lost for every
    /// hold of the lease.
    pub(crate) fn refused_by_store(&self, why: &'static str) {
        self.lease.mark_lost();
        self.lease.report_lost(why);
    }

    /// The key held, as the caller named it.
    pub(crate) fn key(&self) -> &str {
        &self.lease.user_key
    }

    /// The fencing token of this acquisition (with the locker's offset).
    pub(crate) fn fence(&self) -> u64 {
        self.fence
    }

    /// Whether the lease is still trusted: not released, not reported lost, and within its
    /// validity.
    pub(crate) fn is_held(&self) -> bool {
        !self.released && self.lease.is_held_by(self.fence)
    }

    /// True for a hold that re-entered a lease an enclosing scope holds.
    pub(crate) fn is_reentrant(&self) -> bool {
        !self.owner && !self.downgraded
    }

    /// Whether this hold owns the lease (it was acquired or handed over, not re-entered).
    pub(crate) fn is_owner(&self) -> bool {
        self.owner
    }

    /// Resolves when the lease is lost. Cancel-safe.
    pub(crate) async fn lost(&self) {
        self.lease.lost_for(Some(self.fence)).await
    }

    /// Runs `fut` with this lease marked as held by the enclosing scope.
    pub(crate) fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        reentrant::scope(self.held_entry(), fut)
    }

    /// Gives the lease back (to the next waiter of this process, or to the store) when this
    /// hold is the last one of it; see [`LockGuard::release`](crate::LockGuard::release).
    pub(crate) async fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        let last = match (self.owner, self.downgraded) {
            // The write of a downgrade: the reads hold on, and the last of them ends the
            // lease.
            (true, _) => self.lease.writer_done(),
            (false, true) => self.lease.leave_downgrade(),
            (false, false) => return Ok(()),
        };
        if !last {
            // The hold that ends the lease keeps this one's too.
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

impl Drop for Hold {
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
        // At once, not when the background release runs: holds re-entered under this one
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
