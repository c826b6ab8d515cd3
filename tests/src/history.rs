//! Histories of lock holders that run as separate OS processes, and the checker that judges them.
//!
//! Worker processes (the `history_worker` binary) take locks in a loop and log every step with
//! `CLOCK_MONOTONIC` times, which compare across processes of one machine; the test logs the
//! faults it injects in the same clock. [`History::check`] then fails a run on holders whose
//! validity windows overlap (two readers of a read-write lock may; a multi-key hold counts on
//! each of its keys), fences out of real-time order (one rule for every primitive: writers,
//! readers, permits, leader terms, each key of a multi-key hold), readers whose fence is not
//! between the writers before and after them, stale writes that the fenced resource accepted,
//! fair locks granted out of the
//! order of arrival, calls that took longer than their bound, leases that came back after
//! being reported lost, and workers that hung.
//!
//! ```no_run
//! use std::time::Duration;
//! use leasehold_tests::harness::RedisServer;
//! use leasehold_tests::history::{Run, WorkerSpec};
//!
//! # async fn demo() {
//! let (locks, resource) = (RedisServer::start().await, RedisServer::start().await);
//! let mut run = Run::new("example");
//! let spec = WorkerSpec::new(&locks.url(), &resource.url()).duration(Duration::from_secs(3));
//! for _ in 0..3 {
//!     run.spawn(&spec);
//! }
//! run.wait_all(Duration::from_secs(20)).await;
//! let report = run.history().check();
//! assert!(report.violations.is_empty(), "{report}");
//! # }
//! ```
//!
//! # The log
//!
//! One event per line, `T EVENT FIELDS...`, `T` in nanoseconds of `CLOCK_MONOTONIC`; each line
//! is written with a single `write` on a file opened for appending, so a worker killed with
//! SIGKILL leaves whole lines. A *hold* is one acquisition, named `worker.task.n`.
//!
//! | event | fields | meaning |
//! | --- | --- | --- |
//! | `start` | id pid lease_ms wait_ms op_ms \[tasks fair\] | the worker's settings (fair 1/0) |
//! | `inv` | hold keys \[mode\] | acquire invoked; keys comma-separated (one, or a `lock_all`'s as named), each as [`encode_key`] writes it; mode `x` exclusive (the default), `r` read side, `w` write side, `pN` N permits of a semaphore (a `sem` worker's holds take 1 without it) |
//! | `ok` | hold fence validity_us \[fences\] | acquire returned a guard (fence: of the first key; `-` for an unfenced lock, which has none); its validity budget; for several keys, each key's fence, comma-separated, in the keys' order |
//! | `sem` | permits | the worker takes permits of semaphores of this many, not locks (`--permits`) |
//! | `ldr` | | the worker campaigns for leader elections named by the keys, not locks (`--leader`); a hold is a leadership, its fence the term |
//! | `aerr` | hold code | acquire failed (`lock_busy`, `lock_unavailable`, ...; `hung` when the worker gave up on it past its bound) |
//! | `chk` | hold 1/0 | the task asked `is_held()` (time taken before asking) |
//! | `h` | hold | the sampler thread saw `is_held()` true (time taken before asking) |
//! | `nh` | hold | the sampler first saw it false |
//! | `rz` | hold | the sampler saw it true again after false: a resurrected lease |
//! | `win` | hold fence 1/0 | a write to the fenced resource invoked; 1 = after a true `chk`, 0 = blind |
//! | `wok` | hold 1/0 | the resource accepted (1) or refused (0) it |
//! | `werr` | hold | the write failed |
//! | `lost` | hold | the holder noticed the loss and stops using the lock |
//! | `blk` / `blkend` | hold | the worker blocks its own Tokio runtime (`std::thread::sleep`) |
//! | `rel` | hold 1/0 | release invoked; 1 when `is_held()` was true just before |
//! | `rok` / `rlost` / `runav` / `rerr` | hold | release returned Ok / Lost / Unavailable / other |
//! | `end` | | the worker finished its run |
//!
//! The bracketed fields are newer: logs without them still parse (one exclusive key, `tasks`
//! unknown, not fair).
//!
//! The test's `faults.log` holds `T fault KIND TARGET` and `T heal KIND TARGET`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Display, Write as _};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// The clock and the log
// ---------------------------------------------------------------------------------------------

/// Nanoseconds of `CLOCK_MONOTONIC`: comparable between processes of one machine (and the
/// clock `std::time::Instant`, hence leasehold's lease validity, is measured on under Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An append-only event log shared by the threads of one process. Each event is one line,
/// written with one `write` call.
#[derive(Debug)]
pub struct EventLog {
    file: Mutex<File>,
}

impl EventLog {
    /// Creates (or appends to) the log at `path`.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventLog {
            file: Mutex::new(file),
        })
    }

    /// Logs `event` with `fields` at time `t` (from [`monotonic_ns`]). Fields must not contain
    /// spaces or newlines.
    pub fn at(&self, t: u64, event: &str, fields: &[&dyn Display]) {
        let mut line = format!("{t} {event}");
        for field in fields {
            let _ = write!(line, " {field}");
        }
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk must not take the run down; the checker sees the gap.
        let _ = file.write_all(line.as_bytes());
    }

    /// Logs `event` now; returns the time it logged.
    pub fn now(&self, event: &str, fields: &[&dyn Display]) -> u64 {
        let t = monotonic_ns();
        self.at(t, event, fields);
        t
    }
}

// ---------------------------------------------------------------------------------------------
// What a worker does
// ---------------------------------------------------------------------------------------------

/// The settings of one `history_worker` process; [`WorkerSpec::to_args`] and
/// [`WorkerSpec::from_args`] carry it over the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct WorkerSpec {
    /// The servers the locks are taken through, as [`servers`](Self::servers) says.
    pub urls: Vec<String>,
    /// What `urls` are.
    pub servers: LockServers,
    /// The Redis server that holds the fenced resource (never faulted by the tests).
    pub resource_url: String,
    /// The lock keys; each acquisition picks one at random.
    pub keys: Vec<String>,
    /// The locker's key prefix.
    pub prefix: String,
    /// Tasks per process taking locks concurrently (more than one exercises the local queue
    /// and the handover without a round trip).
    pub tasks: usize,
    /// How long the worker runs; it finishes the current hold, then exits.
    pub duration: Duration,
    /// The lease of every acquisition.
    pub lease: Duration,
    /// How long an acquire waits for a busy lock.
    pub wait: Duration,
    /// The locker's bound on one Redis call.
    pub op_timeout: Duration,
    /// How long a hold lasts (it writes `writes` times, spread over it).
    pub hold: Duration,
    /// Writes to the fenced resource per hold, after the first one made right after acquiring.
    pub writes: u32,
    /// The longest random pause between two holds of one task.
    pub gap: Duration,
    /// Block the Tokio runtime for this long in some holds (scenario 5); zero for never.
    pub block: Duration,
    /// Block in every `block_every`-th hold of a task.
    pub block_every: u32,
    /// Run on a current-thread runtime (a block then stops everything, watchdog included).
    pub current_thread: bool,
    /// Take the locks with `fair(true)` (single-key holds; `lock_all` has no fair mode).
    pub fair: bool,
    /// Read-write mode: `Some(p)` takes `p` % of the holds with `read_lock` (readers only
    /// check `is_held()`, they do not write) and the rest with `write_lock`; `None` takes
    /// every hold with `lock`.
    pub read_percent: Option<u32>,
    /// Multi-key mode: each hold takes `lock_all` of this many distinct keys of `keys`,
    /// picked at random and named in random order, and its writes are transfers between the
    /// wallets of its first two keys (see [`FencedResource::transfer`]); 0 takes one key with
    /// `lock`.
    pub multi: usize,
    /// Take one permit of a semaphore of this many for each key instead of the lock; 0 for
    /// locks. Holds then make no writes (permit holders share the resource), the checker
    /// counts holders instead of looking for overlaps, and judges each holder's fence by the
    /// rule of every fence (above every fence of the semaphore handed out before).
    pub permits: u32,
    /// Campaign for the leadership of an election named by the key instead of taking the
    /// lock (`Locker::leader`); the hold's fence is the leader's term, and its writes carry
    /// it.
    pub leader: bool,
    /// The locker's `fence_ttl` (how long a fence counter outlives its last use); `None`
    /// for the library's default.
    pub fence_ttl: Option<Duration>,
}

/// What the `urls` of a [`WorkerSpec`] are: one deployment of one lock engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockServers {
    /// Redis servers: one URL is a single node, several the independent masters of a RedLock.
    Redis,
    /// Redis Sentinels, asked for the master of this name.
    Sentinel(String),
    /// Nodes of one Redis Cluster.
    Cluster,
    /// ZooKeeper servers (`host:port`, no scheme), with sessions of this timeout.
    ZooKeeper(Duration),
    /// Members of one etcd cluster (`http://host:port`), each locker's etcd lease of this TTL.
    Etcd(Duration),
    /// One PostgreSQL database (`postgres://user@host:port/db`).
    Postgres,
}

impl LockServers {
    /// `redis`, `sentinel:NAME`, `cluster`, `zookeeper:MS`, `etcd:MS` or `postgres`, as on
    /// the command line.
    fn to_arg(&self) -> String {
        match self {
            LockServers::Redis => "redis".to_owned(),
            LockServers::Sentinel(master) => format!("sentinel:{master}"),
            LockServers::Cluster => "cluster".to_owned(),
            LockServers::ZooKeeper(session) => format!("zookeeper:{}", session.as_millis()),
            LockServers::Etcd(ttl) => format!("etcd:{}", ttl.as_millis()),
            LockServers::Postgres => "postgres".to_owned(),
        }
    }

    fn from_arg(arg: &str) -> Result<Self, String> {
        match arg.split_once(':') {
            None if arg == "redis" => Ok(LockServers::Redis),
            None if arg == "cluster" => Ok(LockServers::Cluster),
            None if arg == "postgres" => Ok(LockServers::Postgres),
            Some(("sentinel", master)) if !master.is_empty() => {
                Ok(LockServers::Sentinel(master.to_owned()))
            }
            Some(("zookeeper", ms)) => ms
                .parse()
                .map(|ms| LockServers::ZooKeeper(Duration::from_millis(ms)))
                .map_err(|_| format!("--servers zookeeper:MS needs a whole number, not `{ms}`")),
            Some(("etcd", ms)) => ms
                .parse()
                .map(|ms| LockServers::Etcd(Duration::from_millis(ms)))
                .map_err(|_| format!("--servers etcd:MS needs a whole number, not `{ms}`")),
            _ => Err(format!(
                "--servers is `redis`, `sentinel:NAME`, `cluster`, `zookeeper:MS`, `etcd:MS` or \
                 `postgres`, not `{arg}`"
            )),
        }
    }
}

impl WorkerSpec {
    /// Defaults for a short scenario: one key, one task, lease 500 ms, wait 3 s, op timeout
    /// 300 ms, holds of 30 ms with 2 writes, runs 5 s.
    pub fn new(lock_url: &str, resource_url: &str) -> Self {
        WorkerSpec {
            urls: vec![lock_url.to_owned()],
            servers: LockServers::Redis,
            resource_url: resource_url.to_owned(),
            keys: vec!["hist".to_owned()],
            prefix: "leasehold".to_owned(),
            tasks: 1,
            duration: Duration::from_secs(5),
            lease: Duration::from_millis(500),
            wait: Duration::from_secs(3),
            op_timeout: Duration::from_millis(300),
            hold: Duration::from_millis(30),
            writes: 2,
            gap: Duration::from_millis(5),
            block: Duration::ZERO,
            block_every: 0,
            current_thread: true,
            fair: false,
            read_percent: None,
            multi: 0,
            permits: 0,
            leader: false,
            fence_ttl: None,
        }
    }

    /// Campaigns for the leadership of an election named by the key in each hold, instead
    /// of taking the lock.
    pub fn leader(mut self) -> Self {
        self.leader = true;
        self
    }

    /// Sets the locker's `fence_ttl`.
    pub fn fence_ttl(mut self, ttl: Duration) -> Self {
        self.fence_ttl = Some(ttl);
        self
    }

    /// Takes one permit of a semaphore of `permits` for each hold, instead of the lock.
    pub fn semaphore(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// Sets the lock server(s).
    pub fn urls(mut self, urls: &[String]) -> Self {
        self.urls = urls.to_vec();
        self
    }

    /// Takes the locks through Redis Sentinel: `sentinels` are the sentinels' URLs, `master`
    /// the name they know the master by.
    pub fn sentinel(mut self, sentinels: &[String], master: &str) -> Self {
        self.urls = sentinels.to_vec();
        self.servers = LockServers::Sentinel(master.to_owned());
        self
    }

    /// Takes the locks on a Redis Cluster reached through any of `nodes`.
    pub fn cluster(mut self, nodes: &[String]) -> Self {
        self.urls = nodes.to_vec();
        self.servers = LockServers::Cluster;
        self
    }

    /// Takes the locks on ZooKeeper: `hosts` is its connect string (`host:port,host:port`),
    /// each worker a session of `session_timeout`.
    pub fn zookeeper(mut self, hosts: &str, session_timeout: Duration) -> Self {
        self.urls = hosts.split(',').map(str::to_owned).collect();
        self.servers = LockServers::ZooKeeper(session_timeout);
        self
    }

    /// Takes the locks on etcd through any of `endpoints` (`http://host:port`), each worker
    /// holding one etcd lease of `ttl`.
    pub fn etcd(mut self, endpoints: &[String], ttl: Duration) -> Self {
        self.urls = endpoints.to_vec();
        self.servers = LockServers::Etcd(ttl);
        self
    }

    /// Takes the locks in the PostgreSQL database at `url`.
    pub fn postgres(mut self, url: &str) -> Self {
        self.urls = vec![url.to_owned()];
        self.servers = LockServers::Postgres;
        self
    }

    /// Sets the lock keys.
    pub fn keys<S: AsRef<str>>(mut self, keys: &[S]) -> Self {
        self.keys = keys.iter().map(|k| k.as_ref().to_owned()).collect();
        self
    }

    /// Sets the number of tasks.
    pub fn tasks(mut self, tasks: usize) -> Self {
        self.tasks = tasks;
        self
    }

    /// Sets how long the worker runs.
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// Sets the lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Sets the op timeout.
    pub fn op_timeout(mut self, op_timeout: Duration) -> Self {
        self.op_timeout = op_timeout;
        self
    }

    /// Sets the hold time and the writes per hold.
    pub fn hold(mut self, hold: Duration, writes: u32) -> Self {
        self.hold = hold;
        self.writes = writes;
        self
    }

    /// Sets the longest pause between holds.
    pub fn gap(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// Blocks the runtime for `block` in every `every`-th hold.
    pub fn block(mut self, block: Duration, every: u32) -> Self {
        self.block = block;
        self.block_every = every;
        self
    }

    /// Takes every lock with `fair(true)`.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    /// Read-write mode: `percent` % of the holds are readers, the rest writers.
    pub fn read_write(mut self, percent: u32) -> Self {
        self.read_percent = Some(percent);
        self
    }

    /// Multi-key mode: each hold locks `keys` distinct keys together with `lock_all`.
    pub fn multi(mut self, keys: usize) -> Self {
        self.multi = keys;
        self
    }

    /// Chooses the runtime flavour: current-thread (`true`) or multi-thread.
    pub fn current_thread(mut self, on: bool) -> Self {
        self.current_thread = on;
        self
    }

    /// The command line of worker `id` logging to `log`.
    pub fn to_args(&self, id: usize, log: &Path) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            "--id".into(),
            id.to_string(),
            "--log".into(),
            log.display().to_string(),
            "--urls".into(),
            self.urls.join(","),
            "--servers".into(),
            self.servers.to_arg(),
            "--resource".into(),
            self.resource_url.clone(),
            "--keys".into(),
            self.keys
                .iter()
                .map(|k| encode_key(k))
                .collect::<Vec<_>>()
                .join(","),
            "--prefix".into(),
            self.prefix.clone(),
            "--tasks".into(),
            self.tasks.to_string(),
            "--duration-ms".into(),
            ms(self.duration),
            "--lease-ms".into(),
            ms(self.lease),
            "--wait-ms".into(),
            ms(self.wait),
            "--op-timeout-ms".into(),
            ms(self.op_timeout),
            "--hold-ms".into(),
            ms(self.hold),
            "--writes".into(),
            self.writes.to_string(),
            "--gap-ms".into(),
            ms(self.gap),
            "--block-ms".into(),
            ms(self.block),
            "--block-every".into(),
            self.block_every.to_string(),
            "--runtime".into(),
            if self.current_thread {
                "current"
            } else {
                "multi"
            }
            .into(),
            "--fair".into(),
            self.fair.to_string(),
            "--read-percent".into(),
            self.read_percent
                .map_or_else(|| "off".to_owned(), |p| p.to_string()),
            "--multi".into(),
            self.multi.to_string(),
            "--permits".into(),
            self.permits.to_string(),
            "--leader".into(),
            self.leader.to_string(),
            "--fence-ttl-ms".into(),
            self.fence_ttl
                .map_or_else(|| "default".to_owned(), |d| d.as_millis().to_string()),
        ]
    }

    /// Parses what [`to_args`](Self::to_args) wrote: `(id, log path, spec)`. Command lines
    /// from before `--read-percent`, `--multi`, `--permits`, `--leader` and `--fence-ttl-ms`
    /// existed still parse (as `off`, 0, 0, false and the default).
    ///
    /// # Errors
    /// A message naming the bad or missing option.
    pub fn from_args(args: &[String]) -> Result<(usize, PathBuf, WorkerSpec), String> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(name) = it.next() {
            let name = name
                .strip_prefix("--")
                .ok_or_else(|| format!("expected an option, found `{name}`"))?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_owned(), value.clone());
        }
        let get = |name: &str| -> Result<String, String> {
            map.get(name)
                .cloned()
                .ok_or_else(|| format!("missing --{name}"))
        };
        let num = |name: &str| -> Result<u64, String> {
            get(name)?
                .parse()
                .map_err(|_| format!("--{name} is not a whole number"))
        };
        let ms = |name: &str| num(name).map(Duration::from_millis);
        let list = |name: &str| -> Result<Vec<String>, String> {
            Ok(get(name)?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect())
        };
        let spec = WorkerSpec {
            urls: list("urls")?,
            servers: LockServers::from_arg(&get("servers")?)?,
            resource_url: get("resource")?,
            keys: list("keys")?,
            prefix: get("prefix")?,
            tasks: num("tasks")? as usize,
            duration: ms("duration-ms")?,
            lease: ms("lease-ms")?,
            wait: ms("wait-ms")?,
            op_timeout: ms("op-timeout-ms")?,
            hold: ms("hold-ms")?,
            writes: num("writes")? as u32,
            gap: ms("gap-ms")?,
            block: ms("block-ms")?,
            block_every: num("block-every")? as u32,
            current_thread: match get("runtime")?.as_str() {
                "current" => true,
                "multi" => false,
                other => return Err(format!("--runtime is `current` or `multi`, not `{other}`")),
            },
            fair: get("fair")? == "true",
            read_percent: match map.get("read-percent").map(String::as_str) {
                None | Some("off") => None,
                Some(p) => match p.parse() {
                    Ok(p) if p <= 100 => Some(p),
                    _ => return Err(format!("--read-percent is `off` or 0 to 100, not `{p}`")),
                },
            },
            multi: match map.get("multi") {
                None => 0,
                Some(_) => num("multi")? as usize,
            },
            permits: match map.get("permits") {
                Some(_) => num("permits")? as u32,
                None => 0,
            },
            leader: match map.get("leader").map(String::as_str) {
                None | Some("false") => false,
                Some("true") => true,
                Some(other) => return Err(format!("--leader is `true` or `false`, not `{other}`")),
            },
            fence_ttl: match map.get("fence-ttl-ms").map(String::as_str) {
                None | Some("default") => None,
                Some(_) => Some(ms("fence-ttl-ms")?),
            },
        };
        let spec = WorkerSpec {
            keys: spec.keys.iter().map(|k| decode_key(k)).collect(),
            ..spec
        };
        if spec.urls.is_empty() || spec.keys.is_empty() || spec.tasks == 0 {
            return Err("--urls, --keys and --tasks must not be empty".into());
        }
        if spec.multi > spec.keys.len() {
            return Err(format!(
                "--multi {} needs at least as many --keys ({} given)",
                spec.multi,
                spec.keys.len()
            ));
        }
        if spec.multi > 0 && spec.read_percent.is_some() {
            return Err(
                "--multi and --read-percent do not go together: lock_all has no read side".into(),
            );
        }
        if spec.leader && (spec.multi > 0 || spec.read_percent.is_some() || spec.permits > 0) {
            return Err(
                "--leader takes one election per hold: not with --multi, --read-percent or \
                 --permits"
                    .into(),
            );
        }
        Ok((num("id")? as usize, PathBuf::from(get("log")?), spec))
    }
}

/// A key as it appears in a command line's `--keys` list and in a log line: `%`, `,`,
/// whitespace and control characters are written `%XX` (each byte of their UTF-8), the rest
/// as is, so hostile keys (braces, colons, unicode, spaces) survive both.
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if c == '%' || c == ',' || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The inverse of [`encode_key`]; a `%` not followed by two hex digits stays as it is (keys
/// of old command lines and logs, which were not encoded, decode to themselves).
pub fn decode_key(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// The fenced resource
// ---------------------------------------------------------------------------------------------

/// The fenced resource, as a Lua script on its own Redis server: a record that accepts a
/// write only with a fencing token newer than the last one it accepted (or the same token
/// again, from the same holder). Tokens are compared as decimal strings, exactly, since
/// leasehold's fences (microseconds of the server clock and up) are too large for Lua's
/// doubles to compare safely in general.
pub const FENCED_WRITE_SCRIPT: &str = r#"
-- KEYS[1]  the record (a hash: fence, writer, accepted, rejected)
-- ARGV[1]  the writer's fencing token, decimal
-- ARGV[2]  the writer (a hold id)
-- Returns 1 when the write was accepted, 0 when it was refused as stale.
local last = redis.call('HGET', KEYS[1], 'fence')
local newer
if not last then
  newer = true
elseif #ARGV[1] ~= #last then
  newer = #ARGV[1] > #last
elseif ARGV[1] == last then
  newer = redis.call('HGET', KEYS[1], 'writer') == ARGV[2]
else
  newer = ARGV[1] > last
end
if newer then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'writer', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'accepted', 1)
  return 1
end
redis.call('HINCRBY', KEYS[1], 'rejected', 1)
return 0
"#;

/// A transfer between two wallets under a multi-key hold, on the resource's server: every
/// key of the hold is fenced as [`FENCED_WRITE_SCRIPT`] fences one, and only when all of
/// them accept does it set the two balances the holder computed from what it read under the
/// lock (a read-modify-write: two holders overlapping would lose an update and change the
/// total).
pub const TRANSFER_SCRIPT: &str = r#"
-- KEYS[1], KEYS[2]  the balances of the two wallets (plain integers)
-- KEYS[3..]         the fenced records of every key of the hold (as FENCED_WRITE_SCRIPT)
-- ARGV[1], ARGV[2]  the new balances
-- ARGV[3]           the writer (a hold id)
-- ARGV[4..]         the writer's fence of each record's key, decimal, in KEYS[3..]'s order
-- Returns 1 when every record accepted the write (and the balances are set), 0 when one
-- refused it as stale (and nothing changed).
local n = #KEYS - 2
for i = 1, n do
  local rec, fence = KEYS[2 + i], ARGV[3 + i]
  local last = redis.call('HGET', rec, 'fence')
  local newer
  if not last then
    newer = true
  elseif #fence ~= #last then
    newer = #fence > #last
  elseif fence == last then
    newer = redis.call('HGET', rec, 'writer') == ARGV[3]
  else
    newer = fence > last
  end
  if not newer then
    for j = 1, n do
      redis.call('HINCRBY', KEYS[2 + j], 'rejected', 1)
    end
    return 0
  end
end
for i = 1, n do
  redis.call('HSET', KEYS[2 + i], 'fence', ARGV[3 + i], 'writer', ARGV[3])
  redis.call('HINCRBY', KEYS[2 + i], 'accepted', 1)
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
"#;

/// The Redis key of the balance of the wallet of lock key `key` (multi-key mode).
pub fn wallet_key(key: &str) -> String {
    format!("wallet:{key}")
}

/// The Redis key of the fenced record for lock key `key`.
pub fn resource_key(key: &str) -> String {
    format!("resource:{key}")
}

/// A client of the fenced resource.
#[derive(Clone)]
pub struct FencedResource {
    conn: redis::aio::MultiplexedConnection,
    script: redis::Script,
    transfer: redis::Script,
}

impl FencedResource {
    /// Connects to the resource's server.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(url: &str) -> redis::RedisResult<Self> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(FencedResource {
            conn,
            script: redis::Script::new(FENCED_WRITE_SCRIPT),
            transfer: redis::Script::new(TRANSFER_SCRIPT),
        })
    }

    /// Writes to the record of `key` with `fence`; `Ok(true)` when accepted.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn write(&self, key: &str, fence: u64, writer: &str) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let accepted: i64 = self
            .script
            .key(resource_key(key))
            .arg(fence.to_string())
            .arg(writer)
            .invoke_async(&mut conn)
            .await?;
        Ok(accepted == 1)
    }

    /// Moves `amount` from the wallet of `from` to the wallet of `to` under a hold of every
    /// key of `fenced` (each with its fence): reads both balances (a missing one is 0), then
    /// writes both with [`TRANSFER_SCRIPT`]. `Ok(true)` when every record accepted it.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn transfer(
        &self,
        from: &str,
        to: &str,
        amount: i64,
        fenced: &[(&str, u64)],
        writer: &str,
    ) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let (a, b): (Option<i64>, Option<i64>) = redis::cmd("MGET")
            .arg(wallet_key(from))
            .arg(wallet_key(to))
            .query_async(&mut conn)
            .await?;
        let (a, b) = (a.unwrap_or(0), b.unwrap_or(0));
        let mut call = self.transfer.prepare_invoke();
        call.key(wallet_key(from)).key(wallet_key(to));
        for (key, _) in fenced {
            call.key(resource_key(key));
        }
        call.arg(a - amount).arg(b + amount).arg(writer);
        for (_, fence) in fenced {
            call.arg(fence.to_string());
        }
        let accepted: i64 = call.invoke_async(&mut conn).await?;
        Ok(accepted == 1)
    }

    /// The balance of the wallet of `key` (0 when it has none).
    ///
    /// # Errors
    /// When the server fails.
    pub async fn balance(&self, key: &str) -> redis::RedisResult<i64> {
        let mut conn = self.conn.clone();
        let balance: Option<i64> = redis::cmd("GET")
            .arg(wallet_key(key))
            .query_async(&mut conn)
            .await?;
        Ok(balance.unwrap_or(0))
    }

    /// Sets the balance of the wallet of `key`.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn set_balance(&self, key: &str, balance: i64) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(wallet_key(key))
            .arg(balance)
            .query_async(&mut conn)
            .await
    }

    /// The record's totals: `(accepted, rejected)`.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn totals(&self, key: &str) -> redis::RedisResult<(u64, u64)> {
        let mut conn = self.conn.clone();
        let (a, r): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(resource_key(key))
            .arg("accepted")
            .arg("rejected")
            .query_async(&mut conn)
            .await?;
        Ok((a.unwrap_or(0), r.unwrap_or(0)))
    }
}

// ---------------------------------------------------------------------------------------------
// Worker processes
// ---------------------------------------------------------------------------------------------

/// One worker process. Dropping it kills it (SIGCONT first, in case it is stopped).
#[derive(Debug)]
pub struct WorkerProc {
    /// The worker's id (its hold ids start with it).
    pub id: usize,
    /// Its event log.
    pub log: PathBuf,
    child: Option<Child>,
    exited: Option<std::process::ExitStatus>,
}

impl WorkerProc {
    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&mut self, sig: libc::c_int) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                // SAFETY: a plain syscall on our own unreaped child, whose pid cannot be reused.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, sig);
                }
            }
        }
    }

    fn reap(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let Some(child) = self.child.as_mut() else {
            return true;
        };
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.exited = Some(status);
                    self.child = None;
                    return true;
                }
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => return false,
                Err(_) => {
                    self.child = None;
                    return true;
                }
            }
        }
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        self.signal(libc::SIGCONT);
        self.reap(Duration::from_secs(5));
    }
}

/// One run of a scenario: a directory with the workers' logs and the fault log, and the
/// worker processes. The directory is removed on drop unless the run was marked to keep it
/// (as a failed check does).
#[derive(Debug)]
pub struct Run {
    name: String,
    dir: PathBuf,
    faults: EventLog,
    workers: Vec<WorkerProc>,
    keep: bool,
    expect_fifo: bool,
    fifo_slack_ns: u64,
}

impl Run {
    /// A new run in a fresh directory under the system's temporary directory.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "leasehold-history-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let faults = EventLog::create(&dir.join("faults.log"))
            .unwrap_or_else(|e| panic!("cannot create the fault log: {e}"));
        Run {
            name: name.to_owned(),
            dir,
            faults,
            workers: Vec::new(),
            keep: false,
            expect_fifo: false,
            fifo_slack_ns: FIFO_SLACK_NS,
        }
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Judges the order of fair grants: strict first come, first served across the tasks of
    /// all processes ([`History::expect_fifo`]).
    pub fn expect_fifo(&mut self) {
        self.expect_fifo = true;
    }

    /// [`expect_fifo`](Self::expect_fifo) for an engine whose first attempt takes longer than
    /// [`FIFO_SLACK_NS`] to reach the store and queue the request.
    pub fn expect_fifo_with_slack(&mut self, slack: Duration) {
        self.expect_fifo = true;
        self.fifo_slack_ns = u64::try_from(slack.as_nanos()).unwrap_or(u64::MAX);
    }

    /// Keeps the directory after the run (for a post-mortem).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// The workers started so far.
    pub fn workers(&self) -> &[WorkerProc] {
        &self.workers
    }

    /// Starts a worker; returns its index (also its id).
    ///
    /// # Panics
    /// When the worker binary cannot be run.
    pub fn spawn(&mut self, spec: &WorkerSpec) -> usize {
        let id = self.workers.len();
        let log = self.dir.join(format!("worker-{id}.log"));
        let out = File::create(self.dir.join(format!("worker-{id}.out")))
            .unwrap_or_else(|e| panic!("cannot create the worker's output file: {e}"));
        let mut cmd = Command::new(worker_binary());
        cmd.args(spec.to_args(id, &log))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup the output file"))
            .stderr(out);
        die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start history_worker: {e}"));
        self.workers.push(WorkerProc {
            id,
            log,
            child: Some(child),
            exited: None,
        });
        id
    }

    /// Logs the start of a fault on `target` (`w3`, `redis`, ...); returns its time.
    pub fn fault(&self, kind: &str, target: &str) -> u64 {
        self.faults.now("fault", &[&kind, &target])
    }

    /// Logs the end of a fault started with [`fault`](Self::fault); returns its time.
    pub fn heal(&self, kind: &str, target: &str) -> u64 {
        self.faults.now("heal", &[&kind, &target])
    }

    /// Freezes worker `i` with SIGSTOP (logged as fault `pause`).
    pub fn pause(&mut self, i: usize) {
        self.fault("pause", &format!("w{i}"));
        self.workers[i].signal(libc::SIGSTOP);
    }

    /// Thaws worker `i` with SIGCONT.
    pub fn resume(&mut self, i: usize) {
        self.workers[i].signal(libc::SIGCONT);
        self.heal("pause", &format!("w{i}"));
    }

    /// Kills worker `i` with SIGKILL (logged as fault `kill`, which never heals).
    pub fn kill9(&mut self, i: usize) -> u64 {
        let t = self.fault("kill", &format!("w{i}"));
        self.workers[i].signal(libc::SIGKILL);
        self.workers[i].reap(Duration::from_secs(5));
        t
    }

    /// Whether worker `i` is still running.
    pub fn is_running(&mut self, i: usize) -> bool {
        !self.workers[i].reap(Duration::ZERO)
    }

    /// The holds that are open right now (acquired, not yet released nor reported lost), by
    /// worker index, read from the tail of each log.
    pub fn open_holds(&mut self) -> Vec<(usize, String)> {
        self.open_holds_since()
            .into_iter()
            .map(|(w, hold, _)| (w, hold))
            .collect()
    }

    /// A hold opened within the last 50 ms, waiting up to 3 s for one: its worker and id.
    /// A fault injected into it lands inside the hold, not after its release.
    pub async fn young_hold(&mut self) -> Option<(usize, String)> {
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while tokio::time::Instant::now() < until {
            let now = monotonic_ns();
            if let Some((w, id, _)) = self
                .open_holds_since()
                .into_iter()
                .find(|(_, _, since)| now.saturating_sub(*since) < 50_000_000)
            {
                return Some((w, id));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    }

    /// As [`open_holds`](Self::open_holds), with the time each was acquired.
    pub fn open_holds_since(&mut self) -> Vec<(usize, String, u64)> {
        let mut open = Vec::new();
        for i in 0..self.workers.len() {
            if !self.is_running(i) {
                continue;
            }
            let tail = read_tail(&self.workers[i].log, 64 * 1024);
            let mut holds: Vec<(String, u64)> = Vec::new();
            for line in tail.lines() {
                let mut parts = line.split(' ');
                let (Some(t), Some(event), Some(hold)) = (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                match event {
                    "ok" => holds.push((hold.to_owned(), t.parse().unwrap_or(0))),
                    "rel" | "lost" => holds.retain(|(h, _)| h != hold),
                    _ => {}
                }
            }
            open.extend(holds.into_iter().map(|(h, t)| (i, h, t)));
        }
        open
    }

    /// Waits up to `within` for every worker to exit by itself; the ones still running then
    /// are killed and logged as fault `hung` (a violation).
    pub async fn wait_all(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let running: Vec<usize> = (0..self.workers.len())
                .filter(|&i| self.is_running(i))
                .collect();
            if running.is_empty() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                for i in running {
                    self.fault("hung", &format!("w{i}"));
                    self.workers[i].signal(libc::SIGKILL);
                    self.workers[i].signal(libc::SIGCONT);
                    self.workers[i].reap(Duration::from_secs(5));
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Reads all logs of the run.
    ///
    /// # Panics
    /// When a log cannot be read.
    pub fn history(&self) -> History {
        let mut logs = Vec::new();
        for w in &self.workers {
            logs.push((w.id, fs::read_to_string(&w.log).unwrap_or_default()));
        }
        let faults = fs::read_to_string(self.dir.join("faults.log")).unwrap_or_default();
        let mut history = History::parse(&logs, &faults);
        history.expect_fifo = self.expect_fifo;
        history.fifo_slack_ns = self.fifo_slack_ns;
        history
    }

    /// Checks the run's history, records the figures (see [`Report::record`]) and panics
    /// with every violation found, keeping the run's directory for a post-mortem.
    pub fn check_and_record(&mut self, scenario: &str) -> (History, Report) {
        self.check_and_record_allowing(scenario, &[])
    }

    /// As [`check_and_record`](Self::check_and_record), but violations of the `known` rules
    /// (a finding not fixed yet) are printed, not fatal.
    pub fn check_and_record_allowing(
        &mut self,
        scenario: &str,
        known: &[Rule],
    ) -> (History, Report) {
        let history = self.history();
        let report = history.check();
        report.record(scenario);
        let fatal = report.violations_except(known);
        if !fatal.is_empty() {
            self.keep();
            panic!(
                "{scenario} ({}): {} violation(s); logs kept in {}\n{report}",
                self.name,
                fatal.len(),
                self.dir.display()
            );
        }
        (history, report)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.workers.clear();
        if !self.keep && !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!(
                "history of run `{}` kept in {}",
                self.name,
                self.dir.display()
            );
        }
    }
}

/// The `history_worker` binary, built with the test's profile.
fn worker_binary() -> PathBuf {
    crate::harness::cargo_bin("history_worker")
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only makes an async-signal-safe call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

fn read_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // Drop the partial first line.
        text.split_once('\n')
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default()
    } else {
        text
    }
}

/// The resident set size of process `pid` in KiB, from `/proc`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

// ---------------------------------------------------------------------------------------------
// The history
// ---------------------------------------------------------------------------------------------

/// One write to the fenced resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// When it was invoked.
    pub inv: u64,
    /// Made after `is_held()` said true (a careful holder), not blindly after a loss.
    pub careful: bool,
    /// When it returned, and whether the resource accepted it; `None` if it never returned.
    pub outcome: Option<(u64, Option<bool>)>,
}

/// One acquisition and what became of it.
#[derive(Clone, Debug, Default)]
pub struct Hold {
    /// `worker.task.n`.
    pub id: String,
    /// The worker's index.
    pub worker: usize,
    /// The lock key (the first one named, for a multi-key hold).
    pub key: String,
    /// Every key of the hold, as named: one, or the keys of a `lock_all`.
    pub keys: Vec<String>,
    /// The read side of a read-write lock (`read_lock`); otherwise the hold excludes
    /// everyone on each of its keys (`lock`, `write_lock`, `lock_all`).
    pub shared: bool,
    /// An unfenced lock (`ok` with fence `-`): it excludes like any lock, but has no fence
    /// for the fence rules to judge (its `ok` and `key_fences` carry 0).
    pub unfenced: bool,
    /// The permits a semaphore hold asked for (`inv` mode `pN`); 1 when not said.
    pub permits: u32,
    /// When acquire was invoked.
    pub inv: u64,
    /// When acquire returned a guard, and its fence (of the first key, for a multi-key hold).
    pub ok: Option<(u64, u64)>,
    /// The fence of each of `keys`, in their order, once acquired.
    pub key_fences: Vec<u64>,
    /// When acquire failed, and the error's code.
    pub err: Option<(u64, String)>,
    /// Times at which the holder provably believed it held the lock (`is_held()` true).
    pub first_true: Option<u64>,
    /// The last such time.
    pub last_true: Option<u64>,
    /// The first time `is_held()` was seen false.
    pub first_false: Option<u64>,
    /// `is_held()` was seen true again after false.
    pub resurrected: bool,
    /// When the holder noticed the loss.
    pub lost: Option<u64>,
    /// When release was invoked, and whether `is_held()` was true just before.
    pub rel: Option<(u64, bool)>,
    /// When release returned, and how (`rok`, `rlost`, `runav`, `rerr`).
    pub rel_done: Option<(u64, String)>,
    /// Writes to the fenced resource.
    pub writes: Vec<Write>,
    /// Runtime blocks inside this hold: (start, end).
    pub blocks: Vec<(u64, Option<u64>)>,
}

impl Hold {
    fn saw_true(&mut self, t: u64) {
        if self.first_false.is_some() && self.first_false < Some(t) {
            self.resurrected = true;
        }
        self.first_true = Some(self.first_true.map_or(t, |f| f.min(t)));
        self.last_true = Some(self.last_true.map_or(t, |l| l.max(t)));
    }

    /// The fence, if acquired.
    pub fn fence(&self) -> Option<u64> {
        self.ok.map(|(_, f)| f)
    }

    /// The fence of `key`, if acquired and one of the hold's keys.
    pub fn fence_of(&self, key: &str) -> Option<u64> {
        self.ok?;
        let i = self.keys.iter().position(|k| k == key)?;
        self.key_fences.get(i).copied()
    }

    /// When the acquire ended: granted, failed, or never (`None`).
    pub fn answered(&self) -> Option<u64> {
        self.ok
            .map(|(t, _)| t)
            .or(self.err.as_ref().map(|(t, _)| *t))
    }
}

/// A worker's settings and life, from its log.
#[derive(Clone, Debug, Default)]
pub struct WorkerLife {
    /// The worker's index.
    pub id: usize,
    /// When it started, and its lease, wait and op timeout in ms.
    pub start: Option<(u64, u64, u64, u64)>,
    /// Its tasks, when its log says (logs from before they did: `None`).
    pub tasks: Option<usize>,
    /// Whether it took its single-key locks with `fair(true)`.
    pub fair: bool,
    /// When it finished by itself.
    pub end: Option<u64>,
    /// The permits of the semaphores it took (`sem`); 0 when it took locks.
    pub permits: u32,
    /// It campaigned for leader elections (`ldr`), not locks.
    pub leader: bool,
}

/// A fault the test injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What (`pause`, `kill`, `restart`, `stall`, ...).
    pub kind: String,
    /// On what (`w3`, `redis`, ...).
    pub target: String,
    /// When it started.
    pub start: u64,
    /// When it ended, if it did.
    pub end: Option<u64>,
}

/// One hold as seen on one of its keys: the hold, and its fence of that key.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    hold: &'a Hold,
    fence: u64,
}

/// What a fence counter belongs to. Each has its own counter in the store, even under one
/// name: a lock's key (its exclusive holds, both sides of a read-write lock, a multi-key
/// hold's keys), a semaphore (its permit holders), a leader election (its terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Counter {
    Lock,
    Semaphore,
    Election,
}

impl Counter {
    /// How violations name the counter of `key`: `` `k` ``, `` semaphore `k` ``,
    /// `` election `k` ``.
    fn name(self, key: &str) -> String {
        match self {
            Counter::Lock => format!("`{key}`"),
            Counter::Semaphore => format!("semaphore `{key}`"),
            Counter::Election => format!("election `{key}`"),
        }
    }
}

/// How long before B an acquire A must have been invoked for the FIFO check of fair locks to
/// expect A granted first: 10 ms, for A's first attempt to reach the store and queue it (a
/// round trip on loopback, and a process that was not scheduled at once: with several
/// multi-process tests on two cores, 5 ms was exceeded now and then).
pub const FIFO_SLACK_NS: u64 = 10_000_000;

/// Everything the workers and the test logged in one run.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every acquisition, in log order per worker.
    pub holds: Vec<Hold>,
    /// Every worker.
    pub workers: Vec<WorkerLife>,
    /// Every fault.
    pub faults: Vec<Fault>,
    /// Lines that did not parse (a worker killed mid-write leaves none, but who knows).
    pub garbage: usize,
    /// Whether fair locks must grant in strict arrival order across the tasks of all
    /// processes (the FIFO rule, [`Rule::Fifo`]); set by [`Run::expect_fifo`]. Without it the
    /// order is measured (the report's `fifo_*` figures) but not judged: `fair(true)` has
    /// promised turns by process, not by task.
    pub expect_fifo: bool,
    /// How long before B an acquire A must have been invoked for the FIFO rule to expect A
    /// first; [`FIFO_SLACK_NS`] unless the run says otherwise.
    pub fifo_slack_ns: u64,
    /// Whether a reader's fence must *equal* the newest writer's before it where nothing else
    /// can have drawn a fence in between (see
    /// `check_reader_fences`): engines whose readers read the
    /// last writer's record (ZooKeeper, etcd). Off for Redis, whose readers get the fence
    /// counter lifted to the server clock (µs): only the bounds hold there.
    pub exact_reader_fences: bool,
}

impl History {
    /// Parses worker logs (`(worker index, text)`) and the fault log.
    pub fn parse(logs: &[(usize, String)], faults: &str) -> History {
        let mut history = History {
            fifo_slack_ns: FIFO_SLACK_NS,
            ..History::default()
        };
        for (worker, text) in logs {
            let mut life = WorkerLife {
                id: *worker,
                ..WorkerLife::default()
            };
            let mut index: HashMap<String, usize> = HashMap::new();
            for line in text.lines() {
                let fields: Vec<&str> = line.split(' ').collect();
                let (Some(t), Some(&event)) = (
                    fields.first().and_then(|t| t.parse::<u64>().ok()),
                    fields.get(1),
                ) else {
                    history.garbage += 1;
                    continue;
                };
                let num = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
                match event {
                    "start" => {
                        life.start = Some((
                            t,
                            num(4).unwrap_or(0),
                            num(5).unwrap_or(0),
                            num(6).unwrap_or(0),
                        ));
                        life.tasks = num(7).map(|n| n as usize);
                        life.fair = fields.get(8) == Some(&"1");
                    }
                    "end" => life.end = Some(t),
                    "sem" => life.permits = num(2).unwrap_or(0) as u32,
                    "ldr" => life.leader = true,
                    _ => {
                        let Some(&id) = fields.get(2) else {
                            history.garbage += 1;
                            continue;
                        };
                        if event == "inv" {
                            let keys: Vec<String> = fields
                                .get(3)
                                .unwrap_or(&"")
                                .split(',')
                                .map(decode_key)
                                .collect();
                            let mut permits = 1;
                            let shared = match fields.get(4) {
                                None | Some(&"x") | Some(&"w") => false,
                                Some(&"r") => true,
                                Some(mode) if mode.starts_with('p') => {
                                    match mode[1..].parse::<u32>() {
                                        Ok(n) if n > 0 => permits = n,
                                        _ => history.garbage += 1,
                                    }
                                    false
                                }
                                Some(_) => {
                                    history.garbage += 1;
                                    false
                                }
                            };
                            index.insert(id.to_owned(), history.holds.len());
                            history.holds.push(Hold {
                                id: id.to_owned(),
                                worker: *worker,
                                key: keys[0].clone(),
                                keys,
                                shared,
                                permits,
                                inv: t,
                                ..Hold::default()
                            });
                            continue;
                        }
                        let Some(&i) = index.get(id) else {
                            history.garbage += 1;
                            continue;
                        };
                        let hold = &mut history.holds[i];
                        let flag = fields.get(3) == Some(&"1");
                        match event {
                            "ok" if fields.get(3) == Some(&"-") => {
                                hold.ok = Some((t, 0));
                                hold.unfenced = true;
                                hold.key_fences = vec![0; hold.keys.len()];
                            }
                            "ok" => {
                                hold.ok = num(3).map(|f| (t, f));
                                hold.key_fences = match fields.get(5) {
                                    Some(list) => {
                                        list.split(',').filter_map(|f| f.parse().ok()).collect()
                                    }
                                    None => hold.ok.map(|(_, f)| f).into_iter().collect(),
                                };
                                if hold.ok.is_some() && hold.key_fences.len() != hold.keys.len() {
                                    history.garbage += 1;
                                }
                            }
                            "aerr" => {
                                hold.err = Some((t, fields.get(3).unwrap_or(&"").to_string()))
                            }
                            "chk" if flag => hold.saw_true(t),
                            "chk" | "nh" => {
                                hold.first_false = Some(hold.first_false.map_or(t, |f| f.min(t)))
                            }
                            "h" => hold.saw_true(t),
                            "rz" => hold.resurrected = true,
                            "win" => hold.writes.push(Write {
                                inv: t,
                                careful: fields.get(4) == Some(&"1"),
                                outcome: None,
                            }),
                            "wok" | "werr" => {
                                if let Some(w) = hold.writes.last_mut() {
                                    let accepted = (event == "wok").then_some(flag);
                                    w.outcome = Some((t, accepted));
                                }
                            }
                            "lost" => hold.lost = Some(t),
                            "blk" => hold.blocks.push((t, None)),
                            "blkend" => {
                                if let Some(b) = hold.blocks.last_mut() {
                                    b.1 = Some(t);
                                }
                            }
                            "rel" => {
                                hold.rel = Some((t, flag));
                                if flag {
                                    hold.saw_true(t);
                                }
                            }
                            "rok" | "rlost" | "runav" | "rerr" => {
                                hold.rel_done = Some((t, event.to_owned()))
                            }
                            _ => history.garbage += 1,
                        }
                    }
                }
            }
            history.workers.push(life);
        }
        let mut open: Vec<Fault> = Vec::new();
        for line in faults.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(t), Some(&event), Some(&kind), Some(&target)) = (
                fields.first().and_then(|t| t.parse::<u64>().ok()),
                fields.get(1),
                fields.get(2),
                fields.get(3),
            ) else {
                history.garbage += 1;
                continue;
            };
            match event {
                "fault" => open.push(Fault {
                    kind: kind.to_owned(),
                    target: target.to_owned(),
                    start: t,
                    end: None,
                }),
                "heal" => {
                    if let Some(i) = open
                        .iter()
                        .position(|f| f.kind == kind && f.target == target && f.end.is_none())
                    {
                        open[i].end = Some(t);
                    }
                }
                _ => history.garbage += 1,
            }
        }
        history.faults = open;
        history
    }

    /// The holds of worker `w`.
    pub fn holds_of(&self, w: usize) -> impl Iterator<Item = &Hold> {
        self.holds.iter().filter(move |h| h.worker == w)
    }

    /// The hold of the given id.
    pub fn hold(&self, id: &str) -> Option<&Hold> {
        self.holds.iter().find(|h| h.id == id)
    }

    /// The first hold (of any worker) that acquired `key` (as one of its keys) at or after
    /// `t`.
    pub fn first_acquired_after(&self, key: &str, t: u64) -> Option<&Hold> {
        self.holds
            .iter()
            .filter(|h| h.keys.iter().any(|k| k == key) && h.ok.is_some_and(|(ok, _)| ok >= t))
            .min_by_key(|h| h.ok.map(|(ok, _)| ok))
    }

    /// Whether worker `w` was stopped (paused) or blocked at any time in `[from, to]`.
    fn frozen(&self, w: usize, from: u64, to: u64) -> bool {
        let target = format!("w{w}");
        let paused = self.faults.iter().any(|f| {
            f.kind == "pause"
                && f.target == target
                && f.start <= to
                && f.end.unwrap_or(u64::MAX) >= from
        });
        let blocked = self.holds_of(w).any(|h| {
            h.blocks
                .iter()
                .any(|&(s, e)| s <= to && e.unwrap_or(u64::MAX) >= from)
        });
        paused || blocked
    }

    /// Judges the history; see the module's documentation for the rules.
    pub fn check(&self) -> Report {
        let mut r = Report {
            workers: self.workers.len(),
            // Runtime blocks are faults the workers inject on themselves.
            faults: self.faults.iter().filter(|f| f.kind != "hung").count()
                + self.holds.iter().map(|h| h.blocks.len()).sum::<usize>(),
            ..Report::default()
        };
        // A multi-key hold counts as a hold of each of its keys, with that key's fence.
        let mut by_key: BTreeMap<(Counter, &str), Vec<Entry<'_>>> = BTreeMap::new();
        let mut by_semaphore: BTreeMap<(&str, u32), Vec<&Hold>> = BTreeMap::new();
        for h in &self.holds {
            r.acquires += 1;
            let life = self.workers.get(h.worker);
            let permits = life.map_or(0, |w| w.permits);
            if h.ok.is_some() && permits > 0 {
                r.holds += 1;
                by_semaphore
                    .entry((h.key.as_str(), permits))
                    .or_default()
                    .push(h);
                // Permit holders share the semaphore, but not its fence counter.
                if let Some(&fence) = h.key_fences.first() {
                    by_key
                        .entry((Counter::Semaphore, h.key.as_str()))
                        .or_default()
                        .push(Entry { hold: h, fence });
                }
            } else if h.ok.is_some() {
                r.holds += 1;
                let counter = if life.is_some_and(|w| w.leader) {
                    Counter::Election
                } else {
                    Counter::Lock
                };
                for (key, &fence) in h.keys.iter().zip(&h.key_fences) {
                    by_key
                        .entry((counter, key.as_str()))
                        .or_default()
                        .push(Entry { hold: h, fence });
                }
                if h.shared {
                    r.read_holds += 1;
                }
                if h.keys.len() > 1 {
                    r.multi_holds += 1;
                }
            }
            if let Some((_, code)) = &h.err {
                *r.acquire_errors.entry(code.clone()).or_default() += 1;
            }
            if h.lost.is_some()
                || h.first_false
                    .is_some_and(|f| h.rel.is_none_or(|(t, _)| f <= t))
            {
                r.losses += 1;
            }
            for w in &h.writes {
                match w.outcome {
                    Some((_, Some(true))) => r.writes_accepted += 1,
                    Some((_, Some(false))) => r.writes_refused += 1,
                    _ => r.writes_failed += 1,
                }
                if h.ok.is_some() && !w.careful {
                    r.blind_writes += 1;
                    if w.outcome.is_some_and(|(_, a)| a == Some(false)) {
                        r.blind_refused += 1;
                    }
                }
            }
            if h.resurrected {
                r.violation(
                    Rule::Resurrection,
                    format!(
                        "lease of {} was reported lost (is_held() false), then held again",
                        h.id
                    ),
                );
            }
        }
        for (&(counter, key), entries) in &by_key {
            self.check_fences(&counter.name(key), entries, &mut r);
            if counter == Counter::Semaphore {
                // Holders share it: `check_permits` counts them instead.
                continue;
            }
            self.check_overlap(key, entries, &mut r);
            self.check_stale_writes(key, entries, &mut r);
            self.check_reader_fences(key, entries, &mut r);
        }
        self.check_fifo(&mut r);
        for ((key, permits), holds) in &by_semaphore {
            self.check_permits(key, *permits, holds, &mut r);
        }
        self.check_bounds(&mut r);
        self.check_liveness(&mut r);
        if self.garbage > 0 {
            r.violation(
                Rule::Log,
                format!("{} log line(s) did not parse", self.garbage),
            );
        }
        r
    }

    /// The one fence rule, for every primitive alike: on each fence counter (a lock's key,
    /// with its exclusive holds, both sides of a read-write lock and each key of a multi-key
    /// hold; a semaphore, with its permit holders; a leader election, with its terms), when
    /// A's acquire returned before B's was invoked, B's fence is above A's, whatever A was,
    /// and at or above it when B is a reader (readers share the counter's current value:
    /// "a reader's fence is at or above the last writer's, below every later writer's").
    /// Fences of holds that exclude, and of permit holders, are also unique. A counter that
    /// went back (a restore from a snapshot or AOF, a failover to a lagging replica, an
    /// expired counter handed out again from scratch) shows here, for whichever kind of hold
    /// came first after it. Readers are judged against the writers' grant order, more
    /// finely, by [`check_reader_fences`](Self::check_reader_fences).
    fn check_fences(&self, counter: &str, entries: &[Entry<'_>], r: &mut Report) {
        // Unfenced holds exclude (see `check_overlap`) but have no fence to judge.
        let fenced: Vec<Entry<'_>> = entries
            .iter()
            .filter(|e| !e.hold.unfenced)
            .copied()
            .collect();
        let entries = &fenced[..];
        let mut seen: HashMap<u64, &str> = HashMap::new();
        for e in entries.iter().filter(|e| !e.hold.shared) {
            if let Some(other) = seen.insert(e.fence, &e.hold.id) {
                r.violation(
                    Rule::FenceOrder,
                    format!(
                        "fence {} of {counter} handed to both {other} and {}",
                        e.fence, e.hold.id
                    ),
                );
            }
        }
        // (granted, fence, hold), by the time the acquire returned.
        let mut by_ok: Vec<(u64, u64, &Hold)> = entries
            .iter()
            .filter_map(|e| e.hold.ok.map(|(t, _)| (t, e.fence, e.hold)))
            .collect();
        by_ok.sort_by_key(|&(t, f, _)| (t, f));
        let mut by_inv: Vec<&Entry<'_>> = entries.iter().collect();
        by_inv.sort_by_key(|e| e.hold.inv);
        let mut i = 0;
        // The highest fence among the acquires that returned before B was invoked.
        let mut max: Option<(u64, &Hold)> = None;
        for b in by_inv {
            while i < by_ok.len() && by_ok[i].0 < b.hold.inv {
                if max.is_none_or(|(f, _)| by_ok[i].1 > f) {
                    max = Some((by_ok[i].1, by_ok[i].2));
                }
                i += 1;
            }
            let Some((mf, a)) = max else { continue };
            let fence = b.fence;
            let broken = if b.hold.shared {
                mf > fence
            } else {
                mf >= fence
            };
            if broken {
                let who = |h: &Hold| if h.shared { "reader " } else { "" };
                r.violation(
                    Rule::FenceOrder,
                    format!(
                        "fence out of order on {counter}: {}{} got {mf} before {}{} asked, which got {fence}",
                        who(a),
                        a.id,
                        who(b.hold),
                        b.hold.id
                    ),
                );
            }
        }
    }

    /// No two holders' validity windows overlap on a key, except two readers'. A window is
    /// the span between the first and the last instant at which the holder provably
    /// believed it held the lock (`is_held()` true, time taken before asking): a lower bound
    /// of its belief, so an overlap found is an overlap that happened. A multi-key hold's
    /// window counts on each of its keys.
    fn check_overlap(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut windows: Vec<(u64, u64, &str, bool)> = entries
            .iter()
            .filter_map(|e| {
                let h = e.hold;
                Some((h.first_true?, h.last_true?, h.id.as_str(), h.shared))
            })
            .collect();
        windows.sort();
        // The furthest-reaching window so far, of anyone and of an excluding holder.
        let mut reach: Option<(u64, &str)> = None;
        let mut reach_excl: Option<(u64, &str)> = None;
        for (start, end, id, shared) in windows {
            let against = if shared { reach_excl } else { reach };
            if let Some((until, other)) = against {
                if start < until {
                    r.violation(
                        Rule::Overlap,
                        format!(
                        "overlap on `{key}`: {id} held it from {start} while {other} still held it until {until} ({:.3} ms)",
                        (until - start) as f64 / 1e6
                    ));
                }
            }
            if reach.is_none_or(|(until, _)| end > until) {
                reach = Some((end, id));
            }
            if !shared && reach_excl.is_none_or(|(until, _)| end > until) {
                reach_excl = Some((end, id));
            }
        }
    }

    /// No more of a semaphore's permits held than it has, at any instant: each holder's
    /// window is the span of its proven belief (as in [`check_overlap`](Self::check_overlap)),
    /// counting the permits it asked for (`inv` mode `pN`, else 1), and the windows are swept
    /// in time order. Workers that disagree on the limit are judged by the smallest.
    fn check_permits(&self, key: &str, permits: u32, holds: &[&Hold], r: &mut Report) {
        let mut edges: Vec<(u64, bool, &str, u32)> = Vec::new(); // (time, ends, hold, permits)
        for h in holds {
            if let (Some(start), Some(end)) = (h.first_true, h.last_true) {
                let n = h.permits.max(1);
                edges.push((start, false, h.id.as_str(), n));
                // Belief up to and including `end`: it ends just after.
                edges.push((end + 1, true, h.id.as_str(), n));
            }
        }
        // Ends before starts at one instant: a window [a, b] and one from b + 1 do not meet.
        edges.sort_by_key(|&(t, ends, _, _)| (t, !ends));
        let mut inside: Vec<(&str, u32)> = Vec::new();
        for (t, ends, id, n) in edges {
            if ends {
                inside.retain(|&(other, _)| other != id);
                continue;
            }
            inside.push((id, n));
            r.most_permit_holders = r.most_permit_holders.max(inside.len());
            let taken: u32 = inside.iter().map(|&(_, n)| n).sum();
            if taken > permits {
                let who: Vec<String> = inside.iter().map(|(id, n)| format!("{id} ({n})")).collect();
                r.violation(
                    Rule::Permits,
                    format!(
                        "{taken} of the {permits} permits of `{key}` held at {t}: {}",
                        who.join(", ")
                    ),
                );
            }
        }
    }

    /// The fenced resource accepted no stale write: no write was accepted after (in real
    /// time) a write with a higher fence had been accepted. A multi-key hold's writes count
    /// on each of its keys, with that key's fence.
    fn check_stale_writes(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut accepted: Vec<(u64, u64, u64, &str)> = Vec::new(); // (inv, done, fence, id)
        for e in entries.iter().filter(|e| !e.hold.unfenced) {
            for w in &e.hold.writes {
                if let Some((done, Some(true))) = w.outcome {
                    accepted.push((w.inv, done, e.fence, e.hold.id.as_str()));
                }
            }
        }
        let mut by_done = accepted.clone();
        by_done.sort_by_key(|a| a.1);
        accepted.sort_by_key(|a| a.0);
        let mut i = 0;
        let mut max: Option<(u64, &str)> = None;
        for (inv, _, fence, id) in accepted {
            while i < by_done.len() && by_done[i].1 < inv {
                if max.is_none_or(|(f, _)| by_done[i].2 > f) {
                    max = Some((by_done[i].2, by_done[i].3));
                }
                i += 1;
            }
            if let Some((mf, mid)) = max {
                if mf > fence {
                    r.stale_accepted += 1;
                    r.violation(
                        Rule::StaleWrite,
                        format!(
                        "stale write accepted on `{key}`: {id} wrote with fence {fence} after {mid} had written with {mf}"
                    ));
                }
            }
        }
    }

    /// A reader's fence is the fence of the newest writer before it. For each read hold R of
    /// a key, the writers (holds that exclude on the key) split by their `ok` time against
    /// R's: a writer whose acquire returned before R's did was granted before R (the two
    /// exclude each other, so the earlier grant released before the later one, and each
    /// `ok` is logged between its grant and its release; no slack is needed, as for
    /// [`check_fences`](Self::check_fences)), one that returned after was granted after.
    /// Then:
    /// - R's fence is at least the highest fence of the writers before it, and below the
    ///   lowest fence of the writers after it;
    /// - with [`exact_reader_fences`](Self::exact_reader_fences), it *equals* the fence of
    ///   the newest writer before it (W) when nothing else can have
    ///   drawn a fence in between: W's worker ran one task or fair locks (so W reserved one
    ///   fence, not spares for in-process handovers), and no write acquire of the key failed
    ///   or went unanswered between W's grant and R's (it may have drawn a fence unlogged).
    ///   With no writer before R, only the upper bound is checked (a counter may predate the
    ///   run).
    fn check_reader_fences(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut writers: Vec<(u64, u64, &Hold)> = entries
            .iter()
            .filter(|e| !e.hold.shared && !e.hold.unfenced)
            .filter_map(|e| Some((e.hold.ok?.0, e.fence, e.hold)))
            .collect();
        if entries.iter().all(|e| !e.hold.shared) {
            return;
        }
        writers.sort_by_key(|w| w.0);
        // Write acquires of the key that failed or never answered: (invoked, answered).
        let unresolved: Vec<(u64, u64)> = self
            .holds
            .iter()
            .filter(|h| !h.shared && h.ok.is_none() && h.keys.iter().any(|k| k == key))
            .map(|h| (h.inv, h.answered().unwrap_or(u64::MAX)))
            .collect();
        for e in entries.iter().filter(|e| e.hold.shared) {
            let Some((ok, _)) = e.hold.ok else { continue };
            let split = writers.partition_point(|w| w.0 < ok);
            let (before, after) = writers.split_at(split);
            let lowest_after = after.iter().min_by_key(|w| w.1);
            let highest_before = before.iter().max_by_key(|w| w.1);
            let id = &e.hold.id;
            if let Some(&(_, f, w)) = highest_before.filter(|w| e.fence < w.1) {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {} below {f} of writer {} granted before it",
                        e.fence, w.id
                    ),
                );
                continue;
            }
            if let Some(&(_, f, w)) = lowest_after.filter(|w| e.fence >= w.1) {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {}, not below {f} of writer {} granted after it",
                        e.fence, w.id
                    ),
                );
                continue;
            }
            let Some(&(w_ok, f, w)) = before.last().filter(|_| self.exact_reader_fences) else {
                continue;
            };
            let one_fence = self
                .workers
                .iter()
                .find(|l| l.id == w.worker)
                .is_some_and(|l| l.fair || l.tasks == Some(1));
            let gap = unresolved.iter().any(|&(inv, end)| inv < ok && end > w_ok);
            if one_fence && !gap && e.fence != f {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {}, not {f} of the last writer {} before it",
                        e.fence, w.id
                    ),
                );
            }
        }
    }

    /// Fair locks grant in the order of arrival (judged when [`expect_fifo`](Self::expect_fifo)
    /// is set, measured always). For two single-key acquires A and B of one
    /// key, both by workers that took fair locks and neither a reader: when A was invoked
    /// more than [`FIFO_SLACK_NS`] before B (the time for A's first attempt to reach the
    /// store and queue it), and A was still pending when B was granted (A granted after B,
    /// failed after B's grant, or never answered while its worker lived), B overtook A: a
    /// violation. The order of grants comes from the `ok` times, which follow the grants
    /// (the holds exclude one another). One violation per key, with the number of such
    /// pairs and the worst one (the greatest lead A had over B).
    fn check_fifo(&self, r: &mut Report) {
        let fair: Vec<bool> = {
            let mut fair = vec![false; self.workers.iter().map(|l| l.id + 1).max().unwrap_or(0)];
            for l in &self.workers {
                fair[l.id] = l.fair;
            }
            fair
        };
        let killed = |w: usize| {
            let target = format!("w{w}");
            self.faults
                .iter()
                .filter(|f| (f.kind == "kill" || f.kind == "hung") && f.target == target)
                .map(|f| f.start)
                .min()
                .unwrap_or(u64::MAX)
        };
        // (invoked, pending until, granted at, id)
        type Acquire<'a> = (u64, u64, Option<u64>, &'a str);
        let mut by_key: BTreeMap<&str, Vec<Acquire<'_>>> = BTreeMap::new();
        for h in &self.holds {
            if h.shared || h.keys.len() != 1 || !fair.get(h.worker).copied().unwrap_or(false) {
                continue;
            }
            // Pending from `inv` until answered, or until its worker died or finished.
            let end = h
                .answered()
                .unwrap_or_else(|| killed(h.worker).min(self.workers_end(h.worker)));
            by_key.entry(h.key.as_str()).or_default().push((
                h.inv,
                end,
                h.ok.map(|(t, _)| t),
                h.id.as_str(),
            ));
        }
        for (key, acquires) in by_key {
            let mut pairs = 0usize;
            let mut overtaking = 0usize;
            let mut worst: Option<(u64, &str, &str)> = None;
            for &(b_inv, _, b_ok, b_id) in &acquires {
                let Some(b_ok) = b_ok else { continue };
                r.fifo_grants += 1;
                let mut overtook = false;
                for &(a_inv, a_end, _, a_id) in &acquires {
                    if a_inv.saturating_add(self.fifo_slack_ns) < b_inv && a_end > b_ok {
                        pairs += 1;
                        overtook = true;
                        let lead = b_inv - a_inv;
                        if worst.is_none_or(|(l, _, _)| lead > l) {
                            worst = Some((lead, a_id, b_id));
                        }
                    }
                }
                overtaking += usize::from(overtook);
            }
            r.fifo_pairs += pairs;
            r.fifo_overtaking += overtaking;
            if let Some((lead, a, b)) = worst.filter(|_| self.expect_fifo) {
                r.violation(
                    Rule::Fifo,
                    format!(
                        "fair lock `{key}` granted out of arrival order: {pairs} pair(s), {overtaking} grant(s) \
                         overtook an earlier waiter; worst: {b} was granted while {a}, invoked {:.1} ms before it, \
                         still waited",
                        lead as f64 / 1e6
                    ),
                );
            }
        }
    }

    /// When worker `w` finished by itself (`u64::MAX` if it did not).
    fn workers_end(&self, w: usize) -> u64 {
        self.workers
            .iter()
            .find(|l| l.id == w)
            .and_then(|l| l.end)
            .unwrap_or(u64::MAX)
    }

    /// Every call returned within its bound: acquire within wait + 3 op timeouts, release
    /// within 2 op timeouts, a resource write within 2 s, each plus 1 s of slack for a loaded
    /// machine; calls during which the worker itself was paused or blocked are exempt.
    /// A call that never returned from a worker that finished is a hang.
    fn check_bounds(&self, r: &mut Report) {
        const SLACK: u64 = 1_000_000_000;
        let ms = 1_000_000;
        for h in &self.holds {
            let life = &self.workers[h.worker];
            let Some((_, _, wait, op)) = life.start else {
                continue;
            };
            let finished = life.end.is_some();
            let hung = match &h.err {
                // Given up on by the worker past its bound: say so, not just how long it took.
                Some((t, code)) if code == "hung" && !self.frozen(h.worker, h.inv, *t) => {
                    r.violation(
                        Rule::Bound,
                        format!(
                            "acquire of {} (wait {wait} ms, op timeout {op} ms) never returned: \
                             the worker gave up on it after {:.0} ms; its bound is {:.0} ms",
                            h.id,
                            t.saturating_sub(h.inv) as f64 / 1e6,
                            ((wait + 3 * op) * ms + SLACK) as f64 / 1e6
                        ),
                    );
                    true
                }
                _ => false,
            };
            let mut bound = |what: &str, from: u64, to: Option<u64>, limit: u64| match to {
                Some(to) => {
                    let took = to.saturating_sub(from);
                    if what == "acquire" {
                        r.max_acquire_ns = r.max_acquire_ns.max(took);
                    }
                    if took > limit + SLACK && !self.frozen(h.worker, from, to) {
                        r.violation(
                            Rule::Bound,
                            format!(
                                "{what} of {} took {:.0} ms; its bound is {:.0} ms",
                                h.id,
                                took as f64 / 1e6,
                                (limit + SLACK) as f64 / 1e6
                            ),
                        );
                    }
                }
                None if finished => {
                    r.violation(Rule::Bound, format!("{what} of {} never returned", h.id));
                }
                None => {}
            };
            let acquired = h.ok.map(|(t, _)| t).or(h.err.as_ref().map(|(t, _)| *t));
            if !hung {
                bound("acquire", h.inv, acquired, (wait + 3 * op) * ms);
            }
            if let Some((t, _)) = h.rel {
                bound(
                    "release",
                    t,
                    h.rel_done.as_ref().map(|(t, _)| *t),
                    2 * op * ms,
                );
            }
            for w in &h.writes {
                bound("write", w.inv, w.outcome.map(|(t, _)| t), 2_000 * ms);
            }
        }
        for f in &self.faults {
            if f.kind == "hung" {
                r.violation(
                    Rule::Hang,
                    format!("worker {} did not finish in time and was killed", f.target),
                );
            }
        }
    }

    /// Every worker that ran to its end acquired at least once after the last fault healed
    /// (the service recovers by itself).
    fn check_liveness(&self, r: &mut Report) {
        let last_heal = self
            .faults
            .iter()
            .filter(|f| f.kind != "kill" && f.kind != "hung")
            .filter_map(|f| f.end)
            .max();
        let Some(healed) = last_heal else { return };
        for life in &self.workers {
            let Some(end) = life.end else { continue };
            if end <= healed {
                continue;
            }
            let recovered = self
                .holds_of(life.id)
                .any(|h| h.ok.is_some_and(|(t, _)| t > healed));
            if !recovered {
                r.violation(
                    Rule::Liveness,
                    format!(
                    "worker w{} acquired nothing in the {:.0} ms between the last fault's end and its own",
                    life.id,
                    (end - healed) as f64 / 1e6
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

/// The rule a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// Two holders' validity windows overlapped.
    Overlap,
    /// A fence was handed out twice, or out of the real-time order of acquisitions (by any
    /// primitive: writer, reader, permit, leader term, multi-key hold).
    FenceOrder,
    /// The fenced resource accepted a write after one with a higher fence.
    StaleWrite,
    /// A call took longer than its bound, or never returned.
    Bound,
    /// A worker did not finish in time.
    Hang,
    /// A lease reported lost was held again.
    Resurrection,
    /// A worker made no progress after the faults healed.
    Liveness,
    /// A reader's fence was not between the fences of the writers before and after it (or,
    /// with exact reader fences, not the last writer's).
    ReaderFence,
    /// A fair lock was granted out of the order of arrival.
    Fifo,
    /// The logs could not be read.
    Log,
    /// A semaphore had more holders than permits.
    Permits,
}

/// One broken rule, and the evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// What happened, with hold ids and times.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.rule, self.what)
    }
}

/// The figures of one checked run, and its violations.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Worker processes.
    pub workers: usize,
    /// Acquires invoked.
    pub acquires: usize,
    /// Acquires that returned a guard.
    pub holds: usize,
    /// Failed acquires by error code.
    pub acquire_errors: BTreeMap<String, usize>,
    /// Holds whose loss was reported to the holder.
    pub losses: usize,
    /// Writes the fenced resource accepted.
    pub writes_accepted: usize,
    /// Writes it refused as stale.
    pub writes_refused: usize,
    /// Writes that failed or never returned.
    pub writes_failed: usize,
    /// Blind writes (made after the holder noticed its loss, to test the fence).
    pub blind_writes: usize,
    /// Blind writes the resource refused.
    pub blind_refused: usize,
    /// Stale writes the resource accepted (must be 0).
    pub stale_accepted: usize,
    /// Faults injected.
    pub faults: usize,
    /// The slowest acquire, in ns.
    pub max_acquire_ns: u64,
    /// Holds of the read side of a read-write lock.
    pub read_holds: usize,
    /// Holds of several keys at once.
    pub multi_holds: usize,
    /// Grants of fair locks checked for their order.
    pub fifo_grants: usize,
    /// Pairs of fair acquires granted out of arrival order (see [`FIFO_SLACK_NS`]).
    pub fifo_pairs: usize,
    /// Grants of fair locks that overtook at least one earlier waiter.
    pub fifo_overtaking: usize,
    /// The most holders of one semaphore's permits seen at one instant.
    pub most_permit_holders: usize,
    /// Everything that broke a rule.
    pub violations: Vec<Violation>,
}

impl Report {
    fn violation(&mut self, rule: Rule, what: String) {
        self.violations.push(Violation { rule, what });
    }

    /// The violations of one rule.
    pub fn violations_of(&self, rule: Rule) -> Vec<&Violation> {
        self.violations.iter().filter(|v| v.rule == rule).collect()
    }

    /// The violations of every rule but `rules`.
    pub fn violations_except(&self, rules: &[Rule]) -> Vec<&Violation> {
        self.violations
            .iter()
            .filter(|v| !rules.contains(&v.rule))
            .collect()
    }

    /// Operations: acquires, releases and writes.
    pub fn operations(&self) -> usize {
        self.acquires + self.holds + self.writes_accepted + self.writes_refused + self.writes_failed
    }

    /// Prints the figures to stderr (visible with `--nocapture`) and appends them as one
    /// tab-separated line to the file named by `LEASEHOLD_RELIABILITY_REPORT`, if set.
    pub fn record(&self, scenario: &str) {
        eprintln!("{scenario}: {self}");
        if let Some(path) = std::env::var_os("LEASEHOLD_RELIABILITY_REPORT") {
            let line = format!(
                "{scenario}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                self.workers,
                self.holds,
                self.operations(),
                self.faults,
                self.losses,
                self.writes_refused,
                self.stale_accepted,
                self.violations.len()
            );
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workers, {} acquires ({} held, errors {:?}), {} operations, {} faults, {} losses \
             reported, writes {} accepted / {} refused / {} failed ({} blind, {} refused), \
             slowest acquire {:.0} ms, stale writes accepted {}, violations {}",
            self.workers,
            self.acquires,
            self.holds,
            self.acquire_errors,
            self.operations(),
            self.faults,
            self.losses,
            self.writes_accepted,
            self.writes_refused,
            self.writes_failed,
            self.blind_writes,
            self.blind_refused,
            self.max_acquire_ns as f64 / 1e6,
            self.stale_accepted,
            self.violations.len()
        )?;
        if self.read_holds + self.multi_holds > 0 {
            write!(
                f,
                ", read holds {}, multi-key holds {}",
                self.read_holds, self.multi_holds
            )?;
        }
        if self.fifo_grants > 0 {
            write!(
                f,
                ", fair grants {} ({} out of arrival order, {} pairs)",
                self.fifo_grants, self.fifo_overtaking, self.fifo_pairs
            )?;
        }
        for v in self.violations.iter().take(50) {
            write!(f, "\n  - {v}")?;
        }
        if self.violations.len() > 50 {
            write!(f, "\n  ... and {} more", self.violations.len() - 50)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(log: &str) -> History {
        History::parse(&[(0, log.to_owned())], "")
    }

    #[test]
    fn a_clean_history_passes() {
        let h = history(
            "1 start 0 1 500 1000 300\n\
             10 inv 0.0.1 k\n20 ok 0.0.1 5\n21 chk 0.0.1 1\n22 win 0.0.1 5 1\n23 wok 0.0.1 1\n\
             30 rel 0.0.1 1\n31 rok 0.0.1\n\
             32 inv 0.0.2 k\n40 ok 0.0.2 6\n41 h 0.0.2\n50 rel 0.0.2 1\n51 rok 0.0.2\n60 end\n",
        );
        let r = h.check();
        assert!(r.violations.is_empty(), "{r}");
        assert_eq!((r.holds, r.writes_accepted), (2, 1));
    }

    #[test]
    fn overlap_fence_order_and_stale_writes_are_caught() {
        let a = "1 start 0 1 500 1000 300\n10 inv 0.0.1 k\n20 ok 0.0.1 7\n21 h 0.0.1\n\
                 45 h 0.0.1\n46 win 0.0.1 7 1\n47 wok 0.0.1 1\n50 rel 0.0.1 1\n51 rok 0.0.1\n60 end\n";
        // b holds (with an older fence) while a does, and writes after a's write landed.
        let b = "1 start 1 1 500 1000 300\n25 inv 1.0.1 k\n30 ok 1.0.1 6\n31 chk 1.0.1 1\n\
                 48 win 1.0.1 6 1\n49 wok 1.0.1 1\n52 rel 1.0.1 1\n53 rok 1.0.1\n60 end\n";
        let h = History::parse(&[(0, a.into()), (1, b.into())], "");
        let r = h.check();
        let all = r
            .violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(all.contains("overlap"), "{all}");
        assert!(all.contains("fence out of order"), "{all}");
        assert!(all.contains("stale write accepted"), "{all}");
    }

    #[test]
    fn hangs_and_resurrections_are_caught() {
        let h = history(
            "1 start 0 1 500 1000 300\n10 inv 0.0.1 k\n20 ok 0.0.1 5\n21 h 0.0.1\n25 nh 0.0.1\n\
             30 h 0.0.1\n40 rel 0.0.1 1\n90 end\n",
        );
        let all = h
            .check()
            .violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(all.contains("held again"), "{all}");
        assert!(all.contains("release of 0.0.1 never returned"), "{all}");
    }

    fn listed(r: &Report) -> String {
        r.violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One hold: invoked at `inv`, granted at `ok` with `fences`, believed held from `from`
    /// to `to`, released after.
    fn hold_lines(id: &str, keys: &str, mode: &str, times: [u64; 4], fences: &[u64]) -> String {
        let [inv, ok, from, to] = times;
        let list = fences
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let extra = if fences.len() > 1 {
            format!(" {list}")
        } else {
            String::new()
        };
        format!(
            "{inv} inv {id} {keys} {mode}\n{ok} ok {id} {} 1000{extra}\n{from} h {id}\n{to} h {id}\n\
             {} rel {id} 1\n{} rok {id}\n",
            fences[0],
            to + 1,
            to + 2
        )
    }

    fn worker_log(id: usize, tasks: usize, fair: bool, holds: &[String]) -> String {
        format!(
            "1 start {id} 1 500 1000 300 {tasks} {}\n{}999999999 end\n",
            u8::from(fair),
            holds.concat()
        )
    }

    #[test]
    fn readers_share_and_a_writer_overlapping_a_reader_is_caught() {
        let r0 = hold_lines("0.0.1", "k", "r", [10, 20, 21, 50], &[5]);
        let r1 = hold_lines("1.0.1", "k", "r", [11, 22, 23, 40], &[5]);
        let clean = History::parse(
            &[
                (0, worker_log(0, 1, false, std::slice::from_ref(&r0))),
                (1, worker_log(1, 1, false, std::slice::from_ref(&r1))),
            ],
            "",
        )
        .check();
        assert!(clean.violations.is_empty(), "{clean}");
        assert_eq!(clean.read_holds, 2);

        let w = hold_lines("2.0.1", "k", "w", [25, 30, 31, 45], &[6]);
        let h = History::parse(
            &[
                (0, worker_log(0, 1, false, &[r0])),
                (1, worker_log(1, 1, false, &[r1])),
                (2, worker_log(2, 1, false, &[w])),
            ],
            "",
        );
        let r = h.check();
        let all = listed(&r);
        assert!(
            all.contains("overlap on `k`: 2.0.1 held it from 31 while 0.0.1"),
            "{all}"
        );
        assert!(!r.violations_of(Rule::Overlap).is_empty());
    }

    #[test]
    fn a_multi_key_hold_counts_on_each_of_its_keys() {
        // 0.0.1 holds {a}:x and ключ together; 1.0.1 takes ключ alone while it does.
        let m = hold_lines("0.0.1", "%7Ba%7D:x,ключ", "x", [10, 20, 21, 50], &[5, 7]);
        let one = hold_lines("1.0.1", "ключ", "x", [25, 30, 31, 40], &[8]);
        let h = History::parse(
            &[
                (0, worker_log(0, 1, false, std::slice::from_ref(&m))),
                (1, worker_log(1, 1, false, &[one])),
            ],
            "",
        );
        assert_eq!(h.holds[0].keys, ["{a}:x", "ключ"]);
        assert_eq!(h.holds[0].fence_of("ключ"), Some(7));
        let r = h.check();
        let all = listed(&r);
        assert!(all.contains("overlap on `ключ`"), "{all}");
        assert!(!all.contains("overlap on `{a}:x`"), "{all}");
        assert_eq!(r.multi_holds, 1);

        // Its fence of each key takes part in that key's fence order: 1.0.1 asks after the
        // multi hold was granted, on the other key this time, and gets an older fence.
        let later = hold_lines("1.0.1", "%7Ba%7D:x", "x", [60, 70, 71, 80], &[4]);
        let r = History::parse(
            &[
                (0, worker_log(0, 1, false, &[m])),
                (1, worker_log(1, 1, false, &[later])),
            ],
            "",
        )
        .check();
        let all = listed(&r);
        assert!(all.contains("fence out of order on `{a}:x`"), "{all}");
    }

    #[test]
    fn a_reader_must_carry_the_last_writers_fence() {
        let w = hold_lines("0.0.1", "k", "w", [10, 20, 21, 30], &[10]);
        let next = hold_lines("0.0.2", "k", "w", [60, 70, 71, 80], &[20]);
        let judge = |reader_fence: u64, tasks: usize, exact: bool| {
            let r = hold_lines("1.0.1", "k", "r", [15, 40, 41, 50], &[reader_fence]);
            let mut history = History::parse(
                &[
                    (0, worker_log(0, tasks, false, &[w.clone(), next.clone()])),
                    (1, worker_log(1, 1, false, &[r])),
                ],
                "",
            );
            history.exact_reader_fences = exact;
            history.check()
        };
        let run = |reader_fence: u64, tasks: usize| judge(reader_fence, tasks, true);
        // Without exact reader fences (Redis: the counter lifted to the server clock), only
        // the bounds are judged.
        assert!(judge(11, 1, false).violations.is_empty());
        assert!(!judge(9, 1, false).violations.is_empty());
        assert!(!judge(20, 1, false).violations.is_empty());
        assert!(run(10, 1).violations.is_empty(), "{}", run(10, 1));
        let below = listed(&run(9, 1));
        assert!(
            below.contains("reader 1.0.1 of `k` got fence 9 below 10 of writer 0.0.1"),
            "{below}"
        );
        let after = listed(&run(20, 1));
        assert!(after.contains("not below 20 of writer 0.0.2"), "{after}");
        let spare = listed(&run(11, 1));
        assert!(
            spare.contains("got fence 11, not 10 of the last writer 0.0.1"),
            "{spare}"
        );
        // A writer of a process with several tasks may have reserved spare fences for
        // handovers; the reader then sees the counter's top.
        let many = run(11, 4);
        assert!(many.violations.is_empty(), "{many}");
        assert!(!run(11, 1).violations_of(Rule::ReaderFence).is_empty());
    }

    #[test]
    fn fair_grants_out_of_arrival_order_are_caught() {
        let ms = 1_000_000;
        // A asks at 10 ms, B at `b_inv` (the slack is 10 ms); the lock is busy until 50 ms; the fences follow
        // the grants, so only the FIFO rule can fire.
        let run = |b_inv: u64, a_ok: u64, b_ok: u64, fair: bool, expect: bool| {
            let (fa, fb) = if a_ok < b_ok { (5, 6) } else { (6, 5) };
            let a = hold_lines(
                "0.0.1",
                "k",
                "x",
                [10 * ms, a_ok, a_ok + 1, a_ok + ms],
                &[fa],
            );
            let b = hold_lines("1.0.1", "k", "x", [b_inv, b_ok, b_ok + 1, b_ok + ms], &[fb]);
            let mut h = History::parse(
                &[
                    (0, worker_log(0, 1, fair, &[a])),
                    (1, worker_log(1, 1, fair, &[b])),
                ],
                "",
            );
            h.expect_fifo = expect;
            h.check()
        };
        let in_order = run(30 * ms, 50 * ms, 60 * ms, true, true);
        assert!(in_order.violations.is_empty(), "{in_order}");
        assert_eq!(in_order.fifo_grants, 2);
        // B granted first while A still waited: out of order.
        let swapped = run(30 * ms, 60 * ms, 50 * ms, true, true);
        let fifo = swapped.violations_of(Rule::Fifo);
        assert_eq!(fifo.len(), 1, "{swapped}");
        assert!(
            fifo[0].what.contains("1 pair(s)")
                && fifo[0]
                    .what
                    .contains("1.0.1 was granted while 0.0.1, invoked 20.0 ms before it"),
            "{swapped}"
        );
        assert_eq!((swapped.fifo_pairs, swapped.fifo_overtaking), (1, 1));
        assert_eq!(swapped.violations.len(), 1, "{swapped}");
        // Measured but not judged when the run does not expect FIFO.
        let measured = run(30 * ms, 60 * ms, 50 * ms, true, false);
        assert!(measured.violations.is_empty(), "{measured}");
        assert_eq!(measured.fifo_pairs, 1);
        // Not fair locks: no order promised.
        let unfair = run(30 * ms, 60 * ms, 50 * ms, false, true);
        assert!(unfair.violations.is_empty(), "{unfair}");
        assert_eq!(unfair.fifo_grants, 0);
        // Within the slack: no order promised either.
        let close = run(12 * ms, 60 * ms, 50 * ms, true, true);
        assert!(close.violations.is_empty(), "{close}");
    }

    #[test]
    fn a_clean_mixed_history_passes() {
        let ms = 1_000_000;
        // A writer, two readers sharing its fence, a multi-key hold over the key and another
        // one, then a fair single-key hold, in arrival order.
        let w = hold_lines("0.0.1", "k", "w", [ms, 2 * ms, 2 * ms + 1, 3 * ms], &[10]);
        let r1 = hold_lines(
            "1.0.1",
            "k",
            "r",
            [4 * ms, 5 * ms, 5 * ms + 1, 7 * ms],
            &[10],
        );
        let r2 = hold_lines(
            "2.0.1",
            "k",
            "r",
            [4 * ms, 6 * ms, 6 * ms + 1, 8 * ms],
            &[10],
        );
        let m = hold_lines(
            "0.0.2",
            "j,k",
            "x",
            [9 * ms, 10 * ms, 10 * ms + 1, 11 * ms],
            &[3, 11],
        );
        let f = hold_lines(
            "1.0.2",
            "k",
            "x",
            [12 * ms, 13 * ms, 13 * ms + 1, 14 * ms],
            &[12],
        );
        let mut h = History::parse(
            &[
                (0, worker_log(0, 1, false, &[w, m])),
                (1, worker_log(1, 1, true, &[r1, f])),
                (2, worker_log(2, 1, false, &[r2])),
            ],
            "",
        );
        h.expect_fifo = true;
        let r = h.check();
        assert!(r.violations.is_empty(), "{r}");
        assert_eq!((r.holds, r.read_holds, r.multi_holds), (5, 2, 1));
    }

    #[test]
    fn keys_survive_the_command_line_and_the_log() {
        for key in [
            "plain",
            "{tag}:x",
            "ключ",
            "a b",
            "50%",
            "a,b",
            "%41",
            "new\nline",
            "%+1",
        ] {
            let encoded = encode_key(key);
            assert!(
                !encoded.contains([',', ' ', '\n']),
                "{key:?} -> {encoded:?}"
            );
            assert_eq!(decode_key(&encoded), key);
        }
        // Old, unencoded keys read as themselves.
        assert_eq!(decode_key("hist"), "hist");
        assert_eq!(decode_key("100%"), "100%");
    }

    #[test]
    fn spec_round_trips_through_the_command_line() {
        let spec = WorkerSpec::new("redis://a", "redis://b")
            .sentinel(&["redis://s1".into(), "redis://s2".into()], "mymaster")
            .keys(&["x", "y"])
            .tasks(3)
            .block(Duration::from_millis(700), 4)
            .current_thread(false)
            .semaphore(3);
        let args = spec.to_args(7, Path::new("/tmp/w.log"));
        let (id, log, back) = WorkerSpec::from_args(&args).unwrap();
        assert_eq!((id, log.as_path()), (7, Path::new("/tmp/w.log")));
        assert_eq!(back, spec);
        let cluster = WorkerSpec::new("redis://a", "redis://b")
            .cluster(&["redis://c1".into(), "redis://c2".into()]);
        let args = cluster.to_args(1, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, cluster);
        let zookeeper = WorkerSpec::new("127.0.0.1:1", "redis://b")
            .zookeeper("127.0.0.1:1,127.0.0.1:2", Duration::from_millis(2500));
        assert_eq!(zookeeper.urls, ["127.0.0.1:1", "127.0.0.1:2"]);
        let args = zookeeper.to_args(2, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, zookeeper);
        let rw = WorkerSpec::new("redis://a", "redis://b")
            .keys(&["{a}:b", "ключ", "a b", "50%", "x,y"])
            .read_write(70)
            .fair(true);
        let args = rw.to_args(4, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, rw);
        let multi = rw.clone().multi(3);
        let args = multi.to_args(5, Path::new("/tmp/w.log"));
        assert!(WorkerSpec::from_args(&args)
            .unwrap_err()
            .contains("do not go together"));
        let multi = WorkerSpec {
            read_percent: None,
            ..multi
        };
        let args = multi.to_args(5, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, multi);
        let too_many = multi.clone().multi(6).to_args(5, Path::new("/tmp/w.log"));
        assert!(WorkerSpec::from_args(&too_many).is_err());
        // A command line from before --read-percent and --multi: one exclusive key.
        let old = WorkerSpec::new("redis://a", "redis://b");
        let mut args = old.to_args(6, Path::new("/tmp/w.log"));
        let at = args.iter().position(|a| a == "--read-percent").unwrap();
        args.truncate(at);
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, old);
        let etcd = WorkerSpec::new("redis://unused", "redis://b").etcd(
            &["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            Duration::from_secs(3),
        );
        assert_eq!(etcd.urls, ["http://127.0.0.1:1", "http://127.0.0.1:2"]);
        let args = etcd.to_args(3, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, etcd);
        let leader = WorkerSpec::new("redis://a", "redis://b")
            .leader()
            .fence_ttl(Duration::from_secs(1));
        let args = leader.to_args(8, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, leader);
        let args = leader
            .clone()
            .semaphore(3)
            .to_args(8, Path::new("/tmp/w.log"));
        assert!(WorkerSpec::from_args(&args)
            .unwrap_err()
            .contains("--leader"));
    }

    #[test]
    fn more_permit_holders_than_permits_are_caught() {
        let log = |w: usize, from: u64, to: u64| {
            format!(
                "1 start {w} 1 500 1000 300\n2 sem 2\n{from} inv {w}.0.1 k\n{} ok {w}.0.1 {from} 0\n\
                 {} h {w}.0.1\n{to} h {w}.0.1\n{} rel {w}.0.1 0\n{} rok {w}.0.1\n90 end\n",
                from + 1,
                from + 2,
                to + 1,
                to + 2
            )
        };
        // Two holders of two permits at once are fine; a third one at that instant is not.
        let two = History::parse(&[(0, log(0, 10, 40)), (1, log(1, 20, 50))], "");
        let r = two.check();
        assert!(r.violations.is_empty(), "{r}");
        assert_eq!(r.most_permit_holders, 2);
        let three = History::parse(
            &[
                (0, log(0, 10, 40)),
                (1, log(1, 20, 50)),
                (2, log(2, 30, 60)),
            ],
            "",
        );
        let r = three.check();
        assert_eq!(r.violations_of(Rule::Permits).len(), 1, "{r}");
        // Back to back (one's last belief before the other's first) is no overlap.
        let chained = History::parse(
            &[
                (0, log(0, 10, 40)),
                (1, log(1, 20, 50)),
                (2, log(2, 38, 60)),
            ],
            "",
        );
        assert_eq!(chained.check().violations_of(Rule::Permits).len(), 1);
        let after = History::parse(
            &[
                (0, log(0, 10, 40)),
                (1, log(1, 20, 50)),
                (2, log(2, 39, 60)),
            ],
            "",
        );
        assert!(after.check().violations.is_empty());
    }

    /// The fence rule holds for every kind of hold alike: fed histories in which only the
    /// fence of a reader, a permit holder, a leader or one key of a multi-key hold goes
    /// back (as a counter restored from an old snapshot, or expired, would make it), the
    /// checker reports each.
    #[test]
    fn fences_go_back_for_no_kind_of_hold() {
        let ms = 1_000_000;
        let at = |n: u64| [n * ms, n * ms + 1, n * ms + 2, n * ms + 3];
        let judge = |logs: Vec<String>| {
            let logs: Vec<(usize, String)> = logs.into_iter().enumerate().collect();
            History::parse(&logs, "").check()
        };
        let fence_order = |r: &Report| {
            r.violations_of(Rule::FenceOrder)
                .iter()
                .map(|v| v.what.clone())
                .collect::<Vec<_>>()
        };

        // Readers: a reader after a reader (no writer in between) with a lower fence, as a
        // reader of a counter restored from a snapshot gets; equal fences are fine.
        let reader = |id: &str, n: u64, f: u64| hold_lines(id, "k", "r", at(n), &[f]);
        let w = hold_lines("0.0.1", "k", "w", at(1), &[100]);
        let ok = judge(vec![
            worker_log(0, 1, false, std::slice::from_ref(&w)),
            worker_log(
                1,
                1,
                false,
                &[reader("1.0.1", 2, 100), reader("1.0.2", 3, 100)],
            ),
        ]);
        assert!(ok.violations.is_empty(), "{ok}");
        let back = judge(vec![
            worker_log(0, 1, false, std::slice::from_ref(&w)),
            worker_log(
                1,
                1,
                false,
                &[reader("1.0.1", 2, 150), reader("1.0.2", 3, 7)],
            ),
        ]);
        assert_eq!(
            fence_order(&back),
            ["fence out of order on `k`: reader 1.0.1 got 150 before reader 1.0.2 asked, which got 7"],
            "{back}"
        );
        // A writer after a reader must be above it, not equal.
        let tie = judge(vec![
            worker_log(0, 1, false, &[reader("0.0.1", 1, 100)]),
            worker_log(1, 1, false, &[hold_lines("1.0.1", "k", "w", at(2), &[100])]),
        ]);
        assert_eq!(
            fence_order(&tie),
            ["fence out of order on `k`: reader 0.0.1 got 100 before 1.0.1 asked, which got 100"],
            "{tie}"
        );

        // Permits: each holder's fence above every earlier holder's, and unique.
        let permit = |w: usize, n: u64, f: u64| {
            format!(
                "1 start {w} 1 500 1000 300\n2 sem 3\n{}999999999 end\n",
                hold_lines(&format!("{w}.0.1"), "k", "x", at(n), &[f])
            )
        };
        let ok = judge(vec![permit(0, 1, 5), permit(1, 2, 6), permit(2, 3, 7)]);
        assert!(ok.violations.is_empty(), "{ok}");
        let ones = judge(vec![permit(0, 1, 1), permit(1, 2, 1)]);
        let ones = fence_order(&ones);
        assert!(
            ones.contains(&"fence 1 of semaphore `k` handed to both 0.0.1 and 1.0.1".to_owned())
                && ones.contains(
                    &"fence out of order on semaphore `k`: 0.0.1 got 1 before 1.0.1 asked, which got 1"
                        .to_owned()
                ),
            "{ones:?}"
        );
        // A semaphore's counter is not the lock's of the same name.
        let apart = judge(vec![
            permit(0, 1, 50),
            worker_log(1, 1, false, &[hold_lines("1.0.1", "k", "x", at(2), &[10])]),
        ]);
        assert!(apart.violations.is_empty(), "{apart}");

        // Leader terms.
        let leader = |w: usize, n: u64, term: u64| {
            format!(
                "1 start {w} 1 500 1000 300\n2 ldr\n{}999999999 end\n",
                hold_lines(&format!("{w}.0.1"), "k", "x", at(n), &[term])
            )
        };
        let ok = judge(vec![leader(0, 1, 5), leader(1, 2, 6)]);
        assert!(ok.violations.is_empty(), "{ok}");
        let back = judge(vec![leader(0, 1, 6), leader(1, 2, 5)]);
        assert_eq!(
            fence_order(&back),
            ["fence out of order on election `k`: 0.0.1 got 6 before 1.0.1 asked, which got 5"],
            "{back}"
        );

        // One key of a multi-key hold behind a reader of that key.
        let m = hold_lines("1.0.1", "j,k", "x", at(3), &[9, 99]);
        let w = hold_lines("0.0.1", "k", "w", at(1), &[90]);
        let back = judge(vec![
            worker_log(0, 1, false, &[w, reader("0.0.2", 2, 100)]),
            worker_log(1, 1, false, &[m]),
        ]);
        assert_eq!(
            fence_order(&back),
            ["fence out of order on `k`: reader 0.0.2 got 100 before 1.0.1 asked, which got 99"],
            "{back}"
        );
    }

    #[test]
    fn bad_servers_are_refused() {
        let bad_ones = [
            "",
            "redlock",
            "sentinel:",
            "zookeeper:2s",
            "cluster:x",
            "etcd:3s",
        ];
        for bad in bad_ones {
            let err = LockServers::from_arg(bad).expect_err(bad);
            assert!(err.contains("--servers"), "{err}");
        }
    }
}
