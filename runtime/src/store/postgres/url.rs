//! The engine's URL: read and checked without connecting, shown in messages without its
//! password.

use std::str::FromStr;

use tokio_postgres as pg;

use crate::error::LockError;

/// `postgres://[user[:password]@]host[:port]/database?...`, parsed, for messages without
/// the password.
pub(super) fn parse(url: &str) -> Result<(pg::Config, String), LockError> {
    let shown = crate::store::settings::redact(url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(LockError::config(format!(
            "postgres needs a URL such as postgres://user:password@host:5432/database; got \
             {shown:?}"
        )));
    }
    let config = pg::Config::from_str(url).map_err(|e| {
        LockError::config(format!("postgres could not read the URL {shown:?}: {e}"))
    })?;
    if config.get_hosts().is_empty() {
        return Err(LockError::config(format!(
            "postgres needs a host in its URL; got {shown:?}"
        )));
    }
    if config.get_ssl_mode() == pg::config::SslMode::Require {
        return Err(LockError::config(format!(
            "postgres: sslmode=require is not supported yet (this engine connects without \
             TLS); reach the server over a trusted network or a local TLS tunnel and drop \
             sslmode from {shown:?}"
        )));
    }
    Ok((config, shown))
}

/// Checks a URL without connecting.
pub(crate) fn validate(url: &str) -> Result<(), LockError> {
    parse(url).map(drop)
}
