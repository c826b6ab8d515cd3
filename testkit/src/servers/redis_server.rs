//! A throwaway `redis-server` on a free port of 127.0.0.1, with its own directory and no
//! persistence, that tests can kill, freeze, restart and inspect.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::probe::info_field;
use super::server::{self, Answer, LaunchError, ServerKind, ServerProcess, PORT_ATTEMPTS};
use super::{ports, resp};

/// The environment variable naming the `redis-server` binary; `redis-server` on `PATH` otherwise.
const BINARY_VAR: &str = "LEASEHOLD_REDIS_SERVER";
const LOG_FILE: &str = "redis.log";
/// The config file written from [`RedisOptions::config_file`], in the server's directory.
const CONFIG_FILE: &str = "redis.conf";
/// Bounds every harness call on a running server: connecting, SCAN, INFO, signals taking effect.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A `redis-server`: one process, a throwaway directory (its log goes with it: panic messages
/// carry its tail).
static REDIS: ServerKind = ServerKind {
    log_file: LOG_FILE,
    data_dir: None,
    port_taken: "Address already in use",
    forks: false,
    signal_timeout: CALL_TIMEOUT,
    poll: Duration::from_millis(10),
    leftovers: None,
};

/// Extra settings for [`RedisServer::start_with`].
///
/// ```no_run
/// use leasehold_testkit::servers::{RedisOptions, RedisServer};
///
/// # async fn demo() {
/// let redis = RedisServer::start_with(
///     RedisOptions::default().arg("--maxmemory-policy").arg("noeviction"),
/// )
/// .await;
/// # drop(redis);
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisOptions {
    args: Vec<OsString>,
    config_file: Option<String>,
    startup_timeout: Duration,
    /// Options that name a port of their own (`--cluster-port`, `--tls-port`).
    port_flags: Vec<&'static str>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            args: Vec::new(),
            config_file: None,
            startup_timeout: Duration::from_secs(10),
            port_flags: Vec::new(),
        }
    }
}

impl RedisOptions {
    /// Appends one command-line argument, after the harness's own (`--port`, `--bind`, `--save ""`,
    /// `--appendonly no`, `--dir`, `--enable-debug-command yes`), so it can override them.
    /// No arguments by default.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several command-line arguments, as [`arg`](Self::arg) does.
    pub fn args<I>(mut self, args: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts the server with a config file holding `contents`: it is written to `redis.conf` in
    /// the server's directory before every start and restart, and passed as the first argument,
    /// ahead of the harness's own, so the server can rewrite it (`CONFIG REWRITE`, or a sentinel
    /// saving its state; pass `--sentinel` with [`arg`](Self::arg) to run one). No file by
    /// default.
    pub fn config_file(mut self, contents: impl Into<String>) -> Self {
        self.config_file = Some(contents.into());
        self
    }

    /// Gives the server a second port of its own through the option `flag`, e.g.
    /// `"--cluster-port"` (a cluster's bus port: the default, the client port + 10000, may be
    /// beyond 65535 or taken) or `"--tls-port"`. The port is a free one picked afresh for every
    /// start attempt, as the client port is, so a port found taken is not tried again; it is
    /// kept across restarts, and [`RedisServer::port_of`] tells it. The option goes after the
    /// harness's own arguments. None by default.
    pub fn port_arg(mut self, flag: &'static str) -> Self {
        self.port_flags.push(flag);
        self
    }

    /// How long a start or restart may take until the server answers. Defaults to 10 s.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }
}

/// A `redis-server` child process on 127.0.0.1, with no persistence and a temporary directory.
///
/// Dropping it kills and reaps the process and removes the directory, also while a test panics.
/// All methods take `&self`, so a server can be shared (`Arc`) with a task that injects faults.
///
/// ```no_run
/// use leasehold_testkit::servers::RedisServer;
///
/// # async fn demo() {
/// let redis = RedisServer::start().await;
/// let mut conn = redis.conn().await;
/// let _: () = redis::cmd("SET").arg("k").arg("v").query_async(&mut conn).await.unwrap();
/// redis.restart().await; // same port, empty data
/// assert!(redis.keys("*").await.is_empty());
/// # }
/// ```
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    /// The ports of [`RedisOptions::port_arg`], flag by flag.
    flag_ports: Vec<(&'static str, u16)>,
    options: RedisOptions,
    process: ServerProcess,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    ///
    /// # Panics
    ///
    /// If `redis-server` cannot be run, exits, or does not answer within 10 s; the message
    /// includes the tail of its log.
    pub async fn start() -> Self {
        Self::start_with(RedisOptions::default()).await
    }

    /// Starts a server with extra arguments and waits until it answers.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start), within the options' startup timeout.
    pub async fn start_with(options: RedisOptions) -> Self {
        Self::start_on(options, ports::free_port).await
    }

    /// [`start_with`](Self::start_with), taking every port it tries from `next_port`: each
    /// attempt takes a client port, then one for each [`RedisOptions::port_arg`] in order.
    async fn start_on(options: RedisOptions, mut next_port: impl FnMut() -> u16) -> Self {
        let dir = server::fresh_dir(&std::env::temp_dir(), "redis");
        let mut server = Self {
            port: 0,
            flag_ports: Vec::new(),
            options,
            process: ServerProcess::new(&REDIS, label(0), dir),
        };
        for _ in 0..PORT_ATTEMPTS {
            // Whichever port was taken, the next attempt tries new ones all round, and starts
            // from an empty directory (a cluster node saved its `nodes.conf` before it failed).
            empty_dir_but_log(server.dir());
            server.port = next_port();
            server.flag_ports = (server.options.port_flags.iter())
                .map(|&flag| (flag, next_port()))
                .collect();
            server.process.set_label(label(server.port));
            match server.launch().await {
                Ok(()) => return server,
                Err(LaunchError::PortTaken) => continue,
                Err(LaunchError::Failed(why)) => {
                    // Dropping the server on the way out removes its directory.
                    panic!(
                        "{} did not start: {why}\n{}",
                        server.process.label(),
                        server.log_tail()
                    );
                }
            }
        }
        panic!(
            "redis-server found a port taken by the time it bound, {PORT_ATTEMPTS} times with \
             new free ports\n{}",
            server.log_tail()
        );
    }

    /// Starts `n` servers in parallel, each as [`start`](Self::start) does.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start), if any of them fails (the others are stopped); outside a tokio
    /// runtime.
    pub async fn start_many(n: usize) -> Vec<Self> {
        let mut starting = tokio::task::JoinSet::new();
        for index in 0..n {
            starting.spawn(async move { (index, Self::start().await) });
        }
        let mut servers: Vec<Option<Self>> = (0..n).map(|_| None).collect();
        while let Some(started) = starting.join_next().await {
            match started {
                Ok((index, server)) => servers[index] = Some(server),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("starting a redis-server was cancelled: {e}"),
            }
        }
        servers
            .into_iter()
            .map(|s| s.expect("every index is filled"))
            .collect()
    }

    /// `redis://127.0.0.1:PORT`, for `redis::Client::open` or a `leasehold` locker.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port the server listens on; it stays the same across [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port given with the option `flag` by [`RedisOptions::port_arg`]; it stays the same
    /// across [`restart`](Self::restart).
    pub fn port_of(&self, flag: &str) -> Option<u16> {
        (self.flag_ports.iter())
            .find(|(f, _)| *f == flag)
            .map(|&(_, port)| port)
    }

    /// `127.0.0.1:PORT`, e.g. as the target of a [`TcpProxy`](super::TcpProxy).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's working directory, holding its log (`redis.log`); removed on drop.
    pub fn dir(&self) -> &Path {
        self.process.dir()
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

    /// Stops the server gracefully (SIGTERM, nothing saved) and waits until it has exited, for at
    /// most 5 s before it is SIGKILLed. Does nothing if it is not running; it can be
    /// [`restart`](Self::restart)ed afterwards.
    ///
    /// # Panics
    ///
    /// If the process does not exit even after SIGKILL.
    pub fn stop(&self) {
        self.process.stop(libc::SIGTERM, Duration::from_secs(5));
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered, as during
    /// a long GC pause or a hung host. Returns once the process is stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running, or not stopped within 10 s.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Thaws a server frozen by [`pause`](Self::pause) with SIGCONT. Returns once it runs again.
    ///
    /// # Panics
    ///
    /// If the server is not running, or still stopped after 10 s.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Kills the server (if it runs) and starts it again on the same port with empty data (the
    /// directory is emptied but for the log), then waits until it answers. Connections made
    /// before are broken.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start); also if the port stays taken by another process.
    pub async fn restart(&self) {
        self.kill9();
        empty_dir_but_log(self.dir());
        self.relaunch().await;
    }

    /// Kills the server (if it runs) and starts it again on the same port from what it left
    /// in its directory: the last RDB snapshot (`SAVE`, `BGSAVE`), or its AOF when started
    /// with `--appendonly yes`. A crash and a supervisor's restart, with persistence on.
    ///
    /// # Panics
    ///
    /// As [`restart`](Self::restart); also if the server cannot load its files.
    pub async fn restart_from_disk(&self) {
        self.kill9();
        self.relaunch().await;
    }

    async fn relaunch(&self) {
        self.process
            .relaunch(self.options.startup_timeout, || self.launch())
            .await;
    }

    /// A client for [`url`](Self::url), for raw access in assertions.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("the harness's redis URL is valid")
    }

    /// A new multiplexed connection, with the `redis` crate's default timeouts (1 s to connect,
    /// 500 ms per response).
    ///
    /// # Panics
    ///
    /// If the server cannot be connected to within 10 s.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        match tokio::time::timeout(
            CALL_TIMEOUT,
            self.client().get_multiplexed_async_connection(),
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => panic!("cannot connect to redis-server at {}: {e}", self.addr()),
            Err(_) => panic!(
                "redis-server at {} did not accept a connection within {CALL_TIMEOUT:?}",
                self.addr()
            ),
        }
    }

    /// All keys matching the glob `pattern`, sorted, found with SCAN (not KEYS, which would block
    /// a large database): for "nothing left behind" assertions.
    ///
    /// # Panics
    ///
    /// If the server does not answer within 10 s in all.
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        let scan = async {
            let mut conn = self.conn().await;
            let mut keys = Vec::new();
            let mut cursor = 0_u64;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("SCAN on redis-server at {} failed: {e}", self.addr())
                    });
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            keys.sort();
            keys.dedup(); // SCAN may return a key twice
            keys
        };
        tokio::time::timeout(CALL_TIMEOUT, scan)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "SCAN of redis-server at {} did not finish within {CALL_TIMEOUT:?}",
                    self.addr()
                )
            })
    }

    /// A numeric field of `INFO everything`, e.g. `"total_commands_processed"` or
    /// `"connected_clients"`.
    ///
    /// For a field made of `k=v` pairs, `"cmdstat_set"` is its first pair (`calls`) and
    /// `"cmdstat_set.failed_calls"` names another; `cmdstat_*`, `errorstat_*` and `db<N>` fields
    /// that Redis leaves out (never called, no errors, empty database) read as 0.
    ///
    /// The probe is one INFO command on a connection of its own, so `total_commands_processed`
    /// counts it once and nothing else (INFO is counted after it reports).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 10 s, or the field is missing or not a number.
    pub async fn info_stat(&self, name: &str) -> u64 {
        let info = match resp::command(self.addr(), &["INFO", "everything"], CALL_TIMEOUT).await {
            Ok(resp::Reply::Text(info)) => info,
            Ok(resp::Reply::Error(e)) => {
                panic!("INFO on redis-server at {} failed: {e}", self.addr())
            }
            Err(e) => panic!("INFO on redis-server at {} failed: {e}", self.addr()),
        };
        parse_info_stat(&info, name)
            .unwrap_or_else(|why| panic!("INFO of redis-server at {}: {why}", self.addr()))
    }

    /// How many clients the server counts as subscribed to `channel` (`PUBSUB NUMSUB`).
    ///
    /// # Panics
    ///
    /// If the server does not answer within 2 s.
    pub async fn subscribers(&self, channel: &str) -> u64 {
        let mut numsub = redis::cmd("PUBSUB");
        numsub.arg("NUMSUB").arg(channel);
        let (_, n): (String, u64) = super::probe::query(self.addr(), &numsub)
            .await
            .unwrap_or_else(|why| panic!("PUBSUB NUMSUB on {}: {why}", self.addr()));
        n
    }

    /// The last lines of the server's log, framed for a panic message.
    pub(crate) fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// Runs `redis-server` on the server's port until it answers as itself, or says why not.
    async fn launch(&self) -> Result<(), LaunchError> {
        let dir = self.dir();
        // The log is kept across restarts; judge this launch by what it appends.
        let log_start = self.process.log_len();
        let binary = std::env::var_os(BINARY_VAR).unwrap_or_else(|| "redis-server".into());
        let mut cmd = Command::new(&binary);
        if let Some(contents) = &self.options.config_file {
            // In the writable directory: a rewrite replaces the file through a temporary sibling.
            let config = dir.join(CONFIG_FILE);
            fs::write(&config, contents).map_err(|e| {
                LaunchError::Failed(format!("cannot write {}: {e}", config.display()))
            })?;
            cmd.arg(config);
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args([
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ])
            // DEBUG SLEEP and friends let tests make the server slow without freezing it.
            .args(["--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(dir);
        for (flag, port) in &self.flag_ports {
            cmd.arg(flag).arg(port.to_string());
        }
        cmd.args(&self.options.args)
            .current_dir(dir)
            .stdin(Stdio::null());
        self.process.log_to(&mut cmd).map_err(LaunchError::Failed)?;
        let pid = self.process.spawn(cmd).map_err(|e| {
            let hint = if e.kind() == io::ErrorKind::NotFound {
                format!(" (install redis-server, or name the binary in {BINARY_VAR})")
            } else {
                String::new()
            };
            LaunchError::Failed(format!(
                "cannot run {}: {e}{hint}",
                binary.to_string_lossy()
            ))
        })?;
        let addr = self.addr();
        self.process
            .wait_launched(log_start, self.options.startup_timeout, || {
                answer(addr, pid)
            })
            .await
    }
}

/// What messages call the `redis-server` on `port`.
fn label(port: u16) -> String {
    format!("redis-server on port {port}")
}

/// Who answers `INFO server` on `addr`: the server of process `pid`, another one, or nobody yet.
async fn answer(addr: SocketAddr, pid: u32) -> Answer {
    match resp::command(addr, &["INFO", "server"], Duration::from_millis(500)).await {
        Ok(resp::Reply::Text(info)) => {
            if info_field(&info, "process_id") == Some(pid.to_string().as_str()) {
                Answer::Ours
            } else {
                Answer::Theirs
            }
        }
        // Password set through the options: it is up, but will not say who it is.
        Ok(resp::Reply::Error(e)) if e.starts_with("NOAUTH") => Answer::Ours,
        // LOADING, connection refused, ...: not ready yet.
        Ok(resp::Reply::Error(e)) => Answer::NotYet(e),
        Err(e) => Answer::NotYet(e.to_string()),
    }
}

/// Empties the server's directory but for its log, for a restart with empty data.
fn empty_dir_but_log(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name() != LOG_FILE {
            let path = entry.path();
            let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
        }
    }
}

fn parse_info_stat(info: &str, name: &str) -> Result<u64, String> {
    let (field, pair) = match name.split_once('.') {
        Some((field, pair)) => (field, Some(pair)),
        None => (name, None),
    };
    let Some(value) = info_field(info, field) else {
        let omitted_when_zero = field.starts_with("cmdstat_")
            || field.starts_with("errorstat_")
            || field
                .strip_prefix("db")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        return if omitted_when_zero {
            Ok(0)
        } else {
            Err(format!("no field `{field}`"))
        };
    };
    let number = if value.contains('=') {
        let mut pairs = value.split(',').filter_map(|kv| kv.split_once('='));
        let found = match pair {
            Some(pair) => pairs.find(|(k, _)| *k == pair),
            None => pairs.next(),
        };
        found
            .ok_or_else(|| {
                format!(
                    "field `{field}` ({value}) has no `{}`",
                    pair.unwrap_or("pair")
                )
            })?
            .1
    } else if let Some(pair) = pair {
        return Err(format!(
            "field `{field}` ({value}) has no `{pair}`: it is not made of k=v pairs"
        ));
    } else {
        value
    };
    number
        .parse()
        .map_err(|_| format!("`{name}` is `{number}`, not a whole number"))
}

#[cfg(test)]
mod tests {
    use super::{parse_info_stat, ports, RedisOptions, RedisServer};

    /// A cluster node whose bus port is found taken is tried again on new ports, the bus port
    /// included (CI once saw all five attempts fail on one bus port, picked once for all).
    #[tokio::test]
    async fn a_bus_port_found_taken_is_replaced_on_the_next_attempt() {
        let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let taken = holder.local_addr().expect("a bound address").port();
        let mut handed_out = Vec::new();
        let options = RedisOptions::default()
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .port_arg("--cluster-port");
        let server = RedisServer::start_on(options, || {
            // The first attempt's client port is free, its bus port is not.
            let port = if handed_out.len() == 1 {
                taken
            } else {
                ports::free_port()
            };
            handed_out.push(port);
            port
        })
        .await;
        let log = std::fs::read_to_string(server.dir().join(super::LOG_FILE)).unwrap_or_default();
        assert!(
            log.contains(&format!("{taken}: bind: Address already in use")),
            "the first attempt did not try the taken bus port {taken}; log:\n{log}"
        );
        assert_eq!(
            handed_out.len(),
            4,
            "two attempts of two ports each: {handed_out:?}"
        );
        let bus = server
            .port_of("--cluster-port")
            .expect("the options ask for a bus port");
        assert_eq!(
            bus, handed_out[3],
            "the second attempt's bus port is its own"
        );
        tokio::net::TcpStream::connect(("127.0.0.1", bus))
            .await
            .unwrap_or_else(|e| panic!("the node does not listen on its bus port {bus}: {e}"));
        assert_eq!(
            log.matches("No cluster configuration found").count(),
            2,
            "each attempt starts from an empty directory, not the nodes.conf of the last; log:\n{log}"
        );
    }

    const INFO: &str = "# Stats\r\ntotal_commands_processed:42\r\nused_memory_human:1.2M\r\n\
                        # Commandstats\r\ncmdstat_set:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=1\r\n\
                        # Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=100\r\n";

    #[test]
    fn plain_and_paired_fields() {
        assert_eq!(parse_info_stat(INFO, "total_commands_processed"), Ok(42));
        assert_eq!(parse_info_stat(INFO, "cmdstat_set"), Ok(3));
        assert_eq!(parse_info_stat(INFO, "cmdstat_set.failed_calls"), Ok(1));
        assert_eq!(parse_info_stat(INFO, "db0.expires"), Ok(1));
    }

    #[test]
    fn omitted_counters_are_zero() {
        assert_eq!(parse_info_stat(INFO, "cmdstat_get"), Ok(0));
        assert_eq!(parse_info_stat(INFO, "errorstat_ERR"), Ok(0));
        assert_eq!(parse_info_stat(INFO, "db3"), Ok(0));
    }

    #[test]
    fn unknown_or_non_numeric_fields_are_errors() {
        assert!(parse_info_stat(INFO, "total_command_processed").is_err());
        assert!(parse_info_stat(INFO, "used_memory_human").is_err());
        assert!(parse_info_stat(INFO, "cmdstat_set.usec_per_call").is_err());
        assert!(parse_info_stat(INFO, "cmdstat_set.nope").is_err());
    }
}
