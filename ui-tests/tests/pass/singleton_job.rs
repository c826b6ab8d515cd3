//! Singleton jobs: `on_busy = "skip"` on `Result<(), E>` (with the user's own error type and
//! through an alias that names its `Ok` type), on `Result<Option<T>, E>` and with `keys`;
//! `hold_at_least` and `hold_at_most`. A second trigger during the hold is skipped.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker};

#[derive(Debug)]
enum JobError {
    Lock(LockError),
}

impl From<LockError> for JobError {
    fn from(e: LockError) -> Self {
        JobError::Lock(e)
    }
}

type JobResult<T> = Result<T, JobError>;

#[distributed_lock(key = "job:cleanup", on_busy = "skip", hold_at_least = "30s", locker = locker)]
async fn cleanup(locker: &Locker) -> Result<(), JobError> {
    Ok(())
}

#[distributed_lock(key = "job:report:<day>", on_busy = "skip", hold_at_least = "1m", hold_at_most = "10m", locker = locker)]
async fn report(locker: &Locker, day: u32) -> JobResult<Option<String>> {
    Ok(Some(format!("report for day {day}")))
}

#[distributed_lock(keys = ["job:a", "job:b"], on_busy = "skip", locker = locker, guard = g)]
async fn both(locker: &Locker) -> Result<Option<usize>, LockError> {
    Ok(Some(g.guards().len()))
}

#[distributed_lock(key = "job:bounded", on_busy = "wait", hold_at_most = "2s", on_lost = "continue", locker = locker)]
async fn bounded(locker: &Locker) -> Result<u8, LockError> {
    Ok(1)
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    cleanup(&locker).await.unwrap();
    cleanup(&locker).await.unwrap(); // skipped: held for 30 s
    assert_eq!(report(&locker, 1).await.unwrap().as_deref(), Some("report for day 1"));
    assert_eq!(report(&locker, 1).await.unwrap(), None);
    assert_eq!(report(&locker, 2).await.unwrap().as_deref(), Some("report for day 2"));
    assert_eq!(both(&locker).await.unwrap(), Some(2));
    let _held = locker.lock("job:b").acquire().await.unwrap();
    assert_eq!(both(&locker).await.unwrap(), None);
    assert_eq!(bounded(&locker).await.unwrap(), 1);
    if let Err(JobError::Lock(e)) = cleanup(&locker).await {
        panic!("{e}");
    }
}
