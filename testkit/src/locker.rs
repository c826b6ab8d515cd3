//! The in-memory locker with faults on demand.

use leasehold::testing::{in_memory_with_faults, Faults};
use leasehold::{LockError, Locker, LockerBuilder};

/// An in-memory locker with default options, and the handle that injects faults into it.
/// Run the test under Tokio's paused clock (`#[tokio::test(start_paused = true)]`) and every
/// step happens in the same order on every run.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let (locker, faults) = leasehold_testkit::faulty();
/// let guard = locker.lock("order:42").acquire().await?;
/// faults.lose("order:42");
/// guard.lost().await;
/// assert!(!guard.is_held());
/// # Ok(()) }
/// ```
pub fn faulty() -> (Locker, Faults) {
    faulty_with(Locker::builder()).expect("the default options are valid")
}

/// An in-memory locker built from `builder` (prefix, leases, waits, watchdog, profiles: no
/// engine), and the handle that injects faults into it.
///
/// # Errors
/// [`LockError::Config`] when an option of `builder` is invalid.
///
/// ```
/// # fn main() -> Result<(), leasehold::LockError> {
/// use std::time::Duration;
/// let (locker, faults) = leasehold_testkit::faulty_with(
///     leasehold::Locker::builder().prefix("shop").default_lease(Duration::from_secs(10)),
/// )?;
/// # drop((locker, faults));
/// # Ok(()) }
/// ```
pub fn faulty_with(builder: LockerBuilder) -> Result<(Locker, Faults), LockError> {
    in_memory_with_faults(builder)
}
