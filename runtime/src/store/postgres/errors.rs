//! What a driver error means for a lock call: a refusal that retrying will not mend
//! ([`LockError::Config`]), or a server that did not answer ([`LockError::Unavailable`]).

use tokio_postgres as pg;

use crate::error::LockError;

/// A driver error with its causes: tokio-postgres shows only its kind ("db error", "error
/// connecting to server") and keeps the server's message or the OS error as the source.
pub(crate) fn error_text(e: &pg::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The server ended the session in answer to the call (an error of severity FATAL or PANIC:
/// an operator's `pg_terminate_backend`, a shutdown, a crash): the connection is gone, as when
/// it broke, and the call's outcome is as unknown. The session ends where it checks for the
/// signal, which may come after the statement committed (while its answer is being sent), so
/// the call is settled as one whose connection broke, never taken as refused.
pub(super) fn session_ended(e: &pg::Error) -> bool {
    use pg::error::Severity;
    e.as_db_error().is_some_and(|db| {
        matches!(
            db.parsed_severity(),
            Some(Severity::Fatal | Severity::Panic)
        )
    })
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
        Some(top) => crate::store::Attempt::granted(top as u64),
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

/// A driver error as a lock call's: [`refused`] when retrying will not mend it, else
/// `Unavailable` with the error as its source.
pub(super) fn unavailable_at(shown: &str, what: &str, e: pg::Error) -> LockError {
    if let Some(config) = refused(shown, &e) {
        return config;
    }
    LockError::unavailable(
        format!("PostgreSQL at {shown} {what}: {}", error_text(&e)),
        Some(Box::new(e)),
    )
}

/// The errors that retrying will not mend, as [`LockError::Config`]: credentials, a database
/// or schema that is not there, privileges, and TLS that cannot work (no TLS on the server
/// while the URL requires it, a server certificate this client does not trust or that names
/// another host, a client certificate the server does not take). A connection the server
/// refused because it was not encrypted says so.
fn refused(shown: &str, e: &pg::Error) -> Option<LockError> {
    let hint = tls_refusal(e).or_else(|| statement_refusal(e))?;
    Some(LockError::Config {
        message: format!("PostgreSQL at {shown} {hint}: {}", error_text(e)),
        source: None,
    })
}

fn statement_refusal(e: &pg::Error) -> Option<&'static str> {
    use pg::error::SqlState;
    let code = e.code()?;
    let server_says = |words: &str| {
        e.as_db_error()
            .is_some_and(|db| db.message().contains(words))
    };
    Some(
        if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION && server_says("no encryption") {
            // pg_hba.conf has only `hostssl` lines for this client (or `hostnossl ... reject`).
            "accepts only encrypted connections from this client (pg_hba.conf: hostssl), and this \
         one was not: connect with sslmode=verify-full (or require), which needs leasehold's \
         `tls` feature"
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            && server_says("certificate")
        {
            // pg_hba.conf's `cert` method, or `clientcert=verify-full`.
            "requires a client certificate it accepts for this user: give sslcert and sslkey (PEM \
         files; the certificate's common name is the user name)"
        } else if *code == SqlState::INVALID_PASSWORD
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
        },
    )
}

/// Why TLS cannot work with this server and these settings, if that is what `e` says.
fn tls_refusal(e: &pg::Error) -> Option<&'static str> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        // tokio-postgres's words when the server answers "no" to the request for TLS.
        if err.to_string() == "server does not support TLS" {
            return Some(
                "does not offer TLS (its `ssl` setting is off), which this URL's sslmode \
                 requires: turn ssl on in the server, or connect with sslmode=prefer",
            );
        }
        #[cfg(feature = "tls")]
        if let Some(e) = super::tls::rustls_error(err) {
            return rustls_refusal(e);
        }
        cause = err.source();
    }
    None
}

#[cfg(feature = "tls")]
fn rustls_refusal(e: &rustls::Error) -> Option<&'static str> {
    use rustls::{CertificateError, Error};
    Some(match e {
        Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => {
            "presented a certificate for another host name (sslmode=verify-full checks the \
             URL's host against it): connect by a name the certificate holds, or use \
             sslmode=verify-ca to check its chain only"
        }
        Error::InvalidCertificate(_) => {
            "presented a certificate this client does not accept (checked against \
             sslrootcert, or without it the operating system's roots and SSL_CERT_FILE): \
             name the CA that signed it with sslrootcert=/path/ca.pem"
        }
        Error::AlertReceived(_) | Error::NoCertificatesPresented => {
            "refused the TLS handshake (does it want a client certificate this client did not \
             give or it does not accept? see sslcert and sslkey)"
        }
        Error::PeerIncompatible(_) => {
            "could not agree on TLS with this client (TLS 1.2 or 1.3, with the ring provider's \
             cipher suites)"
        }
        _ => return None,
    })
}
