//! Servers with TLS: the options ([`PgOptions`]) and the files and `pg_hba.conf` a server
//! started with them gets.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::*;

/// How a [`PgServer`] starts: plain (the default), or with TLS.
///
/// ```no_run
/// use leasehold_testkit::servers::{PgOptions, PgServer};
///
/// # async fn demo(cert: std::path::PathBuf, key: std::path::PathBuf) {
/// // TLS only: a client without it is refused by pg_hba.conf.
/// let pg = PgServer::start_with(PgOptions::default().tls(cert, key).tls_only()).await;
/// let url = format!("{}?sslmode=verify-full&sslrootcert=/path/ca.pem", pg.url());
/// # drop(url);
/// # }
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct PgOptions {
    pub(super) tls: Option<TlsFiles>,
    /// TCP clients only over TLS (`hostssl`, and `hostnossl ... reject`).
    pub(super) tls_only: bool,
    /// TCP clients only over TLS with a certificate this CA signed, for the user named by its
    /// common name (`hostssl ... cert`).
    pub(super) client_ca: Option<PathBuf>,
}

/// The server's certificate (chain) and key, PEM files of the test's.
#[derive(Clone, Debug)]
pub(super) struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
}

impl PgOptions {
    /// Turns TLS on (`ssl = on`) with this certificate (chain) and its key, PEM files that the
    /// harness copies into the server's directory (the key readable by the server's user only,
    /// as PostgreSQL demands). Clients may still connect without TLS, unless
    /// [`tls_only`](Self::tls_only).
    pub fn tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = Some(TlsFiles {
            cert: cert.into(),
            key: key.into(),
        });
        self
    }

    /// Lets TCP clients in only over TLS: `pg_hba.conf` holds `hostssl` for 127.0.0.1 and
    /// `hostnossl all all all reject`. Needs [`tls`](Self::tls).
    pub fn tls_only(mut self) -> Self {
        self.tls_only = true;
        self
    }

    /// Lets TCP clients in only over TLS with a client certificate that `ca` (a PEM file)
    /// signed, whose common name is the user name (`hostssl ... cert`; `ssl_ca_file`). Needs
    /// [`tls`](Self::tls).
    pub fn client_certificates(mut self, ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(ca.into());
        self
    }
}

/// Where the harness copies the TLS files, in the server's directory.
pub(super) const TLS_DIR: &str = "tls";

impl PgServer {
    /// Copies the TLS files into `tls/`, owned by the server's user (the key readable by it
    /// alone), and writes `pg_hba.conf` for `tls_only` and `client_certificates`.
    ///
    /// # Panics
    ///
    /// If a file cannot be copied or written.
    pub(super) fn set_up_tls(&self) {
        let Some(files) = &self.options.tls else {
            return;
        };
        let dir = self.dir().join(TLS_DIR);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let mut copies = vec![
            (&files.cert, "server.crt", 0o644),
            (&files.key, "server.key", 0o600),
        ];
        if let Some(ca) = &self.options.client_ca {
            copies.push((ca, "client-ca.crt", 0o644));
        }
        for (from, name, mode) in copies {
            let to = dir.join(name);
            fs::copy(from, &to).unwrap_or_else(|e| {
                panic!("cannot copy {} to {}: {e}", from.display(), to.display())
            });
            fs::set_permissions(&to, fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", to.display()));
        }
        if let Some(user) = self.run_as {
            for entry in [dir.clone(), dir.join("server.crt"), dir.join("server.key")]
                .into_iter()
                .chain(
                    self.options
                        .client_ca
                        .as_ref()
                        .map(|_| dir.join("client-ca.crt")),
                )
            {
                std::os::unix::fs::chown(&entry, Some(user.uid), Some(user.gid)).unwrap_or_else(
                    |e| panic!("cannot give {} to uid {}: {e}", entry.display(), user.uid),
                );
            }
        }
        if self.options.tls_only || self.options.client_ca.is_some() {
            let method = match self.options.client_ca {
                Some(_) => "cert",
                None => "trust",
            };
            // The harness's sessions come over the socket; TCP only over TLS.
            let hba = format!(
                "local all all trust\n\
                 hostssl all all 127.0.0.1/32 {method}\n\
                 hostnossl all all all reject\n"
            );
            let path = self.data_dir().join("pg_hba.conf");
            fs::write(&path, hba)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        }
    }
}
