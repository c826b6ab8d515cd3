//! Tests of the harness itself (`leasehold_tests::harness`), one module per kind of server it
//! starts: if these fail, every test built on the harness would lie. `redis_server` also covers
//! the fault-injecting proxy and `cargo_bin`.

mod cluster;
mod mysql;
mod postgres;
mod redis_server;
mod sentinel;
mod zookeeper;
