//! The fault and history suites of RELIABILITY.md: worker processes take locks in a loop and
//! log every step, the tests inject faults, and the history checker judges the logs and the
//! resource's records.
//! `scenarios` holds scenarios 1 to 5 and 8 to 11 on Redis, `shop` and `shop_delayed_write`
//! scenario 6, `soak` scenario 7; then the other engines, the other primitives (`redlock`:
//! readers and leaders on RedLock), fairness, and `late_write`: a write delayed in the network
//! past its holder's lease, on every lock engine, with the resource on Redis and on PostgreSQL.

mod etcd;
mod fairness;
mod frozen;
mod killed_leader;
mod late_write;
mod mysql;
mod postgres;
mod primitives;
mod redlock;
mod scenarios;
mod shop;
mod shop_delayed_write;
mod shutdown;
mod soak;
mod zookeeper;
mod zookeeper_etcd;
