//! Where a contender waits in the store (its [`ActiveTurn`](crate::kernel::turns::ActiveTurn)'s
//! place), and how it leaves: the same for every kind of lease.

use crate::kernel::health::Calls;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::{Leave, PermitWaiter};

/// Where a contender waits in the store.
#[derive(Clone, Debug)]
pub(crate) enum Place {
    /// As the front of the process's local queue (the store queues processes).
    ProcessFront,
    /// Alone, under a name of its own: a fair request on an engine whose fairness is per
    /// request.
    Alone(Box<str>),
    /// In a semaphore's queue of waiters for several permits.
    PermitLine(PermitWaiter),
    /// Nowhere: a reader, or a request for one permit.
    Nowhere,
}

impl Place {
    /// Leaves the store's queue, where the engine keeps one for this place. Never blocks.
    pub(crate) fn leave(&self, store: &Calls, keys: &LockKeys, kind: LeaseKind) {
        let place = match self {
            Place::ProcessFront => Leave::ProcessFront,
            Place::Alone(name) => Leave::Alone(name),
            Place::PermitLine(waiter) => Leave::PermitLine {
                waiter: waiter.name,
                count: kind.permits(),
            },
            Place::Nowhere => return,
        };
        store.leave(keys, place);
    }
}
