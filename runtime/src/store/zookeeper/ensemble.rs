//! How to reach a ZooKeeper ensemble, read from its connect string
//! `[user:password@]host:port[,host:port...][/chroot][?tls&ca=...&cert=...&key=...&auth=...]`:
//! the servers the client is given, the credentials and TLS files that came with them, and
//! the form messages show, which never holds a credential.

use std::fmt;
#[cfg(feature = "tls")]
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use zookeeper_client as zk;

use crate::error::LockError;
use crate::store::settings::percent_decode;
use crate::store::settings::redact;

/// What [`percent_decode`] names in its errors.
const CONNECT_STRING: &str = "the zookeeper connect string";

/// One ensemble and how to reach it, taken apart from its connect string.
pub(crate) struct Ensemble {
    /// `host:port,host:port[/chroot]`, as the client is given it.
    pub(super) servers: String,
    /// How messages name it: the servers, with ` (TLS)` when connected by TLS.
    pub(crate) shown: String,
    pub(super) credentials: Option<Credentials>,
    /// Always `None` without the `tls` feature (`parse` refuses TLS then).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(super) tls: Option<TlsFiles>,
}

/// Who the sessions authenticate as.
pub(super) struct Credentials {
    pub(super) scheme: AuthScheme,
    pub(super) user: String,
    pub(super) password: String,
}

/// How the credentials are presented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AuthScheme {
    /// `addauth digest user:password`: the server takes any pair and makes it the identity
    /// `digest:user:<hash>`; the password crosses the connection as it is (use TLS).
    Digest,
    /// SASL DIGEST-MD5: the server checks the password against its JAAS users and refuses a
    /// wrong one; the identity is `sasl:user`, and the password never crosses the connection.
    Sasl,
}

/// Where the PEM files of a TLS connection are.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(super) struct TlsFiles {
    /// The CA certificates the servers' certificates are checked against; `SSL_CERT_FILE`
    /// when not given.
    pub(super) ca: Option<PathBuf>,
    /// The client's certificate chain and private key, for servers that ask for one.
    pub(super) identity: Option<(PathBuf, PathBuf)>,
}

/// The form of a connect string, for messages.
const FORM: &str = "[user:password@]host:port[,host:port...][/chroot][?tls&ca=/path/ca.pem\
                    &cert=/path/client.pem&key=/path/client.key&auth=digest|sasl]";

impl Ensemble {
    /// Takes a connect string apart. Its user, password and option values are
    /// percent-decoded (write `@` as `%40`, `%` as `%25`, `&` as `%26`). The messages never
    /// show a credential.
    pub(crate) fn parse(given: &str) -> Result<Ensemble, String> {
        let given = given.trim();
        let shown = redact(given);
        let (userinfo, rest) = match given.rsplit_once('@') {
            Some((userinfo, rest)) => (Some(userinfo), rest),
            None => (None, given),
        };
        let (servers, query) = rest.split_once('?').unwrap_or((rest, ""));
        let hosts = servers.split('/').next().unwrap_or("");
        if hosts.trim().is_empty()
            || given.contains("://")
            || hosts.split(',').any(|h| h.trim().is_empty())
        {
            return Err(format!(
                "zookeeper needs its servers as {FORM} (no scheme); got {shown:?}"
            ));
        }

        let mut tls = None;
        let mut ca = None;
        let mut cert = None;
        let mut key = None;
        let mut scheme = None;
        for option in query.split('&').filter(|o| !o.is_empty()) {
            let (name, value) = match option.split_once('=') {
                Some((name, value)) => (name, Some(percent_decode(value, CONNECT_STRING)?)),
                None => (option, None),
            };
            let path = |value: Option<String>| match value {
                Some(v) if !v.is_empty() => Ok(PathBuf::from(v)),
                _ => Err(format!(
                    "the zookeeper option {name} needs a file: {name}=/path"
                )),
            };
            match name {
                "tls" => {
                    tls = match value.as_deref() {
                        None | Some("true") => Some(true),
                        Some("false") => Some(false),
                        Some(v) => {
                            return Err(format!(
                                "the zookeeper option tls is tls, tls=true or tls=false; got \
                                 tls={v:?}"
                            ))
                        }
                    }
                }
                "ca" => ca = Some(path(value)?),
                "cert" => cert = Some(path(value)?),
                "key" => key = Some(path(value)?),
                "auth" => {
                    scheme = Some(match value.as_deref() {
                        Some("digest") => AuthScheme::Digest,
                        Some("sasl") => AuthScheme::Sasl,
                        _ => {
                            return Err(
                                "the zookeeper option auth is auth=digest (the default) or \
                                 auth=sasl (SASL DIGEST-MD5)"
                                    .into(),
                            )
                        }
                    })
                }
                _ => {
                    return Err(format!(
                        "{name:?} is no zookeeper option; the options are tls, ca, cert, key \
                         and auth, as in {FORM}"
                    ))
                }
            }
        }

        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(
                    "a zookeeper client certificate needs both cert=/path/client.pem and \
                     key=/path/client.key"
                        .into(),
                )
            }
        };
        // A CA or a client certificate means TLS.
        let files = ca.is_some() || identity.is_some();
        if tls == Some(false) && files {
            return Err("the zookeeper options ca, cert and key need TLS; drop tls=false".into());
        }
        let tls = tls.unwrap_or(files);
        if tls && !cfg!(feature = "tls") {
            return Err(
                "TLS to zookeeper (the options tls, ca, cert, key) needs leasehold's `tls` \
                 feature"
                    .into(),
            );
        }

        let credentials = match userinfo {
            None if scheme.is_some() => {
                return Err(format!(
                    "the zookeeper option auth needs credentials: user:password@ before the \
                     servers; got {shown:?}"
                ))
            }
            None => None,
            Some(userinfo) => {
                let (user, password) = userinfo.split_once(':').ok_or_else(|| {
                    "zookeeper credentials are user:password@ before the servers; no `:` was \
                     found in them"
                        .to_owned()
                })?;
                let (user, password) = (
                    percent_decode(user, CONNECT_STRING)?,
                    percent_decode(password, CONNECT_STRING)?,
                );
                if user.is_empty() || user.contains(':') {
                    return Err(
                        "zookeeper credentials need a user name without `:` (user:password@)"
                            .into(),
                    );
                }
                Some(Credentials {
                    scheme: scheme.unwrap_or(AuthScheme::Digest),
                    user,
                    password,
                })
            }
        };

        Ok(Ensemble {
            servers: servers.to_owned(),
            shown: if tls {
                format!("{servers} (TLS)")
            } else {
                servers.to_owned()
            },
            credentials,
            tls: tls.then_some(TlsFiles { ca, identity }),
        })
    }

    /// Whether sessions authenticate: the znodes they create are then theirs alone.
    pub(super) fn authenticated(&self) -> bool {
        self.credentials.is_some()
    }

    /// Opens a session: with the credentials, over TLS when asked. The PEM files are read
    /// on each new session, so that a certificate renewed on disk is taken up.
    ///
    /// # Errors
    /// [`LockError::Config`] for a PEM file that cannot be read or holds no certificate or
    /// key; the client's error as it is otherwise.
    pub(super) async fn connect(
        &self,
        session_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Result<zk::Client, zk::Error>, LockError> {
        let mut connector = zk::Client::connector()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(connect_timeout);
        match &self.credentials {
            Some(Credentials {
                scheme: AuthScheme::Digest,
                user,
                password,
            }) => {
                connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
            }
            Some(Credentials {
                scheme: AuthScheme::Sasl,
                user,
                password,
            }) => {
                connector = connector
                    .with_sasl(zk::SaslOptions::digest_md5(user.clone(), password.clone()));
            }
            None => {}
        }
        #[cfg(feature = "tls")]
        if let Some(files) = &self.tls {
            // The client builds its TLS configuration on the process's default provider; its
            // rustls brings aws-lc-rs besides our ring, so without a default rustls could not
            // choose. The first one installed stays (the Redis engine installs ring too).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let options = files
                .options()
                .map_err(|e| LockError::config(format!("zookeeper at {}: {e}", self.shown)))?;
            return Ok(connector
                .with_tls(options)
                .secure_connect(&self.servers)
                .await);
        }
        Ok(connector.connect(&self.servers).await)
    }
}

#[cfg(feature = "tls")]
impl TlsFiles {
    /// The client's TLS options, from the PEM files.
    fn options(&self) -> Result<zk::TlsOptions, String> {
        let ca = match &self.ca {
            Some(ca) => read_pem(ca, "ca")?,
            None => match std::env::var_os("SSL_CERT_FILE") {
                Some(file) => read_pem(Path::new(&file), "SSL_CERT_FILE")?,
                None => {
                    return Err(
                        "TLS needs the CA that signed the servers' certificates: add \
                                ca=/path/to/ca.pem, or set SSL_CERT_FILE"
                            .into(),
                    )
                }
            },
        };
        let mut options = zk::TlsOptions::new()
            .with_pem_ca(&ca)
            .map_err(|e| format!("the CA file holds no usable certificate: {e}"))?;
        if let Some((cert, key)) = &self.identity {
            options = options
                .with_pem_identity(&read_pem(cert, "cert")?, &read_pem(key, "key")?)
                .map_err(|e| format!("the client certificate or key is not usable: {e}"))?;
        }
        Ok(options)
    }
}

#[cfg(feature = "tls")]
fn read_pem(path: &Path, option: &str) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the {option} file {}: {e}", path.display()))
}

/// Shows the servers and whether there are credentials, never the credentials.
impl fmt::Debug for Ensemble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ensemble")
            .field("servers", &self.shown)
            .field(
                "auth",
                &self.credentials.as_ref().map(|c| match c.scheme {
                    AuthScheme::Digest => "digest ***",
                    AuthScheme::Sasl => "sasl ***",
                }),
            )
            .finish()
    }
}
