// With `fencing = false` the guard is an `UnfencedGuard`: there is no token to read.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "cache:<id>", fencing = false, guard = g)]
async fn rebuild(id: u64) -> Result<u64, LockError> {
    let fence = g.fence();
    Ok(fence + id)
}

fn main() {
    let _ = rebuild(1);
}
