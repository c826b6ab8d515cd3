//! The operator's part of the Redis engine: inspecting a lock, listing locks with `SCAN`
//! (never `KEYS`), releasing one by force.

use std::time::Duration;

use std::collections::{BTreeSet, HashMap};

use super::conn::{bounded, ScriptCall};
use super::scripts::{millis, FORCE_RELEASE, INSPECT};
use super::RedisStore;
use crate::error::LockError;
use crate::inspect::{LockerDescription, MAX_LISTED_WAITERS};
use crate::store::identity::{
    decode_all, description_key, holder, locker_of_waiter, waiters_of_queue, Identity, Stamp,
    DESCRIPTION_TTL,
};
use crate::store::join_all;
use crate::store::keys::{unescape, LockKeys};
use crate::store::{AdminParts, LockState, PermitState, StoreFuture};

impl AdminParts for RedisStore {
    fn admin_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(self.inspect_permits(keys))
    }

    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let mut inv = ScriptCall::new(&INSPECT);
            inv.key(keys.lock())
                .key(keys.fence())
                .key(keys.queue())
                .key(keys.readers())
                .arg(MAX_LISTED_WAITERS);
            // See inspect.lua.
            let (held, pttl, waiters, fence, queued, holders, names, waited): Inspected =
                self.core.run(inv).await?;
            let stamps: Vec<Option<Stamp>> = holders.iter().map(|p| Stamp::of_public(p)).collect();
            let ids = stamps
                .iter()
                .flatten()
                .map(|s| s.locker.as_str())
                .chain(names.iter().filter_map(|n| locker_of_waiter(n)));
            let described = self.descriptions(keys.prefix(), ids).await?;
            let describe = |id: &str| described.get(id).cloned();
            Ok(LockState {
                held: held == 1,
                remaining: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
                waiters: waiters == 1,
                waiting_processes: queued.max(0) as u64,
                last_fence: (fence >= 0).then_some(fence as u64),
                holders: stamps.into_iter().map(|s| holder(s, describe)).collect(),
                waiting: waiters_of_queue(&names, waited, describe),
            })
        })
    }

    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
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

    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inv = ScriptCall::new(&FORCE_RELEASE);
            inv.key(keys.lock())
                .arg(keys.wake())
                .arg(self.core.conn.publish_command());
            let deleted: i64 = self.core.run(inv).await?;
            Ok(deleted == 1)
        })
    }

    /// Under `P:locker:{ID}`, for [`DESCRIPTION_TTL`].
    fn admin_describe<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        Box::pin(RedisStore::describe_locker(self, prefix, identity))
    }
}

/// inspect.lua's answer: `(held, pttl, waiters, fence, queued, holders, names, waited)`.
type Inspected = (i64, i64, i64, i64, i64, Vec<String>, Vec<String>, Vec<i64>);

impl RedisStore {
    /// Stores this locker's description under `P:locker:{ID}` for [`DESCRIPTION_TTL`].
    pub(super) async fn describe_locker(
        &self,
        prefix: &str,
        identity: &Identity,
    ) -> Result<(), LockError> {
        let mut set = redis::cmd("SET");
        set.arg(description_key(prefix, identity.id()))
            .arg(&identity.stored)
            .arg("PX")
            .arg(millis(DESCRIPTION_TTL));
        let _: Option<String> = self.core.query(&set).await?;
        Ok(())
    }

    /// The stored descriptions of the lockers `ids` (each once; one `GET` each, side by side:
    /// on a Cluster they live in slots of their own).
    pub(super) async fn descriptions<'a>(
        &self,
        prefix: &str,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<HashMap<String, LockerDescription>, LockError> {
        let ids: BTreeSet<&str> = ids.collect();
        let reads = ids.iter().map(|id| {
            let mut get = redis::cmd("GET");
            get.arg(description_key(prefix, id));
            async move { self.core.query::<Option<String>>(&get).await }
        });
        let mut found = Vec::with_capacity(ids.len());
        for (id, stored) in ids.iter().zip(join_all(reads).await) {
            found.push((*id, stored?));
        }
        Ok(decode_all(found))
    }

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
