use leasehold::{distributed_lock, LockError};

type JobResult = Result<(), LockError>;

#[distributed_lock(key = "job:nightly-report", on_busy = "skip")]
async fn nightly_report() -> JobResult {
    Ok(())
}

fn main() {
    let _ = nightly_report();
}
