//! The line of waiters (`leasehold_waiters`): how long a contender keeps its place, how long a
//! release leaves the lock to the one that waited longest, and leaving the line without the
//! lock, in the background. As on PostgreSQL.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::sql::WITHDRAW;
use super::MysqlStore;
use crate::store::keys::LockKeys;

/// How long the next process in line has to take a lock that a release left to it (the row
/// holds its name meanwhile). Its waiter needs the wake-up and one round trip; a process that
/// stopped waiting without leaving the line costs the other waiters this much, once.
pub const YIELD_WINDOW: Duration = Duration::from_millis(200);

/// The longest a waiting process stays in line without asking again. Waiters ask again at
/// least every second (a wake-up, or the locker's longest sleep).
pub(super) const MAX_INTEREST: Duration = Duration::from_secs(2);

impl MysqlStore {
    /// The lock keys this process may be in line for (never poisoned: nothing panics while
    /// holding it, and a set of names is valid after any panic).
    pub(super) fn queued_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The front waiter of this process stopped waiting without the lock: the process leaves
    /// the line in the background, and a release that had left it the lock passes it on.
    /// Costs nothing when this process was not in line (a `try_acquire`).
    pub(super) fn withdraw_process(&self, keys: &LockKeys) {
        if self.queued_set().remove(keys.lock()) {
            self.withdraw_in_background(keys, self.contender.clone());
        }
    }

    /// Runs `leasehold_withdraw` for `name` without blocking the caller; without a runtime, or
    /// with the server unreachable, the place lapses by itself within [`MAX_INTEREST`].
    pub(super) fn withdraw_in_background(&self, keys: &LockKeys, name: Arc<str>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let key = keys.lock().to_owned();
        let wake = keys.wake().to_owned();
        runtime.spawn(async move {
            let window_ms = YIELD_WINDOW.as_millis() as i64;
            let done = pool
                .call("refused a withdrawal", |conn| {
                    let params = (key.clone(), name.to_string(), window_ms, wake.clone());
                    Box::pin(conn.exec_drop(WITHDRAW, params))
                })
                .await;
            if let Err(e) = done {
                tracing::debug!(error = %e, "withdrawing a waiter failed; its place lapses");
            }
        });
    }
}
