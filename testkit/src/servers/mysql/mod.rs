//! Throwaway MariaDB (or MySQL) servers on free ports of 127.0.0.1, each a `mariadbd` child the
//! harness owns, with a data directory of its own made by `mariadb-install-db` in a fresh
//! directory, so tests can kill, freeze, restart, dump and restore it.
//!
//! The binaries come from Debian's `mariadb-server` package (`scripts/ensure-mysql` installs it,
//! with `mariadb-client` for dumps), found through
//! `LEASEHOLD_MYSQL_BIN` (a directory holding `mariadbd` and `mariadb-install-db`), `PATH` or
//! `/usr/sbin`. Every server starts with `--no-defaults`: no configuration file of the machine
//! applies, and its socket, pid file and temporary files stay in its directory. A root test
//! binary runs it with `--user=root` (MariaDB refuses root otherwise).
//!
//! Each server gets a database [`MYSQL_DATABASE`] and a least-privilege user [`MYSQL_USER`] (password
//! [`MYSQL_PASSWORD`]) with the grants a lock store needs on that database alone ([`MYSQL_GRANTS`]); the
//! harness's own sessions are `root`'s, over the server's Unix socket.
//!
//! ```no_run
//! use leasehold_testkit::servers::MysqlServer;
//!
//! # async fn demo() {
//! let db = MysqlServer::start().await;
//! let url = db.url(); // mysql://leasehold:leasehold@127.0.0.1:PORT/leasehold
//! db.execute("CREATE TABLE leasehold.t (name VARCHAR(64) PRIMARY KEY)").await.unwrap();
//! db.pause(); // SIGSTOP: connections hang
//! db.resume();
//! db.restart().await; // SIGKILL, then crash recovery on the same port: committed rows survive
//! # drop(url);
//! # }
//! ```
//!
//! [`MysqlServer::start_with`] starts one with TLS ([`MysqlOptions`]): a certificate and key the
//! test made, and optionally `require_secure_transport`, which refuses TCP clients without TLS.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ports;
use super::server::{LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};

mod dump;
mod launch;
mod session;
mod tls;

use launch::{binaries, clear_crash_leftovers, label};
pub use tls::MysqlOptions;

/// The database every server is made with, where the locks' tables go.
pub const MYSQL_DATABASE: &str = "leasehold";
/// The least-privilege user every server is made with ([`MYSQL_GRANTS`] on [`MYSQL_DATABASE`] only).
pub const MYSQL_USER: &str = "leasehold";
/// [`MYSQL_USER`]'s password.
pub const MYSQL_PASSWORD: &str = "leasehold";
/// What [`MYSQL_USER`] may do, on [`MYSQL_DATABASE`] only: read and write rows, create and alter the lock
/// store's tables on first use, and create and run its stored function. No global privilege
/// (no `SUPER`, no `PROCESS`, no access to any other database).
pub const MYSQL_GRANTS: &str = "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, \
                          CREATE ROUTINE, ALTER ROUTINE, EXECUTE";

/// The environment variable naming the directory that holds `mariadbd` and `mariadb-install-db`.
const BIN_VAR: &str = "LEASEHOLD_MYSQL_BIN";
const LOG_FILE: &str = "mariadb.log";
const DATA_DIR: &str = "data";
const SOCKET: &str = "mysqld.sock";
const PID_FILE: &str = "mysqld.pid";
/// How long `mariadb-install-db` may take on a busy 2-core machine (under a second when idle).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a start or restart may take until the server accepts connections, crash recovery
/// included.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a normal shutdown (SIGTERM) may take before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Bounds the waits for signals to take effect.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one readiness probe (connect and one query) may take; a paused server never answers.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Bounds [`MysqlServer::connect`] and [`MysqlServer::execute`], so a test never hangs on them.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// One `mariadbd` process (threads, no forks); a panicking test keeps its log, and a killed one
/// leaves a pid file and a socket to clear.
static MARIADB: ServerKind = ServerKind {
    log_file: LOG_FILE,
    data_dir: Some(DATA_DIR),
    port_taken: "Address already in use",
    forks: false,
    signal_timeout: CALL_TIMEOUT,
    poll: POLL,
    leftovers: Some(clear_crash_leftovers),
};

/// One MariaDB server on 127.0.0.1 with a data directory of its own, its database
/// [`MYSQL_DATABASE`] and least-privilege user [`MYSQL_USER`] ([`url`](Self::url)).
///
/// Settings are made for tests: a 32 MB buffer pool, an 8 MB redo log, 300 connections, and
/// `innodb_flush_log_at_trx_commit=2`: a commit writes its redo log to the kernel (not the
/// disk) before it returns, so a [`kill9`](Self::kill9) still loses no committed transaction
/// (the kernel's page cache outlives the process; only a machine crash would lose it), while a
/// commit does not wait on the disk of a loaded CI machine. The server keeps its directory
/// across restarts. Dropping it kills and reaps the process and removes the directory; while a
/// test panics the log is kept and its path printed. All methods take `&self`, so a server can
/// be shared (`Arc`) with a task that injects faults.
#[derive(Debug)]
pub struct MysqlServer {
    port: u16,
    options: MysqlOptions,
    /// The process, and the directory holding `data/`, the log and the Unix socket.
    process: ServerProcess,
}

impl MysqlServer {
    /// Makes a data directory with `mariadb-install-db` in a fresh directory, starts `mariadbd`
    /// on a free port, waits until it accepts connections (a `SELECT` answered by this very
    /// server), and creates [`MYSQL_DATABASE`] and [`MYSQL_USER`].
    ///
    /// # Panics
    ///
    /// If the binaries cannot be found, the install fails, or the server exits or does not
    /// accept connections within 30 s; the message includes the tail of its log.
    pub async fn start() -> Self {
        Self::start_with(MysqlOptions::default()).await
    }

    /// [`start`](Self::start), with TLS as `options` say.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start); and if the TLS files cannot be copied, or `tls_only` was asked
    /// for without `tls`.
    pub async fn start_with(options: MysqlOptions) -> Self {
        assert!(
            options.tls.is_some() || !options.tls_only,
            "MysqlOptions: tls_only needs tls(cert, key)"
        );
        let binaries = binaries();
        let dir = super::server::fresh_dir(&std::env::temp_dir(), "mysql");
        let mut server = Self {
            port: 0,
            options,
            process: ServerProcess::new(&MARIADB, label(0, &dir), dir),
        };
        server.install(binaries).await;
        server.set_up_tls();
        for _ in 0..PORT_ATTEMPTS {
            server.port = ports::free_port();
            let label = label(server.port, server.dir());
            server.process.set_label(label);
            match server.launch().await {
                Ok(()) => {
                    server.create_database_and_user().await;
                    return server;
                }
                Err(LaunchError::PortTaken) => continue,
                Err(LaunchError::Failed(why)) => panic!(
                    "{} did not start: {why}\n{}",
                    server.describe(),
                    server.log_tail()
                ),
            }
        }
        panic!("mariadbd found each of {PORT_ATTEMPTS} free ports taken by the time it bound");
    }

    /// `127.0.0.1:PORT`; it stays the same across restarts.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://leasehold:leasehold@127.0.0.1:PORT/leasehold`: the least-privilege user and its
    /// database.
    pub fn url(&self) -> String {
        self.url_at(self.addr())
    }

    /// [`url`](Self::url) with another address in it (a proxy in front of the server).
    pub fn url_at(&self, addr: SocketAddr) -> String {
        format!("mysql://{MYSQL_USER}:{MYSQL_PASSWORD}@{addr}/{MYSQL_DATABASE}")
    }

    /// `mysql://root@127.0.0.1:PORT/leasehold`: the superuser, without a password (refused over
    /// TCP by a server started with [`MysqlOptions::tls_only`] unless the client uses TLS).
    pub fn root_url(&self) -> String {
        format!("mysql://root@{}/{MYSQL_DATABASE}", self.addr())
    }

    /// The server's directory: the data in `data/`, the log (`mariadb.log`) and the Unix
    /// socket (`mysqld.sock`).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The path of the server's Unix socket.
    pub fn socket_path(&self) -> PathBuf {
        self.dir().join(SOCKET)
    }

    /// The path of the server's log: all that the install and `mariadbd` wrote since the start.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// The last lines of the server's log, framed for a panic message.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// The server's process id while it runs (also while paused); `None` once killed or stopped.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills the server with SIGKILL, as a crash of the host would, and waits until it is gone;
    /// then removes the pid file and socket it leaves. Committed data stays in the directory.
    /// Does nothing if the server is not running.
    ///
    /// # Panics
    ///
    /// If the process does not exit within 10 s.
    pub fn kill9(&self) {
        self.process.kill9();
    }

    /// Stops the server with SIGTERM, its normal shutdown (sessions are ended, InnoDB writes its
    /// buffers), and waits until it has exited, for at most 20 s before SIGKILL. Does nothing if
    /// it is not running; a paused server is thawed first. It can be started again afterwards.
    ///
    /// # Panics
    ///
    /// If the process does not exit even after SIGKILL.
    pub fn stop_fast(&self) {
        self.process.stop(libc::SIGTERM, STOP_TIMEOUT);
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered, and new
    /// ones hang in the kernel's backlog, as on a hung host. Returns once it is stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running, or not stopped within 20 s.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Thaws a server frozen by [`pause`](Self::pause) with SIGCONT. Returns once it runs again.
    ///
    /// # Panics
    ///
    /// If the server is not running, or still stopped after 20 s.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Kills the server with [`kill9`](Self::kill9) (if it runs) and starts it again on the same
    /// port and directory, as a supervisor would after a crash: InnoDB replays its redo log, and
    /// committed transactions survive. Waits until it accepts connections.
    ///
    /// # Panics
    ///
    /// If it does not accept connections within 30 s, or the port stays taken by another process.
    pub async fn restart(&self) {
        self.kill9();
        self.process
            .relaunch(STARTUP_TIMEOUT, || self.launch())
            .await;
    }

    /// Stops the server with [`stop_fast`](Self::stop_fast) (if it runs) and starts it again on
    /// the same port and directory (no crash recovery). Waits until it accepts connections.
    ///
    /// # Panics
    ///
    /// If it does not accept connections within 30 s, or the port stays taken by another process.
    pub async fn restart_fast(&self) {
        self.stop_fast();
        self.process
            .relaunch(STARTUP_TIMEOUT, || self.launch())
            .await;
    }

    /// Starts the server again after [`kill9`](Self::kill9) or [`stop_fast`](Self::stop_fast)
    /// (killing it first if it runs), without waiting for it to accept connections: see
    /// [`wait_until_ready`](Self::wait_until_ready).
    pub fn start_again(&self) {
        self.kill9();
        self.spawn();
    }

    /// Waits until the server accepts connections (after [`start_again`](Self::start_again) or
    /// [`resume`](Self::resume)).
    ///
    /// # Panics
    ///
    /// If it is not running, or does not accept connections within 30 s.
    pub async fn wait_until_ready(&self) {
        self.process
            .wait_until_serving(STARTUP_TIMEOUT, || self.probe())
            .await;
    }

    fn describe(&self) -> &str {
        self.process.label()
    }
}
