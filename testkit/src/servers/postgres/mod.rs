//! Throwaway PostgreSQL servers on free ports of 127.0.0.1, each a `postgres` child the harness
//! owns, with a cluster of its own made by `initdb` in a fresh directory, so tests can kill,
//! freeze, restart and inspect it.
//!
//! The binaries come from Debian's `postgresql` package (`scripts/ensure-postgres` installs it),
//! found through `LEASEHOLD_PG_BIN` (a directory), `PATH`, or the highest
//! `/usr/lib/postgresql/<major>/bin`. PostgreSQL refuses to run as root, so a root test binary
//! runs `initdb` and `postgres` as `nobody`. Authentication is `trust`: any client may connect
//! as `postgres`.
//!
//! ```no_run
//! use leasehold_testkit::servers::PgServer;
//!
//! # async fn demo() {
//! let pg = PgServer::start().await;
//! let url = pg.url(); // postgres://postgres@127.0.0.1:PORT/postgres
//! pg.execute("CREATE TABLE leases (name text PRIMARY KEY)").await.unwrap();
//! pg.pause(); // SIGSTOP to the postmaster and every backend: connections hang
//! pg.resume();
//! pg.restart().await; // SIGKILL, then crash recovery on the same port: committed rows survive
//! # drop(url);
//! # }
//! ```
//!
//! [`PgServer::start_with`] starts one with TLS ([`PgOptions`]): `ssl = on` with a certificate
//! and key the test made, and optionally a `pg_hba.conf` that lets TCP clients in only over
//! TLS (`hostssl`), or only with a client certificate. The harness's own sessions then go over
//! the server's Unix socket, which needs no TLS.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use std::time::Duration;

use super::server::{LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};
use super::{ports, process};

mod files;
mod launch;
mod session;
mod tls;

use files::{binaries, copy_tree, fresh_dir, unprivileged_user, Binaries, User};
use launch::{clear_crash_leftovers, label};
pub use tls::PgOptions;
use tls::TLS_DIR;

/// The environment variable naming the directory that holds `initdb` and `postgres`.
const BIN_VAR: &str = "LEASEHOLD_PG_BIN";
/// Where Debian installs each major version's binaries, off `PATH`.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";
const LOG_FILE: &str = "postgres.log";
const DATA_DIR: &str = "data";
/// Written by the postmaster into the data directory; a crash leaves it behind.
const LOCK_FILE: &str = "postmaster.pid";
/// How long `initdb` may take on a busy 2-core machine (it takes under a second when idle).
const INITDB_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a start or restart may take until the server accepts connections, crash recovery
/// included.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take (a shutdown checkpoint, fsynced) before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Bounds the waits for signals to take effect (on every process of the server).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one readiness probe (connect and one query) may take; a paused server never answers.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Bounds [`PgServer::connect`] and [`PgServer::execute`], so a test never hangs on them.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// A postmaster and the backends it forks, signalled together; a panicking test keeps its log,
/// and a killed one leaves a lock file and shared memory to clear.
static POSTGRES: ServerKind = ServerKind {
    log_file: LOG_FILE,
    data_dir: Some(DATA_DIR),
    port_taken: "Address already in use",
    forks: true,
    signal_timeout: CALL_TIMEOUT,
    poll: POLL,
    leftovers: Some(clear_crash_leftovers),
};

/// One PostgreSQL server on 127.0.0.1 with a cluster of its own, made by `initdb` in a fresh
/// directory and reachable as user `postgres` without a password ([`url`](Self::url)).
///
/// Settings are made for tests: `shared_buffers=16MB`, `max_connections=200`, dynamic shared
/// memory in files of the data directory, and `fsync=off`. A [`kill9`](Self::kill9) still
/// loses no committed transaction: a commit writes its WAL to the kernel before it returns,
/// and the kernel's page cache outlives the process (fsync guards against a machine crash,
/// which no test makes). With fsync on, a commit waited on the disk, and on a loaded CI
/// machine that outlasted the 500 ms operation bound of the conformance suite. The server keeps its directory across
/// restarts, so data survives them. Dropping it kills the postmaster and every backend, reaps
/// them, and removes the directory; while a test panics the log is kept and its path printed.
/// All methods take `&self`, so a server can be shared (`Arc`) with a task that injects faults.
#[derive(Debug)]
pub struct PgServer {
    port: u16,
    options: PgOptions,
    /// The unprivileged user the server runs as when the test binary is root.
    run_as: Option<User>,
    /// The postmaster, and the directory holding `data/`, the log and the Unix socket.
    process: ServerProcess,
}

impl PgServer {
    /// Makes a cluster with `initdb` in a fresh directory, starts `postgres` on a free port, and
    /// waits until it accepts connections (a `SELECT` answered by this very server).
    ///
    /// # Panics
    ///
    /// If `initdb` or `postgres` cannot be found, `initdb` fails, or the server exits or does not
    /// accept connections within 30 s; the message includes the tail of its log.
    pub async fn start() -> Self {
        Self::start_with(PgOptions::default()).await
    }

    /// [`start`](Self::start), with TLS as `options` say.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start); and if the TLS files cannot be copied, or `tls_only` or
    /// `client_certificates` was asked for without `tls`.
    pub async fn start_with(options: PgOptions) -> Self {
        assert!(
            options.tls.is_some() || (!options.tls_only && options.client_ca.is_none()),
            "PgOptions: tls_only and client_certificates need tls(cert, key)"
        );
        let binaries = binaries();
        let run_as = unprivileged_user();
        let dir = fresh_dir(run_as);
        let mut server = Self {
            port: 0,
            options,
            run_as,
            process: ServerProcess::new(&POSTGRES, label(0, &dir), dir),
        };
        server.initdb(binaries).await;
        server.set_up_tls();
        for _ in 0..PORT_ATTEMPTS {
            server.port = ports::free_port();
            let label = label(server.port, server.dir());
            server.process.set_label(label);
            match server.launch().await {
                Ok(()) => return server,
                Err(LaunchError::PortTaken) => continue,
                Err(LaunchError::Failed(why)) => panic!(
                    "{} did not start: {why}\n{}",
                    server.describe(),
                    server.log_tail()
                ),
            }
        }
        panic!("postgres found each of {PORT_ATTEMPTS} free ports taken by the time it bound");
    }

    /// `127.0.0.1:PORT`; it stays the same across restarts.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: the superuser and its database, no password.
    /// `tokio_postgres::Config::from_str` accepts it.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}/postgres", self.addr())
    }

    /// The server's directory: the cluster in `data/`, the log (`postgres.log`), and the Unix
    /// socket (`.s.PGSQL.PORT`).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The path of the server's log: all that `initdb` and `postgres` wrote since the start.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// The last lines of the server's log, framed for a panic message.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// The postmaster's process id while the server runs (also while paused); `None` once killed
    /// or stopped.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The process ids of the postmaster's children: one backend per connection, and its
    /// auxiliary processes (checkpointer, WAL writer, ...). Empty while it does not run.
    pub fn child_pids(&self) -> Vec<u32> {
        self.pid()
            .map(|pid| process::descendants(pid).iter().map(|p| p.pid).collect())
            .unwrap_or_default()
    }

    /// Kills the postmaster and every backend with SIGKILL, as a crash of the host would, and
    /// waits until all of them are gone; then removes the lock file and shared memory segment a
    /// crash leaves (PostgreSQL would remove them itself on restart, but takes a live process
    /// that reused the old postmaster's pid for another postmaster). Committed data stays in the
    /// directory. Does nothing if the server is not running.
    ///
    /// # Panics
    ///
    /// If a process does not exit within 10 s.
    pub fn kill9(&self) {
        self.process.kill9();
    }

    /// Stops the server with SIGINT, PostgreSQL's fast shutdown (sessions are ended, a shutdown
    /// checkpoint is written), and waits until it has exited, for at most 20 s before every
    /// process is SIGKILLed. Does nothing if it is not running; a paused server is thawed
    /// first. It can be started again afterwards.
    ///
    /// # Panics
    ///
    /// If a process does not exit even after SIGKILL.
    pub fn stop_fast(&self) {
        self.process.stop(libc::SIGINT, STOP_TIMEOUT);
    }

    /// Freezes the server with SIGSTOP, the postmaster first (so it forks no backend meanwhile)
    /// and then every backend: connections stay open but nothing is answered, and new ones hang
    /// in the kernel's backlog, as on a hung host. Returns once all of them are stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running, or not stopped within 20 s.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Thaws a server frozen by [`pause`](Self::pause) with SIGCONT to the postmaster and every
    /// backend. Returns once all of them run again.
    ///
    /// # Panics
    ///
    /// If the server is not running, or still stopped after 20 s.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Kills the server with [`kill9`](Self::kill9) (if it runs) and starts it again on the same
    /// port and directory, as a supervisor would after a crash: PostgreSQL replays its WAL, and
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
    /// the same port and directory, as an orderly restart would (no crash recovery). Waits until
    /// it accepts connections.
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
}
