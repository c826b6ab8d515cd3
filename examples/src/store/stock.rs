//! What both stores hold and answer: a stock record, a purchase's outcome, their errors, and
//! the payment that a purchase awaits between its read and its write.

use std::fmt;
use std::time::Duration;

/// The work a purchase does between reading the stock and writing it back (charging a card,
/// reserving a parcel): an await, as in any real handler. It is what lets concurrent
/// purchases read the same quantity when nothing serializes them.
pub const PAYMENT_TIME: Duration = Duration::from_millis(1);

/// What a stock record holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stock {
    /// The sku.
    pub sku: String,
    /// Items left, as the purchases wrote it back.
    pub quantity: i64,
    /// Items sold: one per successful purchase.
    pub sold: i64,
}

/// The outcome of one purchase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purchase {
    /// Sold: the order number.
    Sold {
        /// The order number, unique across shops.
        order: u64,
    },
    /// Nothing left.
    SoldOut,
    /// No such sku.
    UnknownSku,
    /// The write was refused because this request's lock was lost before it wrote: in Redis,
    /// a newer fencing token wrote to the record; in PostgreSQL, the lock's row showed another
    /// holder, or none, in the purchase's own transaction.
    Stale,
}

/// Why the stock store failed. A stale write is not an error: it is [`Purchase::Stale`] (or
/// `Ok(None)` from a restock).
#[derive(Debug)]
pub enum StoreError {
    /// Redis failed or did not answer in time.
    Redis(::redis::RedisError),
    /// PostgreSQL failed, refused a statement, or did not answer in time.
    Postgres {
        /// What failed, with the server (never its password), e.g. "PostgreSQL at
        /// 127.0.0.1:5432 did not answer within 5s while buying".
        message: String,
        /// The driver's or the lock's error, when there is one.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Redis(e) => write!(f, "redis: {e}"),
            StoreError::Postgres { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Redis(e) => Some(e),
            StoreError::Postgres { source, .. } => source
                .as_deref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
        }
    }
}

impl From<::redis::RedisError> for StoreError {
    fn from(e: ::redis::RedisError) -> Self {
        StoreError::Redis(e)
    }
}
