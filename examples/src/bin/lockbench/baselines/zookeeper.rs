//! The ZooKeeper baseline: the lock recipe of the client leasehold itself uses
//! (`zookeeper_client::Client::lock`, Curator's prefix, persistent parents made on demand), with
//! the same session timeout as ours.

use zookeeper_client as zk;

use crate::engine::SESSION_TIMEOUT;
use crate::key_lock::KeyLock;

/// The recipe's lock directories (persistent, created by the recipe when missing).
const ROOT: &str = "/bench-raw";

/// The recipe's name in the report.
pub(crate) const ZOOKEEPER_RECIPE: &str = "zookeeper-client's Client::lock (curator prefix)";

/// One session of the recipe's client, shared by the tasks of a process.
#[derive(Clone)]
pub(crate) struct ZooKeeperRecipe {
    client: zk::Client,
}

impl ZooKeeperRecipe {
    pub(crate) async fn connect(hosts: &str) -> ZooKeeperRecipe {
        let client = zk::Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .connect(hosts)
            .await
            .expect("zookeeper client");
        ZooKeeperRecipe { client }
    }
}

/// An acquisition is an ephemeral sequential `_c_<uuid>-lock-<seq>` under `/bench-raw/<key>`
/// (created, with its parents, if missing), then waiting until it is the lowest.
impl KeyLock for ZooKeeperRecipe {
    type Held<'a> = zk::LockClient<'a>;

    async fn acquire<'a>(&'a self, key: &'a str) -> zk::LockClient<'a> {
        let options = zk::LockOptions::new(zk::Acls::anyone_all())
            .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
            .expect("ancestor options");
        let dir = format!("{ROOT}/{key}");
        let prefix = zk::LockPrefix::new_curator(&dir, "lock-").expect("lock prefix");
        self.client
            .lock(prefix, b"", options)
            .await
            .expect("raw lock")
    }

    /// Deletes the lock's znode and waits for the answer, as ours is waited for. The recipe's
    /// own release is a delete its `LockClient` sends in the background when dropped; dropping
    /// it after ours would send a second one, so it is forgotten (its path, a few dozen bytes,
    /// stays allocated until the benchmark exits).
    async fn release<'a>(&'a self, _: &'a str, lock: zk::LockClient<'a>) {
        self.client
            .delete(lock.lock_path(), None)
            .await
            .expect("raw unlock");
        std::mem::forget(lock);
    }
}
