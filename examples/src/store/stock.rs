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
    /// Nothing was written because this request's lock was lost: in Redis, a newer fencing
    /// token claimed the record before this purchase's claim (its read) or between its read
    /// and its write; in PostgreSQL, the lock's row showed another holder, or none, in the
    /// purchase's own transaction, before it read.
    Stale,
}

/// How a purchase under a lock fences the stock in Redis. (In PostgreSQL the purchase's
/// transaction checks the lock itself before it reads, `check_fence`, which this does not
/// change.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PurchaseFencing {
    /// The read is the record's claim (`leasehold::fenced::claim_with_fence`), and the write
    /// is accepted only while the claim is still the purchase's own: a stale holder's write
    /// lands nowhere, however late. The default.
    #[default]
    Claim,
    /// The purchase before issue 44, kept to show why it was replaced (the shops' hidden
    /// `--fence-write-only`, for the fault suite): a plain read, and a write refused only if a
    /// newer token wrote first. A holder's write delayed in the network past its lease that
    /// lands between the next holder's read and its write is accepted, and so is the next
    /// holder's: two sales, the stock down by one.
    WriteOnly,
}

/// Why the stock store failed. A stale write is not an error: it is [`Purchase::Stale`] (or
/// `Ok(None)` from a restock).
#[derive(Debug)]
pub enum StoreError {
    /// Redis failed or did not answer in time.
    Redis(::redis::RedisError),
    /// MySQL failed, refused a statement, or did not answer in time.
    Mysql {
        /// What failed, with the server (never its password).
        message: String,
        /// The driver's or the lock's error, when there is one.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
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
            StoreError::Postgres { message, .. } | StoreError::Mysql { message, .. } => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Redis(e) => Some(e),
            StoreError::Postgres { source, .. } | StoreError::Mysql { source, .. } => source
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
