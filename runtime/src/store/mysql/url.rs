//! The URL of a MySQL or MariaDB database: `mysql://user:password@host:port/database` (or
//! `mariadb://`), read into the driver's options. A first version; the parameters the
//! engine takes beyond the driver's (TLS) are read here too.

use crate::error::LockError;
use crate::store::settings::redact;

/// A database to connect to: the driver's options, and the URL as messages show it (no
/// password).
pub(crate) struct Target {
    pub(crate) opts: mysql_async::Opts,
    pub(crate) shown: String,
}

/// Reads `url`; [`LockError::Config`] when it is not a MySQL URL the driver takes. Never
/// connects.
pub(crate) fn parse(url: &str) -> Result<Target, LockError> {
    let url = url.trim();
    let shown = redact(url);
    let rest = url
        .strip_prefix("mysql://")
        .or_else(|| url.strip_prefix("mariadb://"))
        .ok_or_else(|| {
            LockError::config(format!(
                "{shown:?} is not a MySQL URL: write mysql://user:password@host:port/database"
            ))
        })?;
    let opts = mysql_async::Opts::from_url(&format!("mysql://{rest}")).map_err(|e| {
        let text = e.to_string().replace(url, &shown);
        LockError::config(format!(
            "{shown:?} is not a MySQL URL the engine takes: {text}"
        ))
    })?;
    Ok(Target { opts, shown })
}

/// Checks `url` as [`parse`] reads it, without connecting.
pub(crate) fn validate(url: &str) -> Result<(), LockError> {
    parse(url).map(drop)
}
