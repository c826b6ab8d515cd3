// `fencing = false` with `permits`: a permit has no fencing token to leave out.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "partner-api", permits = 4, fencing = false)]
async fn call_partner() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
