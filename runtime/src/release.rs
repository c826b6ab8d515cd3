//! Giving a lock back: hand the lease to the next local waiter when there is one (no round
//! trip), else delete it in Redis (if still ours), wake the waiters of other processes and
//! pass the local turn on.
//!
//! A guard dropped without `release().await` is released by the watchdog task
//! ([`Inner::release_dropped`]). When that release finds Redis unavailable (no answer, a
//! timeout, a broken connection), it is tried again, with backoff ([`RETRY_FIRST`] doubling up
//! to [`RETRY_MAX`], with jitter), for as long as the lease may still be valid: after its
//! validity Redis frees the key by itself, so the retries then stop quietly (a debug event).
//! Otherwise a holder that is gone would keep other processes waiting for the whole lease.
//! The retries only delete the key if the lease's token still owns it: the first attempt took
//! the lease off the renewal schedule for good (a dropped guard never extends its own lock),
//! and passed the local turn on already (local waiters contend in Redis meanwhile, as they
//! would anyway). They stop at the first answer (freed, or not ours any more: that is never
//! retried), and hold the locker only weakly: once it is dropped, the next retry does not run.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{LockError, LostReason};
use crate::lease::Lease;
use crate::observe;
use crate::state::Inner;
use crate::turns::ActiveTurn;
use tracing::Instrument;

impl Inner {
    /// Ends one holder's use of `lease`.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock was not ours any more (nothing was touched),
    /// [`LockError::Unavailable`] when Redis failed (the lease then runs out on its own).
    pub(crate) async fn release_lease(
        self: &Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
    ) -> Result<(), LockError> {
        let span = observe::release_span(self.trace_keys, &lease.user_key, fence);
        let (outcome, result) = self
            .release_traced(lease, fence)
            .instrument(span.clone())
            .await;
        observe::release_ended(&span, outcome);
        result
    }

    /// Releases the lease of a dropped guard (in the background), and retries while Redis is
    /// unavailable and the lease may still be valid (see the module docs).
    pub(crate) async fn release_dropped(self: Arc<Self>, lease: Arc<Lease>, fence: u64) {
        match self.release_lease(lease.clone(), fence).await {
            Ok(()) => {}
            Err(LockError::Unavailable { .. }) => {
                // Only a weak reference across the pauses: dropping the locker ends the retries.
                let locker = Arc::downgrade(&self);
                drop(self);
                retry_delete(locker, &lease, fence).await;
            }
            Err(e) => tracing::debug!(error = %e, fence, "background release failed"),
        }
    }

    async fn release_traced(
        self: &Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
    ) -> (&'static str, Result<(), LockError>) {
        lease.end_holding(fence);
        if lease.alone() {
            // A reader or a semaphore's permits: no local queue, nothing handed over.
            if !lease.finish() {
                return ("released", Ok(()));
            }
            self.schedule.unwatch(&lease);
            return outcome(self.delete(&lease).await);
        }
        let Some(turn) = self.queues.held_turn(&lease) else {
            // No local turn: the lease was lost and forfeited it (the queue moved on without
            // it), or never had one (a fair request that waited in the store's queue alone).
            if !lease.finish() {
                return ("released", Ok(()));
            }
            self.schedule.unwatch(&lease);
            return outcome(self.delete(&lease).await);
        };
        if self.queues.hand_over(&lease) {
            return ("handed_over", Ok(()));
        }
        if !lease.finish() {
            return ("released", Ok(()));
        }
        self.schedule.unwatch(&lease);
        // Dropped mid-flight, the turn still deletes the lock and passes itself on.
        let mut turn = ActiveTurn::new(self, &lease.keys, turn);
        turn.in_flight = Some(lease.token.clone());
        let released = self.delete(&lease).await;
        turn.in_flight = None;
        drop(turn);
        outcome(released)
    }

    /// Deletes the lock in Redis if `lease` still owns it.
    async fn delete(&self, lease: &Lease) -> Result<(), LockError> {
        match self.store.end_lease(lease).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LockError::Lost {
                reason: LostReason::Refused,
            }),
            Err(e) => Err(e),
        }
    }
}

/// The first pause before a background release is tried again, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Tries to delete the lock of a dropped guard again until Redis answers, the lease's
/// validity ends, or the locker is dropped.
async fn retry_delete(locker: Weak<Inner>, lease: &Lease, fence: u64) {
    let mut pause = RETRY_FIRST;
    loop {
        let at = Instant::now() + jitter(pause);
        if at >= lease.state.borrow().valid_until {
            tracing::debug!(
                fence,
                "background release failed until the lease's end; the lock frees itself then"
            );
            return;
        }
        tokio::time::sleep_until(at).await;
        let Some(inner) = locker.upgrade() else {
            return;
        };
        match inner.delete(lease).await {
            Ok(()) => {
                tracing::debug!(fence, "background release succeeded on a retry");
                return;
            }
            Err(LockError::Unavailable { .. }) => pause = (pause * 2).min(RETRY_MAX),
            // Not ours any more (expired, taken over): nothing to give back.
            Err(_) => return,
        }
    }
}

/// A random pause between half of `pause` and all of it, so that the releases of many
/// guards dropped in the same outage do not all come back at once.
fn jitter(pause: Duration) -> Duration {
    let random = f64::from(getrandom::u32().unwrap_or(u32::MAX)) / f64::from(u32::MAX);
    pause / 2 + (pause / 2).mul_f64(random)
}

/// The outcome name of a release in Redis, for the release span.
fn outcome(result: Result<(), LockError>) -> (&'static str, Result<(), LockError>) {
    let name = match &result {
        Ok(()) => "released",
        Err(e) => e.code(),
    };
    (name, result)
}
