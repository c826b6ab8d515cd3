//! The operator's part: inspecting a lock, listing the locks of a prefix, forced release.

use std::time::Duration;

use std::collections::{BTreeSet, HashMap};

use super::sql::{DESCRIBE_LOCKER, DESCRIPTIONS, FORCE_RELEASE, INSPECT, LIST};
use super::text::{db_text, user_key_of};
use super::PostgresStore;
use crate::error::LockError;
use crate::inspect::{LockerDescription, MAX_LISTED_WAITERS};
use crate::store::identity::{
    decode_all, holder, locker_of_waiter, waiters_of_queue, Identity, Stamp, DESCRIPTION_TTL,
};
use crate::store::keys::LockKeys;
use crate::store::{AdminParts, LockState, PermitState, StoreFuture};

impl PostgresStore {
    /// Writes this locker's description to count for [`DESCRIPTION_TTL`].
    pub(super) async fn describe_locker(&self, identity: &Identity) -> Result<(), LockError> {
        let ttl = DESCRIPTION_TTL.as_millis() as i64;
        self.query(
            "refused to record this locker's description",
            DESCRIBE_LOCKER,
            &[&identity.id(), &identity.stored, &ttl],
        )
        .await?;
        Ok(())
    }

    /// The stored descriptions of the lockers `ids`, in one read.
    pub(super) async fn descriptions<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<HashMap<String, LockerDescription>, LockError> {
        let ids: Vec<&str> = ids.collect::<BTreeSet<_>>().into_iter().collect();
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self
            .query("refused a read of the lockers", DESCRIPTIONS, &[&ids])
            .await?;
        let found: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        Ok(decode_all(
            found
                .iter()
                .map(|(id, stored)| (id.as_str(), Some(stored.clone()))),
        ))
    }
}

impl AdminParts for PostgresStore {
    fn admin_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        Box::pin(self.inspect_permits_once(keys))
    }

    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let listed = MAX_LISTED_WAITERS as i64;
            let rows = self
                .query("refused a read", INSPECT, &[&key, &listed])
                .await?;
            let Some(row) = rows.first() else {
                return Ok(LockState::default());
            };
            let fence: i64 = row.get(0);
            let remaining: Option<i64> = row.get(1);
            let remaining = remaining.filter(|ms| *ms > 0);
            let waiting: i64 = row.get(2);
            let holders: Vec<String> = row.get(3);
            let names: Vec<String> = row.get(4);
            let waited: Vec<i64> = row.get(5);
            let stamps: Vec<Option<Stamp>> = holders.iter().map(|p| Stamp::of_public(p)).collect();
            let ids = stamps
                .iter()
                .flatten()
                .map(|s| s.locker.as_str())
                .chain(names.iter().filter_map(|n| locker_of_waiter(n)));
            let described = self.descriptions(ids).await?;
            let describe = |id: &str| described.get(id).cloned();
            Ok(LockState {
                held: remaining.is_some(),
                remaining: remaining.map(|ms| Duration::from_millis(ms as u64)),
                waiters: waiting > 0,
                waiting_processes: waiting.max(0) as u64,
                last_fence: (fence > 0).then_some(fence as u64),
                holders: stamps.into_iter().map(|s| holder(s, describe)).collect(),
                waiting: waiters_of_queue(&names, waited, describe),
            })
        })
    }

    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{}:lock:{{", db_text(prefix));
            let rows = self.query("refused a read", LIST, &[&lock_prefix]).await?;
            Ok(rows
                .iter()
                .filter_map(|row| user_key_of(row.get(0), &lock_prefix))
                .collect())
        })
    }

    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let wake = db_text(keys.wake()).into_owned();
            let rows = self
                .query("refused a delete", FORCE_RELEASE, &[&key, &wake])
                .await?;
            Ok(rows.first().is_some_and(|row| row.get::<_, bool>(0)))
        })
    }

    fn admin_describe<'a>(
        &'a self,
        _prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        Box::pin(PostgresStore::describe_locker(self, identity))
    }
}
