//! Deleting keys of ours in the background, until etcd answers: one left behind would stand
//! in its lock's queue as long as this process keeps its lease alive.

use std::sync::Weak;
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::sequenced::WeakContenders;

/// How long a background deletion keeps trying while the session lives, at most.
pub(super) const CLEAN_UP_FOR: Duration = Duration::from_secs(60);

/// How long a background deletion goes on.
pub(super) enum Until {
    /// Until the key's session ends (its lease, and so the key, then go).
    SessionEnds(Weak<watch::Sender<u64>>, u64),
    /// Until etcd answered a deletion, and then once more after this long (an abandoned write
    /// may land after the first deletion); neither while the key is one this process knows
    /// as a waiter's or a holder's (see [`Contenders::stands`](crate::store::sequenced::Contenders::stands)).
    Twice(Duration, WeakContenders<i64>),
}

/// Deletes `key` in the background, trying again while etcd does not answer (a failover, a
/// partition). A key of ours left behind would stand in the lock's queue as long as this
/// process keeps its lease alive, and everyone behind it would wait.
pub(super) fn clean_up(client: etcd::Client, key: String, until: Until) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: no keep-alives either, the lease expires with its keys
    };
    runtime.spawn(async move {
        let give_up = Instant::now() + CLEAN_UP_FOR;
        let mut pause = Duration::from_millis(50);
        let mut again = match &until {
            Until::Twice(after, _) => Some(*after),
            Until::SessionEnds(..) => None,
        };
        while Instant::now() < give_up {
            match &until {
                Until::SessionEnds(epoch, session) => match epoch.upgrade() {
                    Some(epoch) if *epoch.borrow() == *session => {}
                    _ => return, // the lease ended or is being revoked: the key goes with it
                },
                // The clean-up after an attempt whose put went unanswered: a key this process
                // knows as a waiter's or a holder's came from an answered put (the key is
                // the attempt's own), and is never this clean-up's, however late it runs.
                Until::Twice(_, spare) => {
                    if spare.upgrade().is_some_and(|known| known.stands(&key)) {
                        return;
                    }
                }
            }
            let mut c = client.clone();
            let limit = Duration::from_secs(2);
            let deleted = tokio::time::timeout(limit, c.delete(key.clone(), None)).await;
            if matches!(deleted, Ok(Ok(_))) {
                match again.take() {
                    Some(after) => {
                        tokio::time::sleep(after).await;
                        continue;
                    }
                    None => return,
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
}
