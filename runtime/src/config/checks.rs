//! The one check of each kind of value (duration, lease, bound, prefix, URL, clock drift,
//! boolean), shared by documents and environment variables; errors name the field and value.

use std::time::Duration;

use crate::error::LockError;
use crate::locker::MIN_LEASE;
use crate::store::keys::validate_prefix;

pub(super) fn checked_urls(field: &str, urls: &[String]) -> Result<Vec<String>, LockError> {
    urls.iter()
        .map(|url| check_url(field, url).map_err(invalid))
        .collect()
}

/// Prefixes a field error with what it is about.
pub(super) fn invalid(e: LockError) -> LockError {
    match e {
        LockError::Config { message, source } => LockError::Config {
            message: format!("invalid leasehold config: {message}"),
            source,
        },
        other => other,
    }
}

pub(super) fn parse_duration(field: &str, text: &str) -> Result<Duration, LockError> {
    humantime::parse_duration(text.trim()).map_err(|e| LockError::Config {
        message: format!(
            "{field}: {text:?} is not a duration ({e}); write a number and a unit, e.g. \"30s\", \
             \"500ms\", \"2m\""
        ),
        source: Some(Box::new(e)),
    })
}

/// Checks each URL of a list.
pub(super) fn urls(field: &str, list: Vec<String>) -> Result<Vec<String>, LockError> {
    list.iter().map(|url| check_url(field, url)).collect()
}

/// A comma-separated list of Redis URLs.
pub(super) fn url_list(field: &str, text: &str) -> Result<Vec<String>, LockError> {
    text.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| check_url(field, url))
        .collect()
}

pub(super) fn parse_drift(field: &str, text: &str) -> Result<f64, LockError> {
    match text.parse::<f64>() {
        Ok(drift) if (0.0..0.5).contains(&drift) => Ok(drift),
        _ => Err(LockError::config(format!(
            "{field}: {text:?} is not a clock drift; write a fraction of the lease from 0.0 to \
             below 0.5, e.g. 0.01"
        ))),
    }
}

pub(super) fn parse_bool(field: &str, text: &str) -> Result<bool, LockError> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(LockError::config(format!(
            "{field}: {text:?} is not a boolean; write \"true\" or \"false\""
        ))),
    }
}

pub(super) fn check_lease(field: &str, text: &str, lease: Duration) -> Result<Duration, LockError> {
    if lease < MIN_LEASE {
        return Err(LockError::config(format!(
            "{field}: {text:?} is too short; a lease must be at least {MIN_LEASE:?}"
        )));
    }
    Ok(lease)
}

pub(super) fn check_bound(field: &str, text: &str, bound: Duration) -> Result<Duration, LockError> {
    if bound.is_zero() {
        return Err(LockError::config(format!(
            "{field}: {text:?} is zero; every call to the engine needs a bound, e.g. \"500ms\""
        )));
    }
    Ok(bound)
}

pub(super) fn check_fence_offset(field: &str, offset: u64) -> Result<u64, LockError> {
    if offset > crate::locker::MAX_FENCE_OFFSET {
        return Err(LockError::config(format!(
            "{field}: {offset} is above the largest fence offset, {} (2^52): fences must stay \
             below 2^53, which doubles hold exactly",
            crate::locker::MAX_FENCE_OFFSET
        )));
    }
    Ok(offset)
}

pub(super) fn check_prefix(field: &str, prefix: &str) -> Result<String, LockError> {
    validate_prefix(prefix)
        .map_err(|e| LockError::config(format!("{field}: {prefix:?} is refused: {e}")))?;
    Ok(prefix.to_owned())
}

/// Checks a service name ([`LockerBuilder::service_name`](crate::LockerBuilder::service_name)).
pub(super) fn check_service(field: &str, name: &str) -> Result<String, LockError> {
    crate::store::identity::check_service(name)
        .map_err(|e| LockError::config(format!("{field}: {name:?} is refused: {e}")))?;
    Ok(name.to_owned())
}

/// Checks the scheme only (the client checks the rest when it connects), and never echoes a
/// password.
pub(super) fn check_url(field: &str, url: &str) -> Result<String, LockError> {
    const SCHEMES: [&str; 4] = ["redis://", "rediss://", "redis+unix://", "unix://"];
    if SCHEMES.iter().any(|s| url.starts_with(s)) {
        return Ok(url.to_owned());
    }
    // A URL of another engine in a Redis field: say which field takes it.
    let lower = url.trim().to_ascii_lowercase();
    let elsewhere = if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        Some((
            "a PostgreSQL URL",
            "postgres = \"...\" (LEASEHOLD_POSTGRES)",
        ))
    } else if lower.starts_with("mysql://") || lower.starts_with("mariadb://") {
        Some(("a MySQL URL", "mysql = \"...\" (LEASEHOLD_MYSQL)"))
    } else if lower.starts_with("http://") || lower.starts_with("https://") {
        Some(("an etcd endpoint", "etcd = [\"...\"] (LEASEHOLD_ETCD)"))
    } else if lower.starts_with("zk://") || lower.starts_with("zookeeper://") {
        Some((
            "a ZooKeeper address",
            "zookeeper = \"host:port,...\" (LEASEHOLD_ZOOKEEPER)",
        ))
    } else {
        None
    };
    if let Some((what, key)) = elsewhere {
        return Err(LockError::config(format!(
            "{field}: {:?} is {what}, and {field} names a Redis server; write it as {key} \
             instead",
            redact(url)
        )));
    }
    Err(LockError::config(format!(
        "{field}: {:?} is not a Redis URL; write redis://host:port, rediss://host:port (TLS) \
         or redis+unix:///path/to/socket; for another engine use postgres, mysql, etcd or zookeeper \
         instead of {field}",
        redact(url)
    )))
}

/// `scheme://***@host...` for a URL with credentials.
pub(super) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        (None, Some(at)) => format!("***{}", &url[at..]),
        _ => url.to_owned(),
    }
}

/// `text` with the credentials of every URL or `user:password@host` in it hidden, for
/// messages that quote a line of a document.
pub(super) fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let (before, after) = rest.split_at(at);
        // The word the `@` ends: back to a space, quote, comma or bracket.
        let start = before
            .rfind(|c: char| c.is_whitespace() || "\"',[]{}=".contains(c))
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        out.push_str(&before[..start]);
        match word.find("://") {
            Some(scheme) => {
                out.push_str(&word[..scheme + 3]);
                out.push_str("***");
            }
            None if word.contains(':') => out.push_str("***"),
            None => out.push_str(word),
        }
        out.push('@');
        rest = &after[1..];
    }
    out.push_str(rest);
    out
}
