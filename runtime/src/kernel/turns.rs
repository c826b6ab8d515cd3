//! The two tickets of a task in its key's local queue ([`crate::kernel::queue`]): the turn of the task
//! that contends in the store, and the place of a task waiting behind it. Each passes the
//! turn on however the task leaves (success, error, timeout, cancellation), so the queue can
//! never stall.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::kernel::background::Background;
use crate::kernel::closing::Pending;
use crate::kernel::health::Calls;
use crate::kernel::inflight::Settled;
use crate::kernel::lease::Lease;
use crate::kernel::place::Place;
use crate::kernel::queue::{Queues, Turn};
use crate::kernel::unsettled::Unsettled;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{PermitWaiter, WakeSubscription};

/// How often a queued task looks again at who holds the turn, while a contender holds it.
const HOLDER_RECHECK: Duration = Duration::from_millis(250);

/// What a contender's seat uses of its locker: the calls to the store where it waits (and
/// gives back what its attempt may have taken), the local queues whose turn it holds, and the
/// background task (with the closing registry that counts its work) that cleans up after it.
#[derive(Clone, Copy)]
pub(crate) struct Seating<'a> {
    pub(crate) store: &'a Arc<Calls>,
    pub(crate) queues: &'a Arc<Queues>,
    pub(crate) background: &'a Arc<Background>,
}

/// What a queued task asks of its locker about the lease of its process that holds the turn
/// it waits for.
pub(crate) trait Holders: Sync {
    /// Checks in the store, in the background, whether `lease` still holds its lock
    /// (`heard`: a release of the lock was heard).
    fn verify_soon(&self, lease: &Arc<Lease>, heard: bool);
    /// Gives back, in the background, a lease handed over to a task that no longer wants it.
    fn release_in_background(&self, lease: Arc<Lease>, fence: u64);
}

/// The seat of a task while it contends in the store: the turn of the front of the local
/// queue, or a place of its own (a fair request alone in the store's queue, a reader, a
/// semaphore's waiter). Dropped without [`ActiveTurn::keep`] (error, timeout, cancellation)
/// it leaves the store's queue and passes the turn on, after giving back what an acquire
/// whose answer never came may have taken: one rule for every kind of lease.
pub(crate) struct ActiveTurn<'a> {
    seating: Seating<'a>,
    keys: &'a LockKeys,
    /// What the contender asks for.
    pub(crate) kind: LeaseKind,
    /// The local queue's turn; `None` for a contender with a place of its own.
    turn: Option<u64>,
    /// Where it waits in the store, and so what it leaves when it stops.
    place: Place,
    /// The token of an acquire sent but not answered yet.
    pub(crate) in_flight: Option<OwnerToken>,
    /// Resolves once that acquire was answered (it goes on in the background when its caller
    /// stops polling it): the give-back waits for it. `None`: answered already, or a call
    /// whose give-back may go at once (a release).
    pub(crate) settles: Option<Settled>,
    /// Counts a call in flight, and its answer until it is handled, among the work that
    /// [`close`](crate::Locker::close) waits for: a lock granted to it after `close` gathered
    /// the leases would otherwise be given back only after `close` reported everything
    /// drained. Set before the locker's closed flag is checked for the attempt (see
    /// [`ActiveTurn::sending`]); dropped after whatever gives its outcome back was itself
    /// counted (this struct's drop hands an abandoned call on first).
    pub(crate) counted: Option<Pending>,
    /// The lease its attempts ask for ([`ActiveTurn::sending`]), which bounds how long a
    /// give-back is tried.
    lease: Duration,
    armed: bool,
}

impl<'a> ActiveTurn<'a> {
    /// The front of the local queue, contending for the lock.
    pub(crate) fn new(seating: Seating<'a>, keys: &'a LockKeys, turn: u64) -> Self {
        Self::seated(
            seating,
            keys,
            LeaseKind::Exclusive,
            Some(turn),
            Place::ProcessFront,
        )
    }

    /// A fair request that waits in the store's queue by itself, under `name`, not in the
    /// local queue.
    pub(crate) fn alone(seating: Seating<'a>, keys: &'a LockKeys, name: Box<str>) -> Self {
        Self::seated(
            seating,
            keys,
            LeaseKind::Exclusive,
            None,
            Place::Alone(name),
        )
    }

    /// A contender for a lease of its own (`kind`: a reader's, or permits, where a `waiter`
    /// for several takes its turn in the semaphore's queue).
    pub(crate) fn own(
        seating: Seating<'a>,
        keys: &'a LockKeys,
        kind: LeaseKind,
        waiter: Option<PermitWaiter>,
    ) -> Self {
        let place = waiter.map_or(Place::Nowhere, Place::PermitLine);
        Self::seated(seating, keys, kind, None, place)
    }

    /// This contender, holding `turn` of the local queue (a semaphore's waiter at the front
    /// of the process's line).
    pub(crate) fn in_line(mut self, turn: u64) -> Self {
        self.turn = Some(turn);
        self
    }

    fn seated(
        seating: Seating<'a>,
        keys: &'a LockKeys,
        kind: LeaseKind,
        turn: Option<u64>,
        place: Place,
    ) -> Self {
        ActiveTurn {
            seating,
            keys,
            kind,
            turn,
            place,
            in_flight: None,
            settles: None,
            counted: None,
            lease: Duration::ZERO,
            armed: true,
        }
    }

    /// The name it waits under in the store's queue, when it waits alone there.
    pub(crate) fn contender(&self) -> Option<&str> {
        match &self.place {
            Place::Alone(name) => Some(name),
            _ => None,
        }
    }

    /// The permits waiter it is, if it is one.
    pub(crate) fn permit_waiter(&self) -> Option<PermitWaiter> {
        match &self.place {
            Place::PermitLine(waiter) => Some(*waiter),
            _ => None,
        }
    }

    /// An attempt for a lease of `lease` is about to be sent: counted for `close` from now
    /// until its outcome is handled; `Err(Closed)` (and nothing sent) when the locker closed.
    /// Counted before the flag is read, and `close` sets the flag before it counts: one of
    /// them sees the other.
    pub(crate) fn sending(&mut self, lease: Duration) -> Result<(), crate::error::LockError> {
        self.lease = lease;
        let closing = self.seating.background.closing();
        self.counted = Some(closing.job_started());
        closing.check()
    }

    /// The lease was taken. The lock's turn now belongs to the lease, which passes it on
    /// release (or hands the lease over); a lease of its own is never handed over, so its
    /// turn passes on now.
    pub(crate) fn keep(mut self, lease: &Arc<Lease>) {
        self.armed = false;
        if let Some(turn) = self.turn {
            if self.kind.is_own() {
                self.seating.queues.pass_turn(self.keys.lock(), turn);
            } else {
                self.seating.queues.hold_turn(lease, turn);
            }
        }
    }
}

impl Drop for ActiveTurn<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let seating = self.seating;
        let Some(token) = self.in_flight.take() else {
            self.place.leave(seating.store, self.keys, self.kind);
            if let Some(turn) = self.turn {
                seating.queues.pass_turn(self.keys.lock(), turn);
            }
            return;
        };
        // Giving back what the call may have taken, leaving the store's queue and passing the
        // turn on all wait until the call in flight can no longer land: before that, the
        // store may not have queued or granted it yet, and would find nothing to undo.
        // Without a background task (its runtime is gone) nothing can reach the store and the
        // lease will expire; the local turn is still passed on, as the job is dropped.
        let left = Abandoned {
            store: seating.store.clone(),
            queues: seating.queues.clone(),
            background: seating.background.clone(),
            keys: self.keys.clone(),
            turn: self.turn,
            place: self.place.clone(),
            attempt: Some(Unsettled {
                keys: self.keys.clone(),
                token,
                kind: self.kind,
                lease: self.lease,
                settles: self.settles.take(),
            }),
        };
        let _ = seating.background.run(Box::pin(left.clean_up()));
    }
}

/// A contender that stopped with a call in flight, for the background task to clean up after.
/// Its local turn passes on when it is dropped: after the clean-up, or at once if the clean-up
/// never runs (no runtime left).
struct Abandoned {
    store: Arc<Calls>,
    queues: Arc<Queues>,
    background: Arc<Background>,
    keys: LockKeys,
    turn: Option<u64>,
    place: Place,
    attempt: Option<Unsettled>,
}

impl Abandoned {
    /// Gives back what the call in flight may take, once it can no longer land, then leaves
    /// the store's queue (the call may have queued it): [`Unsettled::undo`]. The turn
    /// passes on as `self` drops.
    async fn clean_up(mut self) {
        if let Some(attempt) = self.attempt.take() {
            let _ = attempt
                .undo(&self.store, &self.background, &self.place)
                .await;
        }
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(turn) = self.turn.take() {
            self.queues.pass_turn(self.keys.lock(), turn);
        }
    }
}

/// The place of a task waiting behind another in its key's local queue.
pub(crate) struct QueuedTurn<'a> {
    /// Where the releases of the lock are heard.
    store: &'a Calls,
    queues: &'a Queues,
    holders: &'a dyn Holders,
    keys: &'a LockKeys,
    pub(crate) rx: Option<oneshot::Receiver<Turn>>,
}

impl<'a> QueuedTurn<'a> {
    /// The place that `rx` tells the turn to, in `seating`'s queue of `keys`; `holders`
    /// verifies the leases of the process that hold the turn meanwhile.
    pub(crate) fn new(
        seating: Seating<'a>,
        holders: &'a dyn Holders,
        keys: &'a LockKeys,
        rx: oneshot::Receiver<Turn>,
    ) -> Self {
        QueuedTurn {
            store: seating.store,
            queues: seating.queues,
            holders,
            keys,
            rx: Some(rx),
        }
    }

    /// Waits for this task's turn until `deadline`. A holder whose lease is lost meanwhile
    /// forfeits the turn, so the queue moves on. A lease of this process that holds the lock
    /// is verified in the store as this task arrives, again once this task listens for the
    /// lock's releases, and on every release it hears (an operator forced it, or the store
    /// ended the lease): if the store no longer has it, it is lost now, not at its next
    /// renewal (see [`crate::kernel::verify`]).
    pub(crate) async fn wait(&mut self, deadline: Instant) -> Option<Turn> {
        let lock_key = self.keys.lock();
        // Heard in the store, the releases of this lock; subscribed once this task has
        // waited a while (the subscription is shared with every other waiter of the lock in
        // this process). Not at once: under a hot key, where turns pass every few
        // milliseconds, every release would wake every queued task for nothing.
        let mut wakes: Option<WakeSubscription> = None;
        let subscribing = async {
            tokio::time::sleep(HOLDER_RECHECK).await;
            self.store.call(|store| store.subscribe(self.keys)).await
        };
        tokio::pin!(subscribing);
        let mut subscribed = false;
        if let Some(lease) = self.queues.turn_holder(lock_key) {
            self.holders.verify_soon(&lease, false);
        }
        loop {
            let holder = self.queues.turn_holder(lock_key);
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
            let released = async {
                match wakes.as_mut() {
                    Some(sub) => sub.released().await,
                    None => std::future::pending().await,
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
                        self.queues.forfeit(lease);
                    }
                }
                sub = &mut subscribing, if !subscribed => {
                    subscribed = true;
                    // Without a subscription, the renewals alone tell.
                    wakes = sub.ok();
                    // A release before the subscription was not heard.
                    if let (Some(lease), Some(_)) = (&holder, &wakes) {
                        self.holders.verify_soon(lease, false);
                    }
                }
                () = released => {
                    if let Some(lease) = &holder {
                        self.holders.verify_soon(lease, true);
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
            Some(Turn::Contend(turn)) => self.queues.pass_turn(self.keys.lock(), turn),
            Some(Turn::Granted(lease, fence)) => {
                self.holders.release_in_background(lease, fence);
            }
        }
    }
}
