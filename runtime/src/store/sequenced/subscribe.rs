//! Waiting for a release: a subscription watches what this process's contender waits for,
//! and wakes the waiter each time it went, until the waiter has nothing left to wait for.

use tokio::sync::watch;

use super::{Driver, Sequenced};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::WakeSubscription;

impl<D: Driver> Sequenced<D> {
    /// Starts watching the predecessor of this process's contender for `keys` (or, with none,
    /// the writers a reader of this process waits for).
    pub(crate) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
        let mine = self.contenders.waiting(keys.lock());
        let watcher = self.driver.watcher(keys).await?;
        let (tx, rx) = watch::channel(0u64);
        // The first watch is set before this returns: a release after it is never missed.
        let first = D::watch_predecessor(&watcher, mine.as_ref())
            .await
            .map_err(|e| {
                LockError::unavailable(
                    format!("{} refused a watch: {e}", self.driver.describe()),
                    None,
                )
            })?;
        tokio::spawn(async move {
            let mut next = first;
            let mut mine = mine;
            loop {
                // No predecessor (we are first, or gone): wake the waiter to look at once.
                if let Some(wake) = next.take() {
                    tokio::select! {
                        () = wake => {}
                        () = tx.closed() => return,
                    }
                }
                tx.send_modify(|n| *n += 1);
                if tx.is_closed() {
                    return;
                }
                next = match D::watch_predecessor(&watcher, mine.as_ref()).await {
                    Ok(Some(wake)) => Some(wake),
                    // This process's contender is first or gone: a reader of this process
                    // that subscribed alongside it still waits, now for the writers'.
                    Ok(None) if mine.is_some() => {
                        mine = None;
                        match D::watch_predecessor(&watcher, None).await {
                            Ok(Some(wake)) => Some(wake),
                            _ => return,
                        }
                    }
                    // Nothing to wait for, or the engine did not answer: the waiter's own
                    // attempts (at least every second) take it from here.
                    _ => return,
                };
            }
        });
        Ok(WakeSubscription::new(rx, None))
    }
}
