//! Watching a lock's queue for a subscription: the znode just ahead of ours, or, for a
//! waiter without one, the last writer's and the first writer's (whose data holds an
//! election's leader record), or the queue itself; for a semaphore, every deletion.

use std::collections::HashSet;
use std::future::Future;
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

fn bounded<T>(
    answer: Result<T, tokio::time::error::Elapsed>,
    limit: Duration,
) -> Result<T, String> {
    answer.map_err(|_| format!("no answer within {limit:?}"))
}

/// A watch on one znode's existence and data; `None` when it is gone.
async fn watch_node(
    client: &zk::Client,
    path: &str,
    limit: Duration,
) -> Result<Option<zk::OneshotWatcher>, String> {
    let watched = bounded(
        tokio::time::timeout(limit, client.check_and_watch_stat(path)).await,
        limit,
    )?;
    match watched {
        Ok((Some(_), watcher)) => Ok(Some(watcher)),
        Ok((None, _)) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Sets watches on what `mine` waits for in `parent`'s queue: the znode just ahead of it.
/// When this process has no znode there (a waiting reader, an election's observer): the last
/// writer's znode and the first writer's (a leader record written there is a data change),
/// or the queue itself when no writer is in it, or the container's creation when it is gone.
/// `None` when there is nothing to wait for.
pub(super) async fn watch_predecessor(
    client: &zk::Client,
    parent: &str,
    mine: Option<&str>,
    limit: Duration,
) -> Result<Option<Vec<zk::OneshotWatcher>>, String> {
    for _ in 0..8 {
        let children = bounded(
            tokio::time::timeout(limit, client.list_children(parent)).await,
            limit,
        )?;
        let queue = match children {
            Ok(children) => in_order(children),
            Err(zk::Error::NoNode) if mine.is_none() => {
                // No queue at all: the next one begins with the container's creation.
                let watched = bounded(
                    tokio::time::timeout(limit, client.check_and_watch_stat(parent)).await,
                    limit,
                )?;
                match watched {
                    Ok((None, watcher)) => return Ok(Some(vec![watcher])),
                    Ok((Some(_), _)) => continue,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let Some(mine) = mine else {
            // No znode of this process waits here: a reader waits (it holds no place in the
            // queue) for the last writer's znode to go, or, with no writer there, for any
            // change of the queue (a writer may be coming); an observer for the first
            // writer's record too.
            let mut writers = queue.iter().filter(|c| c.starts_with(CHILD));
            let (Some(first), last) = (writers.next(), writers.next_back()) else {
                let listed = bounded(
                    tokio::time::timeout(limit, client.get_and_watch_children(parent)).await,
                    limit,
                )?;
                return match listed {
                    Ok((_, _, watcher)) => Ok(Some(vec![watcher])),
                    Err(zk::Error::NoNode) => continue,
                    Err(e) => Err(e.to_string()),
                };
            };
            let mut watchers = Vec::with_capacity(2);
            for writer in std::iter::once(first).chain(last) {
                match watch_node(client, &format!("{parent}/{writer}"), limit).await? {
                    Some(watcher) => watchers.push(watcher),
                    None => break,
                }
            }
            if watchers.len() == 1 + usize::from(last.is_some()) {
                return Ok(Some(watchers));
            }
            continue; // one went between the listing and the watch: look again
        };
        let Some(at) = queue.iter().position(|c| c == mine) else {
            return Ok(None);
        };
        if at == 0 {
            return Ok(None);
        }
        match watch_node(client, &format!("{parent}/{}", queue[at - 1]), limit).await? {
            Some(watcher) => return Ok(Some(vec![watcher])),
            // Gone between the listing and the watch: look again.
            None => continue,
        }
    }
    Err("the queue kept changing under the watch".into())
}

/// Resolves when the first of `watchers` fires.
pub(super) async fn any_of(watchers: Vec<zk::OneshotWatcher>) {
    let mut watchers = watchers.into_iter();
    match (watchers.next(), watchers.next()) {
        (Some(a), Some(b)) => {
            tokio::select! {
                _ = a.changed() => {}
                _ = b.changed() => {}
            }
        }
        (Some(a), None) => {
            let _ = a.changed().await;
        }
        _ => {}
    }
}

/// A watch of a semaphore's queue, armed: the children it listed, and its watch.
enum Armed {
    Children(HashSet<String>, zk::OneshotWatcher),
    /// No container: it is watched for its creation.
    Missing(zk::OneshotWatcher),
}

async fn arm(client: &zk::Client, parent: &str, limit: Duration) -> Result<Armed, String> {
    for _ in 0..3 {
        let listed = bounded(
            tokio::time::timeout(limit, client.get_and_watch_children(parent)).await,
            limit,
        )?;
        match listed {
            Ok((children, _, watcher)) => {
                return Ok(Armed::Children(children.into_iter().collect(), watcher))
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e.to_string()),
        }
        let watched = bounded(
            tokio::time::timeout(limit, client.check_and_watch_stat(parent)).await,
            limit,
        )?;
        match watched {
            Ok((None, watcher)) => return Ok(Armed::Missing(watcher)),
            Ok((Some(_), _)) => continue, // made meanwhile: list it
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the queue kept changing under the watch".into())
}

/// Watches `parent`'s queue for the deletion of any child (creations only re-arm the watch):
/// armed before this returns; the future resolves at the first deletion seen, or when the
/// watch cannot be set again (the waiter then looks).
pub(super) async fn watch_deletions(
    client: zk::Client,
    parent: String,
    limit: Duration,
) -> Result<impl Future<Output = ()> + Send, String> {
    let mut armed = arm(&client, &parent, limit).await?;
    Ok(async move {
        loop {
            let (seen, watcher) = match armed {
                Armed::Children(seen, watcher) => (seen, watcher),
                Armed::Missing(watcher) => (HashSet::new(), watcher),
            };
            let _ = watcher.changed().await;
            armed = match arm(&client, &parent, limit).await {
                Ok(armed) => armed,
                Err(_) => return,
            };
            let gone = match &armed {
                Armed::Children(now, _) => seen.iter().any(|c| !now.contains(c)),
                Armed::Missing(_) => !seen.is_empty(),
            };
            if gone {
                return;
            }
        }
    })
}
