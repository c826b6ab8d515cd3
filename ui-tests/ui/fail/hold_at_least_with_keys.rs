use leasehold::{distributed_lock, LockError};

#[distributed_lock(keys = ["job:a", "job:b"], hold_at_least = "30s")]
async fn two_jobs() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = two_jobs();
}
