//! Calls whose outcome is unknown, for the engines that settle them against their server
//! (PostgreSQL, MySQL): the settlement of one connection (a call sent on it may still run until
//! its session on the server is gone), and the owner tokens whose acquires wait for one, until
//! their give-back ([`Store::settle`](super::Store::settle)). How a connection is settled is the
//! engine's (ending its session from another connection).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// The settlement of one connection: resolves once its backend is gone (or the settlement
/// gave up, after its engine's bound).
#[derive(Clone)]
pub(crate) struct Settlement(watch::Receiver<bool>);

impl Settlement {
    /// The settlement that resolves when `done` turns true (or its sender is dropped).
    pub(crate) fn new(done: watch::Receiver<bool>) -> Self {
        Settlement(done)
    }

    /// Whether it resolved already.
    fn is_done(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Waits until it resolves.
    pub(crate) async fn wait(mut self) {
        // The sender sends `true`, or is dropped (the store is gone): either ends it.
        let _ = self.0.wait_for(|done| *done).await;
    }
}

/// The owner tokens of acquires whose outcome is unknown, with the settlements of the
/// connections they were sent on, until a give-back takes them.
#[derive(Default)]
pub(crate) struct Unsettled(Mutex<HashMap<Box<str>, Vec<Settlement>>>);

impl Unsettled {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Vec<Settlement>>> {
        // A map of handles is valid after any panic.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that an acquire for `token` may still land until `settlement` resolves.
    pub(crate) fn record(&self, token: &str, settlement: Settlement) {
        let mut map = self.lock();
        // Tokens whose attempt is never given back (no runtime left for it) must not pile up.
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, s| s.iter().any(|s| !s.is_done()));
        }
        map.entry(token.into()).or_default().push(settlement);
    }

    /// The settlements `token` waits for, taken out; `None` when there are none to wait for
    /// (the common case: one lock of a mutex, nothing allocated).
    pub(crate) fn take(&self, token: &str) -> Option<Vec<Settlement>> {
        let mut map = self.lock();
        if map.is_empty() {
            return None;
        }
        let pending = map.remove(token)?;
        Some(pending).filter(|p| p.iter().any(|s| !s.is_done()))
    }
}
