//! `fencing = false`: the lock without a fencing token; `guard = g` binds the
//! `&UnfencedGuard`, the key re-enters unfenced inside the body, a fenced acquire of it there
//! is refused, and `on_busy = "skip"` tries it. `fencing = true` is the fenced default.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, LockGuard, Locker, UnfencedGuard};

#[distributed_lock(key = "cache:<shard>", fencing = false, locker = locker, guard = g)]
async fn rebuild(locker: &Locker, shard: u32) -> Result<String, LockError> {
    let _: &UnfencedGuard = g;
    assert!(g.is_held());
    let again = locker.lock(format!("cache:{shard}")).unfenced().acquire().await?;
    assert!(again.is_reentrant());
    assert!(matches!(
        locker.lock(format!("cache:{shard}")).acquire().await,
        Err(LockError::Config { .. })
    ));
    Ok(g.key().to_owned())
}

#[distributed_lock(key = "job:warmup", fencing = false, on_busy = "skip", hold_at_least = "30s", locker = locker)]
async fn warm_up(locker: &Locker) -> Result<Option<u8>, LockError> {
    Ok(Some(1))
}

#[distributed_lock(key = "account:<id>", fencing = true, locker = locker, guard = g)]
async fn fenced(locker: &Locker, id: u64) -> Result<u64, LockError> {
    let _: &LockGuard = g;
    Ok(g.fence() + id)
}

fn assert_send<T: Send>(_: T) {}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    assert_send(rebuild(&locker, 1));
    assert_eq!(rebuild(&locker, 7).await.unwrap(), "cache:7");
    assert_eq!(warm_up(&locker).await.unwrap(), Some(1));
    assert_eq!(warm_up(&locker).await.unwrap(), None); // skipped: held for 30 s
    assert!(fenced(&locker, 1).await.unwrap() >= 2);
}
