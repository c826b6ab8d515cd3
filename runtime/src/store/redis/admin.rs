//! The operator's part of the Redis engine: inspecting a lock, listing locks with `SCAN`
//! (never `KEYS`), releasing one by force.

use std::time::Duration;

use super::conn::bounded;
use super::scripts::{FORCE_RELEASE, INSPECT};
use super::RedisStore;
use crate::error::LockError;
use crate::store::keys::{unescape, LockKeys};
use crate::store::{Admin, LockState, StoreFuture};

impl Admin for RedisStore {
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let mut inv = INSPECT.prepare_invoke();
            inv.key(keys.lock()).key(keys.fence()).key(keys.queue());
            // `(held, pttl, waiters, fence, queued)`, see inspect.lua.
            let (held, pttl, waiters, fence, queued): (i64, i64, i64, i64, i64) =
                self.core.run(inv).await?;
            Ok(LockState {
                held: held == 1,
                remaining: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
                waiters: waiters == 1,
                waiting_processes: queued.max(0) as u64,
                last_fence: (fence >= 0).then_some(fence as u64),
            })
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{prefix}:lock:{{");
            let names = self.scan(&format!("{lock_prefix}*")).await?;
            Ok(names
                .iter()
                .filter_map(|name| {
                    let escaped = name.strip_prefix(&lock_prefix)?.strip_suffix('}')?;
                    unescape(escaped)
                })
                .collect())
        })
    }

    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inv = FORCE_RELEASE.prepare_invoke();
            inv.key(keys.lock())
                .arg(keys.wake())
                .arg(self.core.conn.publish_command());
            let deleted: i64 = self.core.run(inv).await?;
            Ok(deleted == 1)
        })
    }
}

impl RedisStore {
    /// The names matching `pattern`, with `SCAN` (never `KEYS`), each call bounded.
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, LockError> {
        if self.core.conn.is_cluster() {
            return Err(LockError::config(
                "listing locks on a Redis Cluster is not supported yet: inspect keys one by one",
            ));
        }
        let mut names = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000);
            let (next, batch): (u64, Vec<String>) = bounded(
                &self.core.endpoint,
                self.core.op_timeout,
                self.core.conn.query(&cmd),
            )
            .await?;
            names.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}
