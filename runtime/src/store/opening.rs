//! Opening a pooled connection, for the engines whose pools open their connections on demand
//! (PostgreSQL, MySQL): in a task of its own, which holds the connection's slot until it is
//! done and keeps what it opened even when the call that asked stopped waiting (its
//! operation timeout, a cancelled caller). Else, while opening takes longer than a call may
//! wait (a slow network or a loaded machine after an outage: a dozen round trips against one),
//! every call would throw its opening away and none would go out again. Nothing is sent on a
//! connection until it is open, so an opening the caller gave up on leaves nothing to settle.

use std::future::Future;

use tokio::sync::OwnedMutexGuard;

use crate::error::LockError;

/// A pool's slot, held for one call or one opening: its connection, or none.
pub(crate) type Taken<C> = OwnedMutexGuard<Option<C>>;

/// Opens a connection into `slot` with `open` (which the engine bounds by its connect
/// timeout) in a task of its own, and resolves to the slot with it. Dropping the future does
/// not stop the opening: the slot gets the connection, for the next call. `server` names the
/// server in the error of an opening task that did not finish (the runtime shut down).
pub(crate) fn open_in<C, F>(
    mut slot: Taken<C>,
    open: F,
    server: String,
) -> impl Future<Output = Result<Taken<C>, LockError>>
where
    C: Send + 'static,
    F: Future<Output = Result<C, LockError>> + Send + 'static,
{
    *slot = None;
    let opening = tokio::spawn(async move {
        let conn = open.await?;
        *slot = Some(conn);
        Ok(slot)
    });
    async move {
        opening.await.unwrap_or_else(|e| {
            Err(LockError::unavailable(
                format!("opening a connection to {server} did not finish: {e}"),
                None,
            ))
        })
    }
}
