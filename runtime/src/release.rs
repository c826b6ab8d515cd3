//! Giving a lock back: hand the lease to the next local waiter when there is one (no round
//! trip), else delete it in Redis (if still ours), wake the waiters of other processes and
//! pass the local turn on.

use std::sync::Arc;

use crate::error::LockError;
use crate::lease::Lease;
use crate::locker::Inner;
use crate::observe;
use crate::queue::ActiveTurn;
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
        let (outcome, result) = self.release_traced(lease).instrument(span.clone()).await;
        observe::release_ended(&span, outcome);
        result
    }

    async fn release_traced(
        self: &Arc<Self>,
        lease: Arc<Lease>,
    ) -> (&'static str, Result<(), LockError>) {
        if !self.holds_turn(&lease) {
            // The lease was lost and forfeited its turn: the queue moved on without it.
            if !lease.finish() {
                return ("released", Ok(()));
            }
            self.schedule.unwatch(&lease);
            return outcome(self.delete(&lease).await);
        }
        if self.hand_over(&lease) {
            return ("handed_over", Ok(()));
        }
        if !lease.finish() {
            return ("released", Ok(()));
        }
        self.schedule.unwatch(&lease);
        // Dropped mid-flight, the turn still deletes the lock and passes itself on.
        let mut turn = ActiveTurn::new(self, &lease.keys);
        turn.in_flight = Some(lease.token.clone());
        let released = self.delete(&lease).await;
        turn.in_flight = None;
        drop(turn);
        outcome(released)
    }

    /// Deletes the lock in Redis if `lease` still owns it.
    async fn delete(&self, lease: &Lease) -> Result<(), LockError> {
        match self.backend.release(&lease.keys, &lease.token).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LockError::Lost),
            Err(e) => Err(e),
        }
    }
}

/// The outcome name of a release in Redis, for the release span.
fn outcome(result: Result<(), LockError>) -> (&'static str, Result<(), LockError>) {
    let name = match &result {
        Ok(()) => "released",
        Err(e) => e.code(),
    };
    (name, result)
}
