//! The resolved options of one acquisition, shared by the locker, the local queue and the
//! acquire paths (a module of its own, so that the queue need not import the locker), and
//! the bounds every request's options are checked against.

use std::time::Duration;

use crate::store::identity::Label;
use crate::store::kind::LeaseKind;

/// The resolved options of one acquisition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    /// No handover inside the process: every release goes through the store.
    pub(crate) fair: bool,
    /// What the lease holds: the lock, a reader's share, or permits of a semaphore.
    pub(crate) kind: LeaseKind,
    /// Keep the lock at least this long after it was taken; `None`: no minimum.
    pub(crate) hold_at_least: Option<Duration>,
    /// Takes fencing tokens; false for [`LockRequest::unfenced`](crate::LockRequest::unfenced): on Redis a native
    /// `SET NX PX`, and a guard with no fence to read.
    pub(crate) fenced: bool,
    /// A waiting acquire tries an unavailable engine again until its wait is over
    /// ([`crate::kernel::outage`]).
    pub(crate) retry_unavailable: bool,
    /// What operators see beside the holder ([`LockRequest::label`](crate::LockRequest::label)).
    pub(crate) label: Option<Label>,
}

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
    use crate::error::LockError;

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
