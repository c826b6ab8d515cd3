//! Re-entrancy follows the call tree, not the thread or the task: a future running inside a
//! holder's scope may take the same key again; a sibling future joined in the same task may
//! not. (Re-entrancy by task id would let two `join!`ed handlers share one lock.)

use std::future::Future;
use std::sync::Arc;

use crate::engine::lease::Lease;

/// A lock held by an enclosing scope: which locker, the lease, and the holder's fence.
pub(crate) type Held = (u64, Arc<Lease>, u64);

tokio::task_local! {
    static HELD: Vec<Held>;
}

/// The lease (and fence) of `lock_key` held by an enclosing scope of this future, for locker
/// `locker_id`.
pub(crate) fn held(locker_id: u64, lock_key: &str) -> Option<(Arc<Lease>, u64)> {
    HELD.try_with(|held| {
        held.iter()
            .rev()
            .find(|(id, lease, _)| *id == locker_id && lease.keys.lock() == lock_key)
            .map(|(_, lease, fence)| (lease.clone(), *fence))
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

/// Runs `fut` with `lease` added to the enclosing scope's held locks.
pub(crate) fn scope<F: Future>(
    locker_id: u64,
    lease: Arc<Lease>,
    fence: u64,
    fut: F,
) -> impl Future<Output = F::Output> {
    let mut held = HELD.try_with(|h| h.clone()).unwrap_or_default();
    held.push((locker_id, lease, fence));
    HELD.scope(held, fut)
}
