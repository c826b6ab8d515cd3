//! The engine's URL: read and checked without connecting, shown in messages without its
//! password. The TLS parameters are read here as MySQL's own clients spell them (`ssl-mode`
//! with its five values, `ssl-ca`, `ssl-cert`, `ssl-key`; also mysql_async's `require_ssl`,
//! `verify_ca` and `verify_identity`); the pool's and the connection's parameters are
//! mysql_async's (`pool_min`, `pool_max`, `tcp_keepalive`, ...), passed on to it.

use std::fmt;
use std::path::PathBuf;

#[cfg(test)]
use super::ssl::Verify;
pub(crate) use super::ssl::{SslMode, TlsSettings};
use crate::error::LockError;
use crate::store::settings::percent_decode;

/// The values of `ssl-mode` this engine accepts, for messages.
const MODES: &str = "DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY";

/// mysql_async's own parameters that are passed on to it unchanged.
const THEIRS: [&str; 18] = [
    "pool_min",
    "pool_max",
    "inactive_connection_ttl",
    "ttl_check_interval",
    "conn_ttl",
    "abs_conn_ttl",
    "abs_conn_ttl_jitter",
    "tcp_keepalive",
    "tcp_nodelay",
    "stmt_cache_size",
    "prefer_socket",
    "socket",
    "compression",
    "max_allowed_packet",
    "wait_timeout",
    "enable_cleartext_plugin",
    "reset_connection",
    "secure_auth",
];

/// The TLS parameters read here rather than by mysql_async (after `_` became `-` in the
/// `ssl_*` spellings, which MySQL's option files accept too).
const OURS: [&str; 7] = [
    "ssl-mode",
    "ssl-ca",
    "ssl-cert",
    "ssl-key",
    "require_ssl",
    "verify_ca",
    "verify_identity",
];

/// A URL, read.
pub(crate) struct Target {
    /// mysql_async's options: the URL's host, credentials, database and pool parameters, and
    /// the TLS the URL asks for (its files read).
    pub(crate) opts: mysql_async::Opts,
    /// The URL without its password, for messages.
    pub(crate) shown: String,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("shown", &self.shown)
            .finish_non_exhaustive()
    }
}

/// `mysql://user:password@host:port/database?...` (or `mariadb://`), parsed, its TLS files
/// read (at build time, so that a missing file is a [`LockError::Config`] then rather than
/// a failure of every connection).
pub(crate) fn parse(url: &str) -> Result<Target, LockError> {
    let (read, tls) = read(url)?;
    let opts = with_tls(read.opts, &tls, &read.shown)?;
    Ok(Target {
        opts,
        shown: read.shown,
    })
}

/// Checks a URL without connecting (nor opening the files it names).
pub(crate) fn validate(url: &str) -> Result<(), LockError> {
    read(url).map(drop)
}

/// The URL's TLS parameters alone, for tests and messages.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn tls_settings_of(url: &str) -> Result<TlsSettings, LockError> {
    read(url).map(|(_, tls)| tls)
}

/// A URL read: mysql_async's options without TLS, and ours.
struct Read {
    opts: mysql_async::Opts,
    shown: String,
}

fn read(url: &str) -> Result<(Read, TlsSettings), LockError> {
    let shown = crate::store::settings::redact(url);
    let Some(rest) = url
        .strip_prefix("mysql://")
        .or_else(|| url.strip_prefix("mariadb://"))
    else {
        return Err(LockError::config(format!(
            "mysql needs a URL such as mysql://user:password@host:3306/database (or \
             mariadb://...); got {shown:?}"
        )));
    };
    let fail = |e: String| LockError::config(format!("mysql: {e}; in {shown:?}"));
    if rest.contains('#') {
        return Err(fail(
            "a `#` must be written %23 in a MySQL URL (a password, a file name)".to_owned(),
        ));
    }
    let (base, query) = match rest.split_once('?') {
        Some((base, query)) => (base, query),
        None => (rest, ""),
    };
    let authority = base.split('/').next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return Err(fail(
            "the URL needs a host (mysql://user:password@host:3306/database; for a Unix \
             socket: mysql://user@localhost/database?socket=/run/mysqld/mysqld.sock)"
                .to_owned(),
        ));
    }
    let (theirs, ours) = split_params(query).map_err(fail)?;
    let tls = tls_settings(&ours).map_err(fail)?;
    check_tls(&tls, &theirs).map_err(fail)?;
    // mysql_async keeps at least 10 connections (`pool_min`) unless told otherwise, and refuses
    // a `pool_max` below that: a `pool_max` alone lowers the minimum with it.
    let value_of = |name: &str| {
        theirs
            .iter()
            .rev()
            .find_map(|param| param.strip_prefix(name)?.strip_prefix('='))
    };
    let implied_min = match (value_of("pool_min"), value_of("pool_max")) {
        (None, Some(max)) => max
            .parse::<usize>()
            .ok()
            .filter(|max| *max < mysql_async::DEFAULT_POOL_CONSTRAINTS.min())
            .map(|max| format!("pool_min={max}")),
        _ => None,
    };
    let socket_asked = value_of("prefer_socket").is_some();
    let mut theirs: Vec<&str> = theirs;
    if let Some(min) = &implied_min {
        theirs.push(min);
    }
    let mut theirs_url = format!("mysql://{base}");
    if !theirs.is_empty() {
        theirs_url.push('?');
        theirs_url.push_str(&theirs.join("&"));
    }
    let mut opts = mysql_async::Opts::from_url(&theirs_url)
        .map_err(|e| fail(format!("the URL cannot be read: {}", url_error(&e))))?;
    // The driver's default moves a connection to 127.0.0.1 or localhost onto the server's Unix
    // socket once connected, past whatever the URL's address leads through (a proxy, a
    // tunnel) and out of TLS: connections go where the URL says, unless it asks for that.
    if !socket_asked {
        opts = mysql_async::OptsBuilder::from_opts(opts)
            .prefer_socket(false)
            .into();
    }
    Ok((Read { opts, shown }, tls))
}

/// mysql_async's complaint about the URL, without the URL itself (which may hold the
/// password).
fn url_error(e: &mysql_async::UrlError) -> String {
    match e {
        mysql_async::UrlError::Parse(e) => format!("{e}"),
        other => other.to_string(),
    }
}

/// A URL's parameters, decoded, in order.
type Params = Vec<(String, String)>;

/// The parameters mysql_async reads (raw, as written), and ours (decoded, in order). Anything
/// else is refused.
fn split_params(query: &str) -> Result<(Vec<&str>, Params), String> {
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for param in query.split('&').filter(|param| !param.is_empty()) {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let mut key = percent_decode(key, "a parameter name of the mysql URL")?;
        if key.starts_with("ssl_") {
            key = key.replace('_', "-");
        }
        if OURS.contains(&key.as_str()) {
            let what = format!("the mysql URL's {key}");
            ours.push((key, percent_decode(value, &what)?));
        } else if THEIRS.contains(&key.as_str()) {
            theirs.push(param);
        } else {
            return Err(match key.as_str() {
                "built_in_roots" => "built_in_roots is not supported: name the CA that signed \
                                     the server's certificate with ssl-ca=/path/ca.pem (the \
                                     operating system's roots, or SSL_CERT_FILE's, otherwise)"
                    .to_owned(),
                "client_found_rows" => "client_found_rows is not supported: it changes the \
                                        affected-row counts the engine's statements read"
                    .to_owned(),
                "sslmode" | "ssl" | "tls" | "ssl-verify-server-cert" => format!(
                    "unknown parameter {key:?}: MySQL's clients spell it ssl-mode (one of \
                     {MODES})"
                ),
                _ => format!(
                    "unknown parameter {key:?}; accepted: {}, {}",
                    OURS.join(", "),
                    THEIRS.join(", ")
                ),
            });
        }
    }
    Ok((theirs, ours))
}

/// Our parameters, read (the last of a repeated one counts, as in MySQL's clients).
fn tls_settings(params: &[(String, String)]) -> Result<TlsSettings, String> {
    let get = |name: &str| {
        params
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let flag = |name: &str| -> Result<Option<bool>, String> {
        match get(name) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(Some(false)),
            Some(v) => Err(format!("{name}={v:?} is neither true nor false")),
        }
    };
    let file = |name: &str| -> Result<Option<PathBuf>, String> {
        match get(name) {
            None => Ok(None),
            Some("") => Err(format!("{name} is empty: name a PEM file")),
            Some(path) => Ok(Some(PathBuf::from(path))),
        }
    };
    let ca = file("ssl-ca")?;
    let client_cert = match (file("ssl-cert")?, file("ssl-key")?) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some((cert, key)),
        _ => {
            return Err(
                "a client certificate needs both ssl-cert and ssl-key (PEM files)".to_owned(),
            )
        }
    };
    let legacy = (
        flag("require_ssl")?,
        flag("verify_ca")?,
        flag("verify_identity")?,
    );
    let mode = match (get("ssl-mode"), legacy) {
        (Some(_), (Some(_), _, _) | (_, Some(_), _) | (_, _, Some(_))) => {
            return Err(
                "give either ssl-mode or mysql_async's require_ssl / verify_ca / \
                 verify_identity, not both"
                    .to_owned(),
            )
        }
        (Some(mode), _) => match mode.to_ascii_uppercase().replace('-', "_").as_str() {
            "DISABLED" => SslMode::Disabled,
            "PREFERRED" => SslMode::Preferred,
            "REQUIRED" => SslMode::Required,
            "VERIFY_CA" => SslMode::VerifyCa,
            "VERIFY_IDENTITY" => SslMode::VerifyIdentity,
            _ => return Err(format!("unknown ssl-mode {mode:?}; accepted: {MODES}")),
        },
        // mysql_async's spelling: require_ssl=true checks the chain and the name unless
        // verify_ca=false (nothing checked) or verify_identity=false (the chain only).
        (None, (Some(true), verify_ca, verify_identity)) => {
            match (verify_ca.unwrap_or(true), verify_identity.unwrap_or(true)) {
                (false, _) => SslMode::Required,
                (true, false) => SslMode::VerifyCa,
                (true, true) => SslMode::VerifyIdentity,
            }
        }
        (None, (require, Some(_), _) | (require, _, Some(_))) if require != Some(true) => {
            return Err(
                "verify_ca and verify_identity need require_ssl=true (or use ssl-mode=VERIFY_CA \
                 or VERIFY_IDENTITY)"
                    .to_owned(),
            )
        }
        (None, (Some(false), _, _)) => SslMode::Disabled,
        // MySQL's clients: a CA given without a mode means "check the chain".
        (None, _) if ca.is_some() => SslMode::VerifyCa,
        (None, _) => SslMode::Preferred,
    };
    if !mode.needs_tls() && (ca.is_some() || client_cert.is_some()) {
        return Err(format!(
            "ssl-mode={} does not use certificates (this engine encrypts only with REQUIRED or \
             stronger): use ssl-mode=VERIFY_IDENTITY with ssl-ca, ssl-cert and ssl-key",
            mode.name()
        ));
    }
    Ok(TlsSettings {
        mode,
        ca,
        client_cert,
    })
}

/// What the build and the other parameters allow of `tls`.
fn check_tls(tls: &TlsSettings, theirs: &[&str]) -> Result<(), String> {
    if tls.mode.needs_tls() && !cfg!(feature = "tls") {
        return Err(format!(
            "ssl-mode={} asks for TLS, which needs leasehold's `tls` feature; enable it in \
             Cargo.toml",
            tls.mode.name()
        ));
    }
    let cleartext = theirs.iter().any(|param| {
        param
            .split_once('=')
            .is_some_and(|(key, value)| key == "enable_cleartext_plugin" && value == "true")
    });
    if cleartext && !tls.mode.needs_tls() {
        return Err(format!(
            "enable_cleartext_plugin=true sends the password as it is: it needs \
             ssl-mode=VERIFY_IDENTITY (or at least REQUIRED), not {}",
            tls.mode.name()
        ));
    }
    Ok(())
}

/// `opts` with the TLS that `tls` asks for, its files read now.
#[cfg_attr(not(feature = "tls"), allow(unused_variables))]
fn with_tls(
    opts: mysql_async::Opts,
    tls: &TlsSettings,
    shown: &str,
) -> Result<mysql_async::Opts, LockError> {
    if !tls.mode.needs_tls() {
        return Ok(opts);
    }
    #[cfg(feature = "tls")]
    {
        let ssl = super::tls::ssl_opts(tls)
            .map_err(|e| LockError::config(format!("mysql: {e}; in {shown:?}")))?;
        Ok(mysql_async::OptsBuilder::from_opts(opts)
            .ssl_opts(ssl)
            .into())
    }
    #[cfg(not(feature = "tls"))]
    unreachable!("check_tls refuses TLS without the `tls` feature")
}

/// Why a connection's TLS cannot work with this server and these settings, if that is what
/// `e` says: for the engine's connect to answer [`LockError::Config`] (retrying will not mend
/// it) with a message naming the fix.
pub(crate) fn tls_refusal(e: &mysql_async::Error) -> Option<&'static str> {
    match e {
        mysql_async::Error::Driver(mysql_async::DriverError::NoClientSslFlagFromServer) => {
            return Some(
                "does not offer TLS (no certificate configured: ssl_cert and ssl_key in the \
                 server's configuration), which this URL's ssl-mode requires: configure TLS \
                 in the server, or connect with ssl-mode=DISABLED",
            );
        }
        mysql_async::Error::Server(server) if server.message.contains("insecure transport") => {
            return Some(
                "accepts only encrypted connections (require_secure_transport), and this one \
                 was not: connect with ssl-mode=VERIFY_IDENTITY (or REQUIRED), which needs \
                 leasehold's `tls` feature",
            );
        }
        _ => {}
    }
    #[cfg(feature = "tls")]
    {
        super::tls::refusal(e)
    }
    #[cfg(not(feature = "tls"))]
    None
}

#[cfg(test)]
mod tests;
