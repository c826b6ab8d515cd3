use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", on_busy = "skip", hold_at_least = "0s")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
