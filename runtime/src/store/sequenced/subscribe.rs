//! Waiting for a release: a subscription watches what this process's contender waits for,
//! and wakes the waiter each time it went, until the waiter has nothing left to wait for. A
//! semaphore's subscription watches every deletion from its queue.

use tokio::sync::watch;

use super::{Awaited, Contender, Driver, Sequenced, Wake};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::WakeSubscription;

/// Whether `keys` name a semaphore: only a semaphore's names have its agreed limit.
fn is_semaphore(keys: &LockKeys) -> bool {
    !keys.limit().is_empty()
}

/// What a waiter of a lock waits for: the predecessor of its contender, or, with none here (a
/// reader waits without one, an election's observer has none), the writers'.
fn awaited<V>(mine: Option<&Contender<V>>) -> Awaited<'_, V> {
    mine.map_or(Awaited::Writers, Awaited::Predecessor)
}

/// Sets a watch on the deletion of any contender of a semaphore's queue.
async fn watch_queue<D: Driver>(watcher: &D::Watcher) -> Result<Wake, String> {
    D::watch(watcher, Awaited::Deletions)
        .await?
        .ok_or_else(|| "a watch of the whole range was not set".to_owned())
}

impl<D: Driver> Sequenced<D> {
    /// Starts watching the predecessor of this process's contender for `keys` (or, with none,
    /// the writers a reader of this process waits for, and the data of the first one, where
    /// an election's leader is recorded); for a semaphore, every deletion from its queue.
    pub(crate) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
        let refused = |e: String| {
            LockError::unavailable(
                format!("{} refused a watch: {e}", self.driver.describe()),
                None,
            )
        };
        let watcher = self.driver.watcher(keys).await?;
        let (tx, rx) = watch::channel(0u64);
        if is_semaphore(keys) {
            // The first watch is set before this returns: a deletion after it is never missed.
            let first = watch_queue::<D>(&watcher).await.map_err(refused)?;
            tokio::spawn(async move {
                let mut next = first;
                loop {
                    tokio::select! {
                        () = next => {}
                        () = tx.closed() => return,
                    }
                    // Armed again before the waiters are told: a deletion after they looked
                    // is never missed.
                    let again = watch_queue::<D>(&watcher).await;
                    tx.send_modify(|n| *n += 1);
                    match again {
                        Ok(wake) if !tx.is_closed() => next = wake,
                        // The waiters' own attempts (at least every second) take it from here.
                        _ => return,
                    }
                }
            });
            return Ok(WakeSubscription::new(rx, None));
        }
        // Subscribing is part of the wait's attempts: its contender does not lapse meanwhile.
        let _looking = self.contenders.attempt(keys.lock());
        let mine = self.contenders.waiting(keys.lock());
        // The first watch is set before this returns: a release after it is never missed.
        let first = D::watch(&watcher, awaited(mine.as_ref()))
            .await
            .map_err(refused)?;
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
                // A contender of ours is told at once (a handover is its look away); a waiter
                // without one (a reader, an election's observer) once the next watch is set,
                // so that a change after it looked (a leader's record) is never missed.
                let told = mine.is_some();
                if told {
                    tx.send_modify(|n| *n += 1);
                    if tx.is_closed() {
                        return;
                    }
                }
                next = match D::watch(&watcher, awaited(mine.as_ref())).await {
                    Ok(Some(wake)) => Some(wake),
                    // This process's contender is first or gone: a reader of this process
                    // that subscribed alongside it still waits, now for the writers'.
                    Ok(None) if mine.is_some() => {
                        // It became first while the watch was re-armed (the predecessor went
                        // after the last wake-up): tell the waiter, whose attempt after that
                        // wake-up may have found it still there.
                        tx.send_modify(|n| *n += 1);
                        mine = None;
                        match D::watch(&watcher, Awaited::Writers).await {
                            Ok(Some(wake)) => Some(wake),
                            _ => return,
                        }
                    }
                    // Nothing to wait for, or the engine did not answer: the waiter's own
                    // attempts (at least every second) take it from here.
                    _ => {
                        if !told {
                            tx.send_modify(|n| *n += 1);
                        }
                        return;
                    }
                };
                if !told {
                    tx.send_modify(|n| *n += 1);
                    if tx.is_closed() {
                        return;
                    }
                }
            }
        });
        Ok(WakeSubscription::new(rx, None))
    }
}
