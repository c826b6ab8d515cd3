//! The listening connection of each locker: LISTEN for releases, a health check, the
//! periodic sweep of old rows and waiters, and a reconnect that wakes every waiter.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::watch;

use super::conn::Shared;
use super::sql::{SWEEP, SWEEP_PERMITS, SWEEP_READERS, SWEEP_SEMAPHORES, SWEEP_WAITERS};
use super::PostgresStore;
use crate::error::LockError;

/// How often the listening connection proves it is alive.
const LISTENER_CHECK: Duration = Duration::from_secs(2);

/// How often each locker deletes rows whose lease ended long ago.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The listening connection: listens, wakes the waiters of each released lock, checks that it
/// is alive, sweeps old rows; reconnects when it dropped and wakes everyone then. Ends with
/// the store.
pub(super) async fn listen(shared: Weak<Shared>, up: watch::Sender<bool>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(store) = shared.upgrade() else {
            return;
        };
        let (tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
        let opened = store.open(Some(tx)).await;
        let op = store.settings.op_timeout;
        let (client, driver) = match opened {
            Ok(pair) => pair,
            Err(_) => {
                drop(store);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        // Still part of opening it: bounded by the connect timeout; the health checks and
        // sweeps after it by the operation timeout.
        let listen = format!(
            "LISTEN leasehold; LISTEN leasehold_turn; {}",
            store.operation_bounds()
        );
        let limit = store.settings.connect_timeout;
        let listening = tokio::time::timeout(limit, client.batch_execute(&listen)).await;
        if !matches!(listening, Ok(Ok(()))) {
            driver.abort();
            drop(store);
            tokio::time::sleep(backoff).await;
            continue;
        }
        backoff = Duration::from_millis(50);
        up.send_replace(true);
        // Releases while nobody listened were missed: everyone looks again.
        store.wakes.wake_all();
        drop(store);
        let mut check = tokio::time::interval(LISTENER_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                notice = notices.recv() => {
                    let (Some((wake, to)), Some(store)) = (notice, shared.upgrade()) else { break };
                    store.wakes.wake(&wake, to);
                }
                _ = check.tick() => {
                    let alive = tokio::time::timeout(op, client.simple_query("SELECT 1")).await;
                    if !matches!(alive, Ok(Ok(_))) {
                        break;
                    }
                }
                _ = sweep.tick() => {
                    // Best effort: the next sweep, or an acquirer, takes what this one left.
                    for sweep in [SWEEP, SWEEP_WAITERS, SWEEP_READERS, SWEEP_PERMITS, SWEEP_SEMAPHORES] {
                        let _ = tokio::time::timeout(op, client.execute(sweep, &[])).await;
                    }
                }
            }
        }
        up.send_replace(false);
        driver.abort();
        drop(client);
        if let Some(store) = shared.upgrade() {
            store.wakes.wake_all();
        }
    }
}

impl PostgresStore {
    /// Waits until the listening connection listens, for `limit` at most.
    pub(super) async fn wait_listening(&self, limit: Duration) -> Result<(), LockError> {
        let mut up = self.listening.clone();
        let listening = tokio::time::timeout(limit, up.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok());
        match listening {
            true => Ok(()),
            false => Err(LockError::unavailable(
                format!(
                    "PostgreSQL at {} did not let this locker listen for releases within \
                     {limit:?}",
                    self.shared.shown
                ),
                None,
            )),
        }
    }
}
