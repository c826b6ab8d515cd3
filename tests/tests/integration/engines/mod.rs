//! What each engine does beyond the conformance suite (`store/` of the runtime), and starting
//! without one (`lazy_connect`).

mod at_once;
mod at_once_redlock;
mod at_once_sql;
mod consensus;
mod etcd;
mod fence_migration;
mod lazy_connect;
mod memory;
mod mysql;
mod mysql_fenced;
mod mysql_tls;
mod mysql_unknown;
mod postgres;
mod postgres_parts;
mod postgres_tls;
mod postgres_unknown;
mod redis;
mod turns;
mod zookeeper;
mod zookeeper_auth;
