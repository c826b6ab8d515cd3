//! ZooKeeper's driver of the recipe: contenders are ephemeral sequential znodes of the lock's
//! container, in the order of their sequence numbers, fenced by their creation zxid.

use std::time::Duration;

use zookeeper_client as zk;

use super::cleanup::{clean_up, Cleanup};
use super::names::{child_name, in_order, parent_of, path_of, role_of, CHILD, PERMITS, READER};
use super::watch::{any_of, watch_deletions, watch_predecessor, Watcher};
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sequenced::{
    slots_top, tag, writer_top, Ask, Awaited, Contender, Create, Created, Creation, Driver, Head,
    Inspection, Made, Place, Queued, Records, Role, Wake, Who, FENCE_SLOTS,
};
use crate::store::token::OwnerToken;
use crate::store::{join_all, AcquireRequest};

impl Driver for ZooKeeper {
    type Via = zk::Client;
    type Watcher = Watcher;

    fn describe(&self) -> String {
        format!("zookeeper at {}", self.hosts)
    }

    /// `<container>/<kind><tag>-`: the server appends the sequence number (to a permits
    /// znode's `<limit>-<count>-` first).
    fn name(&self, keys: &LockKeys, token: &OwnerToken, role: Role) -> String {
        let kind = match role {
            Role::Writer => CHILD,
            Role::Reader => READER,
            Role::Permits { .. } => PERMITS,
        };
        format!("{}/{kind}{}-", parent_of(keys), tag(token))
    }

    /// The session is the lease: one granted a shorter timeout than the lease is refused
    /// before anything is created.
    async fn open(&self, lease: Duration) -> Result<(zk::Client, u64), LockError> {
        let (client, session) = self.client().await?;
        self.fits_session(&client, lease)?;
        Ok((client, session))
    }

    /// Nothing to add: `open` checked that the session carries the lease, and a lost session
    /// ends the lease at once (its epoch moves on).
    async fn vouch(
        &self,
        _session: u64,
        _req: &AcquireRequest<'_>,
    ) -> Result<Option<tokio::time::Instant>, LockError> {
        Ok(None)
    }

    /// One create (a writer's in one transaction with its fence record). A writer alone in
    /// its container knows it holds the lock from the answer; otherwise, and for a reader,
    /// where it stands takes a listing after it.
    async fn create(
        &self,
        one: &Creation<zk::Client>,
    ) -> Result<(Contender<zk::Client>, Option<Place>), LockError> {
        // The container is made only when the create finds it missing: in steady state an
        // uncontended writer's cycle is one create and one delete.
        if one.role == Role::Writer {
            let mut made = self.create_children(&one.via, one.session, &[one]).await?;
            return Ok(made.pop().expect("a contender per creation"));
        }
        let parent = parent_of(&one.keys);
        let path = path_of(one);
        let mine = self
            .create_child(&one.via, one.session, &parent, &path, &one.token)
            .await?;
        Ok((mine, None))
    }

    /// One `multi` creates every znode (each writer's with its fence record). Where they
    /// stand takes a read after it, unless each is a writer alone in its container (its
    /// record's answer tells: [`first_alone`](super::together::first_alone)).
    async fn create_all(
        &self,
        batch: &[Creation<zk::Client>],
    ) -> Result<Option<Created<zk::Client>>, LockError> {
        let Some(first) = batch.first() else {
            return Ok(None);
        };
        let batch: Vec<&Creation<zk::Client>> = batch.iter().collect();
        let made = self
            .create_children(&first.via, first.session, &batch)
            .await?;
        Ok(Some(made))
    }

    /// A `multi` carries many creates, and a create of a contender is never conditional here
    /// (where it stands is read after it), so the creates that meet share one.
    fn creates_together(&self) -> bool {
        true
    }

    /// A batch (`lock_all`) goes by itself: a batch is already one `multi`, and batches that
    /// meet made one `multi` of up to 128 operations that every task waited on in step; at
    /// 16 tasks `lock_all` ran about a tenth slower so (BENCHMARKS.md).
    fn batches_together(&self) -> bool {
        false
    }

    /// One `multi` creates every contender of `batch` (each writer's with its fence record),
    /// all in one transaction: one round trip and one proposal for them all, and one `czxid`,
    /// which the recipe's group commit allows (no writer shares its lock in a call, so no two
    /// writers of one lock share a fence). A `multi` is all or nothing, but none of these
    /// creates depends on another's lock: a session gone or a call unanswered fails them all
    /// alone too, and one the server refused (a lock's container of another identity's:
    /// `NoAuth`, a `Config` error) made nothing, so the recipe sends each again alone. Creates
    /// over different sessions (one replaced the other while they met) go alone.
    async fn create_many(
        &self,
        batch: &[Create<zk::Client>],
    ) -> Result<Vec<Made<zk::Client>>, LockError> {
        let creations: Vec<&Creation<zk::Client>> =
            batch.iter().flat_map(|c| c.creations()).collect();
        let Some(first) = creations.first() else {
            return Ok(Vec::new());
        };
        if creations.iter().any(|one| one.session != first.session) {
            return Ok(join_all(batch.iter().map(|create| create.alone(self))).await);
        }
        // One contender per creation, in order (`create_children` answers all or fails).
        let mut made = self
            .create_children(&first.via, first.session, &creations)
            .await?
            .into_iter();
        Ok(batch
            .iter()
            .map(|create| match create {
                Create::One(_) => Made::One(Ok(made.next().expect("a contender per creation"))),
                Create::All(all) => Made::All(Ok(Some(made.by_ref().take(all.len()).collect()))),
            })
            .collect())
    }

    /// One read `multi` of every container's children (and a reader's record).
    async fn look_all(
        &self,
        batch: &[Ask<'_, '_>],
        mine: &[Contender<zk::Client>],
    ) -> Result<Vec<Place>, LockError> {
        self.look_all_children(batch, mine).await
    }

    /// One `multi` of deletes.
    async fn delete_all(&self, mine: &[Contender<zk::Client>]) -> Result<bool, LockError> {
        self.delete_children(mine).await
    }

    async fn look(
        &self,
        req: &AcquireRequest<'_>,
        mine: &Contender<zk::Client>,
        role: Role,
    ) -> Result<Place, LockError> {
        let parent = parent_of(req.keys);
        if role == Role::Reader {
            return self.look_reader(&parent, mine).await;
        }
        let queue = self.queue(&mine.via, &parent).await?;
        let name = child_name(&mine.name);
        Ok(match queue.iter().position(|c| c == name) {
            Some(0) => Place::Holds {
                top: writer_top(mine.order, req.fences),
            },
            Some(_) => Place::Behind,
            None => Place::Gone,
        })
    }

    async fn delete(&self, mine: &Contender<zk::Client>) -> Result<bool, LockError> {
        let limit = self.settings.op_timeout;
        match tokio::time::timeout(limit, mine.via.delete(&mine.name, None)).await {
            Ok(Ok(())) => Ok(true),
            Ok(Err(zk::Error::NoNode)) => Ok(false),
            Ok(Err(e)) => Err(self.failed("refused a delete", e)),
            Err(_) => Err(self.late(limit)),
        }
    }

    fn delete_later(&self, mine: Contender<zk::Client>) {
        clean_up(mine.via, Cleanup::Path(mine.name));
    }

    /// The server appended a sequence number to the name: every child of the container whose
    /// name starts with the rest is that attempt's, unless this process knows it as a
    /// waiter's or a holder's. Deleted until ZooKeeper answers: a znode left behind would
    /// stand in the queue for good. The listing goes over the session the create went over
    /// (while it lives), whose requests ZooKeeper answers in order: it sees the create if the
    /// server applied it.
    async fn abandoned(&self, name: &str) -> Result<(), LockError> {
        let (client, _) = self.client().await?;
        let (parent, prefix) = name.rsplit_once('/').unwrap_or(("", name));
        clean_up(
            client,
            Cleanup::Tagged {
                parent: parent.to_owned(),
                prefix: prefix.to_owned(),
                spare: self.contenders.downgrade(),
            },
        );
        Ok(())
    }

    async fn list(&self, keys: &LockKeys) -> Result<Vec<Queued>, LockError> {
        let (client, _) = self.client().await?;
        let parent = parent_of(keys);
        let queue = self.queue(&client, &parent).await?;
        Ok(queue
            .into_iter()
            .map(|child| Queued {
                role: role_of(&child),
                name: format!("{parent}/{child}"),
                owner: 0,
            })
            .collect())
    }

    async fn watcher(&self, keys: &LockKeys) -> Result<Watcher, LockError> {
        let (client, _) = self.client().await?;
        Ok(Watcher {
            client,
            parent: parent_of(keys),
            limit: self.settings.op_timeout,
        })
    }

    async fn watch(
        watcher: &Watcher,
        awaited: Awaited<'_, zk::Client>,
    ) -> Result<Option<Wake>, String> {
        let mine = match awaited {
            Awaited::Predecessor(mine) => Some(child_name(&mine.name)),
            Awaited::Writers => None,
            Awaited::Deletions => {
                let (client, parent) = (watcher.client.clone(), watcher.parent.clone());
                let deleted = watch_deletions(client, parent, watcher.limit).await?;
                return Ok(Some(Box::pin(deleted)));
            }
        };
        let watched =
            watch_predecessor(&watcher.client, &watcher.parent, mine, watcher.limit).await?;
        Ok(watched.map(|w| -> Wake { Box::pin(any_of(w)) }))
    }
}

impl Inspection for ZooKeeper {
    /// One read of each contender's data and stat, one of each session's description.
    async fn who(
        &self,
        keys: &LockKeys,
        contenders: &[Queued],
    ) -> Result<Vec<Option<Who>>, LockError> {
        self.who_at(keys.prefix(), contenders.iter().map(|q| q.name.as_str()))
            .await
    }

    /// ZooKeeper does not tell another client's session timeout: this locker's session
    /// timeout, the bound of every lease over a session like it.
    async fn remaining(&self, owners: &[i64]) -> Result<Vec<Duration>, LockError> {
        let granted =
            Duration::from_millis(self.granted.load(std::sync::atomic::Ordering::Acquire));
        Ok(vec![granted; owners.len()])
    }
}

impl Records for ZooKeeper {
    /// The first child and its data, in a listing and a read (again if it went between).
    async fn head(&self, keys: &LockKeys) -> Result<Option<Head>, LockError> {
        let (client, _) = self.client().await?;
        let parent = parent_of(keys);
        for _ in 0..3 {
            let queue = self.queue(&client, &parent).await?;
            let Some(first) = queue.first() else {
                return Ok(None);
            };
            let limit = self.settings.op_timeout;
            match tokio::time::timeout(limit, client.get_data(&format!("{parent}/{first}"))).await {
                Ok(Ok((data, stat))) => {
                    return Ok(Some(Head {
                        order: stat.czxid,
                        data,
                    }))
                }
                Ok(Err(zk::Error::NoNode)) => continue,
                Ok(Err(e)) => return Err(self.failed("refused a read", e)),
                Err(_) => return Err(self.late(limit)),
            }
        }
        Err(self.unavailable("refused a read", "the queue kept changing"))
    }

    /// `setData` on the znode through its own session (only this process makes its name).
    async fn write(&self, mine: &Contender<zk::Client>, data: &[u8]) -> Result<bool, LockError> {
        let limit = self.settings.op_timeout;
        match tokio::time::timeout(limit, mine.via.set_data(&mine.name, data, None)).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(zk::Error::NoNode)) => Ok(false),
            Ok(Err(e)) => Err(self.failed("refused a write", e)),
            Err(_) => Err(self.late(limit)),
        }
    }
}

impl ZooKeeper {
    /// Where a reader's znode stands: behind a writer, or holding the lock with the fence of
    /// the last writer before it (see [`reader_fence`]).
    async fn look_reader(
        &self,
        parent: &str,
        mine: &Contender<zk::Client>,
    ) -> Result<Place, LockError> {
        // Both sent now, in this order: the session's requests are answered in order, so the
        // record read is at least as recent as the queue listed.
        let listing = mine.via.list_children(parent);
        let record = mine.via.get_data(parent);
        let limit = self.settings.op_timeout;
        let (listing, record) = tokio::join!(
            tokio::time::timeout(limit, listing),
            tokio::time::timeout(limit, record)
        );
        let (queue, record) = match (listing, record) {
            (Ok(Ok(children)), Ok(record)) => (in_order(children), record.ok()),
            (Ok(Err(e)), _) => return Err(self.failed("refused a read", e)),
            _ => return Err(self.late(limit)),
        };
        let name = child_name(&mine.name);
        let Some(at) = queue.iter().position(|c| c == name) else {
            return Ok(Place::Gone);
        };
        if queue[..at].iter().any(|c| c.starts_with(CHILD)) {
            return Ok(Place::Behind);
        }
        Ok(Place::Holds {
            top: reader_fence(record, mine.order),
        })
    }
}

/// A reader's fence, from the container's data and stat read once the reader's znode (created
/// at `mine`) was in. Every writer's znode is created in one transaction with `+n` in the
/// container's data, so the record's `mzxid` is that writer's `czxid`. When the record is older
/// than the reader's znode, it is the last writer that came before the reader: the reader got
/// in, so that writer held the lock and left (or gave up waiting, or its session ended), and
/// the reader's fence is the top of that writer's fence slots, `mzxid × 32 + 31`
/// ([`slots_top`]). Not `mzxid × 32 + n`: `n` is what the attempt that created the znode
/// reserved, and a writer that waited is granted by a later attempt, which reserves one fence
/// per waiter of its process queued by then and hands them out without rewriting the record
/// (a rewrite whose answer was lost could land after a later one, and lower it). The slots'
/// top is at or above every fence that writer handed out, however many, and below every fence
/// of a writer created after it. When a writer came after the reader and overwrote the record,
/// or there is none, the reader's fence is `mine × 32` (or, with no record at all, the
/// container's `czxid × 32`, the same for every reader): either way at or above every fence of
/// the writers before the reader, below every fence of the writers after.
pub(super) fn reader_fence(record: Option<(Vec<u8>, zk::Stat)>, mine: i64) -> u64 {
    let mine_floor = (mine.max(0) as u64) * FENCE_SLOTS;
    let Some((data, stat)) = record else {
        return mine_floor.max(1);
    };
    let recorded = std::str::from_utf8(&data)
        .ok()
        .and_then(|text| text.strip_prefix('+')?.parse::<u64>().ok());
    let top = match recorded {
        Some(_) if stat.mzxid < mine => slots_top(stat.mzxid),
        Some(_) => mine_floor,
        None => (stat.czxid.max(0) as u64) * FENCE_SLOTS,
    };
    top.max(1)
}
