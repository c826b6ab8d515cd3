//! Re-entrancy follows the call tree, not the thread or the task: a future running inside a
//! holder's scope may take the same key again; a sibling future joined in the same task may
//! not. (Re-entrancy by task id would let two `join!`ed handlers share one lock.)

use std::future::Future;
use std::sync::Arc;

use crate::kernel::lease::Lease;
use crate::store::kind::LeaseKind;

/// A lock held by an enclosing scope.
#[derive(Clone)]
pub(crate) struct Held {
    /// The locker that holds it.
    pub(crate) locker: u64,
    pub(crate) lease: Arc<Lease>,
    /// The holder's fence.
    pub(crate) fence: u64,
    /// What the scope holds of the lease: its kind, except for a downgrade, which holds the
    /// write's lease as a read (a write inside it would wait for itself).
    pub(crate) kind: LeaseKind,
}

impl Held {
    /// What the scope holds now: a write whose guard was released while a downgraded read
    /// holds the lease on is only that read any more.
    pub(crate) fn kind_now(&self) -> LeaseKind {
        match self.kind {
            LeaseKind::Exclusive if self.lease.writer_gone() => LeaseKind::Read,
            kind => kind,
        }
    }
}

tokio::task_local! {
    static HELD: Vec<Held>;
}

/// The hold of `lock_key` by an enclosing scope of this future, for locker `locker_id`: the
/// innermost one that still holds a write, else the innermost (a read taken inside a held
/// write does not hide the write from the scopes inside it).
pub(crate) fn held(locker_id: u64, lock_key: &str) -> Option<Held> {
    HELD.try_with(|held| {
        let mut of_key = held
            .iter()
            .rev()
            .filter(|h| h.locker == locker_id && h.lease.keys.lock() == lock_key);
        let innermost = of_key.clone().next()?;
        let write =
            of_key.find(|h| h.kind_now() == LeaseKind::Exclusive && h.lease.holding(h.fence));
        Some(write.unwrap_or(innermost).clone())
    })
    .ok()
    .flatten()
}

/// Runs `fut` with every lock of `entries` added to the enclosing scope's held locks.
pub(crate) fn scope_many<F: Future>(entries: Vec<Held>, fut: F) -> impl Future<Output = F::Output> {
    let mut held = HELD.try_with(|h| h.clone()).unwrap_or_default();
    held.extend(entries);
    HELD.scope(held, fut)
}

/// Runs `fut` with `entry` added to the enclosing scope's held locks.
pub(crate) fn scope<F: Future>(entry: Held, fut: F) -> impl Future<Output = F::Output> {
    scope_many(vec![entry], fut)
}
