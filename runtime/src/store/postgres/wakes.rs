//! Wake-ups: the channel of each lock this process waits for, fed by the notifications the
//! listener hears, and the subscriptions waiters take on them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::text::db_text;
use super::PostgresStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::{WakeLog, WakeSubscription};

/// The wake-up channels of the locks this process waits for, by wake key: each a log that
/// says for whom each release was (everyone, or the one contender it left the lock to).
#[derive(Default)]
pub(super) struct Wakes {
    channels: Mutex<HashMap<String, watch::Sender<WakeLog>>>,
}

impl Wakes {
    pub(super) fn subscribe(&self, wake: &str) -> watch::Receiver<WakeLog> {
        let mut channels = self.channels.lock().unwrap();
        if channels.len() >= 64 && channels.len().is_power_of_two() {
            channels.retain(|_, tx| tx.receiver_count() > 0);
        }
        channels
            .entry(wake.to_owned())
            .or_insert_with(|| watch::channel(WakeLog::default()).0)
            .subscribe()
    }

    /// A release of the lock whose wake key is `wake`, for everyone (`None`) or for the one
    /// contender it was left to.
    pub(super) fn wake(&self, wake: &str, to: Option<Arc<str>>) {
        if let Some(tx) = self.channels.lock().unwrap().get(wake) {
            tx.send_modify(|log| log.push(to));
        }
    }

    pub(super) fn wake_all(&self) {
        let mut channels = self.channels.lock().unwrap();
        channels.retain(|_, tx| tx.receiver_count() > 0);
        for tx in channels.values() {
            tx.send_modify(|log| log.push(None));
        }
    }
}

/// A notification heard: the wake key of the released lock, and the contender it was left to
/// (`None`: anyone may take it). Releases for everyone come on the channel `leasehold` with
/// the wake key as payload; releases that left the lock to a contender on `leasehold_turn`,
/// as its name (hex digits), a space and the wake key.
pub(super) fn heard(channel: &str, payload: &str) -> (String, Option<Arc<str>>) {
    match (channel, payload.split_once(' ')) {
        ("leasehold_turn", Some((name, wake))) => (wake.to_owned(), Some(name.into())),
        _ => (payload.to_owned(), None),
    }
}

impl PostgresStore {
    pub(super) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
        // Registered first: should the listener drop after this, its return wakes us.
        let rx = self.shared.wakes.subscribe(&db_text(keys.wake()));
        self.wait_listening(self.shared.settings.op_timeout).await?;
        Ok(WakeSubscription::addressed(rx, None))
    }
}
