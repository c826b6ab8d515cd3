//! Waiters of one key in one process queue here, first come first served: only the one at
//! the front (the *active* one) talks to Redis, and a release hands the lock straight to the
//! next waiter. Every way of leaving the queue (success, timeout, cancellation) passes the
//! turn on, so the queue can never stall.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::key::LockKeys;
use crate::lease::Lease;
use crate::locker::Inner;
use crate::token::OwnerToken;
use crate::watchdog::Job;

/// After this many handovers in a row inside one process, a release goes through Redis
/// instead, so that waiters in other processes get their chance.
pub(crate) const MAX_HANDOFFS_IN_ROW: u32 = 16;

/// The local state of one key that some task of this process is active on. The key has an
/// entry exactly while one task holds the turn (it holds the lock, or contends for it).
#[derive(Default)]
pub(crate) struct KeyQueue {
    waiters: VecDeque<Waiter>,
    handoffs_in_row: u32,
}

/// A queued task, and what it asked for.
pub(crate) struct Waiter {
    pub(crate) tx: oneshot::Sender<Turn>,
    pub(crate) lease: Duration,
    pub(crate) watchdog: bool,
}

/// What a queued task receives when its turn comes.
pub(crate) enum Turn {
    /// Go and try Redis yourself.
    Contend,
    /// The previous holder handed the lock over: it is yours.
    Granted(Arc<Lease>),
}

/// Where a task stands after [`Inner::enter`].
pub(crate) enum Entry {
    /// It holds the turn: go to Redis.
    Active,
    /// Another task of this process holds the turn: wait on this.
    Queued(oneshot::Receiver<Turn>),
    /// Another task holds the turn and this one may not wait.
    Busy,
}

impl Inner {
    /// Takes the turn for `lock_key`, or queues behind the task that has it.
    pub(crate) fn enter(&self, lock_key: &str, lease: Duration, watchdog: bool, wait: bool) -> Entry {
        let mut queues = self.queues.lock().unwrap();
        match queues.get_mut(lock_key) {
            None => {
                queues.insert(lock_key.to_owned(), KeyQueue::default());
                Entry::Active
            }
            Some(_) if !wait => Entry::Busy,
            Some(q) => {
                let (tx, rx) = oneshot::channel();
                q.waiters.push_back(Waiter {
                    tx,
                    lease,
                    watchdog,
                });
                Entry::Queued(rx)
            }
        }
    }

    /// Gives the turn to the next waiter that is still there, or marks the key idle.
    pub(crate) fn pass_turn(&self, lock_key: &str) {
        let mut queues = self.queues.lock().unwrap();
        let Some(q) = queues.get_mut(lock_key) else {
            return;
        };
        q.handoffs_in_row = 0;
        while let Some(w) = q.waiters.pop_front() {
            if w.tx.send(Turn::Contend).is_ok() {
                return;
            }
        }
        queues.remove(lock_key);
    }

    /// The next live waiter to hand a held lock to, unless the lock has stayed in this
    /// process for [`MAX_HANDOFFS_IN_ROW`] handovers.
    pub(crate) fn next_for_handoff(&self, lock_key: &str) -> Option<Waiter> {
        let mut queues = self.queues.lock().unwrap();
        let q = queues.get_mut(lock_key)?;
        if q.handoffs_in_row >= MAX_HANDOFFS_IN_ROW {
            return None;
        }
        while let Some(w) = q.waiters.pop_front() {
            if !w.tx.is_closed() {
                q.handoffs_in_row += 1;
                return Some(w);
            }
        }
        None
    }

    /// Tells a waiter popped for a handover to contend instead; passes the turn on if it left.
    pub(crate) fn let_contend(&self, lock_key: &str, w: Waiter) {
        if w.tx.send(Turn::Contend).is_err() {
            self.pass_turn(lock_key);
        }
    }
}

/// The turn of the task at the front, while it contends in Redis. Dropped without
/// [`ActiveTurn::keep`] (error, timeout, cancellation) it passes the turn on, after cleaning
/// up an acquire whose answer never came (it may have taken the lock).
pub(crate) struct ActiveTurn<'a> {
    inner: &'a Arc<Inner>,
    keys: &'a LockKeys,
    /// The token of an acquire sent but not answered yet.
    pub(crate) in_flight: Option<OwnerToken>,
    armed: bool,
}

impl<'a> ActiveTurn<'a> {
    pub(crate) fn new(inner: &'a Arc<Inner>, keys: &'a LockKeys) -> Self {
        ActiveTurn {
            inner,
            keys,
            in_flight: None,
            armed: true,
        }
    }

    /// The lock was taken: the turn now belongs to the lease, which passes it on release.
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for ActiveTurn<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match self.in_flight.take() {
            None => self.inner.pass_turn(&self.keys.lock),
            Some(token) => {
                let job = Job::Abandon {
                    inner: self.inner.clone(),
                    keys: self.keys.clone(),
                    token,
                };
                if self.inner.send_job(job).is_err() {
                    // No background task (its runtime is gone): nothing can reach Redis, and
                    // the lease will expire. Still free the local turn.
                    self.inner.pass_turn(&self.keys.lock);
                }
            }
        }
    }
}

/// A queued task's ticket. Dropped while a turn is already on its way (the task timed out or
/// was cancelled at that moment), it passes that turn on instead of losing it.
pub(crate) struct QueuedTurn<'a> {
    inner: &'a Arc<Inner>,
    lock_key: &'a str,
    pub(crate) rx: Option<oneshot::Receiver<Turn>>,
}

impl<'a> QueuedTurn<'a> {
    pub(crate) fn new(inner: &'a Arc<Inner>, lock_key: &'a str, rx: oneshot::Receiver<Turn>) -> Self {
        QueuedTurn {
            inner,
            lock_key,
            rx: Some(rx),
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
            Some(Turn::Contend) => self.inner.pass_turn(self.lock_key),
            Some(Turn::Granted(lease)) => {
                let job = Job::Release {
                    inner: self.inner.clone(),
                    lease,
                };
                let _ = self.inner.send_job(job);
            }
        }
    }
}
