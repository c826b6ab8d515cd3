// `profile` names a `[profiles.NAME]` table: a string literal, not empty, without spaces.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "payout", profile = payments)]
async fn not_a_string() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "payout", profile = "")]
async fn empty() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "payout", profile = "pay ments")]
async fn spaced() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "payout", profile = "a", profile = "b")]
async fn twice() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
