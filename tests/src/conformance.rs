//! The engines of the conformance suite (`tests/tests/conformance/main.rs`): [`Engine::start`] runs
//! one deployment of a lock engine, every lock server behind a [`TcpProxy`] so the suite can
//! stall it, and is the only place in the suite that knows how an engine is deployed.
//!
//! Adding an engine means one [`EngineKind`] variant, its arms
//! here, and its name in the suite's property lists; an engine is done when every property
//! passes against it.
//!
//! ```no_run
//! use std::time::Duration;
//! use leasehold_tests::conformance::{Engine, EngineKind};
//!
//! # async fn demo() {
//! let engine = Engine::start(EngineKind::Single).await;
//! let locker = engine.locker().await;
//! let guard = locker.lock("k").acquire().await.unwrap();
//! assert!(engine.stall()); // every lock server stops answering
//! assert!(guard.release().await.is_err());
//! engine.heal();
//! # }
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use leasehold::{Locker, LockerBuilder, DEFAULT_CONNECT_TIMEOUT};

use crate::harness::{
    eventually, EtcdCluster, EtcdServer, Held, MysqlServer, PgServer, ProxyMode, RedisCluster,
    RedisServer, SentinelSetup, Sentinels, TcpProxy, ZkServer,
};
use crate::history::WorkerSpec;

/// The bound on one call to a lock server, for every locker the suite builds.
pub const OP_TIMEOUT: Duration = Duration::from_millis(500);

/// The key prefix of every locker the suite builds.
pub const PREFIX: &str = "conf";

/// How long a sentinel waits before it calls a silent master down. Far beyond any stall of the
/// suite: a stalled or killed master must stay the master, not be failed over to its replica
/// (which would bring the engine back and test Sentinel's failover instead of the property).
const SENTINEL_DOWN_AFTER_MS: u64 = 60_000;

/// The session timeout of every ZooKeeper locker of the suite, which bounds its leases (a
/// longer lease is shortened to it). 4 s keeps every property meaningful there:
/// - the suite's `LONG_LEASE` (10 s) becomes 4 s, still twice the 2 s `HANDOVER` within which
///   a released lock must reach the next owner, so a handover still tells a release from an
///   expiry (at 2 s it could not);
/// - the watchdog's 600 ms, the loss's 1 s and the stalled holder's 3 s leases stay as they are
///   on every other engine (below 3 s the last would be shortened and could run out during
///   the stall, making its release `Lost` where the property checks `Unavailable`);
/// - it is short enough that a session the server expires (a stall, a killed client) frees its
///   znodes within the suite's waits.
pub const ZK_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// The TTL of every etcd locker's etcd lease, which bounds its leases as a ZooKeeper session
/// does, for the same reasons the same 4 s as [`ZK_SESSION_TIMEOUT`] (a whole number of
/// seconds, as etcd counts).
pub const ETCD_LEASE_TTL: Duration = Duration::from_secs(4);

/// What a locker's health promises on one engine when every lock server stops answering, for
/// the suite's settings ([`OP_TIMEOUT`], [`ZK_SESSION_TIMEOUT`], [`ETCD_LEASE_TTL`]): the table
/// of `EngineState`'s docs, read for this deployment. Bounds count from the moment the servers
/// stopped answering (or answered again), before any slack for a loaded machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthBounds {
    /// How soon a locker with no traffic and no lease is suspended; `None` where it hears of
    /// nothing before its next call (a Redis server, RedLock, memory).
    pub idle_suspended: Option<Duration>,
    /// How soon a locker that holds no lease is lost: its session ended; `None` where locks are
    /// no session's (only a lease that ran out makes them lost).
    pub session_lost: Option<Duration>,
    /// The longest a waiting acquire sleeps between attempts: its next one is sent within it.
    pub nap: Duration,
    /// How soon a locker that was suspended or lost sends the probe that finds the engine back,
    /// once it answers again (the probe's own round trip comes on top).
    pub reconnected: Duration,
}

/// How long a Cluster may take to announce its proxies' ports on every node.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(20);

/// One kind of lock engine: a deployment the suite knows how to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineKind {
    /// One `redis-server`.
    Single,
    /// RedLock over three independent `redis-server` masters.
    RedLock3,
    /// A Redis Cluster of three masters.
    Cluster,
    /// A master and a replica found through three Redis Sentinels.
    Sentinel,
    /// `Locker::in_memory`: one store per process, shared by clones of one locker.
    Memory,
    /// One standalone ZooKeeper server, with sessions of [`ZK_SESSION_TIMEOUT`].
    ZooKeeper,
    /// One single-member etcd cluster, each locker's etcd lease of [`ETCD_LEASE_TTL`].
    Etcd,
    /// A 3-member etcd cluster (every member behind a proxy, the client given all three).
    Etcd3,
    /// One PostgreSQL server (behind a proxy), its locks rows of a lease table.
    Postgres,
    /// One MariaDB server (behind a proxy), its locks rows of a lease table, reached as the
    /// harness's least-privilege user.
    Mysql,
}

impl EngineKind {
    /// Every engine the suite runs against.
    pub const ALL: [EngineKind; 10] = [
        EngineKind::Single,
        EngineKind::RedLock3,
        EngineKind::Cluster,
        EngineKind::Sentinel,
        EngineKind::Memory,
        EngineKind::ZooKeeper,
        EngineKind::Etcd,
        EngineKind::Etcd3,
        EngineKind::Postgres,
        EngineKind::Mysql,
    ];

    /// The engine's name in test names: `single`, `redlock3`, `cluster`, `sentinel`, `memory`,
    /// `zookeeper`, `etcd`, `etcd3`, `postgres`, `mysql`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Single => "single",
            EngineKind::RedLock3 => "redlock3",
            EngineKind::Cluster => "cluster",
            EngineKind::Sentinel => "sentinel",
            EngineKind::Memory => "memory",
            EngineKind::ZooKeeper => "zookeeper",
            EngineKind::Etcd => "etcd",
            EngineKind::Etcd3 => "etcd3",
            EngineKind::Postgres => "postgres",
            EngineKind::Mysql => "mysql",
        }
    }

    /// The engine called `name` (as [`name`](Self::name) gives it), if there is one.
    pub fn named(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether lockers in different processes share the engine's locks (false for
    /// [`Memory`](Self::Memory), whose store lives in one process).
    pub fn spans_processes(self) -> bool {
        self != EngineKind::Memory
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The processes of one running engine (or, for memory, its one store).
enum Servers {
    Single(RedisServer),
    RedLock(Vec<RedisServer>),
    Cluster(RedisCluster),
    /// Boxed: a sentinel setup is three servers and more, the largest variant by far.
    Sentinel(Box<SentinelSetup>),
    Memory(Locker),
    ZooKeeper(ZkServer),
    Etcd(EtcdServer),
    Etcd3(EtcdCluster),
    Postgres(PgServer),
    Mysql(MysqlServer),
}

/// A running engine: its servers, a proxy in front of each lock server, and how to reach,
/// stall and kill them. Dropping it stops everything.
pub struct Engine {
    kind: EngineKind,
    servers: Servers,
    /// One per lock server (none for memory); clients only ever talk to these.
    proxies: Vec<TcpProxy>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("kind", &self.kind)
            .field("proxies", &self.proxy_urls())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Starts an engine of `kind` and waits until a locker can use it through the proxies.
    ///
    /// # Panics
    /// When a server does not start or the deployment does not settle (the harness's messages,
    /// with the servers' logs).
    pub async fn start(kind: EngineKind) -> Engine {
        match kind {
            EngineKind::Single => {
                let server = RedisServer::start().await;
                let proxies = vec![TcpProxy::start(server.addr()).await];
                Engine::new(kind, Servers::Single(server), proxies)
            }
            EngineKind::RedLock3 => {
                let servers = RedisServer::start_many(3).await;
                let mut proxies = Vec::new();
                for server in &servers {
                    proxies.push(TcpProxy::start(server.addr()).await);
                }
                Engine::new(kind, Servers::RedLock(servers), proxies)
            }
            EngineKind::Cluster => {
                let cluster = RedisCluster::start(3).await;
                let mut proxies = Vec::new();
                for node in cluster.nodes() {
                    proxies.push(TcpProxy::start(node.addr()).await);
                }
                announce_proxies(&cluster, &proxies).await;
                Engine::new(kind, Servers::Cluster(cluster), proxies)
            }
            EngineKind::Sentinel => {
                let setup = Sentinels::start().await;
                // Only the master serves locks; the replica is never promoted (see
                // SENTINEL_DOWN_AFTER_MS), so it needs no proxy.
                let proxies = vec![TcpProxy::start(setup.master().addr()).await];
                monitor_through(&setup, &proxies[0]).await;
                Engine::new(kind, Servers::Sentinel(Box::new(setup)), proxies)
            }
            EngineKind::Memory => {
                let locker = options()
                    .build_in_memory()
                    .expect("the suite's options are valid");
                Engine::new(kind, Servers::Memory(locker), Vec::new())
            }
            EngineKind::ZooKeeper => {
                // The proxy is plain TCP: ZooKeeper's protocol goes through it as Redis's does.
                let server = ZkServer::start().await;
                let proxies = vec![TcpProxy::start(server.addr()).await];
                Engine::new(kind, Servers::ZooKeeper(server), proxies)
            }
            EngineKind::Etcd => {
                // gRPC over HTTP/2 is plain TCP to the proxy too.
                let server = EtcdServer::start().await;
                let proxies = vec![TcpProxy::start(server.addr()).await];
                Engine::new(kind, Servers::Etcd(server), proxies)
            }
            EngineKind::Etcd3 => {
                let cluster = EtcdCluster::start(3).await;
                let mut proxies = Vec::new();
                for member in cluster.members() {
                    proxies.push(TcpProxy::start(member.addr()).await);
                }
                Engine::new(kind, Servers::Etcd3(cluster), proxies)
            }
            EngineKind::Postgres => {
                let server = PgServer::start().await;
                let proxies = vec![TcpProxy::start(server.addr()).await];
                Engine::new(kind, Servers::Postgres(server), proxies)
            }
            EngineKind::Mysql => {
                let server = MysqlServer::start().await;
                let proxies = vec![TcpProxy::start(server.addr()).await];
                Engine::new(kind, Servers::Mysql(server), proxies)
            }
        }
    }

    fn new(kind: EngineKind, servers: Servers, proxies: Vec<TcpProxy>) -> Engine {
        Engine {
            kind,
            servers,
            proxies,
        }
    }

    /// Which engine this is.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The bound on one call to a lock server ([`OP_TIMEOUT`]).
    pub fn op_timeout(&self) -> Duration {
        OP_TIMEOUT
    }

    /// What the locker's health promises on this engine ([`HealthBounds`]).
    pub fn health_bounds(&self) -> HealthBounds {
        let (idle_suspended, session_lost) = match self.kind {
            // The client calls its connection lost after its connection timeout without an
            // answer (the connect timeout, at most 3/5 of the session timeout here), checked
            // every eighth of it; the session ends once it stayed disconnected for the whole
            // session timeout.
            EngineKind::ZooKeeper => {
                let disconnected = DEFAULT_CONNECT_TIMEOUT * 9 / 8;
                (Some(disconnected), Some(disconnected + ZK_SESSION_TIMEOUT))
            }
            // A keep-alive every third of the TTL, overdue after the op timeout; the lease is
            // given up a TTL after the last acknowledged one.
            EngineKind::Etcd | EngineKind::Etcd3 => {
                (Some(ETCD_LEASE_TTL / 3 + OP_TIMEOUT), Some(ETCD_LEASE_TTL))
            }
            // The listening connection's health check, every 2 s, bounded by the op timeout.
            EngineKind::Postgres => (Some(Duration::from_secs(2) + OP_TIMEOUT), None),
            // The wake log's reader asks the server every 2 s, bounded by the op timeout.
            EngineKind::Mysql => (Some(Duration::from_secs(2) + OP_TIMEOUT), None),
            _ => (None, None),
        };
        HealthBounds {
            idle_suspended,
            session_lost,
            nap: Duration::from_secs(1),
            reconnected: Duration::from_secs(1),
        }
    }

    /// The longest an acquire with `wait` may take by the library's promise: `wait + 3 ×
    /// op_timeout` (the RedLock bound, the loosest of the engines'), before any slack.
    pub fn acquire_bound(&self, wait: Duration) -> Duration {
        wait + 3 * OP_TIMEOUT
    }

    /// A builder configured for this engine (deployment, [`PREFIX`], [`OP_TIMEOUT`]). For
    /// memory it carries only the options: use [`locker`](Self::locker), since every
    /// `build_in_memory()` makes a separate store.
    pub fn builder(&self) -> LockerBuilder {
        let urls = self.proxy_urls();
        match &self.servers {
            Servers::Single(_) => options().url(urls[0].as_str()),
            Servers::RedLock(_) => options().redlock(urls),
            Servers::Cluster(_) => options().cluster(urls),
            Servers::Sentinel(setup) => {
                options().sentinel(setup.sentinel_urls(), setup.master_name())
            }
            Servers::Memory(_) => options(),
            Servers::ZooKeeper(_) => options()
                .zookeeper(self.zookeeper_hosts())
                .session_timeout(ZK_SESSION_TIMEOUT),
            Servers::Etcd(_) | Servers::Etcd3(_) => options()
                .etcd(self.etcd_endpoints())
                .session_timeout(ETCD_LEASE_TTL),
            Servers::Postgres(_) => options().postgres(self.postgres_url()),
            Servers::Mysql(server) => options().mysql(server.url_at(self.proxies[0].addr())),
        }
    }

    /// A locker on this engine. For a server engine each call connects a new client, which
    /// stands for another process; for memory it is a clone of the engine's one locker (one
    /// store per process: clones share it, and its local queue of waiters).
    ///
    /// # Panics
    /// When the locker cannot be built (the engine is down or stalled).
    pub async fn locker(&self) -> Locker {
        if let Servers::Memory(locker) = &self.servers {
            return locker.clone();
        }
        self.builder()
            .build()
            .await
            .unwrap_or_else(|e| panic!("cannot build a locker on the {} engine: {e}", self.kind))
    }

    /// The settings of history workers (separate processes) locking on this engine, writing
    /// to the fenced resource at `resource_url`; `None` for memory, whose locks no other
    /// process can see.
    pub fn worker_spec(&self, resource_url: &str) -> Option<WorkerSpec> {
        let urls = self.proxy_urls();
        let spec = match &self.servers {
            Servers::Single(_) | Servers::RedLock(_) => {
                WorkerSpec::new(&urls[0], resource_url).urls(&urls)
            }
            Servers::Cluster(_) => WorkerSpec::new(&urls[0], resource_url).cluster(&urls),
            Servers::Sentinel(setup) => WorkerSpec::new(&urls[0], resource_url)
                .sentinel(&setup.sentinel_urls(), setup.master_name()),
            Servers::ZooKeeper(_) => {
                let hosts = self.zookeeper_hosts();
                WorkerSpec::new(&hosts, resource_url).zookeeper(&hosts, ZK_SESSION_TIMEOUT)
            }
            Servers::Etcd(_) | Servers::Etcd3(_) => {
                WorkerSpec::new(&urls[0], resource_url).etcd(&self.etcd_endpoints(), ETCD_LEASE_TTL)
            }
            Servers::Postgres(_) => {
                WorkerSpec::new(&urls[0], resource_url).postgres(&self.postgres_url())
            }
            Servers::Mysql(server) => {
                let url = server.url_at(self.proxies[0].addr());
                WorkerSpec::new(&urls[0], resource_url).mysql(&url)
            }
            Servers::Memory(_) => return None,
        };
        Some(suite_settings(spec))
    }

    /// As [`worker_spec`](Self::worker_spec), for workers that reach the lock servers
    /// directly rather than through the proxies, so that a [`stall`](Self::stall) or
    /// [`cut`](Self::cut) leaves them alone: a test that cuts one holder off while the others
    /// go on. `None` for memory, and for Cluster and Sentinel, whose servers name the proxies
    /// to their clients.
    pub fn direct_worker_spec(&self, resource_url: &str) -> Option<WorkerSpec> {
        let spec = match &self.servers {
            Servers::Single(server) => WorkerSpec::new(&server.url(), resource_url),
            Servers::RedLock(servers) => {
                let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
                WorkerSpec::new(&urls[0], resource_url).urls(&urls)
            }
            Servers::ZooKeeper(server) => {
                let hosts = server.connect_string();
                WorkerSpec::new(&hosts, resource_url).zookeeper(&hosts, ZK_SESSION_TIMEOUT)
            }
            Servers::Etcd(server) => WorkerSpec::new(&server.endpoint(), resource_url)
                .etcd(&[server.endpoint()], ETCD_LEASE_TTL),
            Servers::Etcd3(cluster) => {
                let endpoints = cluster.endpoints();
                WorkerSpec::new(&endpoints[0], resource_url).etcd(&endpoints, ETCD_LEASE_TTL)
            }
            Servers::Postgres(server) => {
                WorkerSpec::new(&server.url(), resource_url).postgres(&server.url())
            }
            Servers::Mysql(server) => {
                WorkerSpec::new(&server.url(), resource_url).mysql(&server.url())
            }
            Servers::Cluster(_) | Servers::Sentinel(_) | Servers::Memory(_) => return None,
        };
        Some(suite_settings(spec))
    }

    /// Stalls every lock server, as a partition would: connections stay open, nothing is
    /// answered, until [`heal`](Self::heal). False (and nothing done) for memory.
    #[must_use = "false means the engine has no server to stall"]
    pub fn stall(&self) -> bool {
        self.set_mode(ProxyMode::Stall)
    }

    /// Ends a [`stall`](Self::stall): held bytes go through, the servers answer again.
    pub fn heal(&self) {
        self.set_mode(ProxyMode::Pass);
    }

    fn set_mode(&self, mode: ProxyMode) -> bool {
        for proxy in &self.proxies {
            proxy.set_mode(mode);
        }
        !self.proxies.is_empty()
    }

    /// Kills every lock server (SIGKILL), so that no lease can be renewed nor released; they
    /// stay down. For Sentinel the master, which the sentinels will not fail over in time.
    /// For ZooKeeper the server: its sessions can neither be proven alive nor expire, so a
    /// holder can only judge its lease on its own clock, as it must against any dead engine.
    /// For etcd the member: no keep-alive is answered, and a holder judges its lease the same
    /// way. False (and nothing done) for memory.
    #[must_use = "false means the engine has no server to take down"]
    pub fn take_down(&self) -> bool {
        match &self.servers {
            Servers::Single(server) => server.kill9(),
            Servers::RedLock(servers) => servers.iter().for_each(RedisServer::kill9),
            Servers::Cluster(cluster) => cluster.nodes().iter().for_each(RedisServer::kill9),
            Servers::Sentinel(setup) => setup.master().kill9(),
            Servers::ZooKeeper(server) => server.kill9(),
            Servers::Etcd(server) => server.kill9(),
            Servers::Etcd3(cluster) => cluster.members().iter().for_each(EtcdServer::kill9),
            Servers::Postgres(server) => server.kill9(),
            Servers::Mysql(server) => server.kill9(),
            Servers::Memory(_) => return false,
        }
        true
    }

    /// Cuts every connection to the lock servers and refuses new ones, as a network that
    /// resets them would, until [`heal`](Self::heal). False (and nothing done) for memory.
    #[must_use = "false means the engine has no server to cut off"]
    pub fn cut(&self) -> bool {
        self.set_mode(ProxyMode::Cut)
    }

    /// Arms every lock server's proxy to hold the next connection whose client sends bytes
    /// containing `pattern` (a lock key's name: every engine's requests carry it), in the
    /// direction(s) `held` names, until [`release_held`](Self::release_held) delivers what it
    /// held or [`cut_held`](Self::cut_held) closes it ([`TcpProxy::hold_next_sending`]): a call
    /// whose outcome its client cannot know, and every later call on that connection. On a
    /// deployment of several servers each proxy catches a connection of its own (RedLock's
    /// call to each node, the Cluster node that serves the key). False (and nothing done) for
    /// memory.
    #[must_use = "false means the engine has no connection to hold"]
    pub fn hold_next_sending(&self, pattern: &[u8], held: Held) -> bool {
        self.hold_nth_sending(pattern, 1, held)
    }

    /// As [`hold_next_sending`](Self::hold_next_sending), but each proxy lets the first
    /// `nth - 1` chunks with `pattern` in them through ([`TcpProxy::hold_nth_sending`]).
    #[must_use = "false means the engine has no connection to hold"]
    pub fn hold_nth_sending(&self, pattern: &[u8], nth: usize, held: Held) -> bool {
        for proxy in &self.proxies {
            proxy.hold_nth_sending(pattern, nth, held);
        }
        !self.proxies.is_empty()
    }

    /// How many connections [`hold_next_sending`](Self::hold_next_sending) caught since the
    /// engine started, over every proxy.
    pub fn caught(&self) -> usize {
        self.proxies.iter().map(TcpProxy::caught).sum()
    }

    /// Waits until the traps caught `at_least` connections in all (see
    /// [`caught`](Self::caught)), up to `within`; whether they did.
    pub async fn wait_caught(&self, at_least: usize, within: Duration) -> bool {
        let until = tokio::time::Instant::now() + within;
        while self.caught() < at_least {
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }

    /// Delivers what the caught connections held, in order, and disarms the traps.
    pub fn release_held(&self) {
        self.proxies.iter().for_each(TcpProxy::release_held);
    }

    /// Closes the caught connections, dropping what they held, and disarms the traps.
    pub fn cut_held(&self) {
        self.proxies.iter().for_each(TcpProxy::cut_held);
    }

    /// What [`restart`](Self::restart) can do on this engine: `(empty, from_data)`. A Redis
    /// server restarts either way (from its last [`snapshot`](Self::snapshot)); ZooKeeper,
    /// etcd, PostgreSQL and MariaDB keep their data by design and restart only from it; a Redis
    /// Cluster node, whose cluster state lives beside its data, and memory do not restart.
    pub fn restarts(&self) -> (bool, bool) {
        match &self.servers {
            Servers::Single(_) | Servers::RedLock(_) | Servers::Sentinel(_) => (true, true),
            Servers::ZooKeeper(_)
            | Servers::Etcd(_)
            | Servers::Etcd3(_)
            | Servers::Postgres(_)
            | Servers::Mysql(_) => (false, true),
            Servers::Cluster(_) | Servers::Memory(_) => (false, false),
        }
    }

    /// Whether a restart of this engine may lose or roll back locks (Redis restarted empty or
    /// from an older snapshot): exclusion then holds only for locks taken after it, and
    /// fences are what protect the resource.
    pub fn restart_loses_locks(&self, from_data: bool) -> bool {
        match &self.servers {
            Servers::Single(_) | Servers::Sentinel(_) => true,
            // One node of three: the majority still holds every lock.
            Servers::RedLock(_) => false,
            _ => !from_data,
        }
    }

    /// Whether [`failover`](Self::failover) does anything on this engine.
    pub fn fails_over(&self) -> bool {
        matches!(self.servers, Servers::Etcd3(_))
    }

    /// Forces a failover where the engine has one the suite can drive: on the 3-member etcd
    /// cluster the leader is killed and started again from its data, so another member
    /// leads (a leader change under the clients; no lock is lost). False (and nothing done)
    /// elsewhere: the suite's Sentinel setup monitors its master through a proxy that a
    /// promoted replica would not be behind (its failovers are scenario 9 and
    /// `tests/tests/integration/engines/redis/sentinel.rs`), and a Cluster node keeps its cluster state beside its data.
    pub async fn failover(&self) -> bool {
        if !self.fails_over() {
            return false;
        }
        match &self.servers {
            Servers::Etcd3(cluster) => {
                let leader = cluster.leader().await;
                cluster.members()[leader].restart().await;
                cluster.wait_until_serving().await;
                true
            }
            _ => false,
        }
    }

    /// Takes a snapshot of every Redis lock server's data (`SAVE`), for a later
    /// [`restart`](Self::restart) from data to come back to. False (and nothing done) on
    /// other engines.
    pub async fn snapshot(&self) -> bool {
        let servers: Vec<&RedisServer> = match &self.servers {
            Servers::Single(server) => vec![server],
            Servers::RedLock(servers) => servers.iter().take(1).collect(),
            Servers::Sentinel(setup) => vec![setup.master()],
            _ => return false,
        };
        for server in servers {
            let mut conn = server.conn().await;
            let saved: redis::RedisResult<()> = redis::cmd("SAVE").query_async(&mut conn).await;
            saved.unwrap_or_else(|e| panic!("SAVE on {}: {e}", server.addr()));
        }
        true
    }

    /// Restarts the lock server (SIGKILL, then start on the same port) and waits until it
    /// serves: empty, or from its data (Redis: its last [`snapshot`](Self::snapshot)). On
    /// RedLock and a 3-member etcd cluster one server of the three. Connections made before
    /// are broken. False (and nothing done) where [`restarts`](Self::restarts) says no.
    pub async fn restart(&self, from_data: bool) -> bool {
        let (empty, data) = self.restarts();
        if !(if from_data { data } else { empty }) {
            return false;
        }
        async fn redis(server: &RedisServer, from_data: bool) {
            if from_data {
                server.restart_from_disk().await
            } else {
                server.restart().await
            }
        }
        match &self.servers {
            Servers::Single(server) => redis(server, from_data).await,
            Servers::RedLock(servers) => redis(&servers[0], from_data).await,
            Servers::Sentinel(setup) => redis(setup.master(), from_data).await,
            Servers::ZooKeeper(server) => server.restart().await,
            Servers::Etcd(server) => server.restart().await,
            Servers::Etcd3(cluster) => cluster.members()[0].restart().await,
            Servers::Postgres(server) => server.restart().await,
            Servers::Mysql(server) => server.restart().await,
            Servers::Cluster(_) | Servers::Memory(_) => return false,
        }
        true
    }

    /// A new in-memory locker with its own store (memory), or a builder for a new client of
    /// the engine, with `prefix` instead of [`PREFIX`]: a run that wants a namespace of its
    /// own on a shared engine.
    pub async fn locker_with_prefix(&self, prefix: &str) -> Locker {
        let builder = self.builder().prefix(prefix);
        if let Servers::Memory(_) = &self.servers {
            return builder
                .build_in_memory()
                .expect("the suite's options are valid");
        }
        builder
            .build()
            .await
            .unwrap_or_else(|e| panic!("cannot build a locker on the {} engine: {e}", self.kind))
    }

    /// The addresses of the lock servers themselves, not their proxies, for a test that
    /// reads what the engine stores: every Redis node (RedLock's three, the Cluster's
    /// masters, Sentinel's master), the ZooKeeper server, every etcd member, the PostgreSQL
    /// server; none for memory.
    pub fn server_addrs(&self) -> Vec<std::net::SocketAddr> {
        match &self.servers {
            Servers::Single(server) => vec![server.addr()],
            Servers::RedLock(servers) => servers.iter().map(RedisServer::addr).collect(),
            Servers::Cluster(cluster) => cluster.nodes().iter().map(RedisServer::addr).collect(),
            Servers::Sentinel(setup) => vec![setup.master().addr()],
            Servers::ZooKeeper(server) => vec![server.addr()],
            Servers::Etcd(server) => vec![server.addr()],
            Servers::Etcd3(cluster) => cluster.members().iter().map(EtcdServer::addr).collect(),
            Servers::Postgres(server) => vec![server.addr()],
            Servers::Mysql(server) => vec![server.addr()],
            Servers::Memory(_) => Vec::new(),
        }
    }

    fn proxy_urls(&self) -> Vec<String> {
        self.proxies.iter().map(TcpProxy::url).collect()
    }

    /// ZooKeeper's connect string of the proxies: `host:port,...`, no scheme.
    fn zookeeper_hosts(&self) -> String {
        let hosts: Vec<String> = self.proxies.iter().map(|p| p.addr().to_string()).collect();
        hosts.join(",")
    }

    /// PostgreSQL's URL through the proxy: `postgres://postgres@host:port/postgres`.
    fn postgres_url(&self) -> String {
        format!("postgres://postgres@{}/postgres", self.proxies[0].addr())
    }

    /// etcd's endpoints of the proxies: `http://host:port`.
    fn etcd_endpoints(&self) -> Vec<String> {
        let endpoints = self.proxies.iter().map(|p| format!("http://{}", p.addr()));
        endpoints.collect()
    }
}

/// The options every worker of the suite shares ([`OP_TIMEOUT`], [`PREFIX`]).
fn suite_settings(spec: WorkerSpec) -> WorkerSpec {
    let mut spec = spec.op_timeout(OP_TIMEOUT);
    spec.prefix = PREFIX.to_owned();
    spec
}

/// The options every locker of the suite shares, before the deployment.
fn options() -> LockerBuilder {
    Locker::builder().prefix(PREFIX).op_timeout(OP_TIMEOUT)
}

/// Makes every node of `cluster` announce its proxy's port (`cluster-announce-port`), so that
/// the topology a client discovers (`CLUSTER SLOTS`, `MOVED`) leads through the proxies; waits
/// until every node's view names only proxy ports.
async fn announce_proxies(cluster: &RedisCluster, proxies: &[TcpProxy]) {
    for (node, proxy) in cluster.nodes().iter().zip(proxies) {
        let mut conn = node.conn().await;
        let set: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-announce-port")
            .arg(proxy.addr().port())
            .query_async(&mut conn)
            .await;
        set.unwrap_or_else(|e| panic!("CONFIG SET cluster-announce-port on {}: {e}", node.addr()));
    }
    let wanted: BTreeSet<u16> = proxies.iter().map(|p| p.addr().port()).collect();
    eventually(
        "every cluster node names the proxies as the nodes' addresses",
        ANNOUNCE_TIMEOUT,
        || async {
            for node in cluster.nodes() {
                let mut conn = node.conn().await;
                let view: redis::RedisResult<String> = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query_async(&mut conn)
                    .await;
                let Ok(view) = view else { return false };
                if announced_ports(&view) != wanted {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

/// The client ports in `CLUSTER NODES` output: `id ip:port@cport flags ...` per line.
fn announced_ports(view: &str) -> BTreeSet<u16> {
    view.lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .filter_map(|addr| addr.split('@').next()?.rsplit(':').next()?.parse().ok())
        .collect()
}

/// Points every sentinel of `setup` at the master through `proxy`, with a down-after far
/// beyond the suite's stalls, and waits until each names the proxy as the master.
async fn monitor_through(setup: &SentinelSetup, proxy: &TcpProxy) {
    let name = setup.master_name();
    let port = proxy.addr().port();
    for sentinel in setup.sentinels() {
        // Not the client's default 500 ms per reply: a sentinel rewrites and syncs its
        // configuration file on each step, which took longer on a loaded machine.
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
        let mut conn = sentinel
            .client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|e| panic!("connecting to sentinel {}: {e}", sentinel.addr()));
        let steps = [
            redis::cmd("SENTINEL").arg("REMOVE").arg(name).clone(),
            redis::cmd("SENTINEL")
                .arg("MONITOR")
                .arg(name)
                .arg("127.0.0.1")
                .arg(port)
                .arg(2)
                .clone(),
            redis::cmd("SENTINEL")
                .arg("SET")
                .arg(name)
                .arg("down-after-milliseconds")
                .arg(SENTINEL_DOWN_AFTER_MS)
                .clone(),
        ];
        for step in steps {
            let done: redis::RedisResult<()> = step.query_async(&mut conn).await;
            done.unwrap_or_else(|e| panic!("reconfiguring sentinel {}: {e}", sentinel.addr()));
        }
    }
    eventually(
        "every sentinel names the master's proxy",
        Duration::from_secs(10),
        || async {
            for sentinel in setup.sentinels() {
                let mut conn = sentinel.conn().await;
                let addr: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(name)
                    .query_async(&mut conn)
                    .await;
                if !matches!(addr, Ok((_, p)) if p == port) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_client_ports_of_cluster_nodes() {
        let view = "\
fd85 127.0.0.1:40002@17102 master - 0 1795312128407 2 connected 5461-10922
1b6a 127.0.0.1:40001@17101,host myself,master - 0 1795312127000 1 connected 0-5460
";
        assert_eq!(announced_ports(view), BTreeSet::from([40001, 40002]));
    }

    #[test]
    fn engine_names_are_distinct() {
        let names: BTreeSet<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), EngineKind::ALL.len());
    }
}
