//! What a driver error means for a lock call: a refusal that retrying will not mend
//! ([`LockError::Config`]), or a server that did not answer ([`LockError::Unavailable`]).

use std::time::Duration;

use tokio_postgres as pg;

use super::conn::Shared;
use crate::error::LockError;

/// A driver error with its causes: tokio-postgres shows only its kind ("db error", "error
/// connecting to server") and keeps the server's message or the OS error as the source.
pub(super) fn error_text(e: &pg::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The SQLSTATE of a statement the server refused, if that is what `e` is.
pub(super) fn sql_state(e: &LockError) -> Option<&pg::error::SqlState> {
    match e {
        LockError::Unavailable {
            source: Some(source),
            ..
        } => source.downcast_ref::<pg::Error>().and_then(pg::Error::code),
        _ => None,
    }
}

/// The row an acquire statement answered; `None` when another session held the row it
/// locks past `lock_timeout`: the lock (or semaphore) reads as held, and the caller tries
/// again (fenced transactions hold an advisory lock, never the row).
pub(super) fn answered_row(
    answer: Result<pg::Row, LockError>,
) -> Result<Option<pg::Row>, LockError> {
    match answer {
        Ok(row) => Ok(Some(row)),
        Err(LockError::Unavailable {
            source: Some(source),
            ..
        }) if is_lock_timeout(&*source) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What an acquire's first two columns say: the top fence when granted, else the holder's
/// remaining lease in milliseconds (when known).
pub(super) fn attempt_of(row: &pg::Row) -> crate::store::Attempt {
    let fence: Option<i64> = row.get(0);
    let remaining: Option<i64> = row.get(1);
    match fence {
        Some(top) => crate::store::Attempt::Granted { top: top as u64 },
        None => crate::store::Attempt::Held {
            remaining: remaining.map(|ms| std::time::Duration::from_millis(ms.max(1) as u64)),
        },
    }
}

pub(super) fn is_lock_timeout(source: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    source
        .downcast_ref::<pg::Error>()
        .and_then(pg::Error::code)
        .is_some_and(|code| *code == pg::error::SqlState::LOCK_NOT_AVAILABLE)
}

impl Shared {
    pub(super) fn unavailable(&self, what: &str, e: pg::Error) -> LockError {
        if let Some(config) = self.refused(&e) {
            return config;
        }
        LockError::unavailable(
            format!("PostgreSQL at {} {what}: {}", self.shown, error_text(&e)),
            Some(Box::new(e)),
        )
    }

    /// The errors that retrying will not mend: credentials, a database or schema that is
    /// not there, privileges.
    fn refused(&self, e: &pg::Error) -> Option<LockError> {
        use pg::error::SqlState;
        let code = e.code()?;
        let hint = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            "refused the user name or password"
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            "has no such database"
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            "refused a privilege the lock tables need (apply leasehold::postgres::SCHEMA as \
             the tables' owner, and grant this user SELECT, INSERT, UPDATE, DELETE on \
             leasehold_locks, leasehold_waiters, leasehold_readers, leasehold_semaphores, \
             leasehold_permits and leasehold_leaders, USAGE, UPDATE on leasehold_fences and \
             EXECUTE on the functions)"
        } else if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::UNDEFINED_FUNCTION {
            "lacks the lock tables in this connection's search_path (apply \
             leasehold::postgres::SCHEMA there)"
        } else {
            return None;
        };
        Some(LockError::Config {
            message: format!("PostgreSQL at {} {hint}: {}", self.shown, error_text(e)),
            source: None,
        })
    }

    pub(super) fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!(
                "PostgreSQL at {} did not answer within {limit:?}",
                self.shown
            ),
            None,
        )
    }
}
