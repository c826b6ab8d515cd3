//! The fault and history suites of RELIABILITY.md: worker processes take locks in a loop and
//! log every step, the tests inject faults, and the history checker judges the logs.
//! `scenarios` holds scenarios 1 to 5 and 8 to 11 on Redis, `shop` scenario 6, `soak` scenario
//! 7; then the other engines, the other primitives (`redlock`: readers and leaders on RedLock),
//! and fairness.

mod etcd;
mod fairness;
mod frozen;
mod killed_leader;
mod late_write;
mod postgres;
mod primitives;
mod redlock;
mod scenarios;
mod shop;
mod shutdown;
mod soak;
mod zookeeper;
mod zookeeper_etcd;
