//! `guard = g` binds `&LockGuard` in the body.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, LockGuard};

#[distributed_lock(key = "fenced:<id>", guard = lock)]
async fn fenced(id: u32) -> Result<(u64, String), LockError> {
    let _: &LockGuard = lock;
    let fence = lock.fence();
    let key = lock.key().to_owned();
    if !lock.is_held() {
        return Ok((0, key));
    }
    Ok((fence + u64::from(id), key))
}

#[distributed_lock(key = "watch", guard = g, on_lost = "continue")]
async fn watch_lost() -> Result<(), LockError> {
    tokio::select! {
        _ = g.lost() => Ok(()),
        _ = tokio::time::sleep(std::time::Duration::from_millis(1)) => Ok(()),
    }
}

fn assert_send<T: Send>(_: T) {}

pub(crate) fn main() {
    assert_send(fenced(1));
    assert_send(watch_lost());
}
