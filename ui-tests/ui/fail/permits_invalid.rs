// `permits` is a whole number from 1 to 10000, for one `key`, without `mode` or `fair`.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "partner-api", permits = 0)]
async fn zero() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "partner-api", permits = "8")]
async fn quoted() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "partner-api", permits = 1000000)]
async fn huge() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(keys = ["a", "b"], permits = 8)]
async fn several() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "doc", mode = "read", permits = 8)]
async fn read() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
