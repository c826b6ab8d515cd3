//! The classic ZooKeeper election, written directly with the client the engine uses
//! (zookeeper-client): each candidate creates an ephemeral sequential znode under the
//! election's directory, and leads when its znode is the lowest; until then it watches the
//! znode just before its own. The observer lists the directory with a child watch: the
//! lowest znode is the leader, its sequence number (plus one) the term.

use zookeeper_client as zk;

use crate::engine::SESSION_TIMEOUT;
use crate::scenarios::leader::handover::Election;

/// Its name in the report.
pub(crate) const ZOOKEEPER_ELECTION: &str =
    "recipe by hand: ephemeral sequential znodes, watch the predecessor (zookeeper-client)";

/// The elections' directories.
const ROOT: &str = "/bench-raw-leader";

/// A candidate's znodes are `n-<sequence>`.
const PREFIX: &str = "n-";

/// The election `name` on the ensemble at `hosts`.
pub(crate) struct ZooKeeperElection {
    hosts: String,
    dir: String,
}

impl ZooKeeperElection {
    pub(crate) fn new(hosts: &str, name: String) -> ZooKeeperElection {
        ZooKeeperElection {
            hosts: hosts.to_owned(),
            dir: format!("{ROOT}/{name}"),
        }
    }

    /// A session with the same timeout as ours, and the election's directory made.
    async fn session(&self) -> zk::Client {
        let client = zk::Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .connect(&self.hosts)
            .await
            .expect("zookeeper session");
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.mkdir(&self.dir, &persistent).await.expect("mkdir");
        client
    }

    /// The sequence numbers of the election's znodes, lowest first.
    fn sequences(children: &[String]) -> Vec<i64> {
        let mut seqs: Vec<i64> = children
            .iter()
            .filter_map(|c| c.strip_prefix(PREFIX)?.parse().ok())
            .collect();
        seqs.sort_unstable();
        seqs
    }

    fn znode(&self, seq: i64) -> String {
        format!("{}/{PREFIX}{seq:010}", self.dir)
    }
}

impl Election for ZooKeeperElection {
    type Candidate = zk::Client;
    /// The candidate's znode.
    type Leadership = String;
    type Observer = zk::Client;

    async fn candidate(&self) -> zk::Client {
        self.session().await
    }

    async fn campaign<'a>(&'a self, client: &'a zk::Client, identity: &'a str) -> (String, u64) {
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let path = format!("{}/{PREFIX}", self.dir);
        let (_, seq) = client
            .create(&path, identity.as_bytes(), &ephemeral)
            .await
            .expect("create the candidate's znode");
        let mine = seq.into_i64();
        loop {
            let (children, _) = client.get_children(&self.dir).await.expect("children");
            let before = Self::sequences(&children)
                .into_iter()
                .take_while(|&s| s < mine)
                .last();
            let Some(predecessor) = before else {
                return (self.znode(mine), mine as u64 + 1);
            };
            let (stat, watcher) = client
                .check_and_watch_stat(&self.znode(predecessor))
                .await
                .expect("watch the predecessor");
            if stat.is_some() {
                watcher.changed().await;
            }
        }
    }

    async fn resign<'a>(&'a self, client: &'a zk::Client, znode: String) {
        client.delete(&znode, None).await.expect("delete");
    }

    /// The session closes when its last client goes; the server deletes its ephemeral znodes.
    async fn end_session(&self, client: zk::Client, _: String) {
        drop(client);
    }

    async fn observer(&self) -> zk::Client {
        self.session().await
    }

    async fn next_leader<'a>(&'a self, client: &'a mut zk::Client, last: u64) -> u64 {
        loop {
            let (children, _, watcher) = client
                .get_and_watch_children(&self.dir)
                .await
                .expect("watch the election");
            if let Some(&lowest) = Self::sequences(&children).first() {
                let term = lowest as u64 + 1;
                if term != last {
                    return term;
                }
            }
            watcher.changed().await;
        }
    }
}
