//! The expansion adds no warning under strict, allow-by-default lints that some crates deny.

#![deny(
    warnings,
    missing_docs,
    unused_qualifications,
    unused_results,
    unused_lifetimes,
    single_use_lifetimes,
    trivial_casts,
    trivial_numeric_casts,
    unreachable_pub,
    elided_lifetimes_in_paths,
    let_underscore_drop,
    unit_bindings,
    unsafe_code,
    redundant_lifetimes,
    missing_debug_implementations
)]

use leasehold::{distributed_lock, LockError, Locker};

/// A locked function with every kind of option.
#[distributed_lock(key = "strict:<id>", lease = "1s", wait = "0s", watchdog = true, locker = locker, guard = lock, on_lost = "continue")]
pub async fn strict(locker: &Locker, id: u64) -> Result<u64, LockError> {
    Ok(id + lock.fence())
}

/// Unit `Ok` and the default locker.
#[distributed_lock(key = "unit")]
pub async fn unit() -> Result<(), LockError> {
    Ok(())
}

/// An error type of its own.
#[derive(Debug)]
pub struct MyError(pub LockError);

impl From<LockError> for MyError {
    fn from(e: LockError) -> Self {
        MyError(e)
    }
}

/// A custom error type.
#[distributed_lock(key = "mine:<id>")]
pub async fn mine(id: u8) -> Result<u8, MyError> {
    Ok(id)
}

fn built<F: std::future::Future>(_: F) {}

pub(crate) fn main() {
    let locker = Locker::in_memory();
    built(strict(&locker, 1));
    built(unit());
    built(mine(1));
}
