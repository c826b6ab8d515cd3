use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", on_busy = "skip")]
async fn nightly_report() -> Result<u64, LockError> {
    Ok(42)
}

fn main() {
    let _ = nightly_report();
}
