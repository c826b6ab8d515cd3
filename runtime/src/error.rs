//! The one error type of the crate, [`LockError`]: what went wrong and what to do about it.
//! Messages never contain owner tokens, passwords or the lock key (keys may carry user data).

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// The cause kept behind a [`LockError`], available through [`std::error::Error::source`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// Match on the variant to decide what to do; print it (`Display`) to tell a person. New
/// variants may be added, so a `match` needs a wildcard arm.
///
/// ```
/// use leasehold::LockError;
/// use std::time::Duration;
///
/// let err = LockError::Busy { retry_after: Some(Duration::from_millis(1500)) };
/// assert!(err.is_busy());
/// assert!(err.to_string().contains("busy"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another owner held the lock for the whole `wait`. `retry_after` is the holder's
    /// remaining lease when it was last seen, if the engine reported one (ZooKeeper and etcd,
    /// where a session rather than a lease of the lock's own ends a hold, report none).
    #[error("{}", busy_message(*retry_after))]
    Busy {
        /// How long the current holder's lease had left when we gave up.
        retry_after: Option<Duration>,
    },
    /// The lease ran out (or was taken over) before the work under it finished, or a release
    /// found that the lock was no longer ours. Anything written under it may be stale: use the
    /// guard's fencing token ([`crate::LockGuard::fence`]) where the resource can check it.
    #[error("{}", lost_message(*reason))]
    Lost {
        /// Why the lease counts as lost.
        reason: LostReason,
    },
    /// The engine (Redis, ZooKeeper, etcd, PostgreSQL) could not be reached, answered with
    /// an error, or did not answer in time.
    #[error("{message}")]
    Unavailable {
        /// What failed and what to check, naming the engine and its servers, e.g. "redis at
        /// 127.0.0.1:6379 did not answer within 500ms".
        message: String,
        /// The underlying client error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The lock key cannot be used (empty, too long, ...). The message says why but never
    /// repeats the key.
    #[error("invalid lock key: {reason}")]
    InvalidKey {
        /// Why the key was refused.
        reason: String,
    },
    /// The [`crate::Locker`] was closed ([`crate::Locker::close`]): it takes no new locks and
    /// gave back those it held. Answered over HTTP with the status of
    /// [`Unavailable`](Self::Unavailable) (503 by default): the service is shutting down.
    #[error(
        "this locker was closed (Locker::close): it takes no new locks; stop using it once \
             the service shuts down, or build a new one"
    )]
    Closed,
    /// The [`crate::Locker`] or the call is misconfigured: the message names the setting and the fix.
    #[error("{message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
        /// The underlying error, if any (e.g. a URL parse error).
        #[source]
        source: Option<BoxError>,
    },
}

/// Why a lease counts as lost (in [`LockError::Lost`], and in the `leasehold.lost` trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// The locker was closed ([`Locker::close`](crate::Locker::close)), which gave the lease
    /// back while this guard still held it.
    Closed,
    /// Its validity ran out on this process's clock before a renewal succeeded: the store was
    /// unreachable or slow for longer than the lease, the process or its runtime was paused
    /// or blocked, or the watchdog was off and the body outlasted the lease.
    Expired,
    /// The connection the lease was granted over dropped: the server may have restarted
    /// without it (empty, or from an older snapshot) or failed over, so nobody vouches for it.
    ConnectionDropped,
    /// The store said the lock is not ours any more: a renewal or the release found it
    /// expired there, taken over by another owner, or deleted by an operator.
    Refused,
    /// A resource refused a write carrying this lock's fencing token: a newer holder wrote
    /// already (returned by applications and helpers that check fences).
    StaleFence,
}

impl LostReason {
    /// A stable, machine-readable name: `expired`, `connection_dropped`, `refused`,
    /// `stale_fence`, `closed`.
    pub fn code(&self) -> &'static str {
        match self {
            LostReason::Expired => "expired",
            LostReason::ConnectionDropped => "connection_dropped",
            LostReason::Refused => "refused",
            LostReason::StaleFence => "stale_fence",
            LostReason::Closed => "closed",
        }
    }
}

fn lost_message(reason: LostReason) -> String {
    const STALE: &str = "treat writes made under it as possibly stale (the fencing token lets \
                         the resource refuse them)";
    match reason {
        LostReason::Expired => format!(
            "the lock's lease ran out before the work under it finished (no renewal succeeded \
             in time: the lock store was unreachable or slow, the process was paused, or the \
             watchdog was off); {STALE}, and give long critical sections a longer lease or \
             keep the watchdog on"
        ),
        LostReason::ConnectionDropped => format!(
            "the connection to the lock store dropped while the lock was held (the server may \
             have restarted or failed over without it); {STALE}"
        ),
        LostReason::Refused => format!(
            "the lock store said the lock was not ours any more (it expired there, or was taken \
             over or deleted); {STALE}"
        ),
        LostReason::Closed => "the locker was closed (Locker::close) while the lock was held, \
                               and gave the lock back; work under it after that ran unprotected"
            .to_owned(),
        LostReason::StaleFence => {
            "a write under the lock was refused because a newer holder's fencing token was seen \
             already; this holder's lease had been lost"
                .to_owned()
        }
    }
}

fn busy_message(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(
            "the lock is busy: another owner holds it (its lease ends in about {d:?}); retry \
             later or give the caller a longer `wait`"
        ),
        None => "the lock is busy: another owner holds it; retry later or give the caller a \
                 longer `wait`"
            .to_owned(),
    }
}

impl LockError {
    /// True for [`LockError::Busy`].
    pub fn is_busy(&self) -> bool {
        matches!(self, LockError::Busy { .. })
    }

    /// True for [`LockError::Lost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, LockError::Lost { .. })
    }

    /// True for [`LockError::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, LockError::Unavailable { .. })
    }

    /// The stable, machine-readable name of the variant, used in HTTP bodies and metrics:
    /// `lock_busy`, `lock_lost`, `lock_unavailable`, `lock_invalid_key`, `lock_config`,
    /// `lock_closed`.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::Busy { .. } => "lock_busy",
            LockError::Lost { .. } => "lock_lost",
            LockError::Unavailable { .. } => "lock_unavailable",
            LockError::InvalidKey { .. } => "lock_invalid_key",
            LockError::Config { .. } => "lock_config",
            LockError::Closed => "lock_closed",
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        LockError::Config {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn invalid_key(reason: impl Into<String>) -> Self {
        LockError::InvalidKey {
            reason: reason.into(),
        }
    }

    pub(crate) fn unavailable(message: impl Into<String>, source: Option<BoxError>) -> Self {
        LockError::Unavailable {
            message: message.into(),
            source,
        }
    }
}

/// A short description of a Redis server for messages: host and port (or socket path),
/// never credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint(pub(crate) String);

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do_and_codes_are_stable() {
        let busy = LockError::Busy {
            retry_after: Some(Duration::from_secs(2)),
        };
        assert!(busy.to_string().contains("longer `wait`"));
        assert_eq!(busy.code(), "lock_busy");
        let lost = LockError::Lost {
            reason: LostReason::ConnectionDropped,
        };
        assert_eq!(lost.code(), "lock_lost");
        assert!(lost.to_string().contains("connection"), "{lost}");
        assert!(!lost.to_string().contains("longer lease"), "{lost}");
        let err = LockError::unavailable(
            "redis at 127.0.0.1:1 did not answer within 500ms",
            Some("boom".into()),
        );
        assert!(err.is_unavailable());
        assert_eq!(err.source().map(|s| s.to_string()), Some("boom".into()));
        assert_eq!(LockError::invalid_key("empty").code(), "lock_invalid_key");
        assert_eq!(LockError::config("x").code(), "lock_config");
    }
}
