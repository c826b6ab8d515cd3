//! The engine's URL: read and checked without connecting, shown in messages without its
//! password. libpq's TLS parameters (`sslmode` with all five of its values, `sslrootcert`,
//! `sslcert`, `sslkey`) are read here, since tokio-postgres knows only three modes and none
//! of the files; the rest of the URL is tokio-postgres's.

use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres as pg;

use crate::error::LockError;
use crate::store::settings::percent_decode;

/// The values of `sslmode` this engine accepts, for messages.
const MODES: &str = "disable, prefer, require, verify-ca, verify-full";

/// libpq's `sslmode`: whether a connection is encrypted, and what of the server's certificate
/// is checked (see the module docs of the engine, *Connections*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it (and the build has the `tls` feature), certificate
    /// unchecked; plain text otherwise. The default.
    Prefer,
    /// TLS or no connection; the certificate checked as by `VerifyCa` when `sslrootcert` is
    /// given, else not at all (libpq's rule).
    Require,
    /// TLS, the certificate's chain checked against the roots, not its host name.
    VerifyCa,
    /// TLS, the certificate's chain and its host name checked.
    VerifyFull,
}

impl SslMode {
    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection without TLS is refused.
    pub(super) fn needs_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

/// Where the certificates that a server's chain must end in come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Roots {
    /// The operating system's (or those of `SSL_CERT_FILE` / `SSL_CERT_DIR`, when set).
    Native,
    /// `sslrootcert=system`: the operating system's, and nothing below `verify-full`.
    System,
    /// `sslrootcert=/path/ca.pem`: the PEM certificates of that file, and no others.
    File(PathBuf),
}

/// What a server's certificate is checked for.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verify {
    /// Nothing: encryption against eavesdroppers, not against a man in the middle.
    Nothing,
    /// That it chains to one of the roots.
    Chain,
    /// That it chains to one of the roots and names the host of the URL.
    ChainAndName,
}

/// The URL's TLS parameters, read but not acted on (no file is opened here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TlsSettings {
    pub(super) mode: SslMode,
    pub(super) roots: Roots,
    /// `sslcert` and `sslkey`: a client certificate and its key, as PEM files.
    pub(super) client_cert: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(super) fn verify(&self) -> Verify {
        match (self.mode, &self.roots) {
            (SslMode::VerifyFull, _) => Verify::ChainAndName,
            (SslMode::VerifyCa, _) | (SslMode::Require, Roots::File(_)) => Verify::Chain,
            _ => Verify::Nothing,
        }
    }
}

/// A URL, read.
#[derive(Debug)]
pub(super) struct Target {
    /// tokio-postgres's configuration, its `ssl_mode` set from ours (`require` for every mode
    /// that needs TLS: the checks are the connector's).
    pub(super) config: pg::Config,
    /// The URL without its password, for messages.
    pub(super) shown: String,
    pub(super) tls: TlsSettings,
}

/// `postgres://[user[:password]@]host[:port]/database?...`, parsed, for messages without
/// the password.
pub(super) fn parse(url: &str) -> Result<Target, LockError> {
    let shown = shown(url);
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return Err(LockError::config(format!(
            "postgres needs a URL such as postgres://user:password@host:5432/database; got \
             {shown:?}"
        )));
    };
    let (theirs, ours) = split_tls_params(url, rest).map_err(|e| {
        LockError::config(format!("postgres could not read the URL {shown:?}: {e}"))
    })?;
    let mut config = pg::Config::from_str(&theirs).map_err(|e| {
        LockError::config(format!("postgres could not read the URL {shown:?}: {e}"))
    })?;
    if config.get_hosts().is_empty() {
        return Err(LockError::config(format!(
            "postgres needs a host in its URL; got {shown:?}"
        )));
    }
    let tls = tls_settings(&ours)
        .map_err(|e| LockError::config(format!("postgres: {e}; in {shown:?}")))?;
    check_tls(&tls, &config)
        .map_err(|e| LockError::config(format!("postgres: {e}; in {shown:?}")))?;
    config.ssl_mode(match tls.mode {
        SslMode::Disable => pg::config::SslMode::Disable,
        SslMode::Prefer => pg::config::SslMode::Prefer,
        _ => pg::config::SslMode::Require,
    });
    Ok(Target { config, shown, tls })
}

/// Checks a URL without connecting (nor opening the files it names).
pub(crate) fn validate(url: &str) -> Result<(), LockError> {
    parse(url).map(drop)
}

/// The URL as messages show it: no password, neither after the user name nor as the
/// `password` (or `sslpassword`) parameter.
fn shown(url: &str) -> String {
    let shown = crate::store::settings::redact(url);
    let Some(query) = shown.find('?') else {
        return shown;
    };
    let params = shown[query + 1..]
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if key == "password" || key == "sslpassword" => format!("{key}=***"),
            _ => param.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{}?{params}", &shown[..query])
}

/// The parameters read here (decoded, in order), and the URL without them for tokio-postgres.
/// The query starts where tokio-postgres looks for it: at the first `?` after the first `@`
/// (or after the scheme, without credentials).
fn split_tls_params(url: &str, rest: &str) -> Result<(String, Vec<(String, String)>), String> {
    let base = url.len() - rest.len();
    let after_credentials = rest.find('@').map_or(0, |at| at + 1);
    let Some(q) = rest[after_credentials..].find('?') else {
        return Ok((url.to_owned(), Vec::new()));
    };
    let query_at = base + after_credentials + q;
    let mut kept = Vec::new();
    let mut ours = Vec::new();
    for param in url[query_at + 1..].split('&') {
        // A parameter without `=` is tokio-postgres's to refuse.
        let Some((key, value)) = param.split_once('=') else {
            kept.push(param);
            continue;
        };
        let key = percent_decode(key, "a parameter name of the postgres URL")?;
        if TLS_PARAMS.contains(&key.as_str()) {
            let what = format!("the postgres URL's {key}");
            ours.push((key, percent_decode(value, &what)?));
        } else {
            kept.push(param);
        }
    }
    let mut theirs = url[..query_at].to_owned();
    if !kept.is_empty() {
        theirs.push('?');
        theirs.push_str(&kept.join("&"));
    }
    Ok((theirs, ours))
}

/// The parameters this file reads rather than tokio-postgres.
const TLS_PARAMS: [&str; 5] = ["sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword"];

/// Our parameters, read (the last of a repeated one counts, as in libpq).
fn tls_settings(params: &[(String, String)]) -> Result<TlsSettings, String> {
    let get = |name: &str| {
        params
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    if get("sslpassword").is_some() {
        return Err(
            "sslpassword (an encrypted client key) is not supported: give sslkey an \
             unencrypted PEM key, readable only by this process's user"
                .to_owned(),
        );
    }
    let roots = match get("sslrootcert") {
        None => Roots::Native,
        Some("") => {
            return Err("sslrootcert is empty: name a PEM file of CA certificates".to_owned())
        }
        Some("system") => Roots::System,
        Some(path) => Roots::File(PathBuf::from(path)),
    };
    let mode = match get("sslmode") {
        // libpq's rule: with the system's roots, nothing below verify-full by default.
        None if roots == Roots::System => SslMode::VerifyFull,
        None => SslMode::Prefer,
        Some("disable") => SslMode::Disable,
        Some("prefer") => SslMode::Prefer,
        Some("require") => SslMode::Require,
        Some("verify-ca") => SslMode::VerifyCa,
        Some("verify-full") => SslMode::VerifyFull,
        Some("allow") => {
            return Err(format!(
                "sslmode=allow (TLS only when the server insists) is not supported; accepted: \
                 {MODES}"
            ))
        }
        Some(other) => return Err(format!("unknown sslmode {other:?}; accepted: {MODES}")),
    };
    if roots == Roots::System && mode != SslMode::VerifyFull {
        return Err(format!(
            "sslrootcert=system (the operating system's roots) needs sslmode=verify-full, not \
             {}: any CA of the system could otherwise vouch for any server",
            mode.name()
        ));
    }
    let client_cert = match (get("sslcert"), get("sslkey")) {
        (None, None) => None,
        (Some(cert), Some(key)) if !cert.is_empty() && !key.is_empty() => {
            Some((PathBuf::from(cert), PathBuf::from(key)))
        }
        _ => {
            return Err("a client certificate needs both sslcert and sslkey (PEM files)".to_owned())
        }
    };
    Ok(TlsSettings {
        mode,
        roots,
        client_cert,
    })
}

/// What the build and the hosts allow of `tls`.
fn check_tls(tls: &TlsSettings, config: &pg::Config) -> Result<(), String> {
    let asks_for_tls = tls.mode.needs_tls()
        || (tls.mode != SslMode::Disable
            && (tls.roots != Roots::Native || tls.client_cert.is_some()));
    if asks_for_tls && !cfg!(feature = "tls") {
        return Err(format!(
            "sslmode={} (or a certificate file) asks for TLS, which needs leasehold's `tls` \
             feature; enable it in Cargo.toml",
            tls.mode.name()
        ));
    }
    #[cfg(unix)]
    if tls.mode.needs_tls()
        && config
            .get_hosts()
            .iter()
            .any(|host| matches!(host, pg::config::Host::Unix(_)))
    {
        return Err(format!(
            "sslmode={} asks for TLS, which PostgreSQL does not speak on a Unix socket; use \
             sslmode=disable for a local socket",
            tls.mode.name()
        ));
    }
    if config.get_ssl_negotiation() == pg::config::SslNegotiation::Direct && !tls.mode.needs_tls() {
        return Err(format!(
            "sslnegotiation=direct needs sslmode=require, verify-ca or verify-full, not {}",
            tls.mode.name()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(url: &str) -> Target {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn refused(url: &str) -> String {
        let e = parse(url).expect_err(url);
        assert!(matches!(e, LockError::Config { .. }), "{url}: {e:?}");
        let text = e.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        text
    }

    #[test]
    fn without_sslmode_tls_is_preferred_and_unchecked() {
        let t = read("postgres://u:s3cret@db.internal:5433/shop");
        assert_eq!(t.tls.mode, SslMode::Prefer);
        assert_eq!(t.tls.roots, Roots::Native);
        assert_eq!(t.tls.verify(), Verify::Nothing);
        assert_eq!(t.config.get_ssl_mode(), pg::config::SslMode::Prefer);
        assert_eq!(t.config.get_password(), Some(&b"s3cret"[..]));
        assert!(!t.shown.contains("s3cret"), "{}", t.shown);
    }

    #[test]
    fn every_mode_says_what_it_checks() {
        for (mode, verify) in [
            ("disable", Verify::Nothing),
            ("prefer", Verify::Nothing),
            ("require", Verify::Nothing),
            ("verify-ca", Verify::Chain),
            ("verify-full", Verify::ChainAndName),
        ] {
            let url = format!("postgres://u@db.internal/shop?sslmode={mode}");
            if !cfg!(feature = "tls") && !matches!(mode, "disable" | "prefer") {
                assert!(refused(&url).contains("`tls` feature"), "{mode}");
                continue;
            }
            let t = read(&url);
            assert_eq!(t.tls.mode.name(), mode);
            assert_eq!(t.tls.verify(), verify, "{mode}");
            assert_eq!(
                t.tls.mode.needs_tls(),
                !matches!(mode, "disable" | "prefer")
            );
            let theirs = match mode {
                "disable" => pg::config::SslMode::Disable,
                "prefer" => pg::config::SslMode::Prefer,
                _ => pg::config::SslMode::Require,
            };
            assert_eq!(t.config.get_ssl_mode(), theirs, "{mode}");
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn require_with_a_root_certificate_checks_the_chain_as_libpq_does() {
        let t = read("postgres://u@db/shop?sslmode=require&sslrootcert=%2Fetc%2Fshop%2Fca.pem");
        assert_eq!(t.tls.roots, Roots::File("/etc/shop/ca.pem".into()));
        assert_eq!(t.tls.verify(), Verify::Chain);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn sslrootcert_system_means_verify_full() {
        let t = read("postgres://u@db/shop?sslrootcert=system");
        assert_eq!(t.tls.roots, Roots::System);
        assert_eq!(t.tls.mode, SslMode::VerifyFull);
        assert!(
            read("postgres://u@db/shop?sslrootcert=system&sslmode=verify-full")
                .tls
                .mode
                .needs_tls()
        );
        for weaker in ["disable", "prefer", "require", "verify-ca"] {
            let e = refused(&format!(
                "postgres://u:s3cret@db/shop?sslrootcert=system&sslmode={weaker}"
            ));
            assert!(e.contains("needs sslmode=verify-full"), "{e}");
        }
    }

    #[test]
    fn unknown_modes_name_the_accepted_ones() {
        for bad in ["verify_full", "VERIFY-FULL", "allow", ""] {
            let e = refused(&format!("postgres://u:s3cret@db/shop?sslmode={bad}"));
            assert!(e.contains(MODES), "{bad}: {e}");
        }
    }

    #[test]
    fn our_parameters_are_taken_out_and_the_rest_is_tokio_postgres_s() {
        let url = "postgres://u:p%3Fw@db:5433/shop?application_name=a%26b&sslmode=disable\
                   &sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=3";
        let t = read(url);
        assert_eq!(t.config.get_application_name(), Some("a&b"));
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(t.config.get_password(), Some(&b"p?w"[..]));
        assert_eq!(t.config.get_ports(), &[5433]);
        assert_eq!(t.tls.mode, SslMode::Disable);
        assert_eq!(t.tls.roots, Roots::File("/tmp/ca.pem".into()));
        // The last of a repeated parameter counts, as in libpq.
        let t = read("postgres://u@db/shop?sslmode=require&sslmode=disable");
        assert_eq!(t.tls.mode, SslMode::Disable);
        // A `?` in the password is no query.
        let t = read("postgres://u:a?b@db/shop?sslmode=disable");
        assert_eq!(t.config.get_password(), Some(&b"a?b"[..]));
        assert_eq!(t.config.get_dbname(), Some("shop"));
        // tokio-postgres still refuses what it does not know.
        let e = refused("postgres://u:s3cret@db/shop?sslmode=disable&sslcrl=x");
        assert!(e.contains("sslcrl"), "{e}");
    }

    #[test]
    fn passwords_stay_out_of_what_is_shown() {
        let t = read("postgres://u@db/shop?password=s3cret&sslmode=disable");
        assert_eq!(t.config.get_password(), Some(&b"s3cret"[..]));
        assert!(!t.shown.contains("s3cret"), "{}", t.shown);
        assert!(t.shown.contains("password=***"), "{}", t.shown);
        assert!(!format!("{t:?}").contains("s3cret"), "{t:?}");
        let e = refused("postgres://u:s3cret@db/shop?password=s3cret&sslmode=sometimes");
        assert!(e.contains("sometimes"), "{e}");
    }

    #[test]
    fn client_certificates_need_both_files_and_no_password() {
        for bad in [
            "postgres://u:s3cret@db/shop?sslmode=require&sslcert=/c.pem",
            "postgres://u:s3cret@db/shop?sslmode=require&sslkey=/k.pem",
            "postgres://u:s3cret@db/shop?sslmode=require&sslcert=&sslkey=/k.pem",
        ] {
            let e = refused(bad);
            assert!(
                e.contains("both sslcert and sslkey") || e.contains("`tls` feature"),
                "{bad}: {e}"
            );
        }
        let e = refused("postgres://u:s3cret@db/shop?sslkey=/k.pem&sslpassword=s3cret");
        assert!(e.contains("sslpassword"), "{e}");
        #[cfg(feature = "tls")]
        {
            let t = read("postgres://u@db/shop?sslmode=verify-full&sslcert=/c.pem&sslkey=/k.pem");
            assert_eq!(t.tls.client_cert, Some(("/c.pem".into(), "/k.pem".into())));
        }
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_the_tls_feature_only_plain_text_is_accepted() {
        for url in [
            "postgres://u:s3cret@db/shop?sslmode=require",
            "postgres://u:s3cret@db/shop?sslmode=verify-full",
            "postgres://u:s3cret@db/shop?sslrootcert=/ca.pem",
        ] {
            let e = refused(url);
            assert!(e.contains("`tls` feature"), "{url}: {e}");
        }
        // libpq without TLS support treats prefer (the default) as disable.
        assert_eq!(read("postgres://u@db/shop").tls.mode, SslMode::Prefer);
        assert_eq!(
            read("postgres://u@db/shop?sslmode=disable").tls.mode,
            SslMode::Disable
        );
    }

    #[cfg(all(unix, feature = "tls"))]
    #[test]
    fn tls_is_refused_on_unix_sockets_and_direct_negotiation_needs_it() {
        let e = refused("postgres://u:s3cret@%2Fvar%2Frun%2Fpostgresql/shop?sslmode=verify-full");
        assert!(e.contains("Unix socket"), "{e}");
        assert!(read("postgres://u@%2Fvar%2Frun%2Fpostgresql/shop").tls.mode == SslMode::Prefer);
        let e = refused("postgres://u:s3cret@db/shop?sslnegotiation=direct");
        assert!(e.contains("sslnegotiation=direct needs"), "{e}");
        read("postgres://u@db/shop?sslnegotiation=direct&sslmode=verify-full");
    }
}
