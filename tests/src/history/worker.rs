//! What one `history_worker` process does, as a [`WorkerSpec`], and how it travels over the
//! command line ([`WorkerSpec::to_args`], [`WorkerSpec::from_args`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::log::{decode_key, encode_key};
use super::resource::Fencing;

/// The settings of one `history_worker` process; [`WorkerSpec::to_args`] and
/// [`WorkerSpec::from_args`] carry it over the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct WorkerSpec {
    /// The servers the locks are taken through, as [`servers`](Self::servers) says.
    pub urls: Vec<String>,
    /// What `urls` are.
    pub servers: LockServers,
    /// The resource's store (never faulted by the tests): a Redis server (`redis://`) or a
    /// PostgreSQL database (`postgres://`), as the scheme says.
    pub resource_url: String,
    /// How the worker fences its read-compute-write of the resource: a claim first (the
    /// default), or the write alone (`--resource-fencing write-only`, the old pattern).
    pub fencing: Fencing,
    /// How long a write computes between its read and its write.
    pub compute: Duration,
    /// How long one update of the resource (its claim, read and write) may take besides its
    /// compute time before the worker gives it up as failed.
    pub update_limit: Duration,
    /// The lock keys; each acquisition picks one at random.
    pub keys: Vec<String>,
    /// The locker's key prefix.
    pub prefix: String,
    /// Tasks per process taking locks concurrently (more than one exercises the local queue
    /// and the handover without a round trip).
    pub tasks: usize,
    /// How long the worker runs; it finishes the current hold, then exits.
    pub duration: Duration,
    /// Holds per task, after which the task ends even before `duration` ran out; `None` for
    /// as many as fit in it.
    pub max_holds: Option<u32>,
    /// The lease of every acquisition.
    pub lease: Duration,
    /// How long an acquire waits for a busy lock.
    pub wait: Duration,
    /// The locker's bound on one Redis call.
    pub op_timeout: Duration,
    /// How long a hold lasts (it writes `writes` times, spread over it).
    pub hold: Duration,
    /// Writes to the resource per hold (each a read, a compute and a write back), after the
    /// first one made right after acquiring.
    pub writes: u32,
    /// The longest random pause between two holds of one task.
    pub gap: Duration,
    /// Block the Tokio runtime for this long in some holds (scenario 5); zero for never.
    pub block: Duration,
    /// Block in every `block_every`-th hold of a task.
    pub block_every: u32,
    /// Run on a current-thread runtime (a block then stops everything, watchdog included).
    pub current_thread: bool,
    /// Take the locks with `fair(true)` (single-key locks and writes; readers have no fair
    /// mode, and multi-key holds take none here).
    pub fair: bool,
    /// Read-write mode: `Some(p)` takes `p` % of the holds with `read_lock` (readers only
    /// check `is_held()`, they do not write) and the rest with `write_lock`; `None` takes
    /// every hold with `lock`.
    pub read_percent: Option<u32>,
    /// Multi-key mode: each hold takes `lock_all` of this many distinct keys of `keys`,
    /// picked at random and named in random order, and its writes claim every key's record,
    /// then move money between the wallets of its first two keys (see
    /// [`Update`](super::Update)); 0 takes one key with `lock`.
    pub multi: usize,
    /// Take one permit of a semaphore of this many for each key instead of the lock; 0 for
    /// locks. The checker counts holders instead of looking for overlaps, and judges each
    /// holder's fence by the rule of every fence (above every fence of the semaphore handed
    /// out before). Holds of a semaphore of 1 permit write as a lock's do (the permit guards
    /// the write, with the permit's fence); with more permits they make no writes (permit
    /// holders share the resource).
    pub permits: u32,
    /// Campaign for the leadership of an election named by the key instead of taking the
    /// lock (`Locker::leader`); the hold's fence is the leader's term, and its writes carry
    /// it.
    pub leader: bool,
    /// The locker's `fence_ttl` (how long a fence counter outlives its last use); `None`
    /// for the library's default.
    pub fence_ttl: Option<Duration>,
}

/// How long a write computes between its read and its write unless a spec says otherwise: a
/// window, as in a real read-modify-write, for a late write to land in.
pub const DEFAULT_COMPUTE: Duration = Duration::from_millis(2);

/// How long one update may take besides its compute time unless a spec says otherwise.
pub const DEFAULT_UPDATE_LIMIT: Duration = Duration::from_secs(2);

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
    /// One MySQL or MariaDB database (`mysql://user:password@host:port/db`).
    Mysql,
}

impl LockServers {
    /// `redis`, `sentinel:NAME`, `cluster`, `zookeeper:MS`, `etcd:MS`, `postgres` or `mysql`,
    /// as on the command line.
    fn to_arg(&self) -> String {
        match self {
            LockServers::Redis => "redis".to_owned(),
            LockServers::Sentinel(master) => format!("sentinel:{master}"),
            LockServers::Cluster => "cluster".to_owned(),
            LockServers::ZooKeeper(session) => format!("zookeeper:{}", session.as_millis()),
            LockServers::Etcd(ttl) => format!("etcd:{}", ttl.as_millis()),
            LockServers::Postgres => "postgres".to_owned(),
            LockServers::Mysql => "mysql".to_owned(),
        }
    }

    fn from_arg(arg: &str) -> Result<Self, String> {
        match arg.split_once(':') {
            None if arg == "redis" => Ok(LockServers::Redis),
            None if arg == "cluster" => Ok(LockServers::Cluster),
            None if arg == "postgres" => Ok(LockServers::Postgres),
            None if arg == "mysql" => Ok(LockServers::Mysql),
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
                "--servers is `redis`, `sentinel:NAME`, `cluster`, `zookeeper:MS`, `etcd:MS`, \
                 `postgres` or `mysql`, not `{arg}`"
            )),
        }
    }
}

impl WorkerSpec {
    /// Defaults for a short scenario: one key, one task, lease 500 ms, wait 3 s, op timeout
    /// 300 ms, holds of 30 ms with 2 writes, each computing for 2 ms between its read and its
    /// write, runs 5 s. The resource's fencing is [`Fencing::from_env`] (a claim, unless
    /// `LEASEHOLD_RESOURCE_FENCING=write-only`).
    pub fn new(lock_url: &str, resource_url: &str) -> Self {
        WorkerSpec {
            urls: vec![lock_url.to_owned()],
            servers: LockServers::Redis,
            resource_url: resource_url.to_owned(),
            fencing: Fencing::from_env(),
            compute: DEFAULT_COMPUTE,
            update_limit: DEFAULT_UPDATE_LIMIT,
            keys: vec!["hist".to_owned()],
            prefix: "leasehold".to_owned(),
            tasks: 1,
            duration: Duration::from_secs(5),
            max_holds: None,
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

    /// Sets how the resource is fenced.
    pub fn fencing(mut self, fencing: Fencing) -> Self {
        self.fencing = fencing;
        self
    }

    /// Sets how long each write computes between its read and its write.
    pub fn compute(mut self, compute: Duration) -> Self {
        self.compute = compute;
        self
    }

    /// Ends each task after `holds` holds (or at the end of its duration, if that comes
    /// first): a worker whose part in a scenario is a number of holds, not a span of time.
    pub fn max_holds(mut self, holds: u32) -> Self {
        self.max_holds = Some(holds);
        self
    }

    /// Sets how long one update may take besides its compute time.
    pub fn update_limit(mut self, limit: Duration) -> Self {
        self.update_limit = limit;
        self
    }

    /// Sets the resource's store (`redis://` or `postgres://`).
    pub fn resource(mut self, url: &str) -> Self {
        self.resource_url = url.to_owned();
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

    /// Takes the locks in the MySQL or MariaDB database at `url`.
    pub fn mysql(mut self, url: &str) -> Self {
        self.urls = vec![url.to_owned()];
        self.servers = LockServers::Mysql;
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
            "--resource-fencing".into(),
            self.fencing.to_string(),
            "--compute-ms".into(),
            ms(self.compute),
            "--update-limit-ms".into(),
            ms(self.update_limit),
            "--max-holds".into(),
            self.max_holds
                .map_or_else(|| "all".to_owned(), |n| n.to_string()),
        ]
    }

    /// Parses what [`to_args`](Self::to_args) wrote: `(id, log path, spec)`. Command lines
    /// from before `--read-percent`, `--multi`, `--permits`, `--leader`, `--fence-ttl-ms`,
    /// `--resource-fencing`, `--compute-ms`, `--update-limit-ms` and `--max-holds` existed
    /// still parse (as `off`, 0, 0, false, the default, `claim`, [`DEFAULT_COMPUTE`],
    /// [`DEFAULT_UPDATE_LIMIT`] and `all`).
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
            fencing: match map.get("resource-fencing") {
                None => Fencing::Claim,
                Some(f) => f.parse().map_err(|e| format!("--resource-fencing: {e}"))?,
            },
            compute: match map.get("compute-ms") {
                None => DEFAULT_COMPUTE,
                Some(_) => ms("compute-ms")?,
            },
            update_limit: match map.get("update-limit-ms") {
                None => DEFAULT_UPDATE_LIMIT,
                Some(_) => ms("update-limit-ms")?,
            },
            max_holds: match map.get("max-holds").map(String::as_str) {
                None | Some("all") => None,
                Some(_) => Some(num("max-holds")? as u32),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // A command line from before --read-percent and --multi: one exclusive key, claims.
        let old = WorkerSpec::new("redis://a", "redis://b").fencing(Fencing::Claim);
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
        let old_way = WorkerSpec::new("redis://a", "postgres://p@h/db")
            .fencing(Fencing::WriteOnly)
            .compute(Duration::from_millis(700))
            .update_limit(Duration::from_secs(9))
            .max_holds(2);
        let args = old_way.to_args(9, Path::new("/tmp/w.log"));
        assert_eq!(WorkerSpec::from_args(&args).unwrap().2, old_way);
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
