//! Servers with TLS: the options ([`MysqlOptions`]) and the files and settings a server started
//! with them gets.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use super::*;

/// How a [`MysqlServer`] starts: plain (the default), or with TLS.
///
/// ```no_run
/// use leasehold_testkit::servers::{MysqlOptions, MysqlServer};
///
/// # async fn demo(cert: std::path::PathBuf, key: std::path::PathBuf) {
/// // TLS only: a TCP client without it is refused (`require_secure_transport`).
/// let db = MysqlServer::start_with(MysqlOptions::default().tls(cert, key).tls_only()).await;
/// let url = format!("{}?ssl-mode=VERIFY_IDENTITY", db.url());
/// # drop(url);
/// # }
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct MysqlOptions {
    pub(super) tls: Option<TlsFiles>,
    /// TCP clients only over TLS (`require_secure_transport`).
    pub(super) tls_only: bool,
}

/// The server's certificate (chain) and key, PEM files of the test's.
#[derive(Clone, Debug)]
pub(super) struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
}

/// Where the harness copies the TLS files, in the server's directory.
const TLS_DIR: &str = "tls";

impl MysqlOptions {
    /// Turns TLS on (`ssl-cert`, `ssl-key`) with this certificate (chain) and its key, PEM files
    /// that the harness copies into the server's directory. Clients may still connect without
    /// TLS, unless [`tls_only`](Self::tls_only).
    pub fn tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = Some(TlsFiles {
            cert: cert.into(),
            key: key.into(),
        });
        self
    }

    /// Lets TCP clients in only over TLS (`require_secure_transport=ON`; the socket stays
    /// open to the harness). Needs [`tls`](Self::tls).
    pub fn tls_only(mut self) -> Self {
        self.tls_only = true;
        self
    }
}

impl MysqlServer {
    /// Copies the TLS files into `tls/` (the key readable by its owner alone).
    ///
    /// # Panics
    ///
    /// If a file cannot be copied.
    pub(super) fn set_up_tls(&self) {
        let Some(files) = &self.options.tls else {
            return;
        };
        let dir = self.dir().join(TLS_DIR);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        for (from, name, mode) in [
            (&files.cert, "server.crt", 0o644),
            (&files.key, "server.key", 0o600),
        ] {
            let to = dir.join(name);
            fs::copy(from, &to).unwrap_or_else(|e| {
                panic!("cannot copy {} to {}: {e}", from.display(), to.display())
            });
            fs::set_permissions(&to, fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", to.display()));
        }
    }

    /// The server's TLS arguments, if it has TLS.
    pub(super) fn tls_arguments(&self, cmd: &mut Command) {
        if self.options.tls.is_none() {
            return;
        }
        let dir = self.dir().join(TLS_DIR);
        cmd.arg(format!("--ssl-cert={}", dir.join("server.crt").display()))
            .arg(format!("--ssl-key={}", dir.join("server.key").display()));
        if self.options.tls_only {
            cmd.arg("--require-secure-transport=ON");
        }
    }
}
