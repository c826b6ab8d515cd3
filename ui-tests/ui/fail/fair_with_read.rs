// `fair = true` with `mode = "read"`: readers have no fair mode.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "doc:<id>", mode = "read", fair = true)]
async fn show(id: u64) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

fn main() {}
