//! Starting a server: the binaries found, `mariadb-install-db`, `mariadbd` spawned, and the wait
//! until it answers; the leftovers of a killed one cleared first.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use mysql_async::prelude::Queryable;

use crate::servers::process;
use crate::servers::server::{Answer, LaunchError};

use super::*;

/// Where `mariadb-install-db` and `mariadbd` are.
#[derive(Debug)]
pub(super) struct Binaries {
    pub(super) install_db: PathBuf,
    pub(super) server: PathBuf,
}

/// Finds `mariadb-install-db` and `mariadbd` once per test binary.
///
/// # Panics
///
/// If they cannot be found, saying where they were looked for.
pub(super) fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Result<Binaries, String>> = OnceLock::new();
    match BINARIES.get_or_init(find_binaries) {
        Ok(binaries) => binaries,
        Err(why) => panic!("{why}"),
    }
}

/// `$LEASEHOLD_MYSQL_BIN`, else `PATH` and `/usr/sbin` (where Debian puts `mariadbd`).
fn find_binaries() -> Result<Binaries, String> {
    let find = |name: &str| {
        let dirs: Vec<PathBuf> = match std::env::var_os(BIN_VAR) {
            Some(dir) => vec![PathBuf::from(dir)],
            None => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
                .collect(),
        };
        dirs.into_iter()
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    };
    match (find("mariadb-install-db"), find("mariadbd")) {
        (Some(install_db), Some(server)) => Ok(Binaries { install_db, server }),
        _ => Err(format!(
            "no mariadb-install-db and mariadbd in {BIN_VAR}, on PATH or in /usr/sbin: install \
             run scripts/ensure-mysql, or name their directory in {BIN_VAR}"
        )),
    }
}

/// Whether the test binary runs as root, whom `mariadbd` serves only with `--user=root`.
fn is_root() -> bool {
    // SAFETY: a plain syscall.
    unsafe { libc::geteuid() == 0 }
}

/// The options the install and the server share: they must agree on the redo log's size, and
/// each keeps its temporary files in the server's directory `dir` (concurrent installs clash in
/// a shared `/tmp`).
fn shared_options(cmd: &mut Command, dir: &Path) {
    cmd.arg(format!("--tmpdir={}", dir.display()))
        .arg("--innodb-log-file-size=8M")
        .arg("--innodb-buffer-pool-size=32M")
        .arg("--character-set-server=utf8mb4")
        .arg("--collation-server=utf8mb4_general_ci");
    if is_root() {
        cmd.arg("--user=root");
    }
}

impl MysqlServer {
    pub(super) fn data_dir(&self) -> PathBuf {
        self.dir().join(DATA_DIR)
    }

    /// Spawns `mariadbd` and waits until it accepts connections, or says why not.
    pub(super) async fn launch(&self) -> Result<(), LaunchError> {
        let log_start = self.process.log_len();
        self.spawn();
        self.wait_ready(log_start, STARTUP_TIMEOUT).await
    }

    /// Makes the system tables in `data/` with `mariadb-install-db`: `root` without a password,
    /// no test database.
    ///
    /// # Panics
    ///
    /// If it cannot be run, fails, or takes more than 60 s.
    pub(super) async fn install(&self, binaries: &Binaries) {
        let mut cmd = Command::new(&binaries.install_db);
        // --no-defaults must come first.
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ]);
        shared_options(&mut cmd, self.dir());
        self.prepare(&mut cmd);
        let mut child = process::spawn(cmd, self.dir().to_owned()).unwrap_or_else(|e| {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-mysql, or name the directory in \
                 {BIN_VAR})",
                binaries.install_db.display(),
                self.describe()
            )
        });
        let Some(status) = process::finish(&mut child, INSTALL_TIMEOUT).await else {
            panic!(
                "mariadb-install-db for {} did not finish within {INSTALL_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            );
        };
        assert!(
            status.success(),
            "mariadb-install-db for {} exited with {status}\n{}",
            self.describe(),
            self.log_tail()
        );
    }

    /// Runs `mariadbd`, without waiting for it to accept connections.
    ///
    /// # Panics
    ///
    /// If `mariadbd` cannot be run.
    pub(super) fn spawn(&self) {
        let server = &binaries().server;
        let dir = self.dir();
        let mut cmd = Command::new(server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--socket={}", dir.join(SOCKET).display()))
            .arg(format!("--pid-file={}", dir.join(PID_FILE).display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--max-connections=300",
                "--innodb-flush-log-at-trx-commit=2",
                "--performance-schema=OFF",
                "--skip-log-bin",
                // Aborted connections (every kill of a client) are not worth a line each.
                "--log-warnings=1",
            ]);
        shared_options(&mut cmd, dir);
        self.tls_arguments(&mut cmd);
        // Out of the test binary's process group: a Ctrl-C meant for the tests is no shutdown.
        cmd.process_group(0);
        self.prepare(&mut cmd);
        if let Err(e) = self.process.spawn(cmd) {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-mysql, or name the directory in \
                 {BIN_VAR})",
                server.display(),
                self.describe()
            )
        }
    }

    /// What the install and the server share: the directory, the environment, the log.
    fn prepare(&self, cmd: &mut Command) {
        cmd.current_dir(self.dir())
            // English messages, which `wait_launched` reads.
            .env("LC_ALL", "C")
            .env("TZ", "UTC")
            .env_remove("MYSQL_HOME")
            .env_remove("MYSQL_TCP_PORT")
            .env_remove("MYSQL_UNIX_PORT")
            .stdin(Stdio::null());
        if let Err(why) = self.process.log_to(cmd) {
            panic!("{why}");
        }
    }

    /// Waits until the server just spawned accepts connections as itself, or says why not. A
    /// server that will not serve is killed.
    async fn wait_ready(&self, log_start: u64, within: Duration) -> Result<(), LaunchError> {
        self.process
            .wait_launched(log_start, within, || async {
                match self.probe_tcp().await {
                    Ok(data_dir) if same_dir(Path::new(&data_dir), &self.data_dir()) => {
                        Answer::Ours
                    }
                    // Another server answers on the port; ours cannot bind it.
                    Ok(_) => Answer::Theirs,
                    Err(why) => Answer::NotYet(why),
                }
            })
            .await
    }

    /// Connects over the Unix socket and asks for the data directory, within
    /// [`PROBE_TIMEOUT`]: whether the server serves, or why not.
    pub(super) async fn probe(&self) -> Result<String, String> {
        self.ask_data_dir(self.admin_opts()).await
    }

    /// As [`probe`](Self::probe), but on the TCP port (as `root`, allowed from 127.0.0.1), which
    /// tells this server from another one holding the port. A server that requires TLS of TCP
    /// clients refuses it: then its socket answers, which is ours alone.
    async fn probe_tcp(&self) -> Result<String, String> {
        if self.options.tls_only {
            return self.probe().await;
        }
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(Ipv4Addr::LOCALHOST.to_string())
            .tcp_port(self.port)
            .user(Some("root"))
            .prefer_socket(false);
        self.ask_data_dir(opts).await
    }

    async fn ask_data_dir(&self, opts: mysql_async::OptsBuilder) -> Result<String, String> {
        let exchange = async {
            let mut conn = mysql_async::Conn::new(opts)
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            let dir: Option<String> = conn
                .query_first("SELECT @@datadir")
                .await
                .map_err(|e| format!("SELECT: {e}"))?;
            let _ = conn.disconnect().await;
            dir.ok_or_else(|| "SELECT gave no row".to_owned())
        };
        tokio::time::timeout(PROBE_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
    }
}

/// What messages call the server on `port` in `dir`.
pub(super) fn label(port: u16, dir: &Path) -> String {
    format!(
        "mariadbd at {} ({})",
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        dir.display()
    )
}

/// Removes the pid file, the socket and the socket's lock file a killed server leaves in its
/// directory `dir`.
pub(super) fn clear_crash_leftovers(dir: &Path) {
    for name in [PID_FILE, SOCKET, &format!("{SOCKET}.lock")] {
        let _ = fs::remove_file(dir.join(name));
    }
}

/// Whether two paths name the same directory (the server spells its own with a trailing `/`).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (fs::canonicalize(a), fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}
