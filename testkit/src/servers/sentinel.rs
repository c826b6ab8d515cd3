//! A throwaway Redis Sentinel deployment: one master, one replica and three sentinels, all on
//! free ports of 127.0.0.1, that tests can fail over by killing the master.

use std::net::SocketAddr;
use std::time::Duration;

use super::probe::{self, info_field, query};
use super::{RedisOptions, RedisServer};

/// The name the sentinels monitor the master under.
const MASTER_NAME: &str = "mymaster";
const SENTINELS: usize = 3;
const QUORUM: usize = 2;
/// The user replicas log in to their master as, and its password.
const REPL_USER: &str = "repl";
const REPL_PASSWORD: &str = "replication";
const REPL_PASSWORD_RULE: &str = ">replication";
/// How long the replica and the sentinels may take to find each other once started.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The entry point: [`Sentinels::start`] starts a [`SentinelSetup`].
#[derive(Debug)]
pub enum Sentinels {}

impl Sentinels {
    /// Starts a master, a replica of it (`--replicaof`) and three sentinels that monitor the
    /// master as `mymaster` with a quorum of 2, `down-after-milliseconds` 1000,
    /// `failover-timeout` 5000 and `parallel-syncs` 1, each sentinel with a config file of its
    /// own that it rewrites. Returns once the replica is in sync and every sentinel sees the
    /// master, the replica and the two other sentinels.
    ///
    /// # Panics
    ///
    /// If a server does not start, or the deployment does not settle within 20 s; the message
    /// includes the tails of the logs.
    pub async fn start() -> SentinelSetup {
        Sentinels::start_with_data_args(Vec::new()).await
    }

    /// As [`start`](Self::start), with data nodes (master and replica alike) where the default
    /// user may run no script and the user `user` (password `password`) may run everything:
    /// a client that does not authenticate to the master cannot take a lock.
    pub async fn start_with_app_user(user: &str, password: &str) -> SentinelSetup {
        let args = [
            "--user",
            "default",
            "on",
            "nopass",
            "~*",
            "&*",
            "+@all",
            "-@scripting",
            "--user",
            user,
            "on",
            &format!(">{password}"),
            "~*",
            "&*",
            "+@all",
        ];
        Sentinels::start_with_data_args(args.iter().map(|a| a.to_string()).collect()).await
    }

    async fn start_with_data_args(extra: Vec<String>) -> SentinelSetup {
        // A replica's first sync would otherwise wait 5 s for more replicas to join it; the
        // replica may be a master later, and the master its replica once restarted.
        // Replicas authenticate as a user of their own, so a test can shut replication out
        // (`pause_replication`) while clients keep writing to the master.
        let data_options = RedisOptions::default()
            .args(["--repl-diskless-sync-delay", "0"])
            .args([
                "--user",
                REPL_USER,
                "on",
                REPL_PASSWORD_RULE,
                "~*",
                "&*",
                "+@all",
            ])
            .args(["--masteruser", REPL_USER, "--masterauth", REPL_PASSWORD])
            .args(extra);
        let master = RedisServer::start_with(data_options.clone()).await;
        let replica = RedisServer::start_with(
            data_options
                .arg("--replicaof")
                .arg("127.0.0.1")
                .arg(master.port().to_string()),
        )
        .await;
        // Replicas are found through the master's INFO, which a sentinel asks for once it
        // connects and then only every 10 s: it must list the replica by then.
        let mut setup = SentinelSetup {
            master,
            replica,
            sentinels: Vec::new(),
        };
        if let Err(why) = probe::wait_until(SETTLE_TIMEOUT, || setup.replica_in_sync()).await {
            panic!(
                "the replica did not sync with the master within {SETTLE_TIMEOUT:?}: {why}\n{}",
                setup.logs()
            );
        }
        setup.sentinels = start_sentinels(setup.master.port()).await;
        if let Err(why) = probe::wait_until(SETTLE_TIMEOUT, || setup.sentinels_settled()).await {
            panic!(
                "the sentinels did not see the master, the replica and each other within \
                 {SETTLE_TIMEOUT:?}: {why}\n{}",
                setup.logs()
            );
        }
        setup
    }
}

/// One master, one replica and three sentinels, started by [`Sentinels::start`].
///
/// Dropping it kills every process and removes their directories, also while a test panics.
///
/// ```no_run
/// use std::time::Duration;
/// use leasehold_testkit::servers::Sentinels;
///
/// # async fn demo() {
/// let setup = Sentinels::start().await;
/// assert_eq!(setup.current_master_addr().await, setup.master().addr());
/// let promoted = setup.kill_master_and_wait_failover(Duration::from_secs(20)).await;
/// assert_eq!(promoted, setup.replica().addr());
/// # }
/// ```
#[derive(Debug)]
pub struct SentinelSetup {
    master: RedisServer,
    replica: RedisServer,
    sentinels: Vec<RedisServer>,
}

impl SentinelSetup {
    /// The name the sentinels know the master by: `"mymaster"`.
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:PORT` of each sentinel, for a sentinel client.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The sentinels, to kill or pause one. A [`restart`](RedisServer::restart)ed sentinel starts
    /// over from its original config, monitoring the original master's address.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The server that was the master at the start (it may have been failed over since).
    pub fn master(&self) -> &RedisServer {
        &self.master
    }

    /// The server that was the replica at the start (it may have been promoted since).
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// The master's address according to the first sentinel that answers
    /// `SENTINEL GET-MASTER-ADDR-BY-NAME mymaster`.
    ///
    /// # Panics
    ///
    /// If no sentinel answers with an address.
    pub async fn current_master_addr(&self) -> SocketAddr {
        let mut errors = Vec::new();
        for sentinel in &self.sentinels {
            match master_addr_of(sentinel).await {
                Ok(addr) => return addr,
                Err(e) => errors.push(e),
            }
        }
        panic!(
            "no sentinel told the address of {MASTER_NAME}: {}",
            errors.join("; ")
        );
    }

    /// Kills the current master (as the sentinels name it) with SIGKILL, then waits until every
    /// running sentinel names one other address as the master and the server there answers
    /// `ROLE` as a master. Returns that address.
    ///
    /// The killed server stays down: with one replica, a second failover needs it
    /// [`restart`](RedisServer::restart)ed first (the sentinels then make it a replica).
    ///
    /// # Panics
    ///
    /// If the current master is not one of [`master`](Self::master) and
    /// [`replica`](Self::replica) or is not running, or the failover does not complete within
    /// `timeout` (the sentinels retry a failed election only after 10 s, so allow 20 s); the
    /// message says what was still missing and includes the tails of the logs.
    pub async fn kill_master_and_wait_failover(&self, timeout: Duration) -> SocketAddr {
        let old = self.current_master_addr().await;
        let Some(server) = [&self.master, &self.replica]
            .into_iter()
            .find(|s| s.addr() == old)
        else {
            panic!(
                "the sentinels name {old} as the master, which is neither the original master \
                 ({}) nor the replica ({})",
                self.master.addr(),
                self.replica.addr()
            );
        };
        assert!(
            server.pid().is_some(),
            "the sentinels name {old} as the master, but it is not running: no failover to \
             wait for"
        );
        server.kill9();
        match probe::wait_until(timeout, || self.failed_over_from(old)).await {
            Ok(new) => new,
            Err(why) => panic!(
                "the sentinels did not fail {MASTER_NAME} over from {old} within {timeout:?}: \
                 {why}\n{}",
                self.logs()
            ),
        }
    }

    /// `Ok(new master)` once every running sentinel names the same master other than `old` and it
    /// answers `ROLE` as a master.
    async fn failed_over_from(&self, old: SocketAddr) -> Result<SocketAddr, String> {
        let mut named = None;
        for sentinel in self.sentinels.iter().filter(|s| s.pid().is_some()) {
            let addr = master_addr_of(sentinel).await?;
            if addr == old {
                return Err(format!(
                    "sentinel {} still names {old} as the master",
                    sentinel.addr()
                ));
            }
            match named {
                Some(other) if other != addr => {
                    return Err(format!(
                        "the sentinels disagree on the new master: {other} and {addr}"
                    ))
                }
                _ => named = Some(addr),
            }
        }
        let new = named.ok_or("no sentinel is running")?;
        let role: redis::Value = query(new, &redis::cmd("ROLE"))
            .await
            .map_err(|e| format!("ROLE on the new master {new}: {e}"))?;
        match role_name(&role).as_deref() {
            Some("master") => Ok(new),
            other => Err(format!(
                "the new master {new} answers ROLE with {}",
                other.unwrap_or("an unexpected reply")
            )),
        }
    }

    /// Shuts the replica out of the current master, as a broken replication link would: the
    /// master disconnects it and refuses its login from now on (its replication user is
    /// switched off), while every other client keeps writing. Writes from now on are on the
    /// master only; a failover before [`resume_replication`](Self::resume_replication) loses
    /// them. Returns once the master counts no connected replica.
    ///
    /// # Panics
    ///
    /// If the master does not answer, or still counts a replica after 5 s.
    pub async fn pause_replication(&self) {
        let master = self.current_master_addr().await;
        let off = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(REPL_USER)
            .arg("off")
            .clone();
        query::<()>(master, &off)
            .await
            .unwrap_or_else(|e| panic!("ACL SETUSER {REPL_USER} off on {master}: {e}"));
        let kill = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .clone();
        query::<i64>(master, &kill)
            .await
            .unwrap_or_else(|e| panic!("CLIENT KILL TYPE replica on {master}: {e}"));
        let cut = probe::wait_until(Duration::from_secs(5), || async {
            let info: String = query(master, redis::cmd("INFO").arg("replication")).await?;
            match info_field(&info, "connected_slaves") {
                Some("0") => Ok(()),
                n => Err(format!("the master counts {} replicas", n.unwrap_or("?"))),
            }
        })
        .await;
        if let Err(why) = cut {
            panic!("replication from {master} did not stop: {why}");
        }
    }

    /// Lets replicas log in to the current master again (undoes
    /// [`pause_replication`](Self::pause_replication)); they resync by themselves.
    ///
    /// # Panics
    ///
    /// If the master does not answer.
    pub async fn resume_replication(&self) {
        let master = self.current_master_addr().await;
        let on = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(REPL_USER)
            .arg("on")
            .clone();
        query::<()>(master, &on)
            .await
            .unwrap_or_else(|e| panic!("ACL SETUSER {REPL_USER} on on {master}: {e}"));
    }

    async fn replica_in_sync(&self) -> Result<(), String> {
        let addr = self.replica.addr();
        let info: String = query(addr, redis::cmd("INFO").arg("replication"))
            .await
            .map_err(|e| format!("INFO replication on the replica {addr}: {e}"))?;
        match info_field(&info, "master_link_status") {
            Some("up") => Ok(()),
            link => Err(format!(
                "the replica {addr} has master_link_status:{}",
                link.unwrap_or("(missing)")
            )),
        }
    }

    async fn sentinels_settled(&self) -> Result<(), String> {
        for sentinel in &self.sentinels {
            let addr = sentinel.addr();
            let master: Vec<String> =
                query(addr, redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))
                    .await
                    .map_err(|e| format!("SENTINEL MASTER on {addr}: {e}"))?;
            let master = pairs(&master);
            let others = field(&master, "num-other-sentinels");
            if others != (SENTINELS - 1).to_string() {
                return Err(format!(
                    "sentinel {addr} sees {others} other sentinels, not {}",
                    SENTINELS - 1
                ));
            }
            let flags = field(&master, "flags");
            if flags != "master" {
                return Err(format!("sentinel {addr} flags the master {flags}"));
            }
            let replicas: Vec<Vec<String>> = query(
                addr,
                redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER_NAME),
            )
            .await
            .map_err(|e| format!("SENTINEL REPLICAS on {addr}: {e}"))?;
            let port = self.replica.port().to_string();
            let listed = replicas.iter().any(|replica| {
                let replica = pairs(replica);
                field(&replica, "port") == port && field(&replica, "flags") == "slave"
            });
            if !listed {
                return Err(format!(
                    "sentinel {addr} does not list the replica {} as a healthy replica",
                    self.replica.addr()
                ));
            }
        }
        Ok(())
    }

    /// The tails of all logs, for a panic message.
    fn logs(&self) -> String {
        let mut logs = format!(
            "master {}:\n{}\nreplica {}:\n{}\n",
            self.master.addr(),
            self.master.log_tail(),
            self.replica.addr(),
            self.replica.log_tail()
        );
        for sentinel in &self.sentinels {
            logs.push_str(&format!(
                "sentinel {}:\n{}\n",
                sentinel.addr(),
                sentinel.log_tail()
            ));
        }
        logs
    }
}

/// Starts the sentinels in parallel, monitoring the master on `master_port`.
async fn start_sentinels(master_port: u16) -> Vec<RedisServer> {
    let config = format!(
        "sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {QUORUM}\n\
         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
         sentinel failover-timeout {MASTER_NAME} 5000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n"
    );
    let mut starting = tokio::task::JoinSet::new();
    for index in 0..SENTINELS {
        let options = RedisOptions::default()
            .config_file(config.clone())
            .arg("--sentinel");
        starting.spawn(async move { (index, RedisServer::start_with(options).await) });
    }
    let mut sentinels: Vec<Option<RedisServer>> = (0..SENTINELS).map(|_| None).collect();
    while let Some(started) = starting.join_next().await {
        match started {
            Ok((index, sentinel)) => sentinels[index] = Some(sentinel),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("starting a sentinel was cancelled: {e}"),
        }
    }
    sentinels
        .into_iter()
        .map(|s| s.expect("every index is filled"))
        .collect()
}

async fn master_addr_of(sentinel: &RedisServer) -> Result<SocketAddr, String> {
    let addr = sentinel.addr();
    let reply: Option<(String, u16)> = query(
        addr,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME),
    )
    .await
    .map_err(|e| format!("SENTINEL GET-MASTER-ADDR-BY-NAME on {addr}: {e}"))?;
    let (ip, port) = reply.ok_or_else(|| format!("sentinel {addr} does not know {MASTER_NAME}"))?;
    format!("{ip}:{port}")
        .parse()
        .map_err(|e| format!("sentinel {addr} named {ip}:{port}, not an address: {e}"))
}

/// A flat `[name, value, name, value, ...]` reply as pairs.
fn pairs(flat: &[String]) -> Vec<(&str, &str)> {
    flat.chunks_exact(2)
        .map(|pair| (pair[0].as_str(), pair[1].as_str()))
        .collect()
}

fn field<'a>(pairs: &[(&str, &'a str)], name: &str) -> &'a str {
    pairs
        .iter()
        .find(|(key, _)| *key == name)
        .map_or("(missing)", |(_, value)| value)
}

/// The first element of a `ROLE` reply: `master`, `slave` or `sentinel`.
fn role_name(role: &redis::Value) -> Option<String> {
    match role {
        redis::Value::Array(items) => redis::from_redis_value_ref(items.first()?).ok(),
        _ => None,
    }
}
