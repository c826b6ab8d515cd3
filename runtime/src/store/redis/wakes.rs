//! Wake-ups of the Redis engine: one RESP3 connection per locker carries the subscriptions of
//! every waiter in the process (sharded pub/sub on a cluster); a release message wakes the
//! waiters of its lock, a dropped connection wakes them all (messages may have been missed),
//! and channels nobody waits on are dropped after a while.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{PushInfo, PushKind};
use tokio::sync::{mpsc, watch, Notify};

use super::conn::{bounded, ping, Conn};
use super::revive::{Revival, Step};
use super::RedisStore;
use crate::error::{Endpoint, LockError};
use crate::store::keys::LockKeys;
use crate::store::{WakeLog, WakeSubscription};

/// How long an idle wake subscription is kept before it is dropped: hot keys are waited on
/// again and again, and re-subscribing each time would cost a round trip per wait.
const SUBSCRIPTION_LINGER: Duration = Duration::from_secs(2);

impl RedisStore {
    /// Listens for releases of one lock; fails when the server did not confirm the
    /// subscription (the waiter then polls).
    pub(crate) async fn subscribe(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        match self.subscribe_or_later(keys).await {
            (subscription, None) => Ok(subscription),
            (_, Some(e)) => Err(e),
        }
    }

    /// Listens for releases of one lock. When the server did not confirm the subscription,
    /// also returns why; the subscription is then made as soon as the server answers again,
    /// and its waiters are woken at that moment (a release in between was not heard).
    pub(crate) async fn subscribe_or_later(
        &self,
        keys: &LockKeys,
    ) -> (WakeSubscription, Option<LockError>) {
        let channel = keys.wake().to_owned();
        let (rx, confirmed) = {
            let mut channels = self.wakes.channels.lock().unwrap();
            let entry = channels.entry(channel.clone()).or_insert_with(|| Channel {
                tx: watch::channel(WakeLog::default()).0,
                interest: 0,
                idle_since: None,
                confirmed: false,
            });
            entry.interest += 1;
            entry.idle_since = None;
            (entry.tx.subscribe(), entry.confirmed)
        };
        let interest = Interest {
            wakes: self.wakes.clone(),
            channel: channel.clone(),
        };
        let subscription = WakeSubscription::addressed(rx, Some(Box::new(interest)));
        if confirmed {
            return (subscription, None);
        }
        // Everything below shares one bound: the serial lock can be held by a revival probe
        // or a sweep whose own calls are bounded, but a waiter never waits longer than one
        // operation for its turn and its SUBSCRIBE together.
        let op_timeout = self.core.op_timeout;
        let subscribe = async {
            let _serial = self.wakes.serial.lock().await;
            self.wakes.conn.subscribe(&channel).await
        };
        match bounded(&self.core.endpoint, op_timeout, subscribe).await {
            Ok(()) => {
                if let Some(entry) = self.wakes.channels.lock().unwrap().get_mut(&channel) {
                    entry.confirmed = true;
                }
                (subscription, None)
            }
            Err(e) => {
                // The subscription stays registered: the connection is probed until it
                // works, then subscribed again, and the waiter woken to look.
                self.wakes.broken.notify_one();
                (subscription, Some(e))
            }
        }
    }
}

/// The wake-up side of the backend: which channels this process listens to, and for whom.
pub(super) struct Wakes {
    pub(super) conn: Conn,
    pub(super) channels: Mutex<HashMap<String, Channel>>,
    /// SUBSCRIBE and UNSUBSCRIBE go out one at a time, so an unsubscribe of an idle channel
    /// can never overtake a newer subscribe to the same channel.
    pub(super) serial: tokio::sync::Mutex<()>,
    pub(super) endpoint: Endpoint,
    pub(super) op_timeout: Duration,
    /// Signalled when a SUBSCRIBE failed: the connection needs reviving.
    pub(super) broken: Arc<Notify>,
}

impl Wakes {
    /// Whether some channel has had nobody waiting on it for [`SUBSCRIPTION_LINGER`].
    fn has_idle_channels(&self, now: tokio::time::Instant) -> bool {
        let channels = self.channels.lock().unwrap();
        channels
            .values()
            .any(|c| c.idle_since.is_some_and(|t| now - t >= SUBSCRIPTION_LINGER))
    }

    /// Subscribes again every channel that waiters still listen to but the server does not
    /// know (after a drop, or a failed SUBSCRIBE), and wakes its waiters: a release may have
    /// gone unheard meanwhile. With no such channel, a PING proves the connection works.
    async fn resubscribe(self: Arc<Self>) -> bool {
        let Ok(_serial) = tokio::time::timeout(self.op_timeout, self.serial.lock()).await else {
            return false;
        };
        let pending: Vec<String> = {
            let channels = self.channels.lock().unwrap();
            channels
                .iter()
                .filter(|(_, c)| !c.confirmed && c.interest > 0)
                .map(|(name, _)| name.clone())
                .collect()
        };
        if pending.is_empty() {
            return ping(&self.conn, &self.endpoint, self.op_timeout).await;
        }
        for name in pending {
            let subscribe = self.conn.subscribe(&name);
            if bounded(&self.endpoint, self.op_timeout, subscribe)
                .await
                .is_err()
            {
                return false;
            }
            if let Some(entry) = self.channels.lock().unwrap().get_mut(&name) {
                entry.confirmed = true;
                entry.tx.send_modify(|log| log.push(None));
            }
        }
        true
    }
}

pub(super) struct Channel {
    /// Every release message, with the contender it chose; each waiter holds a receiver.
    tx: watch::Sender<WakeLog>,
    /// How many waiters currently care.
    interest: usize,
    /// When interest dropped to zero.
    idle_since: Option<tokio::time::Instant>,
    /// The server confirmed the subscription.
    confirmed: bool,
}

/// One waiter's interest in a channel; dropping it lets the channel go idle.
struct Interest {
    wakes: Arc<Wakes>,
    channel: String,
}

impl Drop for Interest {
    fn drop(&mut self) {
        if let Some(entry) = self.wakes.channels.lock().unwrap().get_mut(&self.channel) {
            entry.interest -= 1;
            if entry.interest == 0 {
                entry.idle_since = Some(tokio::time::Instant::now());
            }
        }
    }
}

/// Routes release messages to waiters, wakes everybody when the subscription connection
/// dropped (messages may have been missed), and unsubscribes channels idle for a while.
pub(super) async fn dispatch_wakes(
    wakes: std::sync::Weak<Wakes>,
    mut push_rx: mpsc::UnboundedReceiver<PushInfo>,
    broken: Arc<Notify>,
) {
    let mut sweep = tokio::time::interval(SUBSCRIPTION_LINGER);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut revival = Revival::default();
    loop {
        tokio::select! {
            () = broken.notified() => revival.dropped(),
            step = revival.step(), if revival.active() => {
                if step == Step::Due {
                    let Some(wakes) = wakes.upgrade() else { return };
                    revival.probe(Box::pin(wakes.resubscribe()));
                }
            }
            push = push_rx.recv() => {
                let Some(push) = push else { return };
                let Some(wakes) = wakes.upgrade() else { return };
                let mut channels = wakes.channels.lock().unwrap();
                match push.kind {
                    PushKind::Message | PushKind::SMessage => {
                        if let Some(redis::Value::BulkString(name)) = push.data.first() {
                            let name = String::from_utf8_lossy(name);
                            if let Some(entry) = channels.get(name.as_ref()) {
                                // The payload names the contender the release chose; empty:
                                // everyone may try.
                                let to = match push.data.get(1) {
                                    Some(redis::Value::BulkString(to)) if !to.is_empty() => {
                                        Some(String::from_utf8_lossy(to).into())
                                    }
                                    _ => None,
                                };
                                entry.tx.send_modify(|log| log.push(to));
                            }
                        }
                    }
                    PushKind::Disconnection => {
                        // Messages may have been missed: wake everybody to look again, and
                        // have the next waiter of each channel subscribe afresh (after a
                        // failover the new server knows nothing of our subscriptions).
                        for entry in channels.values_mut() {
                            entry.confirmed = false;
                            entry.tx.send_modify(|log| log.push(None));
                        }
                        revival.dropped();
                    }
                    _ => {}
                }
            }
            _ = sweep.tick() => {
                let Some(wakes) = wakes.upgrade() else { return };
                // In a task of its own: this loop must never wait for `serial`, which a
                // revival probe polled only by this very loop may hold (a waiter would then
                // hang on `serial` forever). Only when there is something to sweep.
                if wakes.has_idle_channels(tokio::time::Instant::now()) {
                    tokio::spawn(unsubscribe_idle(wakes));
                }
            }
        }
    }
}

/// Unsubscribes the channels that nobody waited on for [`SUBSCRIPTION_LINGER`].
async fn unsubscribe_idle(wakes: Arc<Wakes>) {
    // Held across removal and UNSUBSCRIBE: a waiter that re-creates a removed channel must
    // subscribe after this unsubscribe, never before it. Bounded, like every holder of it.
    let Ok(_serial) = tokio::time::timeout(wakes.op_timeout, wakes.serial.lock()).await else {
        return; // busy with a probe; the next sweep tries again
    };
    // Chosen and removed under one lock: a waiter may take a channel up again meanwhile.
    let now = tokio::time::Instant::now();
    let mut idle = Vec::new();
    wakes.channels.lock().unwrap().retain(|name, c| {
        let gone = c.idle_since.is_some_and(|t| now - t >= SUBSCRIPTION_LINGER);
        if gone {
            idle.push(name.clone());
        }
        !gone
    });
    if !idle.is_empty() {
        let unsubscribe = wakes.conn.unsubscribe(&idle);
        if tokio::time::timeout(wakes.op_timeout, unsubscribe)
            .await
            .is_err()
        {
            tracing::debug!(channels = idle.len(), "unsubscribe timed out");
        }
    }
}
