//! What a driver error means for a lock call: a refusal that retrying will not mend
//! ([`LockError::Config`]), a server that did not answer or refused for now
//! ([`LockError::Unavailable`]), and whether the call's outcome is known.

use mysql_async::Error as MyError;

use crate::error::LockError;

/// MariaDB's `ER_LOCK_WAIT_TIMEOUT` (also its answer to `NOWAIT`), MySQL 8's `ER_LOCK_NOWAIT`,
/// and both servers' `ER_LOCK_DEADLOCK`: the statement waited for (or may not wait for) a row
/// another transaction holds; InnoDB rolled it back.
const LOCK_WAIT: [u16; 3] = [1205, 3572, 1213];

/// A statement the server stopped at its time bound (MariaDB's `max_statement_time`: 1969,
/// MySQL 8's `max_execution_time`: 3024) or interrupted (1317): how far it got is unknown.
const STOPPED: [u16; 3] = [1969, 3024, 1317];

/// The server's error code, if the server answered with an error.
pub(super) fn code(e: &MyError) -> Option<u16> {
    match e {
        MyError::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Whether the server answered `e` about the statement itself, so that the call's outcome is
/// known (it did nothing: every procedure rolls its transaction back on an error).
pub(super) fn answered(e: &MyError) -> bool {
    code(e).is_some_and(|c| !STOPPED.contains(&c))
}

/// Whether `e` is a wait for a row another transaction holds: a lock call that met it reads
/// as "held", and is tried again.
pub(super) fn is_lock_wait(e: &MyError) -> bool {
    code(e).is_some_and(|c| LOCK_WAIT.contains(&c))
}

/// The driver error below a lock call's error, if that is what it is.
pub(super) fn driver_error(e: &LockError) -> Option<&MyError> {
    match e {
        LockError::Unavailable {
            source: Some(source),
            ..
        } => source.downcast_ref::<MyError>(),
        _ => None,
    }
}

/// Whether the server refused a statement (renewals are halved then).
pub(super) fn refused(e: &LockError) -> bool {
    driver_error(e).is_some_and(answered)
}

/// A driver error as a lock call's: [`LockError::Config`] when retrying will not mend it, else
/// `Unavailable` with the error as its source.
pub(super) fn unavailable_at(shown: &str, what: &str, e: MyError) -> LockError {
    if let Some(hint) = config_hint(&e) {
        return LockError::Config {
            message: format!("MySQL at {shown} {hint}: {e}"),
            source: None,
        };
    }
    LockError::unavailable(format!("MySQL at {shown} {what}: {e}"), Some(Box::new(e)))
}

/// The errors that retrying will not mend: TLS that cannot work with this server
/// ([`tls_refusal`](super::url::tls_refusal)), credentials, a database that is not there,
/// privileges, missing tables or routines.
fn config_hint(e: &MyError) -> Option<&'static str> {
    if let Some(tls) = super::url::tls_refusal(e) {
        return Some(tls);
    }
    Some(match code(e)? {
        // ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR, ER_NOT_SUPPORTED_AUTH_MODE
        1045 | 1044 | 1251 => "refused the user name, password or database",
        // ER_BAD_DB_ERROR
        1049 => "has no such database",
        // ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_PROCACCESS_DENIED_ERROR,
        // ER_SPECIFIC_ACCESS_DENIED_ERROR
        1142 | 1143 | 1370 | 1227 => {
            "refused a privilege the lock tables need (apply leasehold::mysql::SCHEMA as a user \
             that may create them, and grant this user EXECUTE on the leasehold_* procedures and \
             SELECT on the leasehold_* tables)"
        }
        // ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST
        1146 | 1305 => {
            "lacks the lock tables or procedures in this database (apply leasehold::mysql::SCHEMA \
             there)"
        }
        _ => return None,
    })
}
