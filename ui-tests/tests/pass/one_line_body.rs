//! A body of one expression, on one line, causes no lint in the user's code (the expansion
//! once nested it in a way `unused_braces` flagged, and `cargo fix` would then have broken
//! it).

#![deny(warnings, unused_braces, unused_parens, clippy::all)]

use leasehold::{distributed_lock, LockError, Locker};

#[distributed_lock(key = "n:<n>", locker = locker)]
async fn one_line(locker: &Locker, n: u64) -> Result<u64, LockError> { Ok(n) }

#[distributed_lock(key = "n:<n>", locker = locker, guard = g)]
async fn with_guard(locker: &Locker, n: u64) -> Result<u64, LockError> { Ok(n + g.fence()) }

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    assert_eq!(one_line(&locker, 4).await.unwrap(), 4);
    assert!(with_guard(&locker, 4).await.unwrap() > 4);
}
