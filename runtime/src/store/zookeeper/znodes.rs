//! The znodes of one lock's queue: its container, a contender's creation (a writer's in one
//! transaction with its fence record), and the queue listed in order.

use zookeeper_client as zk;

use super::names::{in_order, ROOT};
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::sequenced::Contender;
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

    /// Creates a reader's or a permits contender's znode `<path><sequence>` under `parent`
    /// (`path` is its name, `<parent>/<kind><tag>-`), by itself: a writer's goes in a `multi`
    /// with its fence record ([`create_children`](ZooKeeper::create_children)).
    pub(super) async fn create_child(
        &self,
        client: &zk::Client,
        session: u64,
        parent: &str,
        path: &str,
        token: &OwnerToken,
    ) -> Result<Contender<zk::Client>, LockError> {
        let options = zk::CreateMode::EphemeralSequential.with_acls(self.acls());
        let limit = self.settings.op_timeout;
        // The container may be deleted between its creation and ours (its last child went):
        // create it again, a bounded number of times.
        for _ in 0..3 {
            let created =
                tokio::time::timeout(limit, client.create(path, token.as_bytes(), &options));
            match created.await {
                Ok(Ok((stat, seq))) => {
                    return Ok(Contender {
                        name: format!("{path}{seq}"),
                        order: stat.czxid,
                        session,
                        via: client.clone(),
                    })
                }
                Ok(Err(zk::Error::NoNode)) => self.ensure_parent(client, parent).await?,
                Ok(Err(e)) => return Err(self.failed("refused a create", e)),
                Err(_) => return Err(self.late(limit)),
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
