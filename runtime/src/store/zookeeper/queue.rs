//! The znodes of one lock's queue: creating a contender's, listing them in order, watching
//! the one ahead, and deleting ours in the background until ZooKeeper answers.

use std::time::Duration;

use zookeeper_client as zk;

use super::contend::Node;
use super::names::{in_order, tag, CHILD, FENCE_SLOTS, ROOT};
use super::ZooKeeperStore;
use crate::error::LockError;
use crate::store::token::OwnerToken;

impl ZooKeeperStore {
    /// Creates the lock's container (and the root) if missing.
    pub(super) async fn ensure_parent(
        &self,
        client: &zk::Client,
        parent: &str,
    ) -> Result<(), LockError> {
        let acls = zk::Acls::anyone_all();
        for (path, mode) in [
            (ROOT, zk::CreateMode::Persistent),
            (parent, zk::CreateMode::Container),
        ] {
            match self
                .bounded(
                    "refused a create",
                    client.create(path, &[], &mode.with_acls(acls)),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.to_string().contains("node already exists") => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Creates this contender's znode under `parent`, named `<kind><tag>-<sequence>`. A
    /// writer's (`fences` given) is created in one transaction with the fence record in the
    /// container's data (see [`reader_fence`]).
    pub(super) async fn create_child(
        &self,
        client: &zk::Client,
        session: u64,
        parent: &str,
        token: &OwnerToken,
        kind: &str,
        fences: Option<u64>,
    ) -> Result<Node, LockError> {
        let path = format!("{parent}/{kind}{}-", tag(token));
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let limit = self.settings.op_timeout;
        // The container may be deleted between its creation and ours (its last child went):
        // create it again, a bounded number of times.
        for _ in 0..3 {
            let created = match fences {
                None => match tokio::time::timeout(
                    limit,
                    client.create(&path, token.as_bytes(), &options),
                )
                .await
                {
                    Ok(Ok((stat, seq))) => Ok((format!("{path}{seq}"), stat.czxid)),
                    Ok(Err(e)) => Err(e),
                    Err(_) => return Err(self.late(limit)),
                },
                Some(fences) => {
                    let record = format!("+{fences}");
                    let mut multi = client.new_multi_writer();
                    let commit = multi
                        .add_create(&path, token.as_bytes(), &options)
                        .and_then(|()| multi.add_set_data(parent, record.as_bytes(), None))
                        .map(|()| multi.commit());
                    let commit = match commit {
                        Ok(commit) => commit,
                        Err(e) => return Err(self.unavailable("refused a create", e)),
                    };
                    match tokio::time::timeout(limit, commit).await {
                        Ok(Ok(results)) => created_by(results).ok_or_else(|| {
                            zk::Error::UnexpectedError("a create without its path".into())
                        }),
                        Ok(Err(e)) => Err(zk::Error::from(e)),
                        Err(_) => return Err(self.late(limit)),
                    }
                }
            };
            match created {
                Ok((path, czxid)) => {
                    return Ok(Node {
                        path,
                        czxid,
                        session,
                        client: client.clone(),
                    })
                }
                Err(zk::Error::NoNode) => self.ensure_parent(client, parent).await?,
                Err(e) => return Err(self.unavailable("refused a create", e)),
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
            Ok(Err(e)) => return Err(self.unavailable("refused a read", e)),
            Err(_) => return Err(self.late(self.settings.op_timeout)),
        };
        Ok(in_order(children))
    }

    pub(super) async fn watch_predecessor(
        &self,
        client: &zk::Client,
        parent: &str,
        mine: Option<&str>,
    ) -> Result<Option<zk::OneshotWatcher>, LockError> {
        watch_predecessor(client, parent, mine, self.settings.op_timeout)
            .await
            .map_err(|e| self.unavailable("refused a watch", e))
    }
}

/// A znode of ours to delete in the background.
pub(super) enum Cleanup {
    Path(String),
    /// Every child of `parent` whose name starts with `prefix` (an attempt's tag).
    Tagged {
        parent: String,
        prefix: String,
    },
}

/// How long a background deletion keeps trying, at most.
pub(super) const CLEAN_UP_FOR: Duration = Duration::from_secs(60);

/// Whether a deletion is settled: done, or nothing left to do (the znode or its session is
/// gone, and the server deletes a session's znodes with it).
pub(super) fn settled(result: &Result<(), zk::Error>) -> bool {
    matches!(
        result,
        Ok(()) | Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed)
    )
}

/// Deletes `what` in the background, trying again while ZooKeeper does not answer (a
/// failover, a partition), until it is gone or its session ended. A znode of ours left
/// behind would stand in the lock's queue as long as the session lives, and everyone behind
/// it would wait.
pub(super) fn clean_up(client: zk::Client, what: Cleanup) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: the znode goes with the session
    };
    runtime.spawn(async move {
        let until = tokio::time::Instant::now() + CLEAN_UP_FOR;
        let mut pause = Duration::from_millis(50);
        while tokio::time::Instant::now() < until {
            if settled(&delete_once(&client, &what).await) {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
}

pub(super) async fn delete_once(client: &zk::Client, what: &Cleanup) -> Result<(), zk::Error> {
    let limit = Duration::from_secs(2);
    let delete = |path: String| async move {
        tokio::time::timeout(limit, client.delete(&path, None))
            .await
            .unwrap_or(Err(zk::Error::Timeout))
    };
    match what {
        Cleanup::Path(path) => delete(path.clone()).await,
        Cleanup::Tagged { parent, prefix } => {
            let children = tokio::time::timeout(limit, client.list_children(parent))
                .await
                .unwrap_or(Err(zk::Error::Timeout))?;
            let mut outcome = Ok(());
            for child in children.iter().filter(|c| c.starts_with(prefix.as_str())) {
                let result = delete(format!("{parent}/{child}")).await;
                if !settled(&result) {
                    outcome = result;
                }
            }
            outcome
        }
    }
}

/// Sets a watch on the znode just ahead of `mine` in `parent`'s queue (when this process has
/// no znode there, as a waiting reader, on the last writer's znode, or on the queue itself
/// when no writer is in it). `None` when there is nothing to wait for.
pub(super) async fn watch_predecessor(
    client: &zk::Client,
    parent: &str,
    mine: Option<&str>,
    limit: Duration,
) -> Result<Option<zk::OneshotWatcher>, String> {
    fn bounded<T>(
        answer: Result<T, tokio::time::error::Elapsed>,
        limit: Duration,
    ) -> Result<T, String> {
        answer.map_err(|_| format!("no answer within {limit:?}"))
    }
    loop {
        let Some(mine) = mine else {
            // No znode of this process waits here: a reader waits (it holds no place in the
            // queue) for the last writer's znode to go, or, with no writer there, for any
            // change of the queue (a writer may be coming).
            let children = bounded(
                tokio::time::timeout(limit, client.list_children(parent)).await,
                limit,
            )?;
            let queue = match children {
                Ok(children) => in_order(children),
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            if let Some(writer) = queue.iter().rev().find(|c| c.starts_with(CHILD)) {
                let watched = bounded(
                    tokio::time::timeout(
                        limit,
                        client.check_and_watch_stat(&format!("{parent}/{writer}")),
                    )
                    .await,
                    limit,
                )?;
                match watched {
                    Ok((Some(_), watcher)) => return Ok(Some(watcher)),
                    Ok((None, _)) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            let listed = bounded(
                tokio::time::timeout(limit, client.get_and_watch_children(parent)).await,
                limit,
            )?;
            return match listed {
                Ok((_, _, watcher)) => Ok(Some(watcher)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e.to_string()),
            };
        };
        let children = bounded(
            tokio::time::timeout(limit, client.list_children(parent)).await,
            limit,
        )?;
        let queue = match children {
            Ok(children) => in_order(children),
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let Some(at) = queue.iter().position(|c| c == mine) else {
            return Ok(None);
        };
        if at == 0 {
            return Ok(None);
        }
        let ahead = format!("{parent}/{}", queue[at - 1]);
        let watched = bounded(
            tokio::time::timeout(limit, client.check_and_watch_stat(&ahead)).await,
            limit,
        )?;
        match watched {
            Ok((Some(_), watcher)) => return Ok(Some(watcher)),
            // Gone between the listing and the watch: look again.
            Ok((None, _)) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The path and creation zxid of the znode a writer's transaction created. The transaction
/// has one zxid: the record's `mzxid` stands in for the `czxid` some servers leave out of a
/// create's answer inside a transaction (ZOOKEEPER-4026).
pub(super) fn created_by(results: Vec<zk::MultiWriteResult>) -> Option<(String, i64)> {
    let mut path = None;
    let mut zxid = None;
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
            }
            _ => {}
        }
    }
    Some((path?, zxid?))
}

/// A reader's fence, from the container's data and stat read once the reader's znode (created
/// at `mine`) was in. Every writer's znode is created in one transaction with `+n` in the
/// container's data, so the record's `mzxid` is that writer's `czxid` and its fences top is
/// `mzxid × 32 + n`. When the record is older than the reader's znode, it is the last writer
/// that came before the reader: the reader got in, so that writer held the lock and left (or
/// gave up waiting, or its session ended) and its top is the fence the reader sees. When a
/// writer came after the reader and overwrote the record, or there is none, the reader's fence
/// is `mine × 32` (or, with no record at all, the container's `czxid × 32`, the same for
/// every reader): either way at or above every fence of the writers before the reader, below
/// every fence of the writers after.
pub(super) fn reader_fence(record: Option<(Vec<u8>, zk::Stat)>, mine: i64) -> u64 {
    let mine_floor = (mine.max(0) as u64) * FENCE_SLOTS;
    let Some((data, stat)) = record else {
        return mine_floor.max(1);
    };
    let recorded = std::str::from_utf8(&data)
        .ok()
        .and_then(|text| text.strip_prefix('+')?.parse::<u64>().ok());
    let top = match recorded {
        Some(n) if stat.mzxid < mine => (stat.mzxid.max(0) as u64) * FENCE_SLOTS + n,
        Some(_) => mine_floor,
        None => (stat.czxid.max(0) as u64) * FENCE_SLOTS,
    };
    top.max(1)
}
