//! A throwaway Redis Cluster: `redis-server`s in cluster mode on free ports of 127.0.0.1, joined
//! with `redis-cli --cluster create`.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::probe::{self, info_field, query};
use super::{process, RedisOptions, RedisServer};

/// The environment variable naming the `redis-cli` binary; `redis-cli` on `PATH` otherwise.
const CLI_VAR: &str = "LEASEHOLD_REDIS_CLI";
/// `redis-cli --cluster create`'s output, in the first node's directory.
const CREATE_LOG: &str = "cluster-create.log";
/// How long `redis-cli --cluster create` may run.
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the nodes may take to agree on a healthy cluster once created.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);
const SLOTS: u32 = 16384;

/// A Redis Cluster of `redis-server` processes on 127.0.0.1, with no persistence, each in a
/// temporary directory of its own, and a node timeout of 2 s.
///
/// Dropping it kills every node and removes their directories, also while a test panics.
///
/// ```no_run
/// use leasehold_testkit::servers::RedisCluster;
///
/// # async fn demo() {
/// let cluster = RedisCluster::start(3).await;
/// let urls = cluster.urls(); // for redis::cluster::ClusterClient::new(urls)
/// let owner = cluster.node_for_key("lock:{order-1}").await;
/// cluster.nodes()[owner].kill9(); // the shard that holds the key goes down
/// # drop(urls);
/// # }
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts a cluster of `masters` masters and no replicas, the slots split evenly between
    /// them, and waits until every node reports `cluster_state:ok`.
    ///
    /// # Panics
    ///
    /// If `masters` is below 3 (`redis-cli --cluster create` refuses); if a node does not start,
    /// `redis-cli` fails or runs for more than 30 s, or the nodes do not agree on a healthy
    /// cluster within 20 s. The message includes the tails of the logs.
    pub async fn start(masters: usize) -> Self {
        Self::start_with_replicas(masters, 0).await
    }

    /// Starts a cluster of `masters` masters with `replicas_per_master` replicas each and waits
    /// until every node reports `cluster_state:ok` and every replica is in sync with its master.
    ///
    /// `redis-cli` makes the first `masters` of [`nodes`](Self::nodes) the masters, though nothing
    /// checks that; ask a node `ROLE` where it matters.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub async fn start_with_replicas(masters: usize, replicas_per_master: usize) -> Self {
        assert!(
            masters >= 3,
            "a Redis Cluster needs at least 3 masters for `redis-cli --cluster create`, not {masters}"
        );
        let nodes = start_nodes(masters * (1 + replicas_per_master)).await;
        let cluster = Self { nodes };
        cluster.create(replicas_per_master).await;
        if let Err(why) = probe::wait_until(SETTLE_TIMEOUT, || cluster.settled()).await {
            panic!(
                "the Redis Cluster was not healthy within {SETTLE_TIMEOUT:?}: {why}\n{}",
                cluster.logs()
            );
        }
        cluster
    }

    /// `redis://127.0.0.1:PORT` of every node, for `redis::cluster::ClusterClient::new`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The nodes, in the order they were started; kill, pause or inspect them as any
    /// [`RedisServer`]. A [`restart`](RedisServer::restart)ed node comes back empty and out of the
    /// cluster (its `nodes.conf` is gone).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The hash slot of `key` (CRC16 of its hash tag, if any, modulo 16384), as `CLUSTER KEYSLOT`
    /// on the first node that answers says.
    ///
    /// # Panics
    ///
    /// If no node answers.
    pub async fn keyslot(&self, key: &str) -> u16 {
        let mut errors = Vec::new();
        for node in &self.nodes {
            match query::<u16>(node.addr(), redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)).await {
                Ok(slot) => return slot,
                Err(e) => errors.push(format!("{}: {e}", node.addr())),
            }
        }
        panic!(
            "no cluster node answered CLUSTER KEYSLOT {key:?}: {}",
            errors.join("; ")
        );
    }

    /// The index in [`nodes`](Self::nodes) of the master that serves `key`'s slot, according to
    /// `CLUSTER NODES` on the first node that answers: the node a cluster client sends `key` to,
    /// and the one that answers `MOVED` elsewhere.
    ///
    /// # Panics
    ///
    /// If no node answers, or none of them knows a master of this cluster for the slot.
    pub async fn node_for_key(&self, key: &str) -> usize {
        let slot = self.keyslot(key).await;
        let mut errors = Vec::new();
        for node in &self.nodes {
            let view = match query::<String>(node.addr(), redis::cmd("CLUSTER").arg("NODES")).await
            {
                Ok(view) => view,
                Err(e) => {
                    errors.push(format!("{}: {e}", node.addr()));
                    continue;
                }
            };
            let Some(port) = master_port_for_slot(&view, slot) else {
                errors.push(format!("{} knows no master for slot {slot}", node.addr()));
                continue;
            };
            match self.nodes.iter().position(|n| n.port() == port) {
                Some(index) => return index,
                None => errors.push(format!(
                    "{} names 127.0.0.1:{port} as the master of slot {slot}, not a node of ours",
                    node.addr()
                )),
            }
        }
        panic!(
            "no cluster node could tell the master of {key:?} (slot {slot}): {}",
            errors.join("; ")
        );
    }

    /// All keys matching the glob `pattern` on the running nodes, sorted and without duplicates
    /// (a replica holds its master's keys), found with SCAN as [`RedisServer::keys`] does.
    ///
    /// # Panics
    ///
    /// If a running node does not answer within 10 s (a paused one does not).
    pub async fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys = Vec::new();
        for node in self.nodes.iter().filter(|n| n.pid().is_some()) {
            keys.extend(node.keys(pattern).await);
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// Runs `redis-cli --cluster create` over all nodes.
    async fn create(&self, replicas_per_master: usize) {
        let log_path = self.nodes[0].dir().join(CREATE_LOG);
        let log = File::create(&log_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
        let binary = std::env::var_os(CLI_VAR).unwrap_or_else(|| "redis-cli".into());
        let mut cmd = Command::new(&binary);
        cmd.arg("--cluster")
            .arg("create")
            .args(self.nodes.iter().map(|n| n.addr().to_string()))
            .arg("--cluster-replicas")
            .arg(replicas_per_master.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log file handle can be cloned"))
            .stderr(log);
        let mut child = process::spawn(cmd, self.nodes[0].dir().to_owned()).unwrap_or_else(|e| {
            let hint = if e.kind() == io::ErrorKind::NotFound {
                format!(" (install redis-tools, or name the binary in {CLI_VAR})")
            } else {
                String::new()
            };
            panic!("cannot run {}: {e}{hint}", binary.to_string_lossy())
        });
        let Some(status) = process::finish(&mut child, CREATE_TIMEOUT).await else {
            panic!(
                "`redis-cli --cluster create` did not finish within {CREATE_TIMEOUT:?}\n{}",
                self.logs()
            );
        };
        assert!(
            status.success(),
            "`redis-cli --cluster create` exited with {status}\n{}",
            self.logs()
        );
    }

    /// `Ok` once every node sees a healthy cluster of all nodes and every replica is in sync.
    async fn settled(&self) -> Result<(), String> {
        let total = self.nodes.len().to_string();
        let slots = SLOTS.to_string();
        for node in &self.nodes {
            let addr = node.addr();
            let info: String = query(addr, redis::cmd("CLUSTER").arg("INFO"))
                .await
                .map_err(|e| format!("CLUSTER INFO on {addr}: {e}"))?;
            for (field, want) in [
                ("cluster_state", "ok"),
                ("cluster_known_nodes", total.as_str()),
                ("cluster_slots_ok", slots.as_str()),
            ] {
                let got = info_field(&info, field).unwrap_or("(missing)");
                if got != want {
                    return Err(format!("{addr} has {field}:{got}, not {want}"));
                }
            }
            let replication: String = query(addr, redis::cmd("INFO").arg("replication"))
                .await
                .map_err(|e| format!("INFO replication on {addr}: {e}"))?;
            if info_field(&replication, "role") == Some("slave") {
                let link = info_field(&replication, "master_link_status").unwrap_or("(missing)");
                if link != "up" {
                    return Err(format!("replica {addr} has master_link_status:{link}"));
                }
            }
        }
        Ok(())
    }

    /// The tails of all nodes' logs and of `redis-cli`'s output, for a panic message.
    fn logs(&self) -> String {
        let mut logs = String::new();
        if let Some(first) = self.nodes.first() {
            let cli = std::fs::read_to_string(first.dir().join(CREATE_LOG)).unwrap_or_default();
            logs.push_str(&format!("--- redis-cli --cluster create ---\n{cli}\n---\n"));
        }
        for node in &self.nodes {
            logs.push_str(&format!("node {}:\n{}\n", node.addr(), node.log_tail()));
        }
        logs
    }
}

/// Starts `n` cluster-mode servers in parallel, each with its own bus port.
async fn start_nodes(n: usize) -> Vec<RedisServer> {
    let mut starting = tokio::task::JoinSet::new();
    for index in 0..n {
        starting.spawn(async move {
            let options = RedisOptions::default().args([
                "--cluster-enabled".to_owned(),
                "yes".to_owned(),
                // Relative to the server's own directory, its working directory.
                "--cluster-config-file".to_owned(),
                "nodes.conf".to_owned(),
                "--cluster-node-timeout".to_owned(),
                "2000".to_owned(),
                // A replica's first sync would otherwise wait 5 s for more replicas to join it.
                "--repl-diskless-sync-delay".to_owned(),
                "0".to_owned(),
            ]);
            (
                index,
                RedisServer::start_with(options.port_arg("--cluster-port")).await,
            )
        });
    }
    let mut nodes: Vec<Option<RedisServer>> = (0..n).map(|_| None).collect();
    while let Some(started) = starting.join_next().await {
        match started {
            Ok((index, node)) => nodes[index] = Some(node),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("starting a cluster node was cancelled: {e}"),
        }
    }
    nodes
        .into_iter()
        .map(|n| n.expect("every index is filled"))
        .collect()
}

/// The port of the master that `CLUSTER NODES` output `view` gives `slot` to.
fn master_port_for_slot(view: &str, slot: u16) -> Option<u16> {
    view.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (address, flags) = (fields.get(1)?, fields.get(2)?);
        if !flags.split(',').any(|f| f == "master") {
            return None;
        }
        let owns = fields.iter().skip(8).any(|range| {
            // `[slot->-id]` / `[slot-<-id]`: a migration in progress, not ownership.
            if range.starts_with('[') {
                return false;
            }
            let (start, end) = range.split_once('-').unwrap_or((range, range));
            matches!((start.parse::<u16>(), end.parse::<u16>()), (Ok(s), Ok(e)) if (s..=e).contains(&slot))
        });
        if !owns {
            return None;
        }
        // `ip:port@cport[,hostname]`
        let host_port = address.split('@').next()?;
        let addr: SocketAddr = host_port.parse().ok()?;
        (addr.ip() == Ipv4Addr::LOCALHOST).then_some(addr.port())
    })
}

#[cfg(test)]
mod tests {
    use super::master_port_for_slot;

    const NODES: &str = "\
fd85 127.0.0.1:17002@17102 master - 0 1795312128407 2 connected 5461-10922
1b6a 127.0.0.1:17001@17101 myself,master - 0 1795312127000 1 connected 0-5460 [5461->-fd85]
aaaa 127.0.0.1:17004@17104 slave 1b6a 0 1795312127000 1 connected
b0fc 127.0.0.1:17003@17103 master - 0 1795312128608 3 connected 10923-16382 16383
";

    #[test]
    fn finds_the_master_of_a_slot() {
        assert_eq!(master_port_for_slot(NODES, 0), Some(17001));
        assert_eq!(master_port_for_slot(NODES, 5460), Some(17001));
        assert_eq!(master_port_for_slot(NODES, 5461), Some(17002));
        assert_eq!(master_port_for_slot(NODES, 16383), Some(17003));
        assert_eq!(master_port_for_slot("", 1), None);
    }
}
