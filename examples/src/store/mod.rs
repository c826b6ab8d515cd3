//! The shop's stock and order counter, in Redis, PostgreSQL or MySQL, with the naive
//! read-check-write purchase that a lock must protect, and the fencing that refuses a holder
//! whose lock was lost: from its read on, not only at its write.

mod backend;
mod mysql;
mod postgres;
mod redis;
mod stock;

pub use self::redis::{stock_key, RedisStock, ORDERS_KEY};
pub use backend::Store;
pub use mysql::{MyStock, MYSQL_STOCK_SCHEMA};
pub use postgres::{PgStock, STOCK_SCHEMA};
pub use stock::{Purchase, PurchaseFencing, Stock, StoreError, PAYMENT_TIME};
