use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", watchdog = true, hold_at_most = "10m")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
