//! What leasehold is measured against: the locks users write by hand and the engines' own lock
//! recipes, one file per engine, each usable by the scenarios and by the hot-key workers.

mod etcd;
pub(crate) mod leader;
mod mysql;
pub(crate) mod permits;
mod postgres;
mod postgres_grouped;
mod redis;
mod token;
mod zookeeper;

pub(crate) use etcd::{EtcdFencedTxn, EtcdLockService, ETCD_FENCED_TXN, ETCD_LOCK_SERVICE};
pub(crate) use mysql::{MysqlRaw, MYSQL_RAW, MYSQL_RAW_POLLING};
pub(crate) use postgres::{PgConnection, PostgresRaw, POSTGRES_RAW, POSTGRES_RAW_POLLING};
pub(crate) use postgres_grouped::{PostgresGrouped, POSTGRES_GROUPED};
pub(crate) use redis::{rslock_lock_unlock, Naive, Rslock};
pub(crate) use token::token;
pub(crate) use zookeeper::{
    ZooKeeperFencedRecipe, ZooKeeperRecipe, ZOOKEEPER_FENCED_RECIPE, ZOOKEEPER_RECIPE,
};
