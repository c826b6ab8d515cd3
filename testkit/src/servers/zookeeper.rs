//! Throwaway ZooKeeper servers on free ports of 127.0.0.1: a standalone [`ZkServer`], or a
//! [`ZkEnsemble`] of members that elect a leader; each in a directory of its own, run as a `java`
//! child the harness owns, so tests can kill, freeze, restart and inspect it.
//!
//! The servers come from Debian's `zookeeper` package (`scripts/ensure-zookeeper` installs it):
//! `java` runs `QuorumPeerMain` from the package's jars, with a `zoo.cfg` the harness writes.
//! Settings are made for tests: a [`ZkServer::TICK_TIME`] of 200 ms so sessions may time out
//! after as little as [`ZkServer::MIN_SESSION_TIMEOUT`], all four-letter words allowed, no admin
//! server, no fsync, and container znodes checked for deletion every 500 ms.
//!
//! ```no_run
//! use leasehold_testkit::servers::{ZkEnsemble, ZkServer};
//!
//! # async fn demo() {
//! let zk = ZkServer::start().await;
//! let connect_string = zk.connect_string(); // 127.0.0.1:PORT, for any ZooKeeper client
//! zk.pause(); // SIGSTOP: the process is alive but frozen
//! zk.resume();
//! zk.kill9();
//! zk.restart().await; // same port and directory: the data and sessions survive
//!
//! let ensemble = ZkEnsemble::start(3).await;
//! let leader = ensemble.leader().await;
//! ensemble.member(leader).kill9(); // the others elect a new leader
//! # drop(connect_string);
//! # }
//! ```

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ports;
use super::server::{self, Answer, LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};

/// The environment variable naming the `java` binary; `java` on `PATH` otherwise.
const JAVA_VAR: &str = "LEASEHOLD_JAVA";
/// The environment variable holding the whole classpath of the server (`:`-separated), instead of
/// the jars found in Debian's packages.
const CLASSPATH_VAR: &str = "LEASEHOLD_ZOOKEEPER_CLASSPATH";
/// The server's jar, where Debian's packagings put it; its manifest names its dependencies.
const ZOOKEEPER_JARS: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/zookeeper/zookeeper.jar",
];
/// The directory of older packagings, holding the server's jar and its dependencies.
const ZOOKEEPER_LIB_DIR: &str = "/usr/share/zookeeper/lib";
/// An SLF4J binding that logs to stderr (Debian's `libslf4j-java`, a dependency of the server);
/// without one the server logs nothing.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// Netty jars that the Netty connection factory (a TLS port) needs and Debian's manifest of the
/// server's jar leaves out (`ByteToMessageDecoder` is in `netty-codec`).
const NETTY_JARS: &[&str] = &[
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
];
const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// Starts a small JVM fast: C1 only, serial GC, no perf-data file left in `/tmp` by a SIGKILL.
const JVM_FLAGS: &[&str] = &[
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    // An empty container znode is deleted within this, not within the default minute.
    "-Dznode.container.checkIntervalMs=500",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
];

const LOG_FILE: &str = "zookeeper.log";
/// The JAAS login configuration of a server with SASL users.
const JAAS_FILE: &str = "jaas.conf";
const CONFIG_FILE: &str = "zoo.cfg";
const DATA_DIR: &str = "data";
/// How long a start or restart may take until the server serves: a JVM on a busy 2-core machine.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Bounds the waits for a leader and for signals to take effect.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one four-letter-word probe may take; a paused server never answers.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
const POLL: Duration = Duration::from_millis(20);

/// A `java` running one ZooKeeper server; a panicking test keeps its log.
static ZOOKEEPER: ServerKind = ServerKind {
    log_file: LOG_FILE,
    data_dir: Some(DATA_DIR),
    port_taken: "Address already in use",
    forks: false,
    signal_timeout: CALL_TIMEOUT,
    poll: POLL,
    leftovers: None,
};

/// Settings of a standalone server that differ from the harness's: the range of session
/// timeouts it grants (what a client asking outside it gets instead), as an operator's
/// `zoo.cfg` may set them; a TLS port ([`tls`](Self::tls)); SASL users
/// ([`sasl_user`](Self::sasl_user)).
///
/// ```no_run
/// use std::time::Duration;
/// use leasehold_testkit::servers::{ZkOptions, ZkServer};
///
/// # async fn demo() {
/// // A client asking for an 8 s session gets 2 s.
/// let zk = ZkServer::start_with(ZkOptions::default().max_session_timeout(Duration::from_secs(2)))
///     .await;
/// # drop(zk);
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ZkOptions {
    min_session_timeout: Duration,
    max_session_timeout: Duration,
    tls: Option<ZkTls>,
    sasl_users: Vec<(String, String)>,
}

/// The TLS port of a server ([`ZkOptions::tls`]): its key store and trust store as PEM files,
/// which ZooKeeper 3.8 reads as they are (`ssl.keyStore.type=PEM`).
#[derive(Debug, Clone)]
pub struct ZkTls {
    /// The server's private key and certificate chain, in one PEM file.
    pub key_store: PathBuf,
    /// The CA certificates a client's certificate is checked against, in one PEM file.
    pub trust_store: PathBuf,
    /// Whether a client must show a certificate signed by the trust store's CA
    /// (`ssl.clientAuth=need`, ZooKeeper's default) or need not (`none`).
    pub client_auth: bool,
}

impl Default for ZkOptions {
    fn default() -> Self {
        Self {
            min_session_timeout: ZkServer::MIN_SESSION_TIMEOUT,
            max_session_timeout: ZkServer::MAX_SESSION_TIMEOUT,
            tls: None,
            sasl_users: Vec::new(),
        }
    }
}

impl ZkOptions {
    /// The shortest session timeout the server grants (`minSessionTimeout`, in whole
    /// milliseconds); a client asking for less gets this. Defaults to
    /// [`ZkServer::MIN_SESSION_TIMEOUT`].
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.min_session_timeout = timeout;
        self
    }

    /// The longest session timeout the server grants (`maxSessionTimeout`, in whole
    /// milliseconds); a client asking for more gets this. Defaults to
    /// [`ZkServer::MAX_SESSION_TIMEOUT`].
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.max_session_timeout = timeout;
        self
    }

    /// A TLS client port besides the plain one (which the harness keeps for its probes):
    /// `secureClientPort` on the Netty connection factory, with `tls`'s PEM stores. Its
    /// address is [`ZkServer::secure_connect_string`]. None by default.
    pub fn tls(mut self, tls: ZkTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// A user the server authenticates by SASL DIGEST-MD5 (a JAAS `Server` section with
    /// `DigestLoginModule`, and the SASL authentication provider): a client that gives this
    /// user and password is `sasl:<user>` in ACLs, and one that gives a wrong password is
    /// refused (`AuthFailed`). None by default.
    pub fn sasl_user(mut self, user: &str, password: &str) -> Self {
        self.sasl_users.push((user.to_owned(), password.to_owned()));
        self
    }
}

/// One ZooKeeper server process on 127.0.0.1: a standalone server ([`ZkServer::start`]) or a
/// member of a [`ZkEnsemble`].
///
/// It keeps its directory (`zoo.cfg`, `myid`, `data/`, `zookeeper.log`) across
/// [`restart`](Self::restart)s, so znodes and sessions survive them. Dropping it kills and reaps
/// the process and removes the directory; while a test panics the log is kept and its path
/// printed. All methods take `&self`, so a server can be shared (`Arc`) with a task that injects
/// faults.
#[derive(Debug)]
pub struct ZkServer {
    client_port: u16,
    /// The TLS client port, when [`ZkOptions::tls`] asked for one.
    secure_port: Option<u16>,
    /// `-D` flags of this server's JVM besides [`JVM_FLAGS`] (the JAAS file of SASL users).
    jvm_flags: Vec<String>,
    /// The member's id in an ensemble (1-based, as in `myid`); `None` for a standalone server.
    myid: Option<u32>,
    process: ServerProcess,
}

impl ZkServer {
    /// The servers' `tickTime`: the unit of their timeouts, and how often sessions are expired.
    pub const TICK_TIME: Duration = Duration::from_millis(200);
    /// The shortest session timeout a server grants; a client asking for less gets this.
    pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(400);
    /// The longest session timeout a server grants; a client asking for more gets this.
    pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(60);

    /// Starts a standalone server on a free port and waits until it serves (`srvr` reports
    /// `Mode: standalone`).
    ///
    /// # Panics
    ///
    /// If `java` or the ZooKeeper jars cannot be found, or the server exits or does not serve
    /// within 30 s; the message includes the tail of its log.
    pub async fn start() -> Self {
        Self::start_with(ZkOptions::default()).await
    }

    /// Starts a standalone server with `options` as [`start`](Self::start) does; they hold
    /// across [`restart`](Self::restart)s.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub async fn start_with(options: ZkOptions) -> Self {
        for _ in 0..PORT_ATTEMPTS {
            let server = Self::create(ports::free_port(), None, "", &options);
            match server.launch().await {
                Ok(()) => return server,
                Err(LaunchError::PortTaken) => continue,
                Err(LaunchError::Failed(why)) => {
                    panic!(
                        "{} did not start: {why}\n{}",
                        server.name(),
                        server.log_tail()
                    )
                }
            }
        }
        panic!("ZooKeeper found each of {PORT_ATTEMPTS} free ports taken by the time it bound");
    }

    /// Makes the directory and its `zoo.cfg` (and `myid`), without starting anything.
    fn create(client_port: u16, myid: Option<u32>, servers: &str, options: &ZkOptions) -> Self {
        let dir = server::fresh_dir(&std::env::temp_dir(), "zk");
        let data = dir.join(DATA_DIR);
        fs::create_dir_all(&data)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", data.display()));
        if let Some(id) = myid {
            fs::write(data.join("myid"), format!("{id}\n"))
                .unwrap_or_else(|e| panic!("cannot write myid in {}: {e}", data.display()));
        }
        let secure_port = options.tls.as_ref().map(|_| ports::free_port());
        let mut config = config(client_port, &data, servers, options);
        if let (Some(tls), Some(port)) = (&options.tls, secure_port) {
            config.push_str(&tls_config(port, tls));
        }
        let mut jvm_flags = Vec::new();
        if !options.sasl_users.is_empty() {
            let jaas = dir.join(JAAS_FILE);
            fs::write(&jaas, jaas_config(&options.sasl_users))
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", jaas.display()));
            jvm_flags.push(format!(
                "-Djava.security.auth.login.config={}",
                jaas.display()
            ));
            config.push_str(
                "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n",
            );
        }
        let path = dir.join(CONFIG_FILE);
        fs::write(&path, config).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, client_port));
        let label = match myid {
            Some(id) => format!("ZooKeeper member {id} at {addr}"),
            None => format!("ZooKeeper at {addr}"),
        };
        Self {
            client_port,
            secure_port,
            jvm_flags,
            myid,
            process: ServerProcess::new(&ZOOKEEPER, label, dir),
        }
    }

    /// `127.0.0.1:PORT`, the client port; it stays the same across [`restart`](Self::restart).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.client_port
    }

    /// `127.0.0.1:PORT`, a connect string naming this server only (for a client that must not
    /// fail over to another member).
    pub fn connect_string(&self) -> String {
        self.addr().to_string()
    }

    /// `127.0.0.1:PORT` of the TLS client port ([`ZkOptions::tls`]).
    ///
    /// # Panics
    ///
    /// If the server was started without one.
    pub fn secure_connect_string(&self) -> String {
        let port = self
            .secure_port
            .unwrap_or_else(|| panic!("{} has no TLS port (ZkOptions::tls)", self.name()));
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)).to_string()
    }

    /// The member's id in its ensemble (`myid`, from 1); `None` for a standalone server.
    pub fn myid(&self) -> Option<u32> {
        self.myid
    }

    /// The server's directory, holding `zoo.cfg`, `data/` and its log (`zookeeper.log`).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// The path of the server's log: all it wrote since it was first started.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// The process id while the server runs (also while paused); `None` once killed or stopped.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills the server with SIGKILL, as a crash would, and waits until it has exited. Does
    /// nothing if it is not running.
    ///
    /// # Panics
    ///
    /// If the process does not exit within 10 s.
    pub fn kill9(&self) {
        self.process.kill9();
    }

    /// Stops the server with SIGTERM and waits until it has exited, for at most 5 s before it is
    /// SIGKILLed. Does nothing if it is not running; it can be [`restart`](Self::restart)ed
    /// afterwards.
    ///
    /// # Panics
    ///
    /// If the process does not exit even after SIGKILL.
    pub fn stop(&self) {
        self.process.stop(libc::SIGTERM, Duration::from_secs(5));
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered, and its
    /// clocks (session expiry, the followers' sync with the leader) stand still, as in a long GC
    /// pause or on a hung host. Returns once the process is stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running, or not stopped within 20 s.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Thaws a server frozen by [`pause`](Self::pause) with SIGCONT. Returns once it runs again;
    /// it may take a moment more to serve.
    ///
    /// # Panics
    ///
    /// If the server is not running, or still stopped after 20 s.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Kills the server (if it runs) and starts it again on the same ports from what it left in
    /// its directory, as a supervisor would after a crash: znodes and open sessions survive (a
    /// session then expires unless its client reconnects within its timeout). Waits until it
    /// serves, which for an ensemble member takes a quorum of running members.
    ///
    /// # Panics
    ///
    /// If it does not serve within 30 s, or a port stays taken by another process.
    pub async fn restart(&self) {
        self.kill9();
        self.process
            .relaunch(STARTUP_TIMEOUT, || self.launch())
            .await;
    }

    /// Waits until the server serves clients again (after [`resume`](Self::resume), or a
    /// member's loss of quorum); returns its mode (`standalone`, `leader`, `follower`).
    ///
    /// # Panics
    ///
    /// If it is not running, or does not serve within 30 s.
    pub async fn wait_until_serving(&self) -> String {
        self.process
            .wait_until_serving(STARTUP_TIMEOUT, || async {
                self.mode().await.ok_or_else(|| "not serving".to_owned())
            })
            .await
    }

    /// The server's mode as `srvr` reports it (`standalone`, `leader`, `follower`), or `None`
    /// while it does not serve: down, paused, or a member without a quorum.
    pub async fn mode(&self) -> Option<String> {
        let srvr = self.four_letter_word("srvr").await.ok()?;
        srvr_mode(&srvr).map(str::to_owned)
    }

    /// Sends a four-letter word (`ruok`, `srvr`, `stat`, `mntr`, `cons`, `dump`, `conf`, ...) on
    /// a connection of its own and returns the whole answer; the error says why there is none.
    /// Bounded by 500 ms, so a paused server gives an error.
    pub async fn four_letter_word(&self, word: &str) -> Result<String, String> {
        four_letter_word(self.addr(), word).await
    }

    /// The last lines of the server's log, framed for a panic message.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn name(&self) -> &str {
        self.process.label()
    }

    /// Spawns the server and waits until it serves, or says why not.
    async fn launch(&self) -> Result<(), LaunchError> {
        let log_start = self.process.log_len();
        self.spawn();
        self.wait_serving(log_start, STARTUP_TIMEOUT).await
    }

    /// Runs `java` on the server's config, without waiting for it to serve.
    ///
    /// # Panics
    ///
    /// If `java` or the jars cannot be found or run.
    fn spawn(&self) {
        let java = std::env::var_os(JAVA_VAR).unwrap_or_else(|| "java".into());
        let dir = self.dir();
        let mut cmd = Command::new(&java);
        cmd.args(JVM_FLAGS)
            .args(&self.jvm_flags)
            .arg("-cp")
            .arg(classpath())
            .arg(MAIN_CLASS)
            .arg(dir.join(CONFIG_FILE))
            .current_dir(dir)
            .stdin(Stdio::null());
        if let Err(why) = self.process.log_to(&mut cmd) {
            panic!("{why}");
        }
        if let Err(e) = self.process.spawn(cmd) {
            let hint = if e.kind() == io::ErrorKind::NotFound {
                format!(" (run scripts/ensure-zookeeper, or name the binary in {JAVA_VAR})")
            } else {
                String::new()
            };
            panic!(
                "cannot run {} for {}: {e}{hint}",
                java.to_string_lossy(),
                self.name()
            )
        }
    }

    /// Waits until the process just spawned serves as itself, or says why not. A process that
    /// will not serve is killed.
    async fn wait_serving(&self, log_start: u64, within: Duration) -> Result<(), LaunchError> {
        self.process
            .wait_launched(log_start, within, || self.answer())
            .await
    }

    /// Who answers `srvr` on the client port: this server, another one, or nobody yet.
    async fn answer(&self) -> Answer {
        match self.four_letter_word("srvr").await {
            Ok(srvr) if srvr_mode(&srvr).is_some() => {
                // Is it ours? Another server on the port would name another data directory.
                let ours = self.dir().join(DATA_DIR).to_string_lossy().into_owned();
                match self.four_letter_word("conf").await {
                    Ok(conf) if conf.contains(&ours) => Answer::Ours,
                    Ok(_) => Answer::Theirs,
                    Err(why) => Answer::NotYet(format!("`conf`: {why}")),
                }
            }
            Ok(srvr) => Answer::NotYet(format!("`srvr`: {}", srvr.trim())),
            Err(why) => Answer::NotYet(format!("`srvr`: {why}")),
        }
    }
}

/// A ZooKeeper ensemble of [`ZkServer`] members on 127.0.0.1, each with its own directory,
/// `myid`, client port and quorum and election ports.
///
/// Members are indexed from 0 ([`member`](Self::member)); member `i` has `myid` `i + 1`. Faults
/// are injected through the members ([`ZkServer::kill9`], [`ZkServer::pause`],
/// [`ZkServer::restart`], ...). Dropping the ensemble kills every member.
#[derive(Debug)]
pub struct ZkEnsemble {
    members: Vec<ZkServer>,
}

impl ZkEnsemble {
    /// Starts `n` members (3 or 5 for a quorum that survives a loss; `n >= 1`) in parallel and
    /// waits until a leader is elected and every member serves.
    ///
    /// # Panics
    ///
    /// If any member exits or does not serve within 30 s, or no leader is elected; the message
    /// includes the tail of every member's log.
    pub async fn start(n: usize) -> Self {
        assert!(n >= 1, "an ensemble needs at least one member");
        'attempt: for _ in 0..PORT_ATTEMPTS {
            let ports: Vec<(u16, u16, u16)> = (0..n)
                .map(|_| (ports::free_port(), ports::free_port(), ports::free_port()))
                .collect();
            let mut servers = String::new();
            for (i, (_, quorum, election)) in ports.iter().enumerate() {
                let _ = writeln!(servers, "server.{}=127.0.0.1:{quorum}:{election}", i + 1);
            }
            let members: Vec<ZkServer> = ports
                .iter()
                .enumerate()
                .map(|(i, (client, _, _))| {
                    let myid = u32::try_from(i + 1).expect("a small ensemble");
                    ZkServer::create(*client, Some(myid), &servers, &ZkOptions::default())
                })
                .collect();
            let ensemble = Self { members };
            for member in &ensemble.members {
                member.spawn();
            }
            // The members start together; waiting for each in turn costs no more than the
            // slowest.
            for member in &ensemble.members {
                match member.wait_serving(0, STARTUP_TIMEOUT).await {
                    Ok(()) => {}
                    Err(LaunchError::PortTaken) => continue 'attempt,
                    Err(LaunchError::Failed(why)) => panic!(
                        "{} did not start: {why}\n{}",
                        member.name(),
                        ensemble.log_tails()
                    ),
                }
            }
            ensemble.leader().await;
            return ensemble;
        }
        panic!("a ZooKeeper ensemble found ports taken {PORT_ATTEMPTS} times in a row");
    }

    /// Member `i` (from 0; its `myid` is `i + 1`).
    ///
    /// # Panics
    ///
    /// If there is no such member.
    pub fn member(&self, i: usize) -> &ZkServer {
        self.members.get(i).unwrap_or_else(|| {
            panic!(
                "the ensemble has {} members, not {}",
                self.members.len(),
                i + 1
            )
        })
    }

    /// All members, in order of `myid`.
    pub fn members(&self) -> &[ZkServer] {
        &self.members
    }

    /// How many members the ensemble has, running or not.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the ensemble has no members; never, since [`start`](Self::start) refuses that.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `127.0.0.1:P1,127.0.0.1:P2,...`: every member's client address, for a client that fails
    /// over between them.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(ZkServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the member that `srvr` reports as `Mode: leader`, waiting for an election
    /// in progress (after the leader was killed or paused) to end.
    ///
    /// # Panics
    ///
    /// If no running member is the leader within 30 s.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let mut modes = Vec::with_capacity(self.members.len());
            for (i, member) in self.members.iter().enumerate() {
                let mode = if member.pid().is_some() {
                    member.mode().await
                } else {
                    Some("down".to_owned())
                };
                if mode.as_deref() == Some("leader") {
                    return i;
                }
                modes.push(mode.unwrap_or_else(|| "not serving".to_owned()));
            }
            if Instant::now() >= deadline {
                panic!(
                    "no ZooKeeper member was the leader within {STARTUP_TIMEOUT:?} (modes: {modes:?})\n{}",
                    self.log_tails()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until a leader is elected and every running member serves (a paused member never
    /// does: resume it first).
    ///
    /// # Panics
    ///
    /// If that does not happen within 30 s.
    pub async fn wait_until_serving(&self) {
        self.leader().await;
        for member in &self.members {
            if member.pid().is_some() {
                member.wait_until_serving().await;
            }
        }
    }

    fn log_tails(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}:\n{}", m.name(), m.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The `zoo.cfg` of one server; `servers` holds an ensemble's `server.N=` lines, or nothing.
fn config(client_port: u16, data: &Path, servers: &str, options: &ZkOptions) -> String {
    let tick = ZkServer::TICK_TIME.as_millis();
    let min_session = options.min_session_timeout.as_millis();
    let max_session = options.max_session_timeout.as_millis();
    format!(
        "tickTime={tick}\n\
         minSessionTimeout={min_session}\n\
         maxSessionTimeout={max_session}\n\
         # Followers: 10 s to connect and sync to a leader, 3 s of silence before they drop it.\n\
         initLimit=50\n\
         syncLimit=15\n\
         dataDir={data}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         4lw.commands.whitelist=*\n\
         admin.enableServer=false\n\
         standaloneEnabled=true\n\
         reconfigEnabled=false\n\
         # Keys the config does not know become `zookeeper.*` system properties: no fsync (a\n\
         # SIGKILL keeps what was written), small log files, and a restart trusts a data\n\
         # directory with a log but no snapshot.\n\
         forceSync=no\n\
         preAllocSize=1024\n\
         snapshot.trust.empty=true\n\
         {servers}",
        data = data.display(),
    )
}

/// The `zoo.cfg` lines of a TLS client port: Netty (the only connection factory that speaks
/// TLS), PEM stores, and whether a client must show a certificate.
fn tls_config(port: u16, tls: &ZkTls) -> String {
    let client_auth = if tls.client_auth { "need" } else { "none" };
    format!(
        "secureClientPort={port}\n\
         secureClientPortAddress=127.0.0.1\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={key_store}\n\
         ssl.keyStore.type=PEM\n\
         ssl.trustStore.location={trust_store}\n\
         ssl.trustStore.type=PEM\n\
         ssl.clientAuth={client_auth}\n",
        key_store = tls.key_store.display(),
        trust_store = tls.trust_store.display(),
    )
}

/// A JAAS `Server` section that knows `users` by SASL DIGEST-MD5.
fn jaas_config(users: &[(String, String)]) -> String {
    let mut jaas =
        String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
    for (user, password) in users {
        let _ = write!(jaas, "\n  user_{user}=\"{password}\"");
    }
    jaas.push_str(";\n};\n");
    jaas
}

/// The `-cp` argument: [`CLASSPATH_VAR`] if set, else the server's jar (whose manifest names its
/// dependencies) or an older packaging's `lib/` directory, and an SLF4J binding to log with.
///
/// # Panics
///
/// If no ZooKeeper jar is found.
fn classpath() -> String {
    if let Ok(classpath) = std::env::var(CLASSPATH_VAR) {
        return classpath;
    }
    let mut jars: Vec<String> = Vec::new();
    if let Some(jar) = ZOOKEEPER_JARS.iter().find(|jar| Path::new(jar).is_file()) {
        jars.push((*jar).to_owned());
    } else if Path::new(ZOOKEEPER_LIB_DIR).is_dir() {
        jars.push(format!("{ZOOKEEPER_LIB_DIR}/*"));
    } else {
        panic!(
            "no ZooKeeper jar in {ZOOKEEPER_JARS:?} nor {ZOOKEEPER_LIB_DIR}: run \
             scripts/ensure-zookeeper, or set {CLASSPATH_VAR}"
        );
    }
    if Path::new(SLF4J_SIMPLE_JAR).is_file() {
        jars.push(SLF4J_SIMPLE_JAR.to_owned());
    }
    jars.extend(
        NETTY_JARS
            .iter()
            .filter(|jar| Path::new(jar).is_file())
            .map(|jar| (*jar).to_owned()),
    );
    jars.join(":")
}

/// Sends `word` to `addr` on a connection of its own and reads the answer until the server
/// closes the connection, within [`PROBE_TIMEOUT`].
async fn four_letter_word(addr: SocketAddr, word: &str) -> Result<String, String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        stream
            .write_all(word.as_bytes())
            .await
            .map_err(|e| format!("cannot send `{word}`: {e}"))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .await
            .map_err(|e| format!("cannot read the answer to `{word}`: {e}"))?;
        Ok(answer)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer to `{word}` within {PROBE_TIMEOUT:?}")),
    }
}

/// The `Mode:` of a `srvr` answer; absent while the server does not serve ("This ZooKeeper
/// instance is not currently serving requests").
fn srvr_mode(srvr: &str) -> Option<&str> {
    srvr.lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::srvr_mode;

    #[test]
    fn srvr_mode_is_read_only_from_a_serving_answer() {
        let serving = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\n\
                       Node count: 5\n";
        assert_eq!(srvr_mode(serving), Some("follower"));
        let idle = "This ZooKeeper instance is not currently serving requests\n";
        assert_eq!(srvr_mode(idle), None);
    }
}
