//! A backend as the server names it, and the settlements of calls sent to one whose outcome
//! is unknown (see [`settle`](super::settle) for how a connection is settled).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;
use tokio_postgres as pg;

/// A backend as the server names it: process id and start time (µs since the epoch), so
/// that a pid reused by a later backend is never ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Backend {
    pub(super) pid: i32,
    pub(super) started: i64,
}

impl Backend {
    /// The backend named by the row of [`BACKEND`](super::sql::BACKEND) among `messages`.
    pub(super) fn of(messages: &[pg::SimpleQueryMessage]) -> Option<Backend> {
        messages.iter().find_map(|m| match m {
            pg::SimpleQueryMessage::Row(row) => Some(Backend {
                pid: row.get(0)?.parse().ok()?,
                started: row.get(1)?.parse().ok()?,
            }),
            _ => None,
        })
    }
}

/// The settlement of one connection: resolves once its backend is gone (or the settlement
/// gave up, [`SETTLE_FOR`](super::settle::SETTLE_FOR)).
#[derive(Clone)]
pub(super) struct Settlement(watch::Receiver<bool>);

impl Settlement {
    /// The settlement that resolves when `done` turns true (or its sender is dropped).
    pub(super) fn new(done: watch::Receiver<bool>) -> Self {
        Settlement(done)
    }

    /// Whether it resolved already.
    fn is_done(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Waits until it resolves.
    pub(super) async fn wait(mut self) {
        // The sender sends `true`, or is dropped (the store is gone): either ends it.
        let _ = self.0.wait_for(|done| *done).await;
    }
}

/// The owner tokens of acquires whose outcome is unknown, with the settlements of the
/// connections they were sent on, until a give-back takes them.
#[derive(Default)]
pub(super) struct Unsettled(Mutex<HashMap<Box<str>, Vec<Settlement>>>);

impl Unsettled {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Vec<Settlement>>> {
        // A map of handles is valid after any panic.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that an acquire for `token` may still land until `settlement` resolves.
    pub(super) fn record(&self, token: &str, settlement: Settlement) {
        let mut map = self.lock();
        // Tokens whose attempt is never given back (no runtime left for it) must not pile up.
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, s| s.iter().any(|s| !s.is_done()));
        }
        map.entry(token.into()).or_default().push(settlement);
    }

    /// The settlements `token` waits for, taken out; `None` when there are none to wait for
    /// (the common case: one lock of a mutex, nothing allocated).
    pub(super) fn take(&self, token: &str) -> Option<Vec<Settlement>> {
        let mut map = self.lock();
        if map.is_empty() {
            return None;
        }
        let pending = map.remove(token)?;
        Some(pending).filter(|p| p.iter().any(|s| !s.is_done()))
    }
}
