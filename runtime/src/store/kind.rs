//! What one lease holds: the lock itself, a reader's share of it, or permits of a semaphore.
//! Decided once, where a request is described, and carried unchanged to the store.

/// What one lease holds. Made once, from the request (or the attribute's options), and
/// matched only where behaviour differs: the store's scripts, re-entry, and whether the
/// lease can be handed to the next holder of the process.
///
/// Not public API: the attribute's expansion names it through `__private`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKind {
    /// The lock itself: a mutex, or the write side of a read-write lock. One holder at a
    /// time, handed to the next waiter of the process where it can be.
    Exclusive,
    /// One reader's share of a read-write lock: a lease of its own, never handed over.
    Read,
    /// `count` of the `limit` permits of a semaphore: a lease of its own, never handed over
    /// (every holder has its own owner token).
    Permits {
        /// The permits of the semaphore, which all of its callers agree on.
        limit: u32,
        /// The permits this lease holds.
        count: u32,
    },
}

impl LeaseKind {
    /// A lease of its own (a reader's, or a semaphore's permits): never handed to another
    /// holder of the process, never in the local queue of the lock's waiters.
    pub(crate) fn is_own(self) -> bool {
        !matches!(self, LeaseKind::Exclusive)
    }

    /// The permits this lease holds; 0 for a lock's lease.
    pub(crate) fn permits(self) -> u32 {
        match self {
            LeaseKind::Permits { count, .. } => count,
            _ => 0,
        }
    }
}
