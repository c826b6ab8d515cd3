//! Each engine's own leader election, written as its users would (or its own election API),
//! for scenario 11: one file per engine.

mod etcd;
mod memory;
mod postgres;
mod redis;
mod zookeeper;

pub(crate) use etcd::{EtcdElection, ETCD_ELECTION};
pub(crate) use memory::{TokioElection, TOKIO_ELECTION};
pub(crate) use postgres::{PostgresElection, POSTGRES_ELECTION};
pub(crate) use redis::{RedisElection, REDIS_ELECTION};
pub(crate) use zookeeper::{ZooKeeperElection, ZOOKEEPER_ELECTION};
