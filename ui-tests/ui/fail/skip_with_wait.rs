use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly-report", on_busy = "skip", wait = "5s")]
async fn nightly_report() -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
