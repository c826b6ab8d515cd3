// An empty list locks nothing.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(keys = [])]
async fn nothing() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
