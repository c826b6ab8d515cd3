// `mode` is "read" or "write"; a read lock takes one key.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "doc:<id>", mode = "shared")]
async fn read(id: u64) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

#[distributed_lock(keys = ["doc:<a>", "doc:<b>"], mode = "read")]
async fn read_two(a: u64, b: u64) -> Result<(), LockError> {
    let _ = (a, b);
    Ok(())
}

fn main() {}
