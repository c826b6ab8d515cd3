//! The defaults of a [`Locker`](crate::Locker) and the bounds of its options, named once.

use std::time::Duration;

/// The default prefix of every name the library writes in its engine (see
/// [`LockerBuilder::prefix`](crate::LockerBuilder::prefix)).
pub const DEFAULT_PREFIX: &str = "leasehold";
/// The default lease: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default time to wait for a busy lock: 3 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The default bound on one call to the engine: 1 s.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(1);
/// The default bound on establishing a connection: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The default lifetime of an unused fence counter (Redis and in memory): 7 days.
pub const DEFAULT_FENCE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The default session timeout of ZooKeeper sessions and etcd leases: 10 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest [`fence_offset`](crate::LockerBuilder::fence_offset): 2^52. Fences stay below
/// 2^53, which doubles (Lua, JavaScript) hold exactly, while the clocks that Redis and
/// PostgreSQL fences follow stay below 2^52 µs (until the year 2112).
pub const MAX_FENCE_OFFSET: u64 = 1 << 52;
/// The shortest lease accepted: 10 ms.
pub const MIN_LEASE: Duration = Duration::from_millis(10);

/// Refuses a lease shorter than [`MIN_LEASE`], naming the option (`name`) that set it.
pub(crate) fn check_lease(lease: Duration, name: &str) -> Result<(), crate::error::LockError> {
    if lease < MIN_LEASE {
        return Err(crate::error::LockError::config(format!(
            "{name} of {lease:?} is too short; a lease must be at least {MIN_LEASE:?} (leases \
             are counted in milliseconds, and the client keeps a safety margin)"
        )));
    }
    Ok(())
}

/// The most permits a semaphore may have: every permit held is an entry of its own in the
/// store (about 100 bytes on Redis, with its own lease), and taking or renewing `n` permits
/// touches `n` entries in one script call, so the bound keeps each call short.
pub const MAX_PERMITS: u32 = 10_000;

/// Checks a semaphore's limit and the permits asked for.
pub(crate) fn check_permits(limit: u32, count: u32) -> Result<(), crate::error::LockError> {
    if limit == 0 {
        return Err(crate::error::LockError::config(
            "a semaphore of 0 permits could never be acquired; give it at least 1 (with 1 it \
             is an exclusive lock)",
        ));
    }
    if limit > MAX_PERMITS {
        return Err(crate::error::LockError::config(format!(
            "a semaphore of {limit} permits is above the limit of {MAX_PERMITS}: every permit \
             held is an entry with its own lease in the store; for a rate rather than a \
             number of holders, use a rate limiter"
        )));
    }
    if count == 0 {
        return Err(crate::error::LockError::config(
            "acquire_many(0) would take no permit; ask for at least 1",
        ));
    }
    if count > limit {
        return Err(crate::error::LockError::config(format!(
            "acquire_many({count}) asks for more permits than the semaphore has ({limit}), \
             which could never be granted"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_permits, MAX_PERMITS};
    use crate::LockError;

    #[test]
    fn hostile_limits_are_config_errors() {
        for (limit, count, says) in [
            (0, 1, "0 permits"),
            (MAX_PERMITS + 1, 1, "above the limit"),
            (u32::MAX, 1, "above the limit"),
            (8, 0, "acquire_many(0)"),
            (8, 9, "more permits than the semaphore has"),
        ] {
            let e = check_permits(limit, count).unwrap_err();
            assert!(matches!(e, LockError::Config { .. }), "{e:?}");
            assert!(e.to_string().contains(says), "{e}");
        }
        assert!(check_permits(MAX_PERMITS, MAX_PERMITS).is_ok());
    }
}
