//! Calls whose outcome is unknown, settled against the server: an acquire that timed out, or
//! whose connection broke, may still be in the network or in its session's input, and run
//! later; a give-back sent meanwhile on another connection would find nothing, and the late
//! acquire would then take the lock for a token nobody holds, for its whole lease.
//!
//! The pool settles such a connection by ending its session from another connection (`KILL
//! CONNECTION` of the id the server gave it in its handshake; a user may end its own sessions
//! without any privilege) and confirms it is gone from `information_schema.PROCESSLIST` (where
//! every user sees its own sessions): a session that is gone runs nothing more, its open
//! transaction was rolled back, and whatever it committed is in the tables, so what the tables
//! say of the token from then on is the whole truth. MySQL and MariaDB number connections in
//! increasing order, so an id is not reused by a later session within a settlement's time.
//! Every acquire records its owner token against the settlement of the connection it was sent
//! on when its outcome became unknown; [`Store::settle`](crate::store::Store::settle) (run
//! first by every give-back) waits for them. Nothing of this is on the path of a call that is
//! answered: the id comes with the connection.
//!
//! Bound: while the server answers, one round trip after the call failed, plus the few
//! milliseconds the session takes to roll back and exit; while it does not, tried again every
//! [`SETTLE_PAUSE_MAX`] at most, each try bounded by the operation timeout, until
//! [`SETTLE_FOR`] after the call. Past that the give-back goes ahead unsettled, and a call that
//! still reaches the server later keeps its lock for its lease at most. Where the user may not
//! end the session (another user's, which leasehold never opens), the settlement waits for it
//! to end by itself.

use std::sync::{Arc, Weak};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::sync::watch;
use tokio::time::Instant;

use super::errors::driver_error;
use super::pool::Pool;
use crate::store::settling::Settlement;

/// How long a settlement keeps trying against a server that does not answer: longer than a
/// closed socket goes on sending what it held (Linux retransmits an orphaned connection's data
/// for about 100 s), as on PostgreSQL.
pub(super) const SETTLE_FOR: Duration = Duration::from_secs(120);

/// The first pause between two tries of a settlement, and the longest.
const SETTLE_PAUSE_FIRST: Duration = Duration::from_millis(10);
pub(super) const SETTLE_PAUSE_MAX: Duration = Duration::from_secs(1);

/// `ER_NO_SUCH_THREAD`: the session is gone already.
const NO_SUCH_THREAD: u16 = 1094;
/// `ER_KILL_DENIED_ERROR`: not this user's session.
const KILL_DENIED: u16 = 1095;

impl Pool {
    /// The settlement of the connection `id`, in a task of its own that holds the pool only
    /// weakly. One call at a time runs on a connection: only the call that failed on it asks.
    pub(super) fn settle(self: &Arc<Self>, id: u32) -> Settlement {
        let (done, settled) = watch::channel(false);
        let pool = Arc::downgrade(self);
        tokio::spawn(async move {
            end_and_confirm(pool, id).await;
            let _ = done.send(true);
        });
        Settlement::new(settled)
    }
}

/// Ends the session `id` from another pooled connection and waits until it is gone, trying
/// again while the server does not answer, for [`SETTLE_FOR`] at most; ends early if the
/// store is dropped.
async fn end_and_confirm(pool: Weak<Pool>, id: u32) {
    let give_up = Instant::now() + SETTLE_FOR;
    let mut pause = SETTLE_PAUSE_FIRST;
    let mut may_end = true;
    loop {
        let Some(live) = pool.upgrade() else {
            return;
        };
        let kill = may_end;
        let answer = live
            .call("did not let a stalled session be ended", |conn| {
                Box::pin(async move {
                    if kill {
                        match conn.query_drop(format!("KILL CONNECTION {id}")).await {
                            Err(mysql_async::Error::Server(e)) if e.code == NO_SUCH_THREAD => {
                                return Ok(0)
                            }
                            other => other?,
                        }
                    }
                    let there: Option<i64> = conn
                        .query_first(format!(
                            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"
                        ))
                        .await?;
                    Ok(there.unwrap_or(0))
                })
            })
            .await;
        drop(live);
        match answer {
            Ok(0) => return,
            // Signalled (or still there): it exits once it rolled back.
            Ok(_) => {}
            Err(e)
                if driver_error(&e).is_some_and(
                    |d| matches!(d, mysql_async::Error::Server(s) if s.code == KILL_DENIED),
                ) =>
            {
                tracing::warn!(
                    error = %e,
                    "MySQL refused to end a session of this locker whose call's outcome is \
                     unknown; waiting for it to end by itself"
                );
                may_end = false;
            }
            Err(e) => {
                tracing::debug!(error = %e, "settling a call whose outcome is unknown: trying again");
            }
        }
        if Instant::now() + pause >= give_up {
            tracing::warn!(
                connection = id,
                "a session whose call's outcome is unknown could not be ended within \
                 {SETTLE_FOR:?}; giving back without it: a call of it that lands later keeps its \
                 lock for its lease"
            );
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(SETTLE_PAUSE_MAX);
    }
}
