//! Riding out an outage: a waiting acquire that finds the engine unavailable (no answer, a
//! timeout, a broken connection, a quorum not reached) tries again, with backoff, for as long
//! as its wait lasts, and fails with [`LockError::Unavailable`] only when the wait is over,
//! naming how long the engine was out and how often it was tried. A failover, a restart or
//! a network blip shorter than the wait is then only a longer wait.
//!
//! The pause between attempts starts at [`RETRY_FIRST`] and doubles up to [`RETRY_MAX`],
//! each one drawn at random between half of it and all of it, so that the waiters of many
//! processes do not all come back at the same instant. An acquire that does not wait
//! (`try_acquire`, `wait = 0`) is never retried, and neither is one whose request turned
//! retrying off ([`LockRequest::retry_unavailable`](crate::LockRequest::retry_unavailable)).
//! What an attempt that failed may have taken is given back in the background
//! ([`undo_later`]): its answer never came, so it may have landed, or land later;
//! the give-back settles it against the engine first ([`crate::kernel::unsettled`]).

use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::backoff::jitter;
use crate::kernel::place::Place;
use crate::kernel::turns::Seating;
use crate::kernel::unsettled::Unsettled;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

/// The first pause before a waiting acquire tries an unavailable engine again.
pub(crate) const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between two attempts of a waiting acquire on an unavailable engine.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(2);

/// One outage as a waiting acquire sees it: since when, how many attempts failed, the next
/// pause.
pub(crate) struct Outage {
    since: Instant,
    failed: u32,
    pause: Duration,
}

impl Outage {
    pub(crate) fn new() -> Self {
        Outage {
            since: Instant::now(),
            failed: 0,
            pause: RETRY_FIRST,
        }
    }

    /// An attempt failed with `err` (unavailable): pauses before the next one, or, when the
    /// wait ends before then, returns the error to give the caller (at the deadline: the
    /// engine may come back until then).
    pub(crate) async fn pause(
        &mut self,
        err: LockError,
        deadline: Instant,
    ) -> Result<(), LockError> {
        self.failed += 1;
        let until = (Instant::now() + jitter(self.pause)).min(deadline);
        tracing::debug!(
            error = %err,
            failed = self.failed,
            "the lock engine is unavailable; trying again while the wait lasts"
        );
        tokio::time::sleep_until(until).await;
        self.pause = (self.pause * 2).min(RETRY_MAX);
        if Instant::now() >= deadline {
            return Err(self.over(err));
        }
        Ok(())
    }

    /// The error for a wait that ended in the outage.
    fn over(&self, last: LockError) -> LockError {
        if self.failed <= 1 {
            return last;
        }
        LockError::unavailable(
            format!(
                "the lock engine was unavailable until the wait ended: {} attempts over {:?} \
                 failed; the last: {last}",
                self.failed,
                self.since.elapsed()
            ),
            Some(Box::new(last)),
        )
    }
}

/// Gives back, in the background, what an acquire of `token` whose answer was an error may
/// have taken (the call may have landed before the error came, or may still land): the one
/// path of [`Unsettled`], through the parts of `seating`. The wait goes on, so its place in
/// the store's line stays.
pub(crate) fn undo_later(
    seating: Seating<'_>,
    keys: &LockKeys,
    token: OwnerToken,
    kind: LeaseKind,
    lease: Duration,
) {
    let (store, background) = (seating.store.clone(), seating.background.clone());
    let attempt = Unsettled {
        keys: keys.clone(),
        token,
        kind,
        lease,
        settles: None,
    };
    let job = Box::pin(async move {
        let undone = attempt.undo(&store, &background, &Place::Nowhere).await;
        if let Err(e) = undone {
            tracing::debug!(error = %e, "giving back a failed attempt failed; trying again");
        }
    });
    let _ = seating.background.run(job);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pauses double up to the bound, and the wait's end turns the last error into one that
    /// says how long the engine was out.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn pauses_back_off_and_end_with_the_wait() {
        let mut outage = Outage::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = || LockError::unavailable("no answer", None);
        let mut pauses = Vec::new();
        loop {
            let before = Instant::now();
            match outage.pause(err(), deadline).await {
                Ok(()) => pauses.push(before.elapsed()),
                Err(e) => {
                    assert!(e.is_unavailable(), "{e:?}");
                    assert!(e.to_string().contains("attempts over"), "{e}");
                    break;
                }
            }
        }
        assert_eq!(
            Instant::now(),
            deadline,
            "the error comes when the wait is over"
        );
        assert!(
            pauses[0] >= RETRY_FIRST / 2 && pauses[0] <= RETRY_FIRST,
            "{pauses:?}"
        );
        assert!(pauses.iter().all(|p| *p <= RETRY_MAX), "{pauses:?}");
        assert!(pauses.iter().any(|p| *p > RETRY_MAX / 2), "{pauses:?}");
    }
}
