//! A ZooKeeper semaphore in the manner of Curator's `InterProcessSemaphoreV2`, written
//! directly with the client the engine uses (zookeeper-client), without its outer lock:
//! each acquisition creates an ephemeral sequential lease znode under the semaphore's
//! directory and holds once fewer than [`PERMITS`] lease znodes are ahead of its own; until
//! then it watches the directory's children (every waiter wakes on every change, as
//! Curator's does). One session for the tasks of the process, as ours.

use zookeeper_client as zk;

use crate::engine::SESSION_TIMEOUT;
use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const ZOOKEEPER_SEMAPHORE: &str =
    "ephemeral sequential lease znodes, count those ahead, child watch (zookeeper-client)";

const PREFIX: &str = "lease-";

#[derive(Clone)]
pub(crate) struct ZooKeeperPermits {
    client: zk::Client,
    dir: String,
}

impl ZooKeeperPermits {
    pub(crate) async fn connect(hosts: &str, name: &str) -> ZooKeeperPermits {
        let client = zk::Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .connect(hosts)
            .await
            .expect("zookeeper session");
        let dir = format!("/bench-raw-semaphore/{name}");
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.mkdir(&dir, &persistent).await.expect("mkdir");
        ZooKeeperPermits { client, dir }
    }
}

impl Permits for ZooKeeperPermits {
    /// The lease znode.
    type Permit = String;

    async fn acquire(&self) -> String {
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let (_, seq) = self
            .client
            .create(&format!("{}/{PREFIX}", self.dir), b"", &ephemeral)
            .await
            .expect("create the lease znode");
        let mine = seq.into_i64();
        loop {
            let (children, _, watcher) = self
                .client
                .get_and_watch_children(&self.dir)
                .await
                .expect("watch the leases");
            let ahead = children
                .iter()
                .filter_map(|c| c.strip_prefix(PREFIX)?.parse::<i64>().ok())
                .filter(|&s| s < mine)
                .count();
            if ahead < PERMITS as usize {
                return format!("{}/{PREFIX}{seq}", self.dir);
            }
            watcher.changed().await;
        }
    }

    async fn release(&self, znode: String) {
        self.client.delete(&znode, None).await.expect("delete");
    }
}
