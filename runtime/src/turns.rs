//! The two tickets of a task in its key's local queue ([`crate::queue`]): the turn of the task
//! that contends in the store, and the place of a task waiting behind it. Each passes the
//! turn on however the task leaves (success, error, timeout, cancellation), so the queue can
//! never stall.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::key::LockKeys;
use crate::lease::Lease;
use crate::queue::Turn;
use crate::state::Inner;
use crate::token::OwnerToken;

/// How often a queued task looks again at who holds the turn, while a contender holds it.
const HOLDER_RECHECK: Duration = Duration::from_millis(250);

/// The turn of the task at the front, while it contends in Redis. Dropped without
/// [`ActiveTurn::keep`] (error, timeout, cancellation) it passes the turn on, after cleaning
/// up an acquire whose answer never came (it may have taken the lock).
pub(crate) struct ActiveTurn<'a> {
    inner: &'a Arc<Inner>,
    keys: &'a LockKeys,
    /// The local queue's turn; `None` for a request that waits alone in the store's queue
    /// under a name of its own (a fair request on an engine that queues requests).
    turn: Option<u64>,
    /// That name.
    pub(crate) contender: Option<Box<str>>,
    /// The token of an acquire sent but not answered yet.
    pub(crate) in_flight: Option<OwnerToken>,
    armed: bool,
}

impl<'a> ActiveTurn<'a> {
    pub(crate) fn new(inner: &'a Arc<Inner>, keys: &'a LockKeys, turn: u64) -> Self {
        ActiveTurn {
            inner,
            keys,
            turn: Some(turn),
            contender: None,
            in_flight: None,
            armed: true,
        }
    }

    /// A fair request that waits in the store's queue by itself, not in the local queue.
    pub(crate) fn alone(inner: &'a Arc<Inner>, keys: &'a LockKeys) -> Self {
        ActiveTurn {
            inner,
            keys,
            turn: None,
            contender: Some(crate::token::contender_name().into()),
            in_flight: None,
            armed: true,
        }
    }

    /// The lock was taken: the turn now belongs to the lease, which passes it on release.
    pub(crate) fn keep(mut self, lease: &Arc<Lease>) {
        self.armed = false;
        if let Some(turn) = self.turn {
            self.inner.queues.hold_turn(lease, turn);
        }
    }
}

impl Drop for ActiveTurn<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match &self.contender {
            Some(name) => self.inner.store.withdraw_request(self.keys, name),
            None => self.inner.store.withdraw(self.keys),
        }
        match (self.in_flight.take(), self.turn) {
            (None, Some(turn)) => self.inner.queues.pass_turn(self.keys.lock(), turn),
            (None, None) => {}
            (Some(token), turn) => {
                if !self.inner.abandon(self.keys, token, turn) {
                    // No background task (its runtime is gone): nothing can reach Redis, and
                    // the lease will expire. Still free the local turn.
                    if let Some(turn) = turn {
                        self.inner.queues.pass_turn(self.keys.lock(), turn);
                    }
                }
            }
        }
    }
}

pub(crate) struct QueuedTurn<'a> {
    inner: &'a Arc<Inner>,
    lock_key: &'a str,
    pub(crate) rx: Option<oneshot::Receiver<Turn>>,
}

impl<'a> QueuedTurn<'a> {
    pub(crate) fn new(
        inner: &'a Arc<Inner>,
        lock_key: &'a str,
        rx: oneshot::Receiver<Turn>,
    ) -> Self {
        QueuedTurn {
            inner,
            lock_key,
            rx: Some(rx),
        }
    }

    /// Waits for this task's turn until `deadline`. A holder whose lease is lost meanwhile
    /// forfeits the turn, so the queue moves on.
    pub(crate) async fn wait(&mut self, deadline: Instant) -> Option<Turn> {
        loop {
            let holder = self.inner.queues.turn_holder(self.lock_key);
            let rx = self.rx.as_mut()?;
            // While a contender (not a lease) holds the turn, look again later: it may
            // become a lease that can be lost.
            let recheck = (Instant::now() + HOLDER_RECHECK).min(deadline);
            let holder_lost = async {
                match &holder {
                    Some(lease) => lease.lost().await,
                    None => tokio::time::sleep_until(recheck).await,
                }
            };
            tokio::select! {
                turn = rx => {
                    self.rx = None;
                    // The queue never drops a sender unsent; an error reads as no turn.
                    return turn.ok();
                }
                _ = tokio::time::sleep_until(deadline) => return self.close(),
                _ = holder_lost => {
                    if let Some(lease) = &holder {
                        self.inner.queues.forfeit(lease);
                    }
                }
            }
        }
    }

    /// Stops the queue from sending anything more, and returns a turn that arrived anyway.
    pub(crate) fn close(&mut self) -> Option<Turn> {
        let mut rx = self.rx.take()?;
        rx.close();
        rx.try_recv().ok()
    }
}

impl Drop for QueuedTurn<'_> {
    fn drop(&mut self) {
        match self.close() {
            None => {}
            Some(Turn::Contend(turn)) => self.inner.queues.pass_turn(self.lock_key, turn),
            Some(Turn::Granted(lease, fence)) => {
                self.inner.release_in_background(lease, fence, None);
            }
        }
    }
}
