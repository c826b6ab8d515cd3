//! The znodes of one lock's queue: its container, a contender's creation (a writer's in one
//! transaction with its fence record), and the queue listed in order.

use zookeeper_client as zk;

use super::names::{in_order, ROOT};
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::sequenced::{writer_top, Contender, Place};
use crate::store::token::OwnerToken;

impl ZooKeeper {
    /// Creates the lock's container (and the root) if missing, with this locker's ACL (see
    /// [`acls`](ZooKeeper::acls)).
    pub(super) async fn ensure_parent(
        &self,
        client: &zk::Client,
        parent: &str,
    ) -> Result<(), LockError> {
        self.ensure(client, ROOT, zk::CreateMode::Persistent)
            .await?;
        self.ensure(client, parent, zk::CreateMode::Container).await
    }

    /// Creates a contender's znode `<path><sequence>` under `parent` (`path` is its name,
    /// `<parent>/<kind><tag>-`). A writer's (`fences` given) is created in one transaction
    /// with the fence record in the container's data (see
    /// [`reader_fence`](super::driver::reader_fence)), and where it stands comes with the
    /// answer when it is the container's only child ([`first_alone`]).
    pub(super) async fn create_child(
        &self,
        client: &zk::Client,
        session: u64,
        parent: &str,
        path: &str,
        token: &OwnerToken,
        fences: Option<u64>,
    ) -> Result<(Contender<zk::Client>, Option<Place>), LockError> {
        let options = zk::CreateMode::EphemeralSequential.with_acls(self.acls());
        let limit = self.settings.op_timeout;
        // The container may be deleted between its creation and ours (its last child went):
        // create it again, a bounded number of times.
        for _ in 0..3 {
            let created = match fences {
                None => match tokio::time::timeout(
                    limit,
                    client.create(path, token.as_bytes(), &options),
                )
                .await
                {
                    Ok(Ok((stat, seq))) => Ok((format!("{path}{seq}"), stat.czxid, None)),
                    Ok(Err(e)) => Err(e),
                    Err(_) => return Err(self.late(limit)),
                },
                Some(fences) => {
                    let record = format!("+{fences}");
                    let mut multi = client.new_multi_writer();
                    let commit = multi
                        .add_create(path, token.as_bytes(), &options)
                        .and_then(|()| multi.add_set_data(parent, record.as_bytes(), None))
                        .map(|()| multi.commit());
                    let commit = match commit {
                        Ok(commit) => commit,
                        Err(e) => return Err(self.failed("refused a create", e)),
                    };
                    match tokio::time::timeout(limit, commit).await {
                        Ok(Ok(results)) => created_by(results, fences).ok_or_else(|| {
                            zk::Error::UnexpectedError("a create without its path".into())
                        }),
                        Ok(Err(e)) => Err(zk::Error::from(e)),
                        Err(_) => return Err(self.late(limit)),
                    }
                }
            };
            match created {
                Ok((name, czxid, place)) => {
                    let mine = Contender {
                        name,
                        order: czxid,
                        session,
                        via: client.clone(),
                    };
                    return Ok((mine, place));
                }
                Err(zk::Error::NoNode) => self.ensure_parent(client, parent).await?,
                Err(e) => return Err(self.failed("refused a create", e)),
            }
        }
        Err(self.unavailable("kept deleting the lock's znode", "giving up"))
    }

    /// The children of `parent` in queue order (by sequence number).
    pub(super) async fn queue(
        &self,
        client: &zk::Client,
        parent: &str,
    ) -> Result<Vec<String>, LockError> {
        let children = match tokio::time::timeout(
            self.settings.op_timeout,
            client.list_children(parent),
        )
        .await
        {
            Ok(Ok(children)) => children,
            Ok(Err(zk::Error::NoNode)) => Vec::new(),
            Ok(Err(e)) => return Err(self.failed("refused a read", e)),
            Err(_) => return Err(self.late(self.settings.op_timeout)),
        };
        Ok(in_order(children))
    }
}

/// The path and creation zxid of the znode a writer's transaction created, and its place
/// when the answer tells it ([`first_alone`]). The transaction has one zxid: the record's
/// `mzxid` stands in for the `czxid` some servers leave out of a create's answer inside a
/// transaction (ZOOKEEPER-4026).
fn created_by(
    results: Vec<zk::MultiWriteResult>,
    fences: u64,
) -> Option<(String, i64, Option<Place>)> {
    let mut path = None;
    let mut zxid = None;
    let mut alone = false;
    for result in results {
        match result {
            zk::MultiWriteResult::Create { path: p, stat } => {
                path = Some(p);
                if !stat.is_invalid() {
                    zxid = Some(stat.czxid);
                }
            }
            zk::MultiWriteResult::SetData { stat } => {
                zxid = zxid.or(Some(stat.mzxid));
                alone = first_alone(&stat);
            }
            _ => {}
        }
    }
    let zxid = zxid?;
    Some((path?, zxid, holds_if(alone, zxid, fences)))
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
pub(super) fn holds_if(alone: bool, czxid: i64, fences: u64) -> Option<Place> {
    alone.then(|| Place::Holds {
        top: writer_top(czxid, fences),
    })
}
