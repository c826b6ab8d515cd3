//! The ZooKeeper baseline: the lock recipe of the client leasehold itself uses
//! (`zookeeper_client::Client::lock`, Curator's prefix, persistent parents made on demand), with
//! the same session timeout as ours.

use zookeeper_client as zk;

use super::bounded;
use crate::engine::SESSION_TIMEOUT;
use crate::key_lock::{KeyLock, KeysAtOnce};

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

/// The fenced recipe's lock directories (persistent, created when missing).
const FENCED_ROOT: &str = "/bench-fenced";

/// The fenced recipe's name in the report.
pub(crate) const ZOOKEEPER_FENCED_RECIPE: &str =
    "the recipe by hand, with a fence record written as ours is";

/// The name of several keys by hand ([`KeysAtOnce`]) in the report.
pub(crate) const ZOOKEEPER_KEYS_BY_HAND: &str =
    "by hand: one multi creates every znode and its fence record (alone: first), one deletes \
     them";

/// The same with one key, the single-key floor it is measured against.
pub(crate) const ZOOKEEPER_KEY_BY_HAND: &str =
    "by hand: one multi creates the znode and its fence record (alone: first), one deletes it";

/// The recipe's cycle written by hand with the one write ours adds to it: the contender's
/// ephemeral sequential znode created in one `multi` with a fence record in the lock
/// directory's data (what lets a reader's fence name the last writer's), then the directory
/// listed and the znode deleted. What a fenced lock on ZooKeeper costs before any library
/// work, as the restore-safe raw lock is on Redis. Uncontended cycles only: each task has keys
/// of its own, so the znode is always first (checked).
#[derive(Clone)]
pub(crate) struct ZooKeeperFencedRecipe {
    client: zk::Client,
}

impl ZooKeeperFencedRecipe {
    pub(crate) async fn connect(hosts: &str) -> ZooKeeperFencedRecipe {
        let ZooKeeperRecipe { client } = ZooKeeperRecipe::connect(hosts).await;
        ZooKeeperFencedRecipe { client }
    }

    /// Makes `path` (persistent) unless it is there.
    async fn ensure(&self, path: &str) {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match bounded(
            "the fenced recipe's create",
            self.client.create(path, b"", &options),
        )
        .await
        {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => panic!("creating {path}: {e}"),
        }
    }
}

impl KeyLock for ZooKeeperFencedRecipe {
    type Held<'a> = String;

    async fn acquire<'a>(&'a self, key: &'a str) -> String {
        let dir = format!("{FENCED_ROOT}/{key}");
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        loop {
            let mut multi = self.client.new_multi_writer();
            multi
                .add_create(&format!("{dir}/lock-"), b"", &options)
                .and_then(|()| multi.add_set_data(&dir, b"+1", None))
                .expect("a multi");
            match bounded("the fenced recipe's multi", multi.commit())
                .await
                .map_err(zk::Error::from)
            {
                Ok(results) => {
                    let Some(zk::MultiWriteResult::Create { path, .. }) =
                        results.into_iter().next()
                    else {
                        panic!("a create without its path");
                    };
                    let children = bounded(
                        "the fenced recipe's listing",
                        self.client.list_children(&dir),
                    )
                    .await
                    .expect("listing");
                    let first = children.iter().min_by_key(|c| c.rsplit('-').next());
                    assert_eq!(
                        first.map(|c| format!("{dir}/{c}")).as_deref(),
                        Some(path.as_str()),
                        "the fenced recipe is measured uncontended only"
                    );
                    return path;
                }
                Err(zk::Error::NoNode) => {
                    self.ensure(FENCED_ROOT).await;
                    self.ensure(&dir).await;
                }
                Err(e) => panic!("fenced recipe: {e}"),
            }
        }
    }

    async fn release<'a>(&'a self, _: &'a str, path: String) {
        bounded(
            "the fenced recipe's delete",
            self.client.delete(&path, None),
        )
        .await
        .expect("fenced recipe's delete");
    }
}

/// Several free keys by hand as ours takes them: one `multi` creates each key's ephemeral
/// sequential znode and writes its fence record in the lock directory's data, whose answer
/// (the directory's `Stat`, one child) tells that the znode is alone, so first, with no
/// listing; one `multi` deletes them all. A missing directory fails the `multi` (nothing
/// made); the directories are made and it is sent again. The floor of ours on ZooKeeper,
/// where `lock_all` of free keys is one `multi` and its release one more.
impl KeysAtOnce for ZooKeeperFencedRecipe {
    /// The znodes' paths.
    type Held = Vec<String>;

    async fn acquire_all<'a>(&'a self, keys: &'a [String]) -> Vec<String> {
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let dirs: Vec<String> = keys.iter().map(|k| format!("{FENCED_ROOT}/{k}")).collect();
        loop {
            let mut multi = self.client.new_multi_writer();
            for dir in &dirs {
                multi
                    .add_create(&format!("{dir}/lock-"), b"", &options)
                    .and_then(|()| multi.add_set_data(dir, b"+1", None))
                    .expect("a multi");
            }
            match bounded("the keys' multi by hand", multi.commit())
                .await
                .map_err(zk::Error::from)
            {
                Ok(results) => {
                    let mut paths = Vec::with_capacity(dirs.len());
                    for result in results {
                        match result {
                            zk::MultiWriteResult::Create { path, .. } => paths.push(path),
                            zk::MultiWriteResult::SetData { stat } => assert_eq!(
                                stat.num_children, 1,
                                "the keys by hand are measured uncontended only"
                            ),
                            _ => panic!("an answer that was not asked for"),
                        }
                    }
                    assert_eq!(paths.len(), dirs.len(), "a create without its path");
                    return paths;
                }
                Err(zk::Error::NoNode) => {
                    self.ensure(FENCED_ROOT).await;
                    for dir in &dirs {
                        self.ensure(dir).await;
                    }
                }
                Err(e) => panic!("the keys by hand: {e}"),
            }
        }
    }

    async fn release_all<'a>(&'a self, _: &'a [String], paths: Vec<String>) {
        let mut multi = self.client.new_multi_writer();
        for path in &paths {
            multi.add_delete(path, None).expect("a multi");
        }
        bounded("the keys' deletes by hand", multi.commit())
            .await
            .expect("the keys' deletes by hand");
    }
}
