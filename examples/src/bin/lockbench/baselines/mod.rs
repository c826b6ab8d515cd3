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

pub(crate) use etcd::{
    EtcdFencedTxn, EtcdLockService, ETCD_FENCED_TXN, ETCD_KEYS_BY_HAND, ETCD_LOCK_SERVICE,
};
pub(crate) use mysql::{MysqlRaw, MYSQL_KEYS_RAW, MYSQL_RAW, MYSQL_RAW_POLLING};
pub(crate) use postgres::{
    PgConnection, PostgresRaw, POSTGRES_KEYS_RAW, POSTGRES_RAW, POSTGRES_RAW_POLLING,
};
pub(crate) use postgres_grouped::{PostgresGrouped, POSTGRES_GROUPED};
pub(crate) use redis::{rslock_lock_unlock, Naive, Rslock};
pub(crate) use token::token;
pub(crate) use zookeeper::{
    ZooKeeperFencedRecipe, ZooKeeperRecipe, ZOOKEEPER_FENCED_RECIPE, ZOOKEEPER_KEYS_BY_HAND,
    ZOOKEEPER_KEY_BY_HAND, ZOOKEEPER_RECIPE,
};

/// How long one call of a hand-written baseline may take before the benchmark gives up.
const CALL_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// `call`'s answer, or a panic naming `what` after [`CALL_BOUND`].
pub(crate) async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(CALL_BOUND, call).await {
        Ok(answer) => answer,
        Err(_) => panic!("a baseline had no answer to {what} within {CALL_BOUND:?}"),
    }
}
