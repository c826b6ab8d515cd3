//! What operators see of an etcd lock, and how they force one free: its holders are the
//! first writer's key, or every reader's ahead of the first writer.

use etcd_client as etcd;

use super::names::{first_by_creation, first_writer, is_reader_key, lock_of, range_of, READER};
use super::Etcd;
use crate::store::identity::Identity;
use crate::store::keys::{unescape, LockKeys};
use crate::store::sequenced::inspect;
use crate::store::{AdminParts, LockState, StoreFuture};

impl AdminParts for Etcd {
    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(inspect(self, keys))
    }

    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{prefix}:lock:{{");
            let options = etcd::GetOptions::new().with_prefix().with_keys_only();
            let found = self
                .bounded("refused a read", |mut c| {
                    let (key, options) = (lock_prefix.clone(), options.clone());
                    async move { c.get(key, Some(options)).await }
                })
                .await?;
            let mut names: Vec<String> = found
                .kvs()
                .iter()
                .filter_map(|kv| {
                    let lock = lock_of(kv.key_str().ok()?)?;
                    let escaped = lock.strip_prefix(&lock_prefix)?.strip_suffix('}')?;
                    unescape(escaped)
                })
                .collect();
            names.dedup();
            Ok(names)
        })
    }

    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let first = self
                .bounded("refused a read", |mut c| async move {
                    let options = first_by_creation().with_keys_only();
                    c.get(range_of(keys), Some(options)).await
                })
                .await?;
            let Some(first) = first.kvs().first().cloned() else {
                return Ok(false);
            };
            // The holders: the first writer, or every reader ahead of the first writer.
            let mut holders = vec![first.clone()];
            if is_reader_key(first.key()) {
                let writer = self
                    .bounded("refused a read", |mut c| async move {
                        c.get(range_of(keys), Some(first_writer(keys))).await
                    })
                    .await?;
                let mut options = etcd::GetOptions::new().with_prefix().with_keys_only();
                if let Some(w) = writer.kvs().first() {
                    options = options.with_max_create_revision(w.create_revision() - 1);
                }
                let readers = self
                    .bounded("refused a read", |mut c| {
                        let options = options.clone();
                        async move {
                            c.get(format!("{}{READER}", range_of(keys)), Some(options))
                                .await
                        }
                    })
                    .await?;
                holders = readers.kvs().to_vec();
            }
            let mut deleted = false;
            for holder in holders {
                let txn = etcd::Txn::new()
                    .when([etcd::Compare::create_revision(
                        holder.key(),
                        etcd::CompareOp::Equal,
                        holder.create_revision(),
                    )])
                    .and_then([etcd::TxnOp::delete(holder.key(), None)]);
                let answer = self.txn("refused a delete", txn).await?;
                deleted |= answer.succeeded();
            }
            Ok(deleted)
        })
    }

    /// A key `P:session:{LEASE}` on the locker's lease: it goes with the lease, as the
    /// lease's locks do. Put once per lease; a call with the same lease costs nothing.
    fn admin_describe<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.describe_on_lease(prefix, identity))
    }
}
