//! The stock in MySQL (or MariaDB), next to the locks: a purchase is one transaction that first
//! checks its lock with [`leasehold::mysql::check_fence`], then reads and writes, so the check,
//! the read and the write commit together. A holder whose lock was taken over writes nothing,
//! and no other holder can take the lock over while the transaction is open: the check holds
//! the lock's guard row in share mode until the commit.

use std::time::Duration;

use leasehold::mysql::check_fence;
use leasehold::{LockError, LockGuard};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, TxOpts};

use super::{Purchase, Stock, StoreError, PAYMENT_TIME};

/// The stock table and the order counter, created on first use (or applied by an operator,
/// for a database user that may not create tables). Idempotent; MySQL 8 and MariaDB.
pub const MYSQL_STOCK_SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS shop_stock (
        sku      VARCHAR(191) NOT NULL PRIMARY KEY,
        quantity BIGINT       NOT NULL,
        sold     BIGINT       NOT NULL DEFAULT 0
    ) ENGINE = InnoDB",
    // One row per order: its AUTO_INCREMENT id is the order number, unique across shops.
    "CREATE TABLE IF NOT EXISTS shop_orders (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY
    ) ENGINE = InnoDB",
];

/// How many connections one store opens at most: a transaction needs a connection of its own
/// for as long as it runs.
const POOL_SIZE: usize = 16;

/// How long one call may take, waiting for a free connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The stock of every sku, in one MySQL database, over a pool of connections. Cheap to clone.
#[derive(Clone)]
pub struct MyStock {
    pool: Pool,
    /// `host:port/database`, for messages.
    shown: String,
}

impl MyStock {
    /// Connects to the database at `url` (`mysql://user:password@host:3306/database`, or
    /// `mariadb://`) and creates [`MYSQL_STOCK_SCHEMA`] when it is missing. Every call is
    /// bounded by 5 s; at most 16 connections are opened, on demand.
    ///
    /// # Errors
    /// When the URL is not a MySQL URL, the server does not answer, or it refuses the
    /// credentials or the schema.
    pub async fn connect(url: &str) -> Result<MyStock, StoreError> {
        let opts = opts(url)?;
        let shown = MyStock::server(url);
        let constraints = PoolConstraints::new(0, POOL_SIZE).expect("0 <= 16");
        let opts = OptsBuilder::from_opts(opts)
            // The address given, never the server's socket it would switch to on loopback.
            .prefer_socket(false)
            .pool_opts(PoolOpts::default().with_constraints(constraints));
        let stock = MyStock {
            pool: Pool::new(opts),
            shown,
        };
        stock
            .bounded("creating the stock table", async {
                let mut conn = stock.pool.get_conn().await?;
                for statement in MYSQL_STOCK_SCHEMA {
                    conn.query_drop(statement).await?;
                }
                Ok(())
            })
            .await?;
        Ok(stock)
    }

    /// The server a MySQL URL names, `host:port/database`, never its password; for messages.
    pub fn server(url: &str) -> String {
        opts(url).map_or_else(
            |_| "an invalid URL".to_owned(),
            |o| {
                format!(
                    "{}:{}/{}",
                    o.ip_or_hostname(),
                    o.tcp_port(),
                    o.db_name().unwrap_or("")
                )
            },
        )
    }

    /// Sets the stock of `sku` to `quantity` with nothing sold. With `holder`, in a
    /// transaction that first checks the holder's fence; `Ok(None)` when it is stale.
    ///
    /// # Errors
    /// When MySQL fails or does not answer within 5 s.
    pub async fn restock(
        &self,
        sku: &str,
        quantity: i64,
        holder: Option<&LockGuard>,
    ) -> Result<Option<Stock>, StoreError> {
        let fenced = self
            .bounded("restocking", async {
                let mut conn = self.pool.get_conn().await?;
                let mut tx = conn.start_transaction(TxOpts::default()).await?;
                if !fence_holds(&mut tx, holder).await? {
                    tx.rollback().await?;
                    return Ok(false);
                }
                tx.exec_drop(
                    "INSERT INTO shop_stock (sku, quantity, sold) VALUES (?, ?, 0) \
                     ON DUPLICATE KEY UPDATE quantity = VALUES(quantity), sold = 0",
                    (sku, quantity),
                )
                .await?;
                tx.commit().await?;
                Ok(true)
            })
            .await?;
        Ok(fenced.then(|| Stock {
            sku: sku.to_owned(),
            quantity,
            sold: 0,
        }))
    }

    /// The stock of `sku`, if it was ever set.
    ///
    /// # Errors
    /// When MySQL fails or does not answer within 5 s.
    pub async fn stock(&self, sku: &str) -> Result<Option<Stock>, StoreError> {
        let row: Option<(i64, i64)> = self
            .bounded("reading the stock", async {
                let mut conn = self.pool.get_conn().await?;
                let row = conn
                    .exec_first(
                        "SELECT quantity, sold FROM shop_stock WHERE sku = ?",
                        (sku,),
                    )
                    .await?;
                Ok(row)
            })
            .await?;
        Ok(row.map(|(quantity, sold)| Stock {
            sku: sku.to_owned(),
            quantity,
            sold,
        }))
    }

    /// Buys one item of `sku` the naive way, in one transaction: read the quantity (a plain,
    /// unlocked read), check it, do the payment, write back the quantity read minus one. Two
    /// purchases that overlap both read the same quantity and both sell: without a lock
    /// around it, this oversells.
    ///
    /// With `holder` (the lock's guard), the transaction first checks the holder's fence
    /// ([`check_fence`]), before the read: a holder whose lock was lost gets
    /// [`Purchase::Stale`] and writes nothing, and no other holder can take the lock over
    /// between this purchase's read and its commit.
    ///
    /// # Errors
    /// When MySQL fails or does not answer within 5 s.
    pub async fn purchase(
        &self,
        sku: &str,
        holder: Option<&LockGuard>,
    ) -> Result<Purchase, StoreError> {
        self.bounded("buying", async {
            let mut conn = self.pool.get_conn().await?;
            let mut tx = conn.start_transaction(TxOpts::default()).await?;
            if !fence_holds(&mut tx, holder).await? {
                tx.rollback().await?;
                return Ok(Purchase::Stale);
            }
            let read: Option<i64> = tx
                .exec_first("SELECT quantity FROM shop_stock WHERE sku = ?", (sku,))
                .await?;
            let outcome = match read {
                None => Purchase::UnknownSku,
                Some(quantity) if quantity <= 0 => Purchase::SoldOut,
                Some(quantity) => {
                    tokio::time::sleep(PAYMENT_TIME).await;
                    tx.exec_drop(
                        "UPDATE shop_stock SET quantity = ?, sold = sold + 1 WHERE sku = ?",
                        (quantity - 1, sku),
                    )
                    .await?;
                    if tx.affected_rows() == 0 {
                        // Removed meanwhile.
                        Purchase::UnknownSku
                    } else {
                        tx.query_drop("INSERT INTO shop_orders () VALUES ()")
                            .await?;
                        Purchase::Sold {
                            order: tx.last_insert_id().unwrap_or(0),
                        }
                    }
                }
            };
            match outcome {
                Purchase::Sold { .. } => tx.commit().await?,
                _ => tx.rollback().await?,
            }
            Ok(outcome)
        })
        .await
    }

    /// Deletes the stock record of `sku`.
    ///
    /// # Errors
    /// When MySQL fails or does not answer within 5 s.
    pub async fn remove(&self, sku: &str) -> Result<(), StoreError> {
        self.bounded("removing a stock record", async {
            let mut conn = self.pool.get_conn().await?;
            conn.exec_drop("DELETE FROM shop_stock WHERE sku = ?", (sku,))
                .await?;
            Ok(())
        })
        .await
    }

    /// `work` within [`CALL_TIMEOUT`], its errors said with the server and what was done.
    async fn bounded<T>(
        &self,
        doing: &str,
        work: impl std::future::Future<Output = Result<T, Checked>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(CALL_TIMEOUT, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Checked::Driver(e))) => Err(StoreError::Mysql {
                message: format!("MySQL at {} failed while {doing}: {e}", self.shown),
                source: Some(Box::new(e)),
            }),
            Ok(Err(Checked::Lock(e))) => Err(StoreError::Mysql {
                message: format!("MySQL at {}: {e}", self.shown),
                source: Some(Box::new(e)),
            }),
            Err(_) => Err(StoreError::Mysql {
                message: format!(
                    "MySQL at {} did not answer within {CALL_TIMEOUT:?} while {doing}",
                    self.shown
                ),
                source: None,
            }),
        }
    }
}

/// A failure inside a bounded call: the driver's, or the fence check's.
enum Checked {
    Driver(mysql_async::Error),
    Lock(LockError),
}

impl From<mysql_async::Error> for Checked {
    fn from(e: mysql_async::Error) -> Self {
        Checked::Driver(e)
    }
}

/// Whether `holder`'s fence is current, checked in `tx` (always, without a holder).
async fn fence_holds(
    tx: &mut mysql_async::Transaction<'_>,
    holder: Option<&LockGuard>,
) -> Result<bool, Checked> {
    let Some(guard) = holder else {
        return Ok(true);
    };
    match check_fence(tx, guard).await {
        Ok(()) => Ok(true),
        Err(LockError::Lost { .. }) => Ok(false),
        Err(e) => Err(Checked::Lock(e)),
    }
}

/// The driver's options for `url`; `mariadb://` is read as `mysql://`.
fn opts(url: &str) -> Result<Opts, StoreError> {
    let url = match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_owned(),
    };
    Opts::from_url(&url).map_err(|e| StoreError::Mysql {
        message: format!("not a MySQL URL: {e}"),
        source: None,
    })
}
