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
//! use leasehold_tests::harness::PgServer;
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

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use super::server::{self, Answer, LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};
use super::{ports, process};

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

/// How a [`PgServer`] starts: plain (the default), or with TLS.
///
/// ```no_run
/// use leasehold_tests::harness::{PgOptions, PgServer};
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
    tls: Option<TlsFiles>,
    /// TCP clients only over TLS (`hostssl`, and `hostnossl ... reject`).
    tls_only: bool,
    /// TCP clients only over TLS with a certificate this CA signed, for the user named by its
    /// common name (`hostssl ... cert`).
    client_ca: Option<PathBuf>,
}

/// The server's certificate (chain) and key, PEM files of the test's.
#[derive(Clone, Debug)]
struct TlsFiles {
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
const TLS_DIR: &str = "tls";

/// A uid and gid to run the server as.
#[derive(Clone, Copy, Debug)]
struct User {
    uid: u32,
    gid: u32,
}

/// Where `initdb` and `postgres` are.
#[derive(Debug)]
struct Binaries {
    initdb: PathBuf,
    postgres: PathBuf,
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

    /// A new session as `postgres`, its connection driven by a task spawned on the current tokio
    /// runtime (it ends when the client is dropped). Over TCP without TLS; over the Unix socket
    /// for a server started with TLS ([`PgOptions::tls`]), which may refuse TCP without it.
    ///
    /// # Errors
    ///
    /// If the server refuses or fails the connection (down, starting up, in recovery).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (it is paused: bound the call more tightly with
    /// `tokio::time::timeout` to see that).
    pub async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) =
            match tokio::time::timeout(QUERY_TIMEOUT, self.admin_config().connect(NoTls)).await {
                Ok(connected) => connected?,
                Err(_) => panic!(
                    "{} did not accept a connection within {QUERY_TIMEOUT:?}\n{}",
                    self.describe(),
                    self.log_tail()
                ),
            };
        tokio::spawn(async move {
            // Its error reaches the client's next call, which is where a test looks.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Runs `sql` (one or more statements, `;`-separated) on a session of its own with the
    /// simple query protocol, and returns the rows of all statements, each value as text (`None`
    /// for NULL): `execute("SELECT 1")` gives `[[Some("1")]]`.
    ///
    /// # Errors
    ///
    /// If the connection fails or a statement fails (then the statements before it in a
    /// multi-statement `sql` are rolled back, as one implicit transaction).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 30 s (see [`connect`](Self::connect)).
    pub async fn execute(
        &self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
        let client = self.connect().await?;
        let messages = match tokio::time::timeout(QUERY_TIMEOUT, client.simple_query(sql)).await {
            Ok(messages) => messages?,
            Err(_) => panic!(
                "{} did not answer `{sql}` within {QUERY_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            ),
        };
        Ok(messages
            .iter()
            .filter_map(|message| match message {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    }

    /// Copies the stopped server's cluster (`data/`) to `<dir>/<name>`, owner and modes kept, as
    /// an operator's file-level backup would; [`restore_data`](Self::restore_data) puts it back.
    ///
    /// # Panics
    ///
    /// If the server runs (stop it first: a copy of a running cluster is not consistent), or
    /// the copy fails.
    pub fn save_data(&self, name: &str) -> PathBuf {
        assert!(
            self.pid().is_none(),
            "{}: stop the server before saving its data",
            self.describe()
        );
        let saved = self.dir().join(name);
        let _ = fs::remove_dir_all(&saved);
        copy_tree(&self.data_dir(), &saved);
        saved
    }

    /// Replaces the stopped server's cluster with a copy [`save_data`](Self::save_data) made:
    /// everything committed since the copy is gone, as after restoring an older backup (or
    /// promoting a standby that had not received it). Start it again with
    /// [`start_again`](Self::start_again).
    ///
    /// # Panics
    ///
    /// If the server runs, or the copy fails.
    pub fn restore_data(&self, saved: &Path) {
        assert!(
            self.pid().is_none(),
            "{}: stop the server before restoring its data",
            self.describe()
        );
        let data = self.data_dir();
        fs::remove_dir_all(&data)
            .unwrap_or_else(|e| panic!("cannot remove {}: {e}", data.display()));
        copy_tree(saved, &data);
    }

    fn describe(&self) -> &str {
        self.process.label()
    }

    /// Where the harness's own sessions connect: TCP without TLS, or the Unix socket of a
    /// server started with TLS.
    fn admin_config(&self) -> Config {
        let mut config = Config::new();
        config.user("postgres").dbname("postgres").port(self.port);
        match self.options.tls {
            Some(_) => config.host_path(self.dir()),
            None => config.host(Ipv4Addr::LOCALHOST.to_string()),
        };
        config
    }

    /// Copies the TLS files into `tls/`, owned by the server's user (the key readable by it
    /// alone), and writes `pg_hba.conf` for `tls_only` and `client_certificates`.
    ///
    /// # Panics
    ///
    /// If a file cannot be copied or written.
    fn set_up_tls(&self) {
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

    fn data_dir(&self) -> PathBuf {
        self.dir().join(DATA_DIR)
    }

    /// Spawns the postmaster and waits until it accepts connections, or says why not.
    async fn launch(&self) -> Result<(), LaunchError> {
        let log_start = self.process.log_len();
        self.spawn();
        self.wait_ready(log_start, STARTUP_TIMEOUT).await
    }

    /// Makes the cluster in `data/`, as the server's user.
    ///
    /// # Panics
    ///
    /// If `initdb` cannot be run, fails, or takes more than 60 s.
    async fn initdb(&self, binaries: &Binaries) {
        let mut cmd = Command::new(&binaries.initdb);
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C")
            // Spares initdb its scan of the time zone database.
            .env("TZ", "UTC");
        self.prepare(&mut cmd);
        let mut child = process::spawn(cmd, self.dir().to_owned()).unwrap_or_else(|e| {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-postgres, or name the directory \
                 in {BIN_VAR})",
                binaries.initdb.display(),
                self.describe()
            )
        });
        let Some(status) = process::finish(&mut child, INITDB_TIMEOUT).await else {
            panic!(
                "initdb for {} did not finish within {INITDB_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            );
        };
        assert!(
            status.success(),
            "initdb for {} exited with {status}\n{}",
            self.describe(),
            self.log_tail()
        );
    }

    /// Runs the postmaster, without waiting for it to accept connections.
    ///
    /// # Panics
    ///
    /// If `postgres` cannot be found or run.
    fn spawn(&self) {
        let postgres = &binaries().postgres;
        let mut cmd = Command::new(postgres);
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "shared_buffers=16MB"])
            .args(["-c", "max_connections=200"])
            .args(["-c", "fsync=off"])
            // Files in data/ rather than /dev/shm, so a killed server leaves nothing outside
            // its directory.
            .args(["-c", "dynamic_shared_memory_type=mmap"])
            .args(["-c", "huge_pages=off"])
            .args(["-c", "log_min_messages=warning"]);
        if self.options.tls.is_some() {
            let tls = self.dir().join(TLS_DIR);
            let setting = |name: &str, file: &str| format!("{name}={}", tls.join(file).display());
            cmd.args(["-c", "ssl=on"])
                .args(["-c", &setting("ssl_cert_file", "server.crt")])
                .args(["-c", &setting("ssl_key_file", "server.key")]);
            if self.options.client_ca.is_some() {
                cmd.args(["-c", &setting("ssl_ca_file", "client-ca.crt")]);
            }
        }
        // Out of the test binary's process group: a Ctrl-C meant for the tests is no fast
        // shutdown. (The backends call setsid(), so the group is not the whole server.)
        cmd.process_group(0);
        self.prepare(&mut cmd);
        if let Err(e) = self.process.spawn(cmd) {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-postgres, or name the directory \
                 in {BIN_VAR})",
                postgres.display(),
                self.describe()
            )
        }
    }

    /// What `initdb` and `postgres` share: the user, the directory, the environment, the log.
    fn prepare(&self, cmd: &mut Command) {
        if let Some(user) = self.run_as {
            cmd.uid(user.uid).gid(user.gid);
        }
        cmd.current_dir(self.dir())
            // English messages, which `wait_ready` reads.
            .env("LC_ALL", "C")
            // Ours are on the command line.
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .stdin(Stdio::null());
        if let Err(why) = self.process.log_to(cmd) {
            panic!("{why}");
        }
    }

    /// Waits until the postmaster just spawned accepts connections as itself, or says why not. A
    /// postmaster that will not serve is killed.
    async fn wait_ready(&self, log_start: u64, within: Duration) -> Result<(), LaunchError> {
        self.process
            .wait_launched(log_start, within, || async {
                match self.probe().await {
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

    /// Connects and asks for the data directory, within [`PROBE_TIMEOUT`]: which server answers
    /// on the port, or why none does.
    async fn probe(&self) -> Result<String, String> {
        let exchange = async {
            let (client, connection) = self
                .admin_config()
                .connect(NoTls)
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let messages = client
                .simple_query("SELECT current_setting('data_directory')")
                .await
                .map_err(|e| format!("SELECT: {e}"))?;
            messages
                .iter()
                .find_map(|message| match message {
                    SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
                .ok_or_else(|| "SELECT gave no row".to_owned())
        };
        tokio::time::timeout(PROBE_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
    }
}

/// What messages call the server on `port` in `dir`.
fn label(port: u16, dir: &Path) -> String {
    format!(
        "postgres at {} ({})",
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        dir.display()
    )
}

/// Removes the lock file and the System V shared memory segment it names, which a killed
/// postmaster leaves in the server's directory `dir`; none of its processes may be alive.
fn clear_crash_leftovers(dir: &Path) {
    let lock_file = dir.join(DATA_DIR).join(LOCK_FILE);
    let Ok(lock) = fs::read_to_string(&lock_file) else {
        return;
    };
    // Line 7 is "KEY ID" of the segment, once the postmaster has made it.
    let segment = lock.lines().nth(6).and_then(|line| {
        let mut numbers = line.split_whitespace().map(str::parse::<i64>);
        Some((numbers.next()?.ok()?, numbers.next()?.ok()?))
    });
    if let Some((key, id)) = segment {
        remove_segment(key, id);
    }
    let _ = fs::remove_file(&lock_file);
}

/// Removes System V shared memory segment `id` if it still has `key` (ids are reused) and no
/// process is attached.
#[cfg(target_os = "linux")]
fn remove_segment(key: i64, id: i64) {
    let (Ok(key), Ok(id)) = (libc::key_t::try_from(key), libc::c_int::try_from(id)) else {
        return;
    };
    // SAFETY: `shmid_ds` is plain data, for which all zeroes is a valid value.
    let mut status: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: IPC_STAT writes one `shmid_ds` into `status`; IPC_RMID takes no buffer.
    unsafe {
        if libc::shmctl(id, libc::IPC_STAT, &mut status) == 0
            && status.shm_perm.__key == key
            && status.shm_nattch == 0
        {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn remove_segment(_key: i64, _id: i64) {}

/// Whether two paths name the same directory (the server may spell its own differently).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (fs::canonicalize(a), fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Finds `initdb` and `postgres` once per test binary.
///
/// # Panics
///
/// If they cannot be found, saying where they were looked for.
fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Result<Binaries, String>> = OnceLock::new();
    match BINARIES.get_or_init(find_binaries) {
        Ok(binaries) => binaries,
        Err(why) => panic!("{why}"),
    }
}

/// `$LEASEHOLD_PG_BIN`, else `PATH`, else the highest major version under `/usr/lib/postgresql`.
fn find_binaries() -> Result<Binaries, String> {
    let in_dir = |dir: &Path| {
        let binaries = Binaries {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
        };
        (binaries.initdb.is_file() && binaries.postgres.is_file()).then_some(binaries)
    };
    if let Some(dir) = std::env::var_os(BIN_VAR) {
        return in_dir(Path::new(&dir)).ok_or_else(|| {
            format!(
                "{BIN_VAR}={} holds no initdb and postgres (it names their directory, such as \
                 {DEBIAN_LIB}/15/bin)",
                Path::new(&dir).display()
            )
        });
    }
    let on_path = |name: &str| {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    };
    if let (Some(initdb), Some(postgres)) = (on_path("initdb"), on_path("postgres")) {
        return Ok(Binaries { initdb, postgres });
    }
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(DEBIAN_LIB)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            // "15", or "9.6" before PostgreSQL 10.
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .iter()
        .rev()
        .find_map(|(_, dir)| in_dir(dir))
        .ok_or_else(|| {
            format!(
                "no initdb and postgres in {BIN_VAR}, on PATH, or in {DEBIAN_LIB}/*/bin: run \
                 scripts/ensure-postgres, or name their directory in {BIN_VAR}"
            )
        })
}

/// The user to run the server as: `nobody` when the test binary is root, whom PostgreSQL
/// refuses; `None` (the binary's own user) otherwise.
fn unprivileged_user() -> Option<User> {
    // SAFETY: a plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    static NOBODY: OnceLock<User> = OnceLock::new();
    Some(*NOBODY.get_or_init(|| {
        look_up_user(c"nobody").unwrap_or(User {
            uid: 65534,
            gid: 65534,
        })
    }))
}

/// The uid and primary gid of `name` in the user database.
fn look_up_user(name: &std::ffi::CStr) -> Option<User> {
    // SAFETY: `passwd` is plain data (integers and pointers), for which all zeroes is valid.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, `buf` for `buf.len()` bytes; the reentrant
    // variant writes only into `entry` and `buf`.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some(User {
        uid: entry.pw_uid,
        gid: entry.pw_gid,
    })
}

/// A new, empty directory for one server under the system's temporary directory, owned by the
/// server's user.
///
/// # Panics
///
/// If it cannot be made, or no temporary directory is reachable by that user.
fn fresh_dir(run_as: Option<User>) -> PathBuf {
    let dir = server::fresh_dir(&base_dir(run_as), "pg");
    if let Some(user) = run_as {
        std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
            .unwrap_or_else(|e| panic!("cannot give {} to uid {}: {e}", dir.display(), user.uid));
    }
    dir
}

/// The system's temporary directory, or `/tmp` when the server runs as another user who could
/// not reach the former (a `TMPDIR` under `/root`).
fn base_dir(run_as: Option<User>) -> PathBuf {
    let tmp = std::env::temp_dir();
    if run_as.is_none() || traversable(&tmp) {
        return tmp;
    }
    let fallback = PathBuf::from("/tmp");
    if traversable(&fallback) {
        return fallback;
    }
    panic!(
        "neither {} nor /tmp can be entered by other users, and postgres runs as uid {}: set \
         TMPDIR to a directory whose every parent is world-executable",
        tmp.display(),
        run_as.map_or(0, |user| user.uid)
    );
}

/// Whether any user may enter `dir` and every directory above it.
fn traversable(dir: &Path) -> bool {
    dir.ancestors().all(|d| {
        fs::metadata(d).is_ok_and(|meta| meta.is_dir() && meta.permissions().mode() & 0o001 != 0)
    })
}

/// Copies the directory `from` to `to` (which must not exist) with `cp -a`, which keeps owners
/// and modes: the server refuses a data directory that is not its user's with mode 0700.
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cp: {e}"));
    assert!(
        status.success(),
        "cp -a {} {} failed: {status}",
        from.display(),
        to.display()
    );
}
