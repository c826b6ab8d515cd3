// `fencing = false` takes one `key`: a lock on several keys has a fencing token per key.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(keys = ["wallet:<from>", "wallet:<to>"], fencing = false)]
async fn transfer(from: u64, to: u64) -> Result<(), LockError> {
    let _ = (from, to);
    Ok(())
}

fn main() {}
