//! The line of waiters (`leasehold_waiters`): how long a contender keeps its place, how long
//! a release leaves the lock to the one that waited longest, and leaving the line without
//! the lock, in the background.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres as pg;

use super::sql::WITHDRAW;
use super::text::db_text;
use super::PostgresStore;
use crate::store::keys::LockKeys;

/// How long the next process in line has to take a lock that a release left to it (the row
/// holds its name meanwhile). Its waiter needs the notification and one round trip; a process
/// that stopped waiting without leaving the line costs the other waiters this much, once.
/// As on Redis.
pub const YIELD_WINDOW: Duration = Duration::from_millis(200);

/// The longest a waiting process stays in line without asking again. Waiters ask again at
/// least every second (a wake-up, or `MAX_SLEEP` in acquire.rs). As on Redis.
pub(super) const MAX_INTEREST: Duration = Duration::from_secs(2);

impl PostgresStore {
    /// The lock keys this process may be in line for (never poisoned: nothing panics while
    /// holding it, and a set of names is valid after any panic).
    pub(super) fn queued_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The front waiter of this process stopped waiting without the lock: the process leaves
    /// the line in the background (`leasehold_withdraw`), and a release that had left it the
    /// lock passes it on. Costs nothing when this process was not in line (a `try_acquire`).
    /// Without it (no runtime, the server unreachable) the process's place still lapses at
    /// most [`MAX_INTEREST`] after its last attempt.
    pub(super) fn withdraw_process(&self, keys: &LockKeys) {
        if self.queued_set().remove(keys.lock()) {
            self.withdraw_in_background(keys, self.contender.clone());
        }
    }

    /// Runs `leasehold_withdraw` for `name` without blocking the caller.
    pub(super) fn withdraw_in_background(&self, keys: &LockKeys, name: Arc<str>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the place lapses by itself
        };
        let pool = self.pool.clone();
        let key = db_text(keys.lock()).into_owned();
        let wake = db_text(keys.wake()).into_owned();
        runtime.spawn(async move {
            let window_ms = YIELD_WINDOW.as_millis() as i64;
            let params: [&(dyn pg::types::ToSql + Sync); 4] =
                [&key, &name.as_ref(), &window_ms, &wake];
            let done = pool
                .call("refused a withdrawal", |conn| async move {
                    conn.client.query(WITHDRAW, &params).await
                })
                .await;
            if let Err(e) = done {
                tracing::debug!(error = %e, "withdrawing a waiter failed; its place lapses");
            }
        });
    }
}
