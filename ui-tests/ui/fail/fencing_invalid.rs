// `fencing` is `true` or `false` without quotes, and unfenced reads are not offered.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "cache:<id>", fencing = "no")]
async fn quoted(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "doc:<id>", mode = "read", fencing = false)]
async fn read(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {}
