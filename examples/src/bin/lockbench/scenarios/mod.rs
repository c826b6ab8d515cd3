//! The scenarios, one file (or folder) each, numbered as in the report.

pub(crate) mod attribute;
pub(crate) mod etcd;
pub(crate) mod fairness;
pub(crate) mod held;
pub(crate) mod hot_key;
pub(crate) mod leader;
pub(crate) mod mysql;
pub(crate) mod mysql_waiting;
pub(crate) mod permits;
pub(crate) mod postgres;
pub(crate) mod redlock;
pub(crate) mod semaphore;
pub(crate) mod uncontended;
pub(crate) mod zookeeper;
