//! Throwaway servers for integration tests against real engines (feature `servers`):
//! `redis-server` processes (single servers, a [`RedisCluster`], a Sentinel deployment),
//! ZooKeeper, etcd, PostgreSQL and MariaDB servers, each on free ports of 127.0.0.1 with a
//! directory of its own, and a fault-injecting TCP proxy ([`TcpProxy`]) to put in front of
//! any of them. The binaries must be installed (`redis-server`, `zkServer.sh` or a ZooKeeper
//! jar, `etcd`, `initdb`/`postgres`, `mariadbd`); a starter panics naming what is missing.
//!
//! Every call is bounded in time and panics with a message that says what did not happen; no
//! server outlives its handle, nor the test binary, even when a test panics. A server the kit
//! started can be paused ([`RedisServer::pause`]: SIGSTOP, alive but frozen) and resumed.
//!
//! ```no_run
//! use leasehold_testkit::servers::{ProxyMode, RedisServer, TcpProxy};
//!
//! # async fn demo() {
//! let redis = RedisServer::start().await;
//! let proxy = TcpProxy::start(redis.addr()).await;
//! let client = redis::Client::open(proxy.url()).unwrap();
//! proxy.set_mode(ProxyMode::Stall); // a partition: bytes are held, nothing answers
//! redis.pause(); // SIGSTOP: the process is alive but frozen
//! redis.resume();
//! # drop(client);
//! # }
//! ```

mod cluster;
mod etcd;
mod mysql;
mod ports;
mod postgres;
mod probe;
mod process;
mod proxy;
mod redis_server;
mod resp;
mod sentinel;
mod server;
mod zookeeper;

pub use cluster::RedisCluster;
pub use etcd::{EtcdCluster, EtcdOptions, EtcdServer};
pub use mysql::{
    MysqlOptions, MysqlServer, MYSQL_DATABASE, MYSQL_GRANTS, MYSQL_PASSWORD, MYSQL_USER,
};
pub use postgres::{PgOptions, PgServer};
pub use probe::eventually;
pub use proxy::{ConnKind, Held, ProxyMode, TcpProxy};
pub use redis_server::{RedisOptions, RedisServer};
pub use sentinel::{SentinelSetup, Sentinels};
pub use zookeeper::{ZkEnsemble, ZkOptions, ZkServer, ZkTls};
