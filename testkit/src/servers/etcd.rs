//! Throwaway etcd servers on free ports of 127.0.0.1: a single-member [`EtcdServer`], or an
//! [`EtcdCluster`] of members that elect a leader; each in a directory of its own, run as an
//! `etcd` child the harness owns, so tests can kill, freeze, restart and inspect it.
//!
//! The servers come from Debian's `etcd-server` package (`scripts/ensure-etcd` installs it).
//! Settings are made for tests: a heartbeat of [`EtcdServer::HEARTBEAT`] and an election timeout
//! of [`EtcdServer::ELECTION_TIMEOUT`], so leases may be as short as 1 s and a new leader is
//! elected within about a second; probes go over plain HTTP to the client port (`/health`,
//! `/metrics`).
//!
//! ```no_run
//! use leasehold_testkit::servers::{EtcdCluster, EtcdServer};
//!
//! # async fn demo() {
//! let etcd = EtcdServer::start().await;
//! let endpoint = etcd.endpoint(); // http://127.0.0.1:PORT
//! etcd.pause(); // SIGSTOP: the process is alive but frozen
//! etcd.resume();
//! etcd.kill9();
//! etcd.restart().await; // same ports and directory: the keys and leases survive
//!
//! let cluster = EtcdCluster::start(3).await;
//! let leader = cluster.leader().await;
//! cluster.member(leader).kill9(); // the others elect a new leader
//! # drop(endpoint);
//! # }
//! ```

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ports;
use super::server::{self, Answer, LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};

/// The environment variable naming the `etcd` binary; `etcd` on `PATH` otherwise.
const ETCD_VAR: &str = "LEASEHOLD_ETCD_BIN";
const LOG_FILE: &str = "etcd.log";
const DATA_DIR: &str = "data";
/// How long a start or restart may take until the server serves, on a busy 2-core machine.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Bounds the waits for signals to take effect.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one HTTP probe may take; a paused server never answers.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
const POLL: Duration = Duration::from_millis(20);

/// An `etcd` member; a panicking test keeps its log.
static ETCD: ServerKind = ServerKind {
    log_file: LOG_FILE,
    data_dir: Some(DATA_DIR),
    port_taken: "address already in use",
    forks: false,
    signal_timeout: CALL_TIMEOUT,
    poll: POLL,
    leftovers: None,
};

/// One etcd server process on 127.0.0.1: a single-member cluster ([`EtcdServer::start`]) or a
/// member of an [`EtcdCluster`].
///
/// It keeps its directory (`data/`, `etcd.log`) across [`restart`](Self::restart)s, so keys and
/// leases survive them. Dropping it kills and reaps the process and removes the directory; while
/// a test panics the log is kept and its path printed. All methods take `&self`, so a server
/// can be shared (`Arc`) with a task that injects faults.
#[derive(Debug)]
pub struct EtcdServer {
    name: String,
    options: EtcdOptions,
    client_port: u16,
    peer_port: u16,
    /// `name=http://127.0.0.1:PEER,...`: every member of its cluster.
    initial_cluster: String,
    token: String,
    process: ServerProcess,
}

/// Settings of a single-member server that differ from the harness's: its Raft timing, which
/// also sets the shortest lease TTL it grants (`⌈1.5 × election timeout⌉` in whole seconds; a
/// client asking for less gets that), as an operator's flags may set them.
///
/// ```no_run
/// use std::time::Duration;
/// use leasehold_testkit::servers::{EtcdOptions, EtcdServer};
///
/// # async fn demo() {
/// // Leases of less than 5 s are granted 5 s.
/// let etcd = EtcdServer::start_with(
///     EtcdOptions::default()
///         .heartbeat(Duration::from_millis(100))
///         .election_timeout(Duration::from_secs(3)),
/// )
/// .await;
/// # drop(etcd);
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct EtcdOptions {
    heartbeat: Duration,
    election_timeout: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            heartbeat: EtcdServer::HEARTBEAT,
            election_timeout: EtcdServer::ELECTION_TIMEOUT,
        }
    }
}

impl EtcdOptions {
    /// The heartbeat interval (`--heartbeat-interval`, in whole milliseconds). Defaults to
    /// [`EtcdServer::HEARTBEAT`].
    pub fn heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// The election timeout (`--election-timeout`, in whole milliseconds; etcd wants at least
    /// 5 heartbeats). Defaults to [`EtcdServer::ELECTION_TIMEOUT`].
    pub fn election_timeout(mut self, timeout: Duration) -> Self {
        self.election_timeout = timeout;
        self
    }

    /// The shortest lease TTL the server grants, as etcd computes it from these settings:
    /// `1.5 × election timeout`, rounded down to whole heartbeats, then up to whole seconds.
    pub fn min_lease_ttl(&self) -> Duration {
        let heartbeat = self.heartbeat.as_millis().max(1);
        let ticks = self.election_timeout.as_millis() / heartbeat;
        let min = (3 * ticks / 2) * heartbeat;
        Duration::from_secs(u64::try_from(min.div_ceil(1000)).unwrap_or(u64::MAX))
    }
}

impl EtcdServer {
    /// The members' heartbeat interval.
    pub const HEARTBEAT: Duration = Duration::from_millis(50);
    /// The members' election timeout: a follower that hears no leader for this long starts an
    /// election. etcd's shortest lease TTL is 1.5 × this, rounded up to whole seconds: 1 s.
    pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(500);

    /// Starts a single-member cluster on free ports and waits until it serves (`/health`).
    ///
    /// # Panics
    ///
    /// If `etcd` cannot be found, or the server exits or does not serve within 30 s; the
    /// message includes the tail of its log.
    pub async fn start() -> Self {
        Self::start_with(EtcdOptions::default()).await
    }

    /// Starts a single-member cluster with `options` as [`start`](Self::start) does; they hold
    /// across [`restart`](Self::restart)s.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub async fn start_with(options: EtcdOptions) -> Self {
        for _ in 0..PORT_ATTEMPTS {
            let (client, peer) = (ports::free_port(), ports::free_port());
            let name = member_name();
            let cluster = format!("{name}=http://127.0.0.1:{peer}");
            let mut server = Self::create(name, client, peer, cluster);
            server.options = options.clone();
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
        panic!("etcd found each of {PORT_ATTEMPTS} free ports taken by the time it bound");
    }

    fn create(name: String, client_port: u16, peer_port: u16, initial_cluster: String) -> Self {
        let dir = server::fresh_dir(&std::env::temp_dir(), "etcd");
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, client_port));
        let label = format!("etcd member {name} at {addr}");
        Self {
            token: format!("{name}-cluster"),
            name,
            options: EtcdOptions::default(),
            client_port,
            peer_port,
            initial_cluster,
            process: ServerProcess::new(&ETCD, label, dir),
        }
    }

    /// `127.0.0.1:PORT`, the client port; it stays the same across [`restart`](Self::restart).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// `http://127.0.0.1:PORT`, the endpoint a client is given.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The member's name in its cluster (unique to this test binary).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's directory, holding `data/` and its log (`etcd.log`).
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
    /// clocks (lease expiry, elections) stand still, as in a long GC pause or on a hung host.
    /// Returns once the process is stopped.
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
    /// its directory, as a supervisor would after a crash: keys, leases and revisions survive.
    /// Waits until it serves, which for a cluster member takes a quorum of running members.
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

    /// Starts the server again after [`kill9`](Self::kill9) or [`stop`](Self::stop) without
    /// waiting for it to serve (a cluster member needs a quorum: start the others too, then
    /// [`wait_until_serving`](Self::wait_until_serving)).
    pub fn start_again(&self) {
        self.kill9();
        self.spawn();
    }

    /// Waits until the server serves clients again (after [`resume`](Self::resume), or a
    /// member's loss of quorum).
    ///
    /// # Panics
    ///
    /// If it is not running, or does not serve within 30 s.
    pub async fn wait_until_serving(&self) {
        self.process
            .wait_until_serving(STARTUP_TIMEOUT, || async {
                if self.healthy().await {
                    Ok(())
                } else {
                    Err("not healthy".to_owned())
                }
            })
            .await;
    }

    /// Whether `/health` says the member serves (it has a leader); false while it is down,
    /// paused, or without a quorum.
    pub async fn healthy(&self) -> bool {
        self.probe("GET", "/health", "")
            .await
            .is_ok_and(|body| body.contains(r#""health":"true""#))
    }

    /// Whether the member is the leader of its cluster (`etcd_server_is_leader 1`); `None`
    /// while it does not answer.
    pub async fn is_leader(&self) -> Option<bool> {
        let metrics = self.probe("GET", "/metrics", "").await.ok()?;
        metrics
            .lines()
            .find_map(|line| line.strip_prefix("etcd_server_is_leader "))
            .map(|v| v.trim() == "1")
    }

    /// One HTTP/1.1 request to the client port on a connection of its own; the body of the
    /// answer, or why there is none. For a server that runs (a test's reads of its keys and
    /// metrics): bounded by 20 s, which a loaded machine never reaches.
    pub async fn http(&self, method: &str, path: &str, body: &str) -> Result<String, String> {
        http(self.addr(), method, path, body, CALL_TIMEOUT).await
    }

    /// [`http`](Self::http) bounded by 500 ms, for the harness's probes: a paused server
    /// gives an error soon.
    async fn probe(&self, method: &str, path: &str, body: &str) -> Result<String, String> {
        http(self.addr(), method, path, body, PROBE_TIMEOUT).await
    }

    /// The last lines of the server's log, framed for a panic message.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    fn describe(&self) -> &str {
        self.process.label()
    }

    /// Spawns the server and waits until it serves, or says why not.
    async fn launch(&self) -> Result<(), LaunchError> {
        let log_start = self.process.log_len();
        self.spawn();
        self.wait_serving(log_start, STARTUP_TIMEOUT).await
    }

    /// Runs `etcd`, without waiting for it to serve.
    ///
    /// # Panics
    ///
    /// If `etcd` cannot be found or run.
    fn spawn(&self) {
        let etcd = std::env::var_os(ETCD_VAR).unwrap_or_else(|| "etcd".into());
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut cmd = Command::new(&etcd);
        cmd.arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.dir().join(DATA_DIR))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new"])
            .arg(format!(
                "--heartbeat-interval={}",
                self.options.heartbeat.as_millis()
            ))
            .arg(format!(
                "--election-timeout={}",
                self.options.election_timeout.as_millis()
            ))
            .args(["--logger=zap", "--log-outputs=stderr", "--log-level=warn"])
            // Debian's package may set these for its own service; ours are on the command line.
            .env_remove("ETCD_DATA_DIR")
            .env_remove("ETCD_NAME")
            .current_dir(self.dir())
            .stdin(Stdio::null());
        if let Err(why) = self.process.log_to(&mut cmd) {
            panic!("{why}");
        }
        if let Err(e) = self.process.spawn(cmd) {
            let hint = if e.kind() == io::ErrorKind::NotFound {
                format!(" (run scripts/ensure-etcd, or name the binary in {ETCD_VAR})")
            } else {
                String::new()
            };
            panic!(
                "cannot run {} for {}: {e}{hint}",
                etcd.to_string_lossy(),
                self.describe()
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

    /// Who answers on the client port: this member, a member of another cluster, or nobody yet.
    async fn answer(&self) -> Answer {
        if !self.healthy().await {
            return Answer::NotYet("not healthy".to_owned());
        }
        // Is it ours? Another server on the port would list other members.
        match self.probe("POST", "/v3/cluster/member/list", "{}").await {
            Ok(members) if members.contains(&format!("\"name\":\"{}\"", self.name)) => Answer::Ours,
            Ok(_) => Answer::Theirs,
            Err(why) => Answer::NotYet(format!("member list: {why}")),
        }
    }
}

/// An etcd cluster of [`EtcdServer`] members on 127.0.0.1, each with its own directory and
/// client and peer ports.
///
/// Members are indexed from 0 ([`member`](Self::member)). Faults are injected through the
/// members ([`EtcdServer::kill9`], [`EtcdServer::pause`], [`EtcdServer::restart`], ...).
/// Dropping the cluster kills every member.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<EtcdServer>,
}

impl EtcdCluster {
    /// Starts `n` members (3 or 5 for a quorum that survives a loss; `n >= 1`) together and
    /// waits until a leader is elected and every member serves.
    ///
    /// # Panics
    ///
    /// If any member exits or does not serve within 30 s, or no leader is elected; the message
    /// includes the tail of every member's log.
    pub async fn start(n: usize) -> Self {
        assert!(n >= 1, "a cluster needs at least one member");
        'attempt: for _ in 0..PORT_ATTEMPTS {
            let ports: Vec<(String, u16, u16)> = (0..n)
                .map(|_| (member_name(), ports::free_port(), ports::free_port()))
                .collect();
            let initial = ports
                .iter()
                .map(|(name, _, peer)| format!("{name}=http://127.0.0.1:{peer}"))
                .collect::<Vec<_>>()
                .join(",");
            let token = format!("{}-cluster", ports[0].0);
            let members: Vec<EtcdServer> = ports
                .into_iter()
                .map(|(name, client, peer)| {
                    let mut member = EtcdServer::create(name, client, peer, initial.clone());
                    member.token = token.clone();
                    member
                })
                .collect();
            let cluster = Self { members };
            for member in &cluster.members {
                member.spawn();
            }
            // The members start together; waiting for each in turn costs no more than the
            // slowest.
            for member in &cluster.members {
                match member.wait_serving(0, STARTUP_TIMEOUT).await {
                    Ok(()) => {}
                    Err(LaunchError::PortTaken) => continue 'attempt,
                    Err(LaunchError::Failed(why)) => panic!(
                        "{} did not start: {why}\n{}",
                        member.describe(),
                        cluster.log_tails()
                    ),
                }
            }
            cluster.leader().await;
            return cluster;
        }
        panic!("an etcd cluster found ports taken {PORT_ATTEMPTS} times in a row");
    }

    /// Member `i` (from 0).
    ///
    /// # Panics
    ///
    /// If there is no such member.
    pub fn member(&self, i: usize) -> &EtcdServer {
        self.members.get(i).unwrap_or_else(|| {
            panic!(
                "the cluster has {} members, not {}",
                self.members.len(),
                i + 1
            )
        })
    }

    /// All members, in order.
    pub fn members(&self) -> &[EtcdServer] {
        &self.members
    }

    /// How many members the cluster has, running or not.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no members; never, since [`start`](Self::start) refuses that.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Every member's endpoint (`http://127.0.0.1:PORT`), for a client that fails over.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(EtcdServer::endpoint).collect()
    }

    /// The index of the member that says it leads, waiting for an election in progress (after
    /// the leader was killed or paused) to end.
    ///
    /// # Panics
    ///
    /// If no running member is the leader within 30 s.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let mut seen = Vec::with_capacity(self.members.len());
            for (i, member) in self.members.iter().enumerate() {
                let leads = if member.pid().is_some() {
                    member.is_leader().await
                } else {
                    None
                };
                if leads == Some(true) {
                    return i;
                }
                seen.push(leads);
            }
            if Instant::now() >= deadline {
                panic!(
                    "no etcd member was the leader within {STARTUP_TIMEOUT:?} (is_leader: \
                     {seen:?})\n{}",
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
            .map(|m| format!("{}:\n{}", m.describe(), m.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A member name unique to this test binary.
fn member_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "lh-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One HTTP/1.1 exchange on a connection of its own, within `bound`: the body of a
/// `200` answer.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    bound: Duration,
) -> Result<String, String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("cannot send {method} {path}: {e}"))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|e| format!("cannot read the answer to {method} {path}: {e}"))?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("no HTTP answer to {method} {path}"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!(
                "{method} {path}: {}",
                head.lines().next().unwrap_or("")
            ));
        }
        Ok(body.to_owned())
    };
    match tokio::time::timeout(bound, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer to {method} {path} within {bound:?}")),
    }
}
