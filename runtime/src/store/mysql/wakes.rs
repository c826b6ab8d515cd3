//! Wake-ups: the channel of each lock this process waits for, fed by the wake log's reader
//! ([`super::listener`]), and the subscriptions waiters take on them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use super::MysqlStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::{WakeLog, WakeSubscription};

/// The wake-up channels of the locks this process waits for, by wake key, and whether the
/// reader of the wake log is reading it for them.
pub(super) struct Wakes {
    inner: Mutex<Inner>,
    /// Told when a subscription finds the reader idle.
    pub(super) wanted: Notify,
    /// True while the reader reads the log for the subscriptions (it read its starting point).
    active: watch::Sender<bool>,
}

#[derive(Default)]
struct Inner {
    channels: HashMap<Vec<u8>, watch::Sender<WakeLog>>,
    active: bool,
}

impl Default for Wakes {
    fn default() -> Self {
        Wakes {
            inner: Mutex::default(),
            wanted: Notify::new(),
            active: watch::channel(false).0,
        }
    }
}

impl Wakes {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A map of channels is valid after any panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A subscription to the releases of the lock whose wake key is `wake`, and whether the
    /// reader is active: then it reads the log again after this call, and every release
    /// committed from now on reaches the subscription.
    fn subscribe(&self, wake: &[u8]) -> (watch::Receiver<WakeLog>, bool) {
        let mut inner = self.inner();
        if inner.channels.len() >= 64 && inner.channels.len().is_power_of_two() {
            inner.channels.retain(|_, tx| tx.receiver_count() > 0);
        }
        let rx = inner
            .channels
            .entry(wake.to_owned())
            .or_insert_with(|| watch::channel(WakeLog::default()).0)
            .subscribe();
        (rx, inner.active)
    }

    /// Whether any subscription is alive; when none is, the reader goes idle (`active` turns
    /// false under the same lock a subscription reads it under, so a subscription either sees
    /// the reader active, which then reads again, or wakes it).
    pub(super) fn keep_reading(&self) -> bool {
        let mut inner = self.inner();
        inner.channels.retain(|_, tx| tx.receiver_count() > 0);
        let wanted = !inner.channels.is_empty();
        if !wanted && inner.active {
            inner.active = false;
            self.active.send_replace(false);
        }
        wanted
    }

    /// The reader read its starting point: subscriptions from now on need not wait for it.
    pub(super) fn activate(&self) {
        let mut inner = self.inner();
        inner.active = true;
        self.active.send_replace(true);
    }

    /// The reader lost its connection: subscriptions wait for it again.
    pub(super) fn deactivate(&self) {
        let mut inner = self.inner();
        inner.active = false;
        self.active.send_replace(false);
    }

    /// A release of the lock whose wake key is `wake`, for everyone (`None`) or for the one
    /// contender it was left to.
    pub(super) fn wake(&self, wake: &[u8], to: Option<Arc<str>>) {
        if let Some(tx) = self.inner().channels.get(wake) {
            tx.send_modify(|log| log.push(to));
        }
    }

    /// Every subscription looks again (the log may have been missed).
    pub(super) fn wake_all(&self) {
        let mut inner = self.inner();
        inner.channels.retain(|_, tx| tx.receiver_count() > 0);
        for tx in inner.channels.values() {
            tx.send_modify(|log| log.push(None));
        }
    }
}

impl MysqlStore {
    /// Registers first, then, if the reader is idle, wakes it and waits until it has read its
    /// starting point (within the operation timeout): a release committed after this resolved
    /// reaches the subscription.
    pub(super) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
        let wakes = &self.shared.wakes;
        let (rx, active) = wakes.subscribe(keys.wake().as_bytes());
        if !active {
            let mut up = wakes.active.subscribe();
            wakes.wanted.notify_one();
            let limit = self.shared.settings.op_timeout;
            let ready = tokio::time::timeout(limit, up.wait_for(|a| *a)).await;
            if !matches!(ready, Ok(Ok(_))) {
                return Err(LockError::unavailable(
                    format!(
                        "MySQL at {} did not let this locker read its wake log within {limit:?}",
                        self.shared.shown
                    ),
                    None,
                ));
            }
        }
        Ok(WakeSubscription::addressed(rx, None))
    }
}
