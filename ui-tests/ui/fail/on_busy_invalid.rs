use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", on_busy = "ignore")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
