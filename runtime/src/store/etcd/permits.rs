//! A semaphore's keys on etcd: a permits contender's key carries its limit and count in its
//! value, so one read of the range lists the whole weighted queue; and what else the recipe
//! reads and writes of a queue (its listing, its first key, a contender's value).

use std::collections::HashMap;
use std::time::Duration;

use etcd_client as etcd;

use super::names::{first_by_creation, is_reader_key, range_of};
use super::Etcd;
use crate::error::LockError;
use crate::store::identity::{session_key, Identity};
use crate::store::keys::LockKeys;
use crate::store::sequenced::{who, Contender, Head, Queued, Role, Seen, Who};

/// What a permits key's value starts with: `permits:<limit>:<count>`.
const PERMITS: &str = "permits:";

/// The value of a permits key.
pub(super) fn permits_value(limit: u32, count: u32) -> String {
    format!("{PERMITS}{limit}:{count}")
}

/// What a key of a lock's range contends for: a reader's by its name, permits by its value,
/// a writer otherwise (a permits value that does not parse, which nothing of ours writes,
/// counts as a writer: as holding the whole limit).
pub(super) fn role_of(kv: &etcd::KeyValue) -> Role {
    if is_reader_key(kv.key()) {
        return Role::Reader;
    }
    let permits = kv.value_str().ok().and_then(|v| {
        let (limit, count) = v.strip_prefix(PERMITS)?.split_once(':')?;
        Some(Role::Permits {
            limit: limit.parse().ok()?,
            count: count.parse().ok()?,
        })
    });
    permits.unwrap_or(Role::Writer)
}

impl Etcd {
    /// Puts a permits key `key` with the lease, unless it is there already, and reads it back
    /// (its create revision) in the same transaction.
    pub(super) async fn put_permits(
        &self,
        lease: i64,
        session: u64,
        key: &str,
        (limit, count): (u32, u32),
    ) -> Result<Contender<i64>, LockError> {
        let put = etcd::TxnOp::put(
            key,
            permits_value(limit, count),
            Some(etcd::PutOptions::new().with_lease(lease)),
        );
        let get = etcd::TxnOp::get(key, Some(etcd::GetOptions::new().with_keys_only()));
        let txn = etcd::Txn::new()
            .when([etcd::Compare::create_revision(
                key,
                etcd::CompareOp::Equal,
                0,
            )])
            .and_then([put, get.clone()])
            .or_else([get]);
        let answer = self.txn("refused a write", txn).await?;
        let mine = answer
            .op_responses()
            .into_iter()
            .find_map(|r| match r {
                etcd::TxnOpResponse::Get(get) => get.kvs().first().cloned(),
                _ => None,
            })
            .filter(|kv| kv.lease() == lease);
        let Some(mine) = mine else {
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: this contender's key belongs to another lease; try again",
                    self.shown
                ),
                None,
            ));
        };
        Ok(Contender {
            name: key.to_owned(),
            order: mine.create_revision(),
            session,
            via: lease,
        })
    }

    /// Every key of a lock's range by create revision, with what each contends for.
    pub(super) async fn list_queue(&self, keys: &LockKeys) -> Result<Vec<Queued>, LockError> {
        let options = etcd::GetOptions::new()
            .with_prefix()
            .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Ascend);
        let listed = self
            .bounded("refused a read", |mut c| {
                let options = options.clone();
                async move { c.get(range_of(keys), Some(options)).await }
            })
            .await?;
        Ok(listed
            .kvs()
            .iter()
            .filter_map(|kv| {
                Some(Queued {
                    name: kv.key_str().ok()?.to_owned(),
                    role: role_of(kv),
                    owner: kv.lease(),
                })
            })
            .collect())
    }

    /// Who each of `contenders` is: one read of the queue (each key's value, lease and create
    /// revision), then each lease's locker description ([`who`]).
    pub(super) async fn who_of(
        &self,
        keys: &LockKeys,
        contenders: &[Queued],
    ) -> Result<Vec<Option<Who>>, LockError> {
        let options = etcd::GetOptions::new().with_prefix();
        let listed = self
            .bounded("refused a read", |mut c| {
                let options = options.clone();
                async move { c.get(range_of(keys), Some(options)).await }
            })
            .await?;
        let by_key: HashMap<&[u8], &etcd::KeyValue> =
            listed.kvs().iter().map(|kv| (kv.key(), kv)).collect();
        let seen = contenders.iter().map(|q| {
            by_key.get(q.name.as_bytes()).map(|kv| Seen {
                data: kv.value().to_vec(),
                owner: kv.lease(),
                // etcd keeps no time with a key.
                created: None,
                order: kv.create_revision(),
            })
        });
        let prefix = keys.prefix();
        who(seen.collect(), |lease| async move {
            let key = session_key(prefix, lease);
            let read = self
                .bounded("refused a read", |mut c| {
                    let key = key.clone();
                    async move { c.get(key, None).await }
                })
                .await?;
            Ok(read
                .kvs()
                .first()
                .and_then(|kv| kv.value_str().ok())
                .map(str::to_owned))
        })
        .await
    }

    /// Puts the locker's description on the current lease, once per lease.
    pub(super) async fn describe_on_lease(
        &self,
        prefix: &str,
        identity: &Identity,
    ) -> Result<(), LockError> {
        let (lease, _) = self.lease().await?;
        if *self.described.lock().unwrap() == Some(lease) {
            return Ok(());
        }
        let key = session_key(prefix, lease);
        self.bounded("refused a write", |mut c| {
            let (key, value) = (key.clone(), identity.stored.clone());
            async move {
                c.put(key, value, Some(etcd::PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await?;
        *self.described.lock().unwrap() = Some(lease);
        Ok(())
    }

    /// The remaining TTL of each lease (zero for one that is gone).
    pub(super) async fn leases_left(&self, owners: &[i64]) -> Result<Vec<Duration>, LockError> {
        let mut left = Vec::with_capacity(owners.len());
        for &id in owners {
            let answer = self
                .bounded("refused a read", |mut c| async move {
                    c.lease_time_to_live(id, None).await
                })
                .await?;
            left.push(Duration::from_secs(
                u64::try_from(answer.ttl()).unwrap_or(0),
            ));
        }
        Ok(left)
    }

    /// The first key of a lock's range by create revision, with its value.
    pub(super) async fn first_of(&self, keys: &LockKeys) -> Result<Option<Head>, LockError> {
        let first = self
            .bounded("refused a read", |mut c| async move {
                c.get(range_of(keys), Some(first_by_creation())).await
            })
            .await?;
        Ok(first.kvs().first().map(|kv| Head {
            order: kv.create_revision(),
            data: kv.value().to_vec(),
        }))
    }

    /// Replaces the value of `mine` while its create revision is ours, keeping it on its lease.
    pub(super) async fn write_value(
        &self,
        mine: &Contender<i64>,
        data: &[u8],
    ) -> Result<bool, LockError> {
        let txn = etcd::Txn::new()
            .when([etcd::Compare::create_revision(
                mine.name.clone(),
                etcd::CompareOp::Equal,
                mine.order,
            )])
            .and_then([etcd::TxnOp::put(
                mine.name.clone(),
                data.to_vec(),
                Some(etcd::PutOptions::new().with_lease(mine.via)),
            )]);
        let answer = self.txn("refused a write", txn).await?;
        Ok(answer.succeeded())
    }
}
