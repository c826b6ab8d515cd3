//! What operators see of a ZooKeeper lock, and how they force one free: its holders are
//! the first writer's znode, or every reader's ahead of the first writer.

use std::time::{Duration, UNIX_EPOCH};

use zookeeper_client as zk;

use super::names::{lock_key_of, node_of, parent_of, CHILD, READER, ROOT};
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::identity::{session_key, Identity};
use crate::store::join_all;
use crate::store::keys::{unescape, LockKeys};
use crate::store::sequenced::{inspect, who, Seen, Who};
use crate::store::{AdminParts, LockState, StoreFuture};

impl ZooKeeper {
    /// An ephemeral znode of the current session, `P:session:{ID}` under the root (the
    /// session's id): it goes with the session, as the session's locks do. Created once per
    /// session; a call in a session that has it costs nothing.
    async fn describe_in_session(
        &self,
        prefix: &str,
        identity: &Identity,
    ) -> Result<(), LockError> {
        let (client, _) = self.client().await?;
        let session = client.session_id().0;
        if *self.described.lock().unwrap() == Some(session) {
            return Ok(());
        }
        self.ensure(&client, ROOT, zk::CreateMode::Persistent)
            .await?;
        let path = node_of(&session_key(prefix, session));
        let options = zk::CreateMode::Ephemeral.with_acls(self.acls());
        let data = identity.stored.as_bytes();
        match self
            .bounded("refused a create", async {
                match client.create(&path, data, &options).await {
                    Err(zk::Error::NodeExists) => Ok(()),
                    other => other.map(|_| ()),
                }
            })
            .await
        {
            Ok(()) => {
                *self.described.lock().unwrap() = Some(session);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Who each contender at `paths` is (see [`Inspection::who`](crate::store::sequenced::Inspection::who)):
    /// its data and stat read side by side, then the descriptions of their sessions ([`who`]).
    pub(super) async fn who_at(
        &self,
        prefix: &str,
        paths: impl Iterator<Item = &str>,
    ) -> Result<Vec<Option<Who>>, LockError> {
        let (client, _) = self.client().await?;
        let client = &client;
        let reads = paths.map(|path| async move { self.read(client, path).await });
        let mut seen = Vec::new();
        for read in join_all(reads).await {
            seen.push(read?.map(|(data, stat)| {
                Seen {
                    data,
                    owner: stat.ephemeral_owner,
                    created: u64::try_from(stat.ctime)
                        .ok()
                        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
                    order: stat.czxid,
                }
            }));
        }
        who(seen, |session| async move {
            let path = node_of(&session_key(prefix, session));
            let read = self.read(client, &path).await?;
            Ok(read.and_then(|(data, _)| String::from_utf8(data).ok()))
        })
        .await
    }

    /// A znode's data and stat; `None` when it is gone.
    async fn read(
        &self,
        client: &zk::Client,
        path: &str,
    ) -> Result<Option<(Vec<u8>, zk::Stat)>, LockError> {
        self.bounded("refused a read", async {
            match client.get_data(path).await {
                Ok(found) => Ok(Some(found)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
    }
}

impl AdminParts for ZooKeeper {
    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(inspect(self, keys))
    }

    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
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

    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
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

    fn admin_describe<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.describe_in_session(prefix, identity))
    }
}
