//! What every database engine's fence check in the caller's transaction shares, written once:
//! which guards may be checked at all (a guard of the check's engine, still held), and what a
//! "not the holder" answer does to the guard and the caller. The engines' checks only name
//! their statement and read their drivers' errors.

use crate::error::{LockError, LostReason};
use crate::primitives::guard::LockGuard;
use crate::store::Engine;

/// The guard's fence as a check's statement takes it (a signed 64-bit integer), or why no
/// statement may run: a guard of a locker on another engine than `engine` (the check `check`,
/// as users call it, e.g. `leasehold::mysql::check_fence`, and the builder method
/// `LockerBuilder::{builder}` that makes a locker on `engine`), or one not held any more.
pub(crate) fn checkable_fence(
    guard: &LockGuard,
    engine: Engine,
    check: &str,
    builder: &str,
) -> Result<i64, LockError> {
    let store = guard.hold().store();
    if store.engine() != engine {
        let name = engine.name();
        return Err(LockError::config(format!(
            "{check} takes the guard of a {name} locker (LockerBuilder::{builder}), and the \
             guard of {:?} comes from a locker on another engine ({}): a {name} transaction \
             cannot check a lock kept elsewhere; give the guard's fence to the resource you \
             write instead",
            guard.key(),
            store.describe()
        )));
    }
    if !guard.is_held() {
        return Err(guard.hold().lost_error());
    }
    i64::try_from(guard.hold().store_fence()).map_err(|_| LockError::Lost {
        reason: LostReason::StaleFence,
    })
}

/// The database showed another holder at a fence check, or none: the guard hears that its
/// lease is lost (its `lost()` resolves), and the caller gets
/// [`LostReason::StaleFence`].
pub(crate) fn not_the_holder(guard: &LockGuard) -> LockError {
    guard
        .hold()
        .refused_by_store("the database showed another holder at a fence check");
    LockError::Lost {
        reason: LostReason::StaleFence,
    }
}
