use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", lease = "10s", watchdog = false, hold_at_least = "30s")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
