//! The shop servers and the oversell demo of `leasehold`.
//!
//! - `shop-actix` ([`actix_shop`]) and `shop-axum` ([`axum_shop`]): the same HTTP API over a
//!   stock kept in Redis (or, with `--postgres`, in PostgreSQL next to the locks), with the
//!   purchase handler under `#[distributed_lock]`, or without it (`--no-lock`), or under a
//!   lock written by hand ([`raw_lock`], `--raw-lock`: the floor `scripts/web-bench` measures).
//! - `demo`: starts a throwaway Redis (and, with `--engine zookeeper` or `--engine etcd`, a
//!   ZooKeeper or an etcd for the locks; with `--engine postgres`, a PostgreSQL for the locks
//!   and the stock, and no Redis) and shop processes, fires concurrent purchases at them
//!   without and with the lock, and prints what was sold. It runs the shops as copies of
//!   itself (`demo --serve shop-axum ...`), so building it builds everything it needs.
//!
//! This library holds the shops' code, what they share (the stock store in [`store`], the
//! state, command line and errors in [`shop`]), and an HTTP client ([`client`]).
#![deny(missing_docs)]

pub mod actix_shop;
pub mod axum_shop;
pub mod client;
pub mod raw_lock;
pub mod reservation;
pub mod shop;
pub mod store;
