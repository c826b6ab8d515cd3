//! RedLock over several independent `redis-server`s, each behind a fault-injecting proxy:
//! locks ([`locks`]), read locks ([`reads`]) and leader election ([`leaders`]) through node
//! failures, restarts and counters that differ.

mod leaders;
mod locks;
mod reads;

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};

/// The per-node bound; hung nodes cost about this much. (At 100 ms, a node's answer missed it
/// on a machine whose two cores were also busy with other work.)
const NODE_TIMEOUT: Duration = Duration::from_millis(250);

struct Cluster {
    servers: Vec<RedisServer>,
    proxies: Vec<TcpProxy>,
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        let servers = RedisServer::start_many(n).await;
        let proxies = Cluster::proxies_to(&servers).await;
        Cluster { servers, proxies }
    }

    /// One proxy per server: a set of links of their own for a locker that faults must hit
    /// alone.
    async fn proxies_to(servers: &[RedisServer]) -> Vec<TcpProxy> {
        let mut proxies = Vec::new();
        for s in servers {
            proxies.push(TcpProxy::start(s.addr()).await);
        }
        proxies
    }

    async fn locker(&self) -> Locker {
        locker_over(&self.proxies).await
    }

    fn set_all(&self, mode: ProxyMode) {
        for p in &self.proxies {
            p.set_mode(mode);
        }
    }

    /// Lock keys left on any node, straight from the servers.
    async fn lock_keys(&self) -> usize {
        let mut total = 0;
        for s in &self.servers {
            total += s.keys("leasehold:lock:*").await.len();
        }
        total
    }

    /// A key's fence counter on node `i`, straight from the server.
    async fn fence_counter(&self, i: usize, key: &str) -> u64 {
        let mut conn = self.servers[i].conn().await;
        let counter: Option<u64> =
            redis::AsyncCommands::get(&mut conn, format!("leasehold:fence:{{{key}}}"))
                .await
                .unwrap();
        counter.unwrap_or(0)
    }
}

/// A RedLock locker over `proxies`.
async fn locker_over(proxies: &[TcpProxy]) -> Locker {
    Locker::builder()
        .redlock(proxies.iter().map(|p| p.url()))
        .op_timeout(NODE_TIMEOUT)
        .build()
        .await
        .expect("redlock locker")
}
