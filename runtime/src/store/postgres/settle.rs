//! Calls whose outcome is unknown, settled against the server: an acquire that timed out, or
//! whose connection broke, may still be sitting in the network or in its backend's input, and
//! run later; a give-back sent meanwhile on another connection would find nothing, and the
//! late acquire would then take the lock for a token nobody holds, for its whole lease.
//!
//! The pool settles such a connection by ending its backend from another connection
//! (`pg_terminate_backend` of the pid and start time read when it opened), and confirms it is
//! gone from `pg_stat_activity`: a backend that is gone runs nothing more, its open
//! transaction was rolled back, and whatever it committed is in the tables, so what the
//! tables say of the token from then on is the whole truth. Every acquire records its owner
//! token against the settlement of the connection it was sent on when its outcome became
//! unknown; [`Store::settle`](crate::store::Store::settle) (run first by every give-back)
//! waits for them. Nothing of this is on the path of a call that is answered: the identity is
//! read in the round trip that sets a new connection's bounds.
//!
//! Bound: while the server answers, one round trip after the call failed, plus a few
//! milliseconds for the backend to exit; while it does not, tried again every
//! [`SETTLE_PAUSE_MAX`] at most, each try bounded by the operation timeout, until
//! [`SETTLE_FOR`] after the call. Past that the give-back goes ahead unsettled, and a call
//! that still reaches the server later keeps its lock for its lease at most. Where the role
//! may not end the backend (another role's session, which leasehold never opens), the
//! settlement waits for it to end by itself: our side of its connection is closed, so it ends
//! once it has read what was sent.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_postgres as pg;

use super::backend::{Backend, Settlement};
use super::conn::Conn;
use super::pool::Pool;
use super::sql::{backend_alive, end_backend};

/// How long a settlement keeps trying against a server that does not answer: longer than a
/// closed socket goes on sending what it held (Linux retransmits an orphaned connection's
/// data for about 100 s), so that past it nothing this client sent can still arrive, short of
/// a proxy that holds bytes for longer.
pub(super) const SETTLE_FOR: Duration = Duration::from_secs(120);

/// The first pause between two tries of a settlement, and the longest.
const SETTLE_PAUSE_FIRST: Duration = Duration::from_millis(10);
pub(super) const SETTLE_PAUSE_MAX: Duration = Duration::from_secs(1);

impl Pool {
    /// The settlement of `conn`, started by the first call that asks (a call on it whose
    /// outcome is unknown), in a task of its own that holds the pool only weakly.
    pub(super) fn settle(self: &Arc<Self>, conn: &Conn) -> Settlement {
        conn.settlement
            .get_or_init(|| {
                let (done, settled) = watch::channel(false);
                let pool = Arc::downgrade(self);
                let backend = conn.backend;
                tokio::spawn(async move {
                    end_and_confirm(pool, backend).await;
                    let _ = done.send(true);
                });
                Settlement::new(settled)
            })
            .clone()
    }
}

/// Ends `backend` from another pooled connection and waits until it is gone, trying again
/// while the server does not answer, for [`SETTLE_FOR`] at most; ends early if the store is
/// dropped.
async fn end_and_confirm(pool: Weak<Pool>, backend: Backend) {
    let give_up = Instant::now() + SETTLE_FOR;
    let mut pause = SETTLE_PAUSE_FIRST;
    // Where the role may not end it, only look until it ended by itself.
    let mut may_end = true;
    loop {
        let Some(live) = pool.upgrade() else {
            return;
        };
        let sql = match may_end {
            true => end_backend(backend.pid, backend.started),
            false => backend_alive(backend.pid, backend.started),
        };
        let answer = live
            .call("did not let a stalled session be ended", |conn| {
                let sql = sql.clone();
                async move { conn.client.simple_query(&sql).await }
            })
            .await;
        drop(live);
        match answer {
            Ok(messages) => {
                let there = messages
                    .iter()
                    .any(|m| matches!(m, pg::SimpleQueryMessage::Row(_)));
                if !there {
                    return;
                }
                // Signalled (or still there): it exits at its next check for interrupts.
            }
            Err(e)
                if super::errors::sql_state(&e)
                    .is_some_and(|c| *c == pg::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
            {
                tracing::warn!(
                    error = %e,
                    "PostgreSQL refused to end a session of this locker whose call's outcome \
                     is unknown; waiting for it to end by itself"
                );
                may_end = false;
            }
            Err(e) => {
                tracing::debug!(error = %e, "settling a call whose outcome is unknown: trying again");
            }
        }
        if Instant::now() + pause >= give_up {
            tracing::warn!(
                pid = backend.pid,
                "a session whose call's outcome is unknown could not be ended within {SETTLE_FOR:?}; \
                 giving back without it: a call of it that lands later keeps its lock for its lease"
            );
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(SETTLE_PAUSE_MAX);
    }
}
