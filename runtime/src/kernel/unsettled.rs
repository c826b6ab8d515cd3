//! The one way back from an acquire attempt whose outcome the caller cannot count on, for
//! every primitive (the lock, a reader's share, permits, `lock_all`, leaders, fair requests):
//! its answer never came (timed out, unavailable), its caller stopped waiting for it, or it
//! granted too late to count on. The server may still apply such a call after the client gave
//! up on it; so its give-back waits until the call was answered, here or in the background
//! ([`Settled`]), then hands the token to the store's `give_back` (on `dyn Store`), which
//! settles the token's calls against the server first
//! ([`Store::settle`](crate::store::Store::settle)) and removes only what that token holds or
//! created; and only then does the attempt leave its place in the store's line, which the
//! late call may have taken. Three callers, one path: the retry of a wait riding out an
//! outage ([`undo_later`](crate::kernel::outage::undo_later)), a
//! contender that stopped with its call in flight
//! (an abandoned seat of [`turns`](crate::kernel::turns)), and a grant that came too late.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::background::Background;
use crate::kernel::backoff::jitter;
use crate::kernel::health::Calls;
use crate::kernel::health::EngineState::Closed;
use crate::kernel::inflight::Settled;
use crate::kernel::place::Place;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

/// The first pause before a give-back that found the engine unavailable is tried again, and
/// the longest.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// An acquire attempt whose outcome the caller cannot count on.
pub(crate) struct Unsettled {
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) kind: LeaseKind,
    /// The lease it asked for: what it took, if anything, ends by then on an engine whose
    /// leases expire, and its give-back is tried no longer.
    pub(crate) lease: Duration,
    /// Resolves once its call was answered (it goes on in the background when its caller
    /// stopped polling it); `None`: answered already.
    pub(crate) settles: Option<Settled>,
}

impl Unsettled {
    /// Gives back in `store` whatever the attempt may have taken, once its call can no longer
    /// land (see the module docs), then leaves `place` in the store's line (`Place::Nowhere`
    /// when the wait goes on and its next attempt stands there). The first try's answer:
    /// `Ok(false)` when nothing was held. A give-back that found the engine unavailable is
    /// tried again in `background`, with backoff, for the attempt's lease at most (what it
    /// took ends by then) or until the locker (its `store`) is dropped, each try once the
    /// locker's health says the engine answers: the caller (a local turn waiting to
    /// pass on) does not wait for those. Bounded: by the operation timeout while the call is
    /// answered, by the engine's stated bound while it settles, by the operation timeout while
    /// it removes.
    pub(crate) async fn undo(
        self,
        store: &Arc<Calls>,
        background: &Background,
        place: &Place,
    ) -> Result<bool, LockError> {
        if let Some(settles) = &self.settles {
            settles.clone().wait().await;
        }
        // Never counted on by a holder: no validity left.
        let given = store
            .give_back(&self.keys, &self.token, self.kind, Instant::now())
            .await;
        place.leave(store, &self.keys, self.kind);
        if matches!(given, Err(LockError::Unavailable { .. })) {
            let retry = self.retry(Arc::downgrade(store));
            let _ = background.run(Box::pin(retry));
        }
        given
    }

    /// Tries the give-back again while the engine is unavailable, for the attempt's lease at
    /// most, holding the locker's calls only weakly. Each try waits until the locker's health
    /// says the engine answers (its monitor probes meanwhile): a give-back is no probe of its
    /// own.
    async fn retry(self, store: Weak<Calls>) {
        let until = Instant::now() + self.lease;
        let mut pause = RETRY_FIRST;
        loop {
            let at = Instant::now() + jitter(pause);
            if at >= until {
                tracing::debug!("giving back an attempt failed for its whole lease; it ran out");
                return;
            }
            tokio::time::sleep_until(at).await;
            let Some(mut log) = store.upgrade().map(|calls| calls.health().log()) else {
                return;
            };
            let answers = log.wait_for(|log| log.now.is_connected() || log.now == Closed);
            if !matches!(tokio::time::timeout_at(until, answers).await, Ok(Ok(_))) {
                return;
            }
            let Some(store) = store.upgrade() else {
                return;
            };
            let given = store
                .give_back(&self.keys, &self.token, self.kind, Instant::now())
                .await;
            match given {
                Err(LockError::Unavailable { .. }) => pause = (pause * 2).min(RETRY_MAX),
                _ => return,
            }
        }
    }
}
