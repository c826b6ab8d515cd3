//! Waiters of one key (a lock's, or a semaphore's) in one process queue here, first come
//! first served: only the one at the front (the *active* one) talks to the store, and a release hands the lease straight to the
//! next waiter, without a round trip: the lease in the store stays this process's, and the next
//! holder gets the next of the fencing tokens reserved with it. Every way of leaving the queue
//! (success, timeout, cancellation) passes the turn on, so the queue can never stall.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::kernel::lease::Lease;
use crate::kernel::options::Options;
use crate::store::keys::LockKeys;

/// After this many handovers in a row inside one process, a release goes through the store
/// instead, so that waiters in other processes get their chance.
pub(crate) const MAX_HANDOFFS_IN_ROW: u32 = 16;

/// Names each turn, so that a turn can be passed on once only: whoever passes it must name
/// the turn it holds, and a stale pass (the turn moved on meanwhile) does nothing. Global, so
/// an id never comes back when a key's queue is removed and made again.
static NEXT_TURN: AtomicU64 = AtomicU64::new(1);

fn next_turn() -> u64 {
    NEXT_TURN.fetch_add(1, Ordering::Relaxed)
}

/// The local queues of one locker, by lock key.
#[derive(Default)]
pub(crate) struct Queues {
    map: Mutex<HashMap<QueueKey, KeyQueue>>,
}

/// A queue's key: the lock's shared names, looked up by the lock key's name (`&str`), so an
/// entry costs a reference count instead of a copy of the name.
struct QueueKey(LockKeys);

impl std::borrow::Borrow<str> for QueueKey {
    fn borrow(&self) -> &str {
        self.0.lock()
    }
}

impl std::hash::Hash for QueueKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that lookups by name find it (`Borrow`'s contract).
        self.0.lock().hash(state)
    }
}

impl PartialEq for QueueKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.lock() == other.0.lock()
    }
}

impl Eq for QueueKey {}

/// The local state of one key that some task of this process is active on. The key has an
/// entry exactly while one task holds the turn (it holds the lock, or contends for it).
struct KeyQueue {
    waiters: VecDeque<Waiter>,
    handoffs_in_row: u32,
    /// The turn being held now.
    turn: u64,
    /// The lease that holds the turn, or `None` while a task contends in the store for it. A
    /// lease that is lost forfeits the turn (see [`Queues::forfeit`]), so a holder that hangs
    /// past its lease cannot keep the rest of the process waiting.
    holder: Option<Arc<Lease>>,
}

/// A queued task, and what it asked for.
pub(crate) struct Waiter {
    pub(crate) tx: oneshot::Sender<Turn>,
    pub(crate) lease: Duration,
    pub(crate) watchdog: bool,
    /// A fair waiter is never handed a lease: it contends in the store in its turn.
    pub(crate) fair: bool,
    /// A fenced waiter reads its fencing token: never handed an unfenced lease, whose
    /// tokens are only local numbers.
    pub(crate) fenced: bool,
    /// A waiter for a lease of its own (permits): never handed a lease.
    pub(crate) own: bool,
}

impl KeyQueue {
    fn new() -> Self {
        KeyQueue {
            waiters: VecDeque::new(),
            handoffs_in_row: 0,
            turn: next_turn(),
            holder: None,
        }
    }
}

/// What a queued task receives when its turn comes.
pub(crate) enum Turn {
    /// Go and try the store yourself, holding this turn.
    Contend(u64),
    /// The previous holder handed the lease over: it is yours, with this fencing token.
    Granted(Arc<Lease>, u64),
}

/// Where a task stands after [`Queues::enter`].
pub(crate) enum Entry {
    /// It holds this turn: go to the store.
    Active(u64),
    /// Another task of this process holds the turn: wait on this.
    Queued(oneshot::Receiver<Turn>),
    /// Another task holds the turn and this one may not wait.
    Busy,
    /// This lease of another task holds the lock, nobody of this process waits for it, and
    /// this task may not wait: busy, unless the store no longer has the lease (see
    /// [`crate::kernel::verify`]).
    HeldHere(Arc<Lease>),
}

impl Queues {
    /// Takes the turn for `keys` (a lock's, or a semaphore's), or queues behind the task that
    /// has it.
    pub(crate) fn enter(&self, keys: &LockKeys, opts: &Options, wait: bool) -> Entry {
        let mut queues = self.map.lock().unwrap();
        match queues.get_mut(keys.lock()) {
            None => {
                let q = KeyQueue::new();
                let turn = q.turn;
                queues.insert(QueueKey(keys.clone()), q);
                Entry::Active(turn)
            }
            // A holder whose lease is lost keeps the turn only until someone notices: a
            // caller that will not wait notices now (queued waiters notice by themselves, and
            // go first).
            Some(q)
                if !wait
                    && q.waiters.is_empty()
                    && q.holder.as_ref().is_some_and(|h| !h.is_held()) =>
            {
                q.holder = None;
                q.handoffs_in_row = 0;
                q.turn = next_turn();
                Entry::Active(q.turn)
            }
            Some(q) if !wait && q.waiters.is_empty() => match &q.holder {
                Some(lease) => Entry::HeldHere(lease.clone()),
                None => Entry::Busy,
            },
            Some(_) if !wait => Entry::Busy,
            Some(q) => {
                let (tx, rx) = oneshot::channel();
                q.waiters.push_back(Waiter {
                    tx,
                    lease: opts.lease,
                    watchdog: opts.watchdog,
                    fair: opts.fair,
                    fenced: opts.fenced,
                    own: opts.kind.is_own(),
                });
                Entry::Queued(rx)
            }
        }
    }

    /// The lease that holds the turn of `lock_key`, if a lease (not a contender) holds it.
    pub(crate) fn turn_holder(&self, lock_key: &str) -> Option<Arc<Lease>> {
        let queues = self.map.lock().unwrap();
        queues.get(lock_key).and_then(|q| q.holder.clone())
    }

    /// Records that `lease` holds `turn` of its key now.
    pub(crate) fn hold_turn(&self, lease: &Arc<Lease>, turn: u64) {
        let mut queues = self.map.lock().unwrap();
        if let Some(q) = queues.get_mut(lease.keys.lock()) {
            if q.turn == turn {
                q.holder = Some(lease.clone());
            }
        }
    }

    /// The turn `lease` holds; `None` once it forfeited it.
    pub(crate) fn held_turn(&self, lease: &Arc<Lease>) -> Option<u64> {
        let queues = self.map.lock().unwrap();
        let q = queues.get(lease.keys.lock())?;
        let holder = q.holder.as_ref()?;
        Arc::ptr_eq(holder, lease).then_some(q.turn)
    }

    /// A lost lease gives up its turn, so the next waiter can try the store (where the lease has
    /// run out) instead of waiting for a holder that may never come back.
    pub(crate) fn forfeit(&self, lease: &Arc<Lease>) {
        if let Some(turn) = self.held_turn(lease) {
            self.pass_turn(lease.keys.lock(), turn);
        }
    }

    /// Gives `turn` to the next waiter that is still there, or marks the key idle. Does
    /// nothing when `turn` was passed on already: a turn is passed once, so two tasks of this
    /// process never contend for one key at the same time.
    pub(crate) fn pass_turn(&self, lock_key: &str, turn: u64) {
        let mut queues = self.map.lock().unwrap();
        let Some(q) = queues.get_mut(lock_key) else {
            return;
        };
        if q.turn != turn {
            return;
        }
        q.handoffs_in_row = 0;
        q.holder = None;
        q.turn = next_turn();
        while let Some(w) = q.waiters.pop_front() {
            if w.tx.send(Turn::Contend(q.turn)).is_ok() {
                return;
            }
        }
        queues.remove(lock_key);
    }

    /// How many fencing tokens an acquire should reserve: one for itself and one for each
    /// waiter queued behind it now, up to the handover limit.
    pub(crate) fn fences_to_reserve(&self, lock_key: &str) -> u64 {
        let queues = self.map.lock().unwrap();
        let queued = queues.get(lock_key).map_or(0, |q| q.waiters.len());
        1 + queued.min(MAX_HANDOFFS_IN_ROW as usize) as u64
    }

    /// Whether [`hand_over`](Self::hand_over) would find a waiter to take `lease` over now,
    /// reserved fences aside: for an engine that must take part in a handover, before it is
    /// asked to.
    pub(crate) fn would_hand_over(&self, lease: &Arc<Lease>) -> bool {
        if !lease.watchdog || !lease.is_held() {
            return false;
        }
        let queues = self.map.lock().unwrap();
        let Some(q) = queues.get(lease.keys.lock()) else {
            return false;
        };
        if !q.holder.as_ref().is_some_and(|h| Arc::ptr_eq(h, lease))
            || q.handoffs_in_row >= MAX_HANDOFFS_IN_ROW
        {
            return false;
        }
        q.waiters
            .iter()
            .find(|w| !w.tx.is_closed())
            .is_some_and(|w| {
                w.watchdog
                    && !w.fair
                    && !w.own
                    && w.lease == lease.lease
                    && (!w.fenced || lease.fenced)
            })
    }

    /// Hands `lease` to the next waiter of this process, without a round trip, when that
    /// waiter asked for the same lease with the watchdog on (so it can take over the lease
    /// as it is) and a reserved fencing token is left. False when the lease must go back
    /// to the store instead.
    pub(crate) fn hand_over(&self, lease: &Arc<Lease>) -> bool {
        if !lease.watchdog || !lease.is_held() {
            return false;
        }
        let mut queues = self.map.lock().unwrap();
        let Some(q) = queues.get_mut(lease.keys.lock()) else {
            return false;
        };
        // Only the lease that holds the turn can hand it over (not one that forfeited it).
        if !q.holder.as_ref().is_some_and(|h| Arc::ptr_eq(h, lease)) {
            return false;
        }
        if q.handoffs_in_row >= MAX_HANDOFFS_IN_ROW {
            return false;
        }
        while let Some(w) = q.waiters.front() {
            if w.tx.is_closed() {
                q.waiters.pop_front();
                continue;
            }
            let takes_over = w.watchdog && !w.fair && !w.own && w.lease == lease.lease;
            if !takes_over || (w.fenced && !lease.fenced) {
                return false;
            }
            let Some(fence) = lease.next_fence() else {
                return false;
            };
            let w = q.waiters.pop_front().expect("front exists");
            if w.tx.send(Turn::Granted(lease.clone(), fence)).is_ok() {
                q.handoffs_in_row += 1;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
impl Queues {
    /// How many keys have a queue now (a key's goes with its last waiter and turn).
    pub(crate) fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}
