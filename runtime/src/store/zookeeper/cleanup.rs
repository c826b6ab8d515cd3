//! Deleting znodes of ours in the background, until ZooKeeper answers: one left behind
//! would stand in its lock's queue as long as the session lives.

use std::time::Duration;

use zookeeper_client as zk;

use crate::store::sequenced::WeakContenders;

/// A znode of ours to delete in the background.
pub(super) enum Cleanup {
    Path(String),
    /// Every child of `parent` whose name starts with `prefix` (the tag of an attempt whose
    /// create went unanswered), except one that `spare` knows as a waiter's or a holder's:
    /// such a one was made by an answered create, and is not this clean-up's, however late
    /// it runs.
    Tagged {
        parent: String,
        prefix: String,
        spare: WeakContenders<zk::Client>,
    },
}

/// How long a background deletion keeps trying, at most.
pub(super) const CLEAN_UP_FOR: Duration = Duration::from_secs(60);

/// Whether a deletion is settled: done, or nothing left to do (the znode or its session is
/// gone, and the server deletes a session's znodes with it), or nothing this client can do
/// (its identity may not delete the znode: trying again will not change that).
pub(super) fn settled(result: &Result<(), zk::Error>) -> bool {
    matches!(
        result,
        Ok(())
            | Err(zk::Error::NoNode
                | zk::Error::SessionExpired
                | zk::Error::ClientClosed
                | zk::Error::NoAuth
                | zk::Error::AuthFailed)
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
        Cleanup::Tagged {
            parent,
            prefix,
            spare,
        } => {
            let children = tokio::time::timeout(limit, client.list_children(parent))
                .await
                .unwrap_or(Err(zk::Error::Timeout))?;
            let mut outcome = Ok(());
            for child in children.iter().filter(|c| c.starts_with(prefix.as_str())) {
                let path = format!("{parent}/{child}");
                // Looked at right before its delete: a znode this process knows as a waiter's
                // or a holder's came from an answered create, and one that is not known now
                // never will be (its create's answer can no longer arrive).
                if spare.upgrade().is_some_and(|known| known.stands(&path)) {
                    continue;
                }
                let result = delete(path).await;
                if !settled(&result) {
                    outcome = result;
                }
            }
            outcome
        }
    }
}
