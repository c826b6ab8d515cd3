use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", hold_at_most = "1ms")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
