//! Watching a lock's queue for a subscription: the znode just ahead of ours, or, for a
//! reader waiting without one, the last writer's, or the queue itself.

use std::time::Duration;

use zookeeper_client as zk;

use super::names::{in_order, CHILD};

/// What a subscription watches one lock's queue with: the client of the session it started
/// in (a new session's queue is another subscription's).
pub(crate) struct Watcher {
    pub(super) client: zk::Client,
    /// The lock's container.
    pub(super) parent: String,
    pub(super) limit: Duration,
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
