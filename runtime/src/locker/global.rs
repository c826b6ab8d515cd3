//! The process-wide default [`Locker`], used by `#[distributed_lock]` when no `locker = ...`
//! is given.

use std::sync::OnceLock;

use crate::error::LockError;
use crate::locker::Locker;

static GLOBAL: OnceLock<Locker> = OnceLock::new();

/// Installs the locker that `#[distributed_lock]` uses when no `locker = ...` is given. Call
/// it once at start-up, before serving requests.
///
/// Every attribute without `locker = ...` is checked against it first, as
/// [`Locker::check_call_sites`] checks them: one that asks for what this locker cannot give
/// (a primitive its engine lacks, a profile it does not define, an unrenewed lease above the
/// engine's bound) would fail on every call, so the locker is not installed and the error
/// lists every such call site.
///
/// # Errors
/// [`LockError::Config`] when a default was installed already (it stays in place), or when
/// an attribute that would use this locker asks for what it cannot give.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// leasehold::set_global_default(locker.clone())?;
/// assert!(leasehold::set_global_default(locker).is_err());
/// assert!(leasehold::global_default().is_some());
/// # Ok(()) }
/// ```
pub fn set_global_default(locker: Locker) -> Result<(), LockError> {
    locker.check_sites(crate::locker::sites::Sites::OfTheDefault)?;
    GLOBAL.set(locker).map_err(|_| {
        LockError::config(
            "a default Locker is installed already; call leasehold::set_global_default once, at \
             start-up",
        )
    })
}

/// The locker installed with [`set_global_default`], if any.
pub fn global_default() -> Option<&'static Locker> {
    GLOBAL.get()
}

/// The default locker, or the error that tells the user how to install one.
pub(crate) fn require_global_default() -> Result<&'static Locker, LockError> {
    GLOBAL.get().ok_or_else(|| {
        LockError::config(
            "no Locker for #[distributed_lock]: call leasehold::set_global_default(locker) at \
             start-up, or pass one with #[distributed_lock(locker = ...)]",
        )
    })
}
