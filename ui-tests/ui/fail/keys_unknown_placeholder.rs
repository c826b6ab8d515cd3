// Every key of the list resolves its placeholders against the parameters.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(keys = ["wallet:<from>", "wallet:<too>"])]
async fn transfer(from: u64, to: u64) -> Result<(), LockError> {
    let _ = (from, to);
    Ok(())
}

fn main() {}
