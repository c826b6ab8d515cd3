//! Asking the store whether a lease of this process still holds its lock, when another task
//! of the process finds the lock held by that lease: a release its holder did not make (an
//! operator's `force_release`, the store's own end of the lease) is then seen as soon as
//! another process could take the lock, not at the lease's next renewal (issue 46).
//!
//! A task that will not wait (`try_acquire`) has the lease verified before it is told the lock
//! is busy: one round trip, what a `try_acquire` of another process costs. A task that waits
//! behind the lease has it verified as it arrives and again once it listens for the lock's
//! releases (one made meanwhile was not heard), at most one every
//! [`MIN_GAP`](crate::kernel::verifying::MIN_GAP), so that a hot key whose tasks keep queueing
//! behind its lease costs the store at most four a second; and at once on every release it
//! hears (as many as the store makes). In the background, one
//! verification of a lease at a time, the asks that come meanwhile joined into the next. A
//! verification is a renewal of the lease alone; for a lease without the watchdog, of the time
//! its lock has left in the store, so that nothing is extended.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::kernel::lease::Lease;
use crate::kernel::state::Inner;
use crate::kernel::watchdog;
use crate::store::{Renewal, Renewed};

impl Inner {
    /// Asks the store now whether `lease` still holds its lock, and takes the answer as the
    /// watchdog takes a renewal's: a lease the store no longer has is lost (its guards are
    /// told, its local turn can be forfeited); one it has stays as it is; a store that did
    /// not answer changes nothing.
    pub(crate) async fn verify(&self, lease: &Arc<Lease>) {
        if lease.is_done() || !lease.is_held() {
            return;
        }
        let sent = Instant::now();
        lease.verifying.sent(sent);
        if lease.watchdog {
            // A renewal as the watchdog's own (it is due a third of the lease later again).
            watchdog::renew_now(
                self.store.clone(),
                self.schedule.clone(),
                Arc::downgrade(&self.health),
                lease.clone(),
            )
            .await;
            return;
        }
        let left = lease.left_in_store();
        if left.is_zero() {
            return;
        }
        let renewal = Renewal {
            keys: &lease.keys,
            token: &lease.token,
            lease: ceil_millis(left),
            kind: lease.kind,
        };
        if let Ok(renewed) = self.store.renew(std::slice::from_ref(&renewal)).await {
            if renewed.first() == Some(&Renewed::No) && !lease.is_done() {
                lease.mark_lost();
                lease.report_lost("the store no longer had it when a task of its process asked");
            }
        }
    }

    /// [`verify`](Self::verify) in the background, soon: at once when `heard` (a release of
    /// the lock was heard) or nothing was sent yet, else
    /// [`MIN_GAP`](crate::kernel::verifying::MIN_GAP) after the last verification of `lease`
    /// was sent; joined to the next one when one runs.
    pub(crate) fn verify_soon(self: &Arc<Self>, lease: &Arc<Lease>, heard: bool) {
        let first = {
            let mut state = lease.verifying.state.lock().unwrap();
            if state.running {
                state.again = true;
                state.urgent |= heard;
                return;
            }
            state.running = true;
            state.next_after(heard)
        };
        let running = Running(lease.clone());
        let locker = Arc::downgrade(self);
        let job: watchdog::Job = Box::pin(async move {
            let mut not_before = first;
            loop {
                if let Some(at) = not_before {
                    tokio::time::sleep_until(at).await;
                }
                let Some(inner) = locker.upgrade() else {
                    return;
                };
                inner.verify(&running.0).await;
                drop(inner);
                let lease = &running.0;
                let mut state = lease.verifying.state.lock().unwrap();
                if !std::mem::take(&mut state.again) || lease.is_done() || !lease.is_held() {
                    return;
                }
                let heard = std::mem::take(&mut state.urgent);
                not_before = state.next_after(heard);
            }
        });
        if let Err(job) = self.in_background(job) {
            // No background task (its runtime is gone), but this one runs.
            tokio::spawn(job);
        }
    }
}

/// The background verifications of a lease run while this lives.
struct Running(Arc<Lease>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = self.0.verifying.state.lock().unwrap();
        state.running = false;
        state.again = false;
        state.urgent = false;
    }
}

/// `d` rounded up to whole milliseconds: a store counting in milliseconds keeps the lock at
/// least that long.
fn ceil_millis(d: Duration) -> Duration {
    let millis = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}
