//! What operators see of a ZooKeeper lock, and how they force one free: its holders are
//! the first writer's znode, or every reader's ahead of the first writer.

use zookeeper_client as zk;

use super::names::{lock_key_of, parent_of, CHILD, READER, ROOT};
use super::ZooKeeper;
use crate::store::keys::{unescape, LockKeys};
use crate::store::sequenced::slots_top;
use crate::store::{Admin, LockState, StoreFuture};

impl Admin for ZooKeeper {
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let parent = parent_of(keys);
            let queue = self.queue(&client, &parent).await?;
            let Some(first) = queue.first() else {
                return Ok(LockState::default());
            };
            let stat = self
                .bounded(
                    "refused a read",
                    client.check_stat(&format!("{parent}/{first}")),
                )
                .await?;
            // The holders: the first writer, or every reader ahead of the first writer.
            let holders = if first.starts_with(CHILD) {
                1
            } else {
                queue.iter().take_while(|c| c.starts_with(READER)).count()
            };
            let waiting = (queue.len() - holders) as u64;
            Ok(LockState {
                held: true,
                // The session, not a TTL, ends a ZooKeeper lock.
                remaining: None,
                waiters: waiting > 0,
                waiting_processes: waiting,
                last_fence: stat.map(|s| slots_top(s.czxid)),
            })
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let names =
                match tokio::time::timeout(self.settings.op_timeout, client.list_children(ROOT))
                    .await
                {
                    Ok(Ok(names)) => names,
                    Ok(Err(zk::Error::NoNode)) => Vec::new(),
                    Ok(Err(e)) => return Err(self.failed("refused a read", e)),
                    Err(_) => return Err(self.late(self.settings.op_timeout)),
                };
            let lock_prefix = format!("{prefix}:lock:{{");
            Ok(names
                .iter()
                .filter_map(|name| {
                    let lock = lock_key_of(name)?;
                    let escaped = lock.strip_prefix(&lock_prefix)?.strip_suffix('}')?;
                    unescape(escaped)
                })
                .collect())
        })
    }

    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let (client, _) = self.client().await?;
            let parent = parent_of(keys);
            let queue = self.queue(&client, &parent).await?;
            // The holders: the first writer, or every reader ahead of the first writer.
            let holders: Vec<&String> = match queue.first() {
                None => return Ok(false),
                Some(first) if first.starts_with(CHILD) => vec![first],
                Some(_) => queue.iter().take_while(|c| c.starts_with(READER)).collect(),
            };
            let mut deleted = false;
            for holder in holders {
                let path = format!("{parent}/{holder}");
                match tokio::time::timeout(self.settings.op_timeout, client.delete(&path, None))
                    .await
                {
                    Ok(Ok(())) => deleted = true,
                    Ok(Err(zk::Error::NoNode)) => {}
                    Ok(Err(e)) => return Err(self.failed("refused a delete", e)),
                    Err(_) => return Err(self.late(self.settings.op_timeout)),
                }
            }
            Ok(deleted)
        })
    }
}
