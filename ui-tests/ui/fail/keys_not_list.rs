// `keys` takes a list of string literals.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(keys = "wallet:<from>")]
async fn one(from: u64) -> Result<(), LockError> {
    let _ = from;
    Ok(())
}

#[distributed_lock(keys = ["wallet:<from>", 7])]
async fn number(from: u64) -> Result<(), LockError> {
    let _ = from;
    Ok(())
}

fn main() {}
