//! What operators see of a lock's queue, once for both engines: its holders (the first
//! writer, or every reader ahead of the first writer) and the contenders behind them, each
//! with who it is ([`Driver::who`]).

use std::time::SystemTime;

use super::{slots_top, Driver, Role};
use crate::error::LockError;
use crate::primitives::inspect::MAX_LISTED_WAITERS;
use crate::store::identity::{contender_holder, contender_waiter};
use crate::store::keys::LockKeys;
use crate::store::LockState;

/// The state of the lock `keys` in `driver`'s engine: held while its queue has a contender,
/// with no TTL of its own (the session or lease of its holder's process ends it).
pub(crate) async fn inspect<D: Driver>(
    driver: &D,
    keys: &LockKeys,
) -> Result<LockState, LockError> {
    let listed = driver.list(keys).await?;
    let Some(first) = listed.first() else {
        return Ok(LockState::default());
    };
    let holders = match first.role {
        Role::Reader => listed.iter().take_while(|q| q.role == Role::Reader).count(),
        _ => 1,
    };
    let waiting = (listed.len() - holders) as u64;
    let shown = &listed[..listed.len().min(holders + MAX_LISTED_WAITERS)];
    let who = driver.who(keys, shown).await?;
    let now = SystemTime::now();
    let mut state = LockState {
        held: true,
        remaining: None,
        waiters: waiting > 0,
        waiting_processes: waiting,
        last_fence: who
            .first()
            .and_then(|w| w.as_ref())
            .map(|w| slots_top(w.order)),
        holders: Vec::new(),
        waiting: Vec::new(),
    };
    // A contender gone since the listing is left out.
    for (i, who) in who.into_iter().enumerate() {
        let Some(w) = who else { continue };
        if i < holders {
            state
                .holders
                .push(contender_holder(w.stamp, w.description, w.created));
        } else {
            state
                .waiting
                .push(contender_waiter(w.stamp, w.description, w.created, now));
        }
    }
    Ok(state)
}
