//! Each engine's semaphore done by hand with the engine's own client, for scenarios 9 and 12:
//! one file per engine.

mod etcd;
mod memory;
mod postgres;
mod redis;
mod zookeeper;

pub(crate) use etcd::{EtcdPermits, ETCD_SEMAPHORE};
pub(crate) use memory::{TokioPermits, TOKIO_SEMAPHORE};
pub(crate) use postgres::{PostgresPermits, POSTGRES_SEMAPHORE};
pub(crate) use redis::{RedisZset, REDIS_ZSET};
pub(crate) use zookeeper::{ZooKeeperPermits, ZOOKEEPER_SEMAPHORE};
