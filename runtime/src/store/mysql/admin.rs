//! The operator's part: inspecting a lock, listing the locks of a prefix, forced release, and
//! the lockers' descriptions.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::sql::{
    descriptions, DESCRIBE_LOCKER, FORCE_RELEASE, INSPECT, INSPECT_READERS, INSPECT_WAITERS, LIST,
};
use super::text::{public_of, user_key_of};
use super::MysqlStore;
use crate::error::LockError;
use crate::inspect::{LockerDescription, MAX_LISTED_WAITERS};
use crate::store::identity::{
    decode_all, holder, locker_of_waiter, waiters_of_queue, Identity, Stamp, DESCRIPTION_TTL,
};
use crate::store::keys::LockKeys;
use crate::store::{AdminParts, LockState, PermitState, StoreFuture};

/// A lock's row, its live readers and its waiters, as one inspection reads them.
type Inspected = (
    Option<(i64, Vec<u8>, i64)>,
    Vec<Vec<u8>>,
    Vec<(Vec<u8>, i64)>,
);

impl MysqlStore {
    /// The stored descriptions of the lockers `ids`, in one read.
    pub(super) async fn descriptions<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<HashMap<String, LockerDescription>, LockError> {
        let ids: Vec<String> = ids
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(str::to_owned)
            .collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = descriptions(ids.len());
        let rows: Vec<(Vec<u8>, Vec<u8>)> = self
            .call("refused a read of the lockers", |conn| {
                Box::pin(conn.exec(sql.clone(), ids.clone()))
            })
            .await?;
        let found: Vec<(String, String)> = rows
            .into_iter()
            .map(|(id, d)| {
                (
                    String::from_utf8_lossy(&id).into_owned(),
                    String::from_utf8_lossy(&d).into_owned(),
                )
            })
            .collect();
        Ok(decode_all(
            found
                .iter()
                .map(|(id, stored)| (id.as_str(), Some(stored.clone()))),
        ))
    }
}

impl AdminParts for MysqlStore {
    fn admin_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(self.inspect_permits_once(keys))
    }

    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let key = keys.lock().to_owned();
            let (row, readers, waiters): Inspected = self
                .call("refused a read", |conn| {
                    let key = key.clone();
                    Box::pin(async move {
                        let row = conn.exec_first(INSPECT, (key.clone(),)).await?;
                        let readers = conn.exec(INSPECT_READERS, (key.clone(),)).await?;
                        let waiters = conn.exec(INSPECT_WAITERS, (key,)).await?;
                        Ok((row, readers, waiters))
                    })
                })
                .await?;
            let Some((fence, owner, left_ms)) = row else {
                return Ok(LockState::default());
            };
            let passed = owner.first() == Some(&b'~');
            let remaining = (!passed && left_ms > 0).then_some(left_ms);
            let holders: Vec<&str> = match remaining {
                None => Vec::new(),
                Some(_) if owner == b"R" => readers.iter().map(|r| public_of(r)).collect(),
                Some(_) => vec![public_of(&owner)],
            };
            let names: Vec<String> = waiters
                .iter()
                .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
                .collect();
            let waiting = names.len();
            let listed: Vec<String> = names.into_iter().take(MAX_LISTED_WAITERS).collect();
            let waited: Vec<i64> = waiters
                .iter()
                .take(MAX_LISTED_WAITERS)
                .map(|(_, ms)| *ms)
                .collect();
            let stamps: Vec<Option<Stamp>> = holders.iter().map(|p| Stamp::of_public(p)).collect();
            let ids = stamps
                .iter()
                .flatten()
                .map(|s| s.locker.as_str())
                .chain(listed.iter().filter_map(|n| locker_of_waiter(n)));
            let described = self.descriptions(ids).await?;
            let describe = |id: &str| described.get(id).cloned();
            Ok(LockState {
                held: remaining.is_some(),
                remaining: remaining.map(|ms| Duration::from_millis(ms as u64)),
                waiters: waiting > 0,
                waiting_processes: waiting as u64,
                last_fence: (fence > 0).then_some(fence as u64),
                holders: stamps.into_iter().map(|s| holder(s, describe)).collect(),
                waiting: waiters_of_queue(&listed, waited, describe),
            })
        })
    }

    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{prefix}:lock:{{");
            let len = lock_prefix.len() as i64;
            let rows: Vec<Vec<u8>> = self
                .call("refused a read", |conn| {
                    Box::pin(conn.exec(LIST, (len, lock_prefix.clone())))
                })
                .await?;
            Ok(rows
                .iter()
                .filter_map(|stored| user_key_of(stored, &lock_prefix))
                .collect())
        })
    }

    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = keys.lock().to_owned();
            let wake = keys.wake().to_owned();
            let row = self
                .call("refused a delete", |conn| {
                    Box::pin(conn.exec_first::<(Option<i64>,), _, _>(
                        FORCE_RELEASE,
                        (key.clone(), wake.clone()),
                    ))
                })
                .await?;
            Ok(row.and_then(|(held,)| held) == Some(1))
        })
    }

    fn admin_describe<'a>(
        &'a self,
        _prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let ttl = DESCRIPTION_TTL.as_millis() as i64;
            let id = identity.id().to_owned();
            let stored = identity.stored.clone();
            self.call("refused to record this locker's description", |conn| {
                Box::pin(conn.exec_drop(DESCRIBE_LOCKER, (id.clone(), stored.clone(), ttl)))
            })
            .await
        })
    }
}
