//! `permits = N`: the body holds one permit of a semaphore of N; other tasks get in while
//! fewer than N bodies run, a request inside the body re-enters, and `guard = g` binds the
//! `&PermitGuard`.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker};

#[distributed_lock(key = "partner-api", permits = 2, locker = locker, guard = g)]
async fn call_partner(locker: &Locker) -> Result<u32, LockError> {
    assert!(locker.semaphore("partner-api", 2).acquire().await?.is_reentrant());
    // Another task gets the other permit; then none is left.
    let other = locker.clone();
    let second = tokio::spawn(async move {
        let second = other.semaphore("partner-api", 2).try_acquire().await?;
        let third = other.semaphore("partner-api", 2).try_acquire().await?;
        Ok::<_, LockError>((second.is_some(), third.is_none()))
    });
    assert_eq!(second.await.unwrap()?, (true, true));
    Ok(g.permits() * 10 + g.limit())
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    assert_eq!(call_partner(&locker).await.unwrap(), 12);
}
