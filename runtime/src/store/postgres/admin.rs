//! The operator's part: inspecting a lock, listing the locks of a prefix, forced release.

use std::time::Duration;

use super::sql::{FORCE_RELEASE, INSPECT, LIST};
use super::text::{db_text, user_key_of};
use super::PostgresStore;
use crate::store::keys::LockKeys;
use crate::store::{Admin, LockState, StoreFuture};

impl Admin for PostgresStore {
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let rows = self.query("refused a read", INSPECT, &[&key]).await?;
            let Some(row) = rows.first() else {
                return Ok(LockState::default());
            };
            let fence: i64 = row.get(0);
            let remaining: Option<i64> = row.get(1);
            let remaining = remaining.filter(|ms| *ms > 0);
            let waiting: i64 = row.get(2);
            Ok(LockState {
                held: remaining.is_some(),
                remaining: remaining.map(|ms| Duration::from_millis(ms as u64)),
                waiters: waiting > 0,
                waiting_processes: waiting.max(0) as u64,
                last_fence: (fence > 0).then_some(fence as u64),
            })
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{}:lock:{{", db_text(prefix));
            let rows = self.query("refused a read", LIST, &[&lock_prefix]).await?;
            Ok(rows
                .iter()
                .filter_map(|row| user_key_of(row.get(0), &lock_prefix))
                .collect())
        })
    }

    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let wake = db_text(keys.wake()).into_owned();
            let rows = self
                .query("refused a delete", FORCE_RELEASE, &[&key, &wake])
                .await?;
            Ok(rows.first().is_some_and(|row| row.get::<_, bool>(0)))
        })
    }
}
