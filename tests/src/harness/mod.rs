//! Throwaway `redis-server` processes (single servers, a [`RedisCluster`], a Sentinel deployment),
//! ZooKeeper, etcd, PostgreSQL and MariaDB servers,
//! a fault-injecting TCP proxy, and lookup of sibling binaries.
//!
//! Every call is bounded in time and panics with a message that says what did not happen; no
//! `redis-server` outlives its [`RedisServer`], nor the test binary, even when a test panics.
//!
//! ```no_run
//! use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};
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

mod cargo_bin;
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

pub use cargo_bin::cargo_bin;
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
