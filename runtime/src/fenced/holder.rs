//! What a claim takes: any holder of a fenced lease, whatever the primitive.

use crate::error::{LockError, LostReason};
use crate::primitives::guard::LockGuard;
use crate::primitives::leader::Leadership;
use crate::primitives::semaphore::PermitGuard;

/// A holder whose fence a resource can check: the guard of a lock (exclusive, or the write
/// side of a read-write lock; a [`MultiGuard`](crate::MultiGuard)'s key through
/// [`guard(key)`](crate::MultiGuard::guard)), a semaphore's [`PermitGuard`] (its permit's
/// fence), or a [`Leadership`] (its term). The claims ([`claim`](super::claim),
/// `postgres::claim_fence`) take any of them, so every primitive that guards a write fences it
/// the same way.
///
/// Implemented by leasehold's guards only.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// use leasehold::fenced::FenceHolder;
///
/// let locker = leasehold::Locker::in_memory();
/// let leader = locker.leader("scheduler").campaign().await?;
/// let permit = locker.semaphore("payments", 1).acquire().await?;
/// fn fence_of(holder: &impl FenceHolder) -> u64 {
///     holder.holder_fence()
/// }
/// assert_eq!(fence_of(&leader), leader.term());
/// assert_eq!(fence_of(&permit), permit.fence());
/// # Ok(()) }
/// ```
pub trait FenceHolder: sealed::Sealed + Send + Sync {
    /// The fence the resource is given: the lock's or permit's fence, the leader's term.
    fn holder_fence(&self) -> u64;

    /// The guard of the lease behind the holder; an error when there is none any more.
    #[doc(hidden)]
    fn fence_guard(&self) -> Result<&LockGuard, LockError>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::LockGuard {}
    impl Sealed for super::PermitGuard {}
    impl Sealed for super::Leadership {}
}

impl FenceHolder for LockGuard {
    fn holder_fence(&self) -> u64 {
        self.fence()
    }

    fn fence_guard(&self) -> Result<&LockGuard, LockError> {
        Ok(self)
    }
}

impl FenceHolder for PermitGuard {
    fn holder_fence(&self) -> u64 {
        self.fence()
    }

    fn fence_guard(&self) -> Result<&LockGuard, LockError> {
        Ok(self.guard())
    }
}

impl FenceHolder for Leadership {
    fn holder_fence(&self) -> u64 {
        self.term()
    }

    fn fence_guard(&self) -> Result<&LockGuard, LockError> {
        self.lease_guard().ok_or(LockError::Lost {
            reason: LostReason::Closed,
        })
    }
}
