//! A waiter's interest, as on every engine: a waiting contender (a lock's waiting one, a
//! permits waiter's seat) that no attempt of its wait looked at for [`MAX_INTEREST`] is
//! withdrawn by the store, so that a live process whose waiting future is no longer polled
//! (held, never dropped) does not keep its contender in the queue, first in line in the end,
//! for as long as its session lives. Its wait, if polled again, queues anew.

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;

use super::{Driver, WeakContenders};
use crate::store::Settings;

/// How long a waiting contender stays in its queue after its wait's last attempt: the
/// interest Redis and PostgreSQL give a waiter's turn (their `MAX_INTEREST`), and
/// [`PERMIT_INTEREST`](crate::store::PERMIT_INTEREST). A wait that is polled tries at least
/// every second (a wake-up, or the contenders' longest nap), and at least every 2 s while it
/// rides out an outage.
pub(crate) const MAX_INTEREST: Duration = Duration::from_secs(2);

/// How often the waiting contenders are looked over: a lapsed one is withdrawn within
/// [`MAX_INTEREST`] + this + one delete of its engine.
pub(crate) const LAPSE_CHECK: Duration = Duration::from_millis(250);

/// The longest one attempt of the recipe runs while it is polled, from the engine's bounds: a
/// session opened (its lock waited for, then the connect), and a dozen calls of the
/// operation timeout (looks, a create retried with its container, listings, a lease check).
/// An attempt that runs longer stopped being polled midway.
pub(crate) fn patience(settings: &Settings) -> Duration {
    settings.connect_timeout * 2 + settings.op_timeout * 12
}

/// Withdraws, every [`LAPSE_CHECK`] while the store lives, the waiting contenders whose wait
/// lost interest ([`Contenders::lapsed`](super::Contenders::lapsed)): each is forgotten at
/// once (an attempt that comes back to it finds it gone, and is never granted on it) and
/// deleted in the background. An attempt in progress keeps its contender for `patience`
/// (see [`patience`]).
pub(super) fn withdraw_lapsed<D: Driver>(
    driver: Weak<D>,
    contenders: WeakContenders<D::Via>,
    patience: Duration,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: no attempts either
    };
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(LAPSE_CHECK).await;
            let (Some(driver), Some(contenders)) = (driver.upgrade(), contenders.upgrade()) else {
                return; // the store is gone, and its session with it
            };
            for mine in contenders.lapsed(Instant::now(), MAX_INTEREST, patience) {
                tracing::debug!(
                    contender = %mine.name,
                    "withdrew a waiter's contender that no attempt of its wait looked at for \
                     {MAX_INTEREST:?}: its future is not polled; polled again, it queues anew"
                );
                driver.delete_later(mine);
            }
        }
    });
}
