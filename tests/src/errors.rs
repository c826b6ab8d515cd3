//! One `LockError` of each kind, for the web tests: the messages carry the details (addresses,
//! keys, passwords) that a response must never show.

use std::time::Duration;

use leasehold::LockError;

/// The error named `kind` (`busy`, `busy-unknown`, `unavailable`, `lost`, `invalid`, anything
/// else: a configuration error); `busy` carries `busy_retry_after`.
pub fn lock_error(kind: &str, busy_retry_after: Duration) -> LockError {
    match kind {
        "busy" => LockError::Busy {
            retry_after: Some(busy_retry_after),
        },
        "busy-unknown" => LockError::Busy { retry_after: None },
        "unavailable" => LockError::Unavailable {
            message: "redis at 10.0.0.7:6379 did not answer within 1s".into(),
            source: None,
        },
        "lost" => LockError::Lost {
            reason: leasehold::LostReason::Refused,
        },
        "invalid" => LockError::InvalidKey {
            reason: "the key secret-customer-42 is too long".into(),
        },
        _ => LockError::Config {
            message: "redis://user:hunter2@10.0.0.7 is wrong".into(),
            source: None,
        },
    }
}
