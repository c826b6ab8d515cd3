//! `permits = N`: the body holds one permit of a semaphore of N; other callers get in while
//! fewer than N bodies run, and `guard = g` binds the `&PermitGuard`.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker};

#[distributed_lock(key = "partner-api", permits = 2, locker = locker, guard = g)]
async fn call_partner(locker: &Locker) -> Result<u32, LockError> {
    // A second caller gets the other permit; a third finds none.
    let second = locker.semaphore("partner-api", 2).try_acquire().await?;
    assert!(second.is_some());
    assert!(locker.semaphore("partner-api", 2).try_acquire().await?.is_none());
    Ok(g.permits() * 10 + g.limit())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let locker = Locker::in_memory();
    assert_eq!(call_partner(&locker).await.unwrap(), 12);
}
