//! Giving a lock back: hand the lease to the next local waiter when there is one (no round
//! trip), else delete it in the store (if still ours), wake the waiters of other processes and
//! pass the local turn on.
//!
//! A guard dropped without `release().await` is released by the watchdog task
//! ([`Inner::release_dropped`]). When that release finds the store unavailable (no answer, a
//! timeout, a broken connection), it is tried again, with backoff ([`RETRY_FIRST`] doubling up
//! to [`RETRY_MAX`], with jitter), for as long as the lease may still be valid: after its
//! validity Redis frees the key by itself, so the retries then stop quietly (a debug event).
//! Otherwise a holder that is gone would keep other processes waiting for the whole lease.
//! The retries only delete the key if the lease's token still owns it: the first attempt took
//! the lease off the renewal schedule for good (a dropped guard never extends its own lock),
//! and passed the local turn on already (local waiters contend in the store meanwhile, as they
//! would anyway). They stop at the first answer (freed, or not ours any more: that is never
//! retried), and hold the locker only weakly: once it is dropped, the next retry does not run.
//!
//! A guard with a hold ([`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least))
//! released before the hold ends leaves its lock taken until then instead: an expiry set in
//! the store where locks expire by themselves, a release by the background task at the end
//! of the hold where they live with the session ([`Inner::hold_then_release`]).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{LockError, LostReason};
use crate::kernel::backoff::jitter;
use crate::kernel::lease::Lease;
use crate::kernel::observe;
use crate::kernel::state::Inner;
use crate::kernel::turns::ActiveTurn;
use crate::store::{Renewal, Renewed};
use tracing::Instrument;

impl Inner {
    /// Ends one holder's use of `lease`.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock was not ours any more (nothing was touched),
    /// [`LockError::Unavailable`] when the store failed (the lease then runs out on its own).
    ///
    /// With `hold_until` still ahead by at least [`MIN_HOLD_LEFT`], the lock is not given
    /// back now but kept taken until then (see [`Inner::hold_then_release`]).
    pub(crate) async fn release_lease(
        self: &Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
        hold_until: Option<Instant>,
    ) -> Result<(), LockError> {
        let span = observe::release_span(self.trace_keys, &lease.user_key, fence);
        let (outcome, result) = match hold_until.filter(|at| held_ahead(*at)) {
            Some(until) => {
                self.hold_then_release(lease, fence, until)
                    .instrument(span.clone())
                    .await
            }
            None => {
                self.release_traced(lease, fence)
                    .instrument(span.clone())
                    .await
            }
        };
        observe::release_ended(&span, outcome);
        result
    }

    /// Releases the lease of a dropped guard (in the background), and retries while the store is
    /// unavailable and the lease may still be valid (see the module docs).
    pub(crate) async fn release_dropped(
        self: Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
        hold_until: Option<Instant>,
    ) {
        let holding = hold_until.is_some_and(held_ahead);
        match self.release_lease(lease.clone(), fence, hold_until).await {
            Ok(()) => {}
            Err(LockError::Unavailable { .. }) if holding => {
                // Deleting it now would end the hold early: the lock frees itself when its
                // lease runs out, as it would after a crash.
                tracing::debug!(
                    fence,
                    "could not set the end of the hold; the lease runs out"
                );
            }
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
        // A reader or a semaphore's permits have no local queue: nothing is handed over.
        // Without a local turn, the lease was lost and forfeited it (the queue moved on
        // without it), or never had one (a fair request that waited in the store's queue
        // alone).
        let turn = match lease.kind.is_own() {
            true => None,
            false => self.queues.held_turn(&lease),
        };
        let Some(turn) = turn else {
            if !self.ends(&lease) {
                return ("released", Ok(()));
            }
            return outcome(self.delete(&lease).await);
        };
        if self.handover_allowed(&lease).await && self.queues.hand_over(&lease) {
            return ("handed_over", Ok(()));
        }
        if !self.ends(&lease) {
            return ("released", Ok(()));
        }
        // Dropped mid-flight, the turn still deletes the lock and passes itself on.
        let mut turn = ActiveTurn::new(self.seating(), &lease.keys, turn);
        turn.in_flight = Some(lease.token.clone());
        let released = self.delete(&lease).await;
        turn.in_flight = None;
        drop(turn);
        outcome(released)
    }

    /// Whether `lease` may go to a waiter of this process without the store. Where the engine
    /// takes part in handovers (PostgreSQL, `Ending::HandOver`), a fenced lease goes through it
    /// first: a transaction that checked an earlier holder's fence may still be open, and the
    /// lease's fences all pass a check. The store gives the next holder a fence of its own once
    /// no such transaction is open, and the lease's reservation starts anew there; while one
    /// is (or the call fails, whatever it did), the lease is released instead, and the next
    /// holder takes the lock in the store like any contender, once that transaction ended.
    async fn handover_allowed(&self, lease: &Arc<Lease>) -> bool {
        if !lease.fenced || !self.queues.would_hand_over(lease) {
            // Unfenced: no fence to check. Nobody to take it: `hand_over` says so itself.
            return true;
        }
        let Some(answer) = self.store.hand_over(&lease.keys, &lease.token).await else {
            return true;
        };
        match answer {
            Ok(Some(fence)) => {
                lease.restart_fences(self.deployment_fence(fence));
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::debug!(error = %e, "a handover through the store failed; released");
                false
            }
        }
    }

    /// Ends one holder's use of a lease whose lock must stay taken until `until` (a hold
    /// from [`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least)). The local
    /// turn passes on at once without handing the lease over: local waiters find the lock
    /// taken in the store until the hold ends, like everybody else.
    ///
    /// Where locks expire by themselves, the lock is set to expire at `until` if it is still
    /// ours (the owner-checked call a renewal makes, with the time left as its lease) and
    /// taken off the renewal schedule: nothing more needs to happen here, and the hold
    /// outlives this process. Elsewhere (ZooKeeper, etcd: the lock lives with the session)
    /// the lease stays on the schedule, renewed as before, and the background task releases
    /// it at `until`.
    async fn hold_then_release(
        self: &Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
        until: Instant,
    ) -> (&'static str, Result<(), LockError>) {
        lease.end_holding(fence);
        let turn = self.queues.held_turn(&lease);
        let result = if self.store.capabilities().leases_expire {
            if !self.ends(&lease) {
                return ("released", Ok(()));
            }
            let left = until.saturating_duration_since(Instant::now());
            self.expire_after(&lease, left).await
        } else {
            self.release_at(lease.clone(), until);
            Ok(())
        };
        if let Some(turn) = turn {
            self.queues.pass_turn(lease.keys.lock(), turn);
        }
        match result {
            Ok(()) => ("held", Ok(())),
            Err(e) => (e.code(), Err(e)),
        }
    }

    /// Sets the lock of `lease` to expire `after` from now if `lease` still owns it, longer
    /// or shorter than its lease: a renewal with `after` as the lease.
    async fn expire_after(&self, lease: &Lease, after: Duration) -> Result<(), LockError> {
        let renewal = Renewal {
            keys: &lease.keys,
            token: &lease.token,
            lease: ceil_millis(after),
            kind: lease.kind,
        };
        let renewed = self.store.renew(std::slice::from_ref(&renewal)).await?;
        match renewed.first() {
            Some(Renewed::Yes) => Ok(()),
            Some(Renewed::No) => Err(LockError::Lost {
                reason: LostReason::Refused,
            }),
            _ => Err(LockError::unavailable(
                format!(
                    "{} did not confirm the end of the hold; the lock frees itself when its \
                     lease runs out",
                    self.store.describe()
                ),
                None,
            )),
        }
    }

    /// Releases `lease` at `until`, in the background (see [`Inner::hold_then_release`]).
    /// Holds the locker only weakly: once it is dropped, its sessions end and the lock with
    /// them.
    fn release_at(self: &Arc<Self>, lease: Arc<Lease>, until: Instant) {
        let locker = Arc::downgrade(self);
        let job: crate::kernel::watchdog::Job = Box::pin(async move {
            tokio::time::sleep_until(until).await;
            let Some(inner) = locker.upgrade() else {
                return;
            };
            if !inner.ends(&lease) {
                return;
            }
            if let Err(e) = inner.delete(&lease).await {
                tracing::debug!(error = %e, "release at the end of the hold failed");
            }
        });
        if let Err(job) = self.in_background(job) {
            // The background task's runtime is gone, but this one runs.
            tokio::spawn(job);
        }
    }

    /// Whether this caller is the one that ends `lease`: marks it released and takes it off
    /// the renewal schedule. False when another path (a release, a drop, `close`) ended it
    /// first, and there is nothing left to do.
    pub(crate) fn ends(&self, lease: &Lease) -> bool {
        self.schedule.ends(lease)
    }

    /// Deletes the lock in the store if `lease` still owns it.
    async fn delete(&self, lease: &Lease) -> Result<(), LockError> {
        match lease.give_back(&self.store).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LockError::Lost {
                reason: LostReason::Refused,
            }),
            Err(e) => Err(e),
        }
    }
}

/// A hold that ends sooner than this is not worth keeping: stores count in milliseconds.
const MIN_HOLD_LEFT: Duration = Duration::from_millis(1);

/// Whether a hold until `at` still has at least [`MIN_HOLD_LEFT`] to run.
fn held_ahead(at: Instant) -> bool {
    at.saturating_duration_since(Instant::now()) >= MIN_HOLD_LEFT
}

/// `d` rounded up to whole milliseconds, so that a store counting in milliseconds keeps the
/// lock at least that long.
fn ceil_millis(d: Duration) -> Duration {
    let millis = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// The first pause before a background release is tried again, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Tries to delete the lock of a dropped guard again until the store answers, the lease's
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

/// The outcome name of a release in the store, for the release span.
fn outcome(result: Result<(), LockError>) -> (&'static str, Result<(), LockError>) {
    let name = match &result {
        Ok(()) => "released",
        Err(e) => e.code(),
    };
    (name, result)
}
