//! A batch of writers' and readers' znodes created by one `multi` (see the recipe's
//! `together`; attempts' creates that meet in the recipe's group commit go the same way),
//! where they stand read by one read `multi`, and, when one is not first, all of them deleted
//! by one more `multi`.
//!
//! ZooKeeper's `multi` cannot make the creates depend on a queue being empty: its only
//! condition is a znode's data version (`check`), and a container's children change its
//! child version, not its data version. So the creates go first, unconditionally. Each
//! writer's fence record is written right after its create, and that write answers with the
//! container's `Stat`: one child means the writer is alone, and so first. A batch of writers
//! on free keys is one round trip; otherwise the read after the creates tells whether each is
//! first: two round trips for free keys, three for a batch that finds one taken.

use zookeeper_client as zk;

use super::driver::reader_fence;
use super::names::{child_name, in_order, parent_of, path_of, CHILD};
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::join_all;
use crate::store::sequenced::{writer_top, Ask, Contender, Created, Creation, Place, Role};

impl ZooKeeper {
    /// Creates every znode of `batch` in one `multi`, each writer's with its fence record in
    /// its container's data, so that they share one `czxid`: a single writer's create (a
    /// batch of one), a batch taken together
    /// ([`create_all`](crate::store::sequenced::Driver::create_all)), or the creates of
    /// attempts that met in the recipe's group commit (`create_many`), which the
    /// recipe sends with no writer beside another contender of its lock. A container missing
    /// makes the whole `multi` fail with nothing created: the containers are made, and it is
    /// sent again, a bounded number of times. Another operation the server refused (a
    /// container of another identity's: `NoAuth`, a [`LockError::Config`]) made nothing
    /// either: a `multi` is all or nothing. Each writer alone in its container is answered
    /// with its place ([`first_alone`]).
    pub(super) async fn create_children(
        &self,
        client: &zk::Client,
        session: u64,
        batch: &[&Creation<zk::Client>],
    ) -> Result<Created<zk::Client>, LockError> {
        let options = zk::CreateMode::EphemeralSequential.with_acls(self.acls());
        let limit = self.settings.op_timeout;
        let records: Vec<String> = batch.iter().map(|one| format!("+{}", one.fences)).collect();
        let asked: Vec<String> = batch.iter().map(|one| path_of(one)).collect();
        for _ in 0..3 {
            let mut multi = client.new_multi_writer();
            let mut added = Ok(());
            for ((one, record), path) in batch.iter().zip(&records).zip(&asked) {
                added = added.and_then(|()| multi.add_create(path, one.token.as_bytes(), &options));
                if one.role == Role::Writer {
                    let parent = parent_of(&one.keys);
                    added =
                        added.and_then(|()| multi.add_set_data(&parent, record.as_bytes(), None));
                }
            }
            if let Err(e) = added {
                return Err(self.failed("refused a create", e));
            }
            let results = match tokio::time::timeout(limit, multi.commit()).await {
                Ok(Ok(results)) => results,
                Ok(Err(e)) => match zk::Error::from(e) {
                    zk::Error::NoNode => {
                        let mut parents: Vec<String> =
                            batch.iter().map(|one| parent_of(&one.keys)).collect();
                        parents.sort_unstable();
                        parents.dedup();
                        let making = parents.iter().map(|p| self.ensure_parent(client, p));
                        for made in join_all(making).await {
                            made?;
                        }
                        continue;
                    }
                    e => return Err(self.failed("refused a create", e)),
                },
                Err(_) => return Err(self.late(limit)),
            };
            // Per creation, its path and whether it is a writer alone in its container (its
            // record's answer, which follows its create).
            let mut paths: Vec<(String, bool)> = Vec::with_capacity(batch.len());
            let mut zxid = None;
            for result in results {
                match result {
                    zk::MultiWriteResult::Create { path, stat } => {
                        if !stat.is_invalid() {
                            zxid = zxid.or(Some(stat.czxid));
                        }
                        paths.push((path, false));
                    }
                    // One transaction, one zxid: a record's `mzxid` is the creates' `czxid`.
                    zk::MultiWriteResult::SetData { stat } => {
                        zxid = zxid.or(Some(stat.mzxid));
                        if let Some((_, alone)) = paths.last_mut() {
                            *alone = first_alone(&stat);
                        }
                    }
                    _ => {}
                }
            }
            if paths.len() != batch.len() {
                return Err(self.unavailable("refused a create", "a create without its path"));
            }
            // Readers alone, on a server that leaves the stat out of a create in a `multi`
            // (ZOOKEEPER-4026): the `czxid` is read back.
            let order = match zxid {
                Some(zxid) => zxid,
                None => self.czxid_of(client, &paths[0].0).await?,
            };
            return Ok(paths
                .into_iter()
                .zip(batch)
                .map(|((name, alone), one)| {
                    let mine = Contender {
                        name,
                        order,
                        session,
                        via: client.clone(),
                    };
                    (mine, holds_if(alone, order, one.fences))
                })
                .collect());
        }
        Err(self.unavailable("kept deleting the lock's znode", "giving up"))
    }

    async fn czxid_of(&self, client: &zk::Client, path: &str) -> Result<i64, LockError> {
        let (_, stat) = self
            .bounded("refused a read", client.get_data(path))
            .await?;
        Ok(stat.czxid)
    }

    /// Where each of `mine` stands, from one read `multi`: each container's children, and a
    /// reader's container's data (its fence record). A writer holds when its znode is first
    /// of all, a reader when no writer's is ahead of its own.
    pub(super) async fn look_all_children(
        &self,
        batch: &[Ask<'_, '_>],
        mine: &[Contender<zk::Client>],
    ) -> Result<Vec<Place>, LockError> {
        let Some(client) = mine.first().map(|c| c.via.clone()) else {
            return Ok(Vec::new());
        };
        let mut multi = client.new_multi_reader();
        let mut added = Ok(());
        for ask in batch {
            let parent = parent_of(ask.req.keys);
            added = added.and_then(|()| multi.add_get_children(&parent));
            if ask.role == Role::Reader {
                added = added.and_then(|()| multi.add_get_data(&parent));
            }
        }
        if let Err(e) = added {
            return Err(self.failed("refused a read", e));
        }
        let mut results = self
            .bounded("refused a read", multi.commit())
            .await?
            .into_iter();
        let mut places = Vec::with_capacity(batch.len());
        for (ask, mine) in batch.iter().zip(mine) {
            let queue = match results.next() {
                Some(zk::MultiReadResult::Children { children }) => in_order(children),
                Some(zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                }) => Vec::new(),
                Some(zk::MultiReadResult::Error { err }) => {
                    return Err(self.failed("refused a read", err))
                }
                _ => return Err(self.unavailable("refused a read", "an answer out of order")),
            };
            let at = queue.iter().position(|c| c == child_name(&mine.name));
            let place = match (ask.role, at) {
                (_, None) => Place::Gone,
                (Role::Writer, Some(0)) => Place::Holds {
                    top: writer_top(mine.order, ask.req.fences),
                },
                (Role::Writer, Some(_)) => Place::Behind,
                (_, Some(at)) if queue[..at].iter().any(|c| c.starts_with(CHILD)) => Place::Behind,
                (_, Some(_)) => Place::Holds { top: 0 },
            };
            let place = match (ask.role, place) {
                (Role::Reader, place) => {
                    let record = match results.next() {
                        Some(zk::MultiReadResult::Data { data, stat }) => Some((data, stat)),
                        _ => None,
                    };
                    match place {
                        Place::Holds { .. } => Place::Holds {
                            top: reader_fence(record, mine.order),
                        },
                        place => place,
                    }
                }
                (_, place) => place,
            };
            places.push(place);
        }
        Ok(places)
    }

    /// Deletes every one of `mine` in one `multi`; `Ok(false)`, with nothing deleted, when
    /// one was gone already.
    pub(super) async fn delete_children(
        &self,
        mine: &[Contender<zk::Client>],
    ) -> Result<bool, LockError> {
        let Some(client) = mine.first().map(|c| c.via.clone()) else {
            return Ok(true);
        };
        let mut multi = client.new_multi_writer();
        for one in mine {
            if let Err(e) = multi.add_delete(&one.name, None) {
                return Err(self.failed("refused a delete", e));
            }
        }
        let limit = self.settings.op_timeout;
        match tokio::time::timeout(limit, multi.commit()).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) => match zk::Error::from(e) {
                zk::Error::NoNode => Ok(false),
                e => Err(self.failed("refused a delete", e)),
            },
            Err(_) => Err(self.late(limit)),
        }
    }
}

/// Whether a writer's contender is its container's only child, from the container's `Stat`
/// that the fence record's write answers in the writer's own transaction: the transaction's
/// operations apply in order, so the record's write counts the children with the create
/// just before it. One child is the create itself: nothing stands ahead of it, and it holds
/// the lock without a listing (a contender created later, in this transaction or after it,
/// stands behind). More than one, and where it stands takes a listing, as before.
pub(super) fn first_alone(container: &zk::Stat) -> bool {
    container.num_children == 1
}

/// A writer's place when its transaction's answer tells it: first, holding the lock with its
/// fence.
fn holds_if(alone: bool, czxid: i64, fences: u64) -> Option<Place> {
    alone.then(|| Place::Holds {
        top: writer_top(czxid, fences),
    })
}
