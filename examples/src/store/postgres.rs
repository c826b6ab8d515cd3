//! The stock in PostgreSQL, next to the locks: a purchase is one transaction that first checks
//! its lock with [`leasehold::postgres::check_fence`], then reads and writes, so the check,
//! the read and the write commit together. A holder whose lock was taken over writes nothing,
//! and no older holder's write can land between this purchase's read and its write: the lock
//! cannot change hands while the transaction is open.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::postgres::{check_fence, tokio_postgres as pg};
use leasehold::{LockError, LockGuard};
use tokio::task::AbortHandle;

use super::{Purchase, Stock, StoreError, PAYMENT_TIME};

/// The stock table and the order counter, created on first use (or applied by an operator,
/// for a database user that may not create tables). Idempotent.
pub const STOCK_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS shop_stock (
    sku      text   PRIMARY KEY,
    quantity bigint NOT NULL,
    sold     bigint NOT NULL DEFAULT 0
);
CREATE SEQUENCE IF NOT EXISTS shop_orders;";

/// Serializes the creation of the schema across shops starting together (`CREATE ... IF NOT
/// EXISTS` races with itself).
const SCHEMA_LOCK: i64 = 0x7368_6f70_5f73_746b; // "shop_stk"

/// How many connections one store opens at most: a transaction needs a connection of its own
/// for as long as it runs, so this many purchases can be between their read and their write.
const POOL_SIZE: usize = 16;

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one call may take, waiting for a free connection included; also the server's
/// `statement_timeout` and `lock_timeout`, so it stops working on a call nobody waits for.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

const READ: &str = "SELECT quantity FROM shop_stock WHERE sku = $1";

/// The naive write: the quantity the purchase computed from what it read, whatever happened
/// since, and the order number.
const WRITE: &str = "UPDATE shop_stock SET quantity = $2, sold = sold + 1 WHERE sku = $1 \
     RETURNING nextval('shop_orders')";

const RESTOCK: &str = "INSERT INTO shop_stock (sku, quantity, sold) VALUES ($1, $2, 0) \
     ON CONFLICT (sku) DO UPDATE SET quantity = excluded.quantity, sold = 0";

const SHOW: &str = "SELECT quantity, sold FROM shop_stock WHERE sku = $1";

const REMOVE: &str = "DELETE FROM shop_stock WHERE sku = $1";

/// The stock of every sku, in one PostgreSQL database, over a small pool of connections.
/// Cheap to clone.
#[derive(Clone)]
pub struct PgStock {
    pool: Arc<Pool>,
}

impl PgStock {
    /// Connects to the database at `url` (`postgres://user:password@host:5432/database`) and
    /// creates [`STOCK_SCHEMA`] when it is missing. Every call is bounded (2 s to connect, 5 s
    /// per call); at most 16 connections are opened, on demand.
    ///
    /// # Errors
    /// When the URL is not a PostgreSQL URL, the server does not answer, or it refuses the
    /// credentials or the schema.
    pub async fn connect(url: &str) -> Result<PgStock, StoreError> {
        let config = pg::Config::from_str(url).map_err(|e| StoreError::Postgres {
            message: format!("not a PostgreSQL URL ({}): {e}", PgStock::server(url)),
            source: None,
        })?;
        let pool = Pool {
            shown: shown(&config),
            config,
            idle: Mutex::new(Vec::new()),
            slots: tokio::sync::Semaphore::new(POOL_SIZE),
        };
        let (mut client, driver) = pool.open_client().await?;
        let schema = async {
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                .await?;
            tx.batch_execute(STOCK_SCHEMA).await?;
            tx.commit().await
        };
        match tokio::time::timeout(CALL_TIMEOUT, schema).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                driver.abort();
                return Err(pool.failed("refused to create the stock table", e));
            }
            Err(_) => {
                driver.abort();
                return Err(pool.late("creating the stock table"));
            }
        }
        let conn = pool.ready(client, driver).await?;
        pool.lock_idle().push(conn);
        Ok(PgStock {
            pool: Arc::new(pool),
        })
    }

    /// The server a PostgreSQL URL names, `host:port/database`, never its password; for
    /// messages.
    pub fn server(url: &str) -> String {
        pg::Config::from_str(url).map_or_else(|_| "an invalid URL".to_owned(), |c| shown(&c))
    }

    /// Sets the stock of `sku` to `quantity` with nothing sold. With `holder`, in a
    /// transaction that first checks the holder's fence; `Ok(None)` when it is stale.
    ///
    /// # Errors
    /// When PostgreSQL fails or does not answer within 5 s.
    pub async fn restock(
        &self,
        sku: &str,
        quantity: i64,
        holder: Option<&LockGuard>,
    ) -> Result<Option<Stock>, StoreError> {
        let pool = &self.pool;
        pool.bounded("restocking", async {
            let mut conn = pool.checkout().await?;
            let (client, statements) = conn.parts();
            let failed = |e| pool.failed("refused a restock", e);
            let tx = client.transaction().await.map_err(failed)?;
            if !pool.fence_holds(&tx, holder).await? {
                tx.rollback().await.map_err(failed)?;
                conn.reusable();
                return Ok(None);
            }
            tx.execute(&statements.restock, &[&sku, &quantity])
                .await
                .map_err(failed)?;
            tx.commit().await.map_err(failed)?;
            conn.reusable();
            Ok(Some(Stock {
                sku: sku.to_owned(),
                quantity,
                sold: 0,
            }))
        })
        .await
    }

    /// The stock of `sku`, if it was ever set.
    ///
    /// # Errors
    /// When PostgreSQL fails or does not answer within 5 s.
    pub async fn stock(&self, sku: &str) -> Result<Option<Stock>, StoreError> {
        let pool = &self.pool;
        pool.bounded("reading the stock", async {
            let mut conn = pool.checkout().await?;
            let (client, statements) = conn.parts();
            let row = client
                .query_opt(&statements.show, &[&sku])
                .await
                .map_err(|e| pool.failed("refused a read of the stock", e))?;
            conn.reusable();
            Ok(row.map(|row| Stock {
                sku: sku.to_owned(),
                quantity: row.get(0),
                sold: row.get(1),
            }))
        })
        .await
    }

    /// Buys one item of `sku` the naive way, in one transaction: read the quantity, check
    /// it, do the payment, write back the quantity read minus one. The read takes no row lock,
    /// so two purchases that overlap both read the same quantity and both sell: without a
    /// lock around it, this oversells.
    ///
    /// With `holder` (the lock's guard), the transaction first checks the holder's fence
    /// ([`check_fence`]), before the read, and that keeps the lock from changing hands until
    /// the commit: a holder whose lock was lost gets [`Purchase::Stale`] and writes nothing,
    /// and no other holder can take the lock over, nor write, between this purchase's read
    /// and its write. (The stock has no fence column: with the locks in the same database,
    /// the lock's row is the fence. With the locks elsewhere, the read would have to be
    /// `leasehold::postgres::claim_fence`'s first touch; the shops keep the stock next to the
    /// locks with `--postgres`, and refuse a PostgreSQL `--store-url` with the locks elsewhere.)
    ///
    /// # Errors
    /// When PostgreSQL fails or does not answer within 5 s.
    pub async fn purchase(
        &self,
        sku: &str,
        holder: Option<&LockGuard>,
    ) -> Result<Purchase, StoreError> {
        let pool = &self.pool;
        pool.bounded("buying", async {
            let mut conn = pool.checkout().await?;
            let (client, statements) = conn.parts();
            let failed = |e| pool.failed("refused a purchase", e);
            let tx = client.transaction().await.map_err(failed)?;
            let outcome = if pool.fence_holds(&tx, holder).await? {
                let read = tx
                    .query_opt(&statements.read, &[&sku])
                    .await
                    .map_err(failed)?;
                match read.map(|row| row.get::<_, i64>(0)) {
                    None => Purchase::UnknownSku,
                    Some(quantity) if quantity <= 0 => Purchase::SoldOut,
                    Some(quantity) => {
                        tokio::time::sleep(PAYMENT_TIME).await;
                        let written = tx
                            .query_opt(&statements.write, &[&sku, &(quantity - 1)])
                            .await
                            .map_err(failed)?;
                        match written {
                            Some(row) => Purchase::Sold {
                                order: row.get::<_, i64>(0) as u64,
                            },
                            // Removed meanwhile.
                            None => Purchase::UnknownSku,
                        }
                    }
                }
            } else {
                Purchase::Stale
            };
            match outcome {
                Purchase::Sold { .. } => tx.commit().await.map_err(failed)?,
                _ => tx.rollback().await.map_err(failed)?,
            }
            conn.reusable();
            Ok(outcome)
        })
        .await
    }

    /// Deletes the stock record of `sku`.
    ///
    /// # Errors
    /// When PostgreSQL fails or does not answer within 5 s.
    pub async fn remove(&self, sku: &str) -> Result<(), StoreError> {
        let pool = &self.pool;
        pool.bounded("removing a stock record", async {
            let mut conn = pool.checkout().await?;
            let (client, statements) = conn.parts();
            client
                .execute(&statements.remove, &[&sku])
                .await
                .map_err(|e| pool.failed("refused to remove a stock record", e))?;
            conn.reusable();
            Ok(())
        })
        .await
    }
}

/// `host:port/database` of a configuration, for messages.
fn shown(config: &pg::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(pg::config::Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(pg::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{database}")
}

/// The prepared statements of one connection.
struct Statements {
    read: pg::Statement,
    write: pg::Statement,
    restock: pg::Statement,
    show: pg::Statement,
    remove: pg::Statement,
}

/// One connection, with its statements prepared.
struct Conn {
    client: pg::Client,
    statements: Statements,
    driver: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The driver would otherwise live on behind a stalled socket.
        self.driver.abort();
    }
}

/// Connections opened on demand, up to [`POOL_SIZE`]; the idle ones wait in `idle`.
struct Pool {
    config: pg::Config,
    /// `host:port/database`, for messages.
    shown: String,
    idle: Mutex<Vec<Conn>>,
    slots: tokio::sync::Semaphore,
}

impl Pool {
    fn failed(&self, what: &str, e: pg::Error) -> StoreError {
        // The driver's own message leaves out its cause ("error connecting to server"), which
        // is the part that says what to do ("Connection refused").
        let mut message = format!("PostgreSQL at {} {what}: {e}", self.shown);
        let mut cause = std::error::Error::source(&e);
        while let Some(e) = cause {
            message.push_str(&format!(": {e}"));
            cause = e.source();
        }
        StoreError::Postgres {
            message,
            source: Some(Box::new(e)),
        }
    }

    fn late(&self, doing: &str) -> StoreError {
        StoreError::Postgres {
            message: format!(
                "PostgreSQL at {} did not answer within {CALL_TIMEOUT:?} while {doing}",
                self.shown
            ),
            source: None,
        }
    }

    /// `work` within [`CALL_TIMEOUT`]; a connection it held when cut short is not reused.
    async fn bounded<T>(
        &self,
        doing: &str,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .unwrap_or_else(|_| Err(self.late(doing)))
    }

    /// Whether `holder`, if any, still holds its lock, checked in `tx` (which keeps the lock's
    /// row locked until it ends). `true` without a holder: the `--no-lock` purchase checks
    /// nothing.
    async fn fence_holds(
        &self,
        tx: &pg::Transaction<'_>,
        holder: Option<&LockGuard>,
    ) -> Result<bool, StoreError> {
        let Some(guard) = holder else {
            return Ok(true);
        };
        match check_fence(tx, guard).await {
            Ok(()) => Ok(true),
            Err(LockError::Lost { .. }) => Ok(false),
            Err(e) => Err(StoreError::Postgres {
                message: format!("PostgreSQL at {}: {e}", self.shown),
                source: Some(Box::new(e)),
            }),
        }
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection for one call: an idle one, or a new one while fewer than [`POOL_SIZE`]
    /// are open; otherwise waits for one to come back.
    async fn checkout(&self) -> Result<Checkout<'_>, StoreError> {
        let slot = self
            .slots
            .acquire()
            .await
            .expect("the pool's semaphore is never closed");
        let idle = std::iter::from_fn(|| self.lock_idle().pop()).find(|c| !c.client.is_closed());
        let conn = match idle {
            Some(conn) => conn,
            None => {
                let (client, driver) = self.open_client().await?;
                self.ready(client, driver).await?
            }
        };
        Ok(Checkout {
            pool: self,
            conn: Some(conn),
            reusable: false,
            _slot: slot,
        })
    }

    /// A new connection whose driver runs on a task of its own, with the session's timeouts
    /// set.
    async fn open_client(&self) -> Result<(pg::Client, AbortHandle), StoreError> {
        let (client, connection) =
            match tokio::time::timeout(CONNECT_TIMEOUT, self.config.connect(pg::NoTls)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(self.failed("could not be reached", e)),
                Err(_) => {
                    return Err(StoreError::Postgres {
                        message: format!(
                            "PostgreSQL at {} did not accept a connection within \
                             {CONNECT_TIMEOUT:?}",
                            self.shown
                        ),
                        source: None,
                    })
                }
            };
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        })
        .abort_handle();
        let ms = CALL_TIMEOUT.as_millis();
        let settings = format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
             SET idle_in_transaction_session_timeout = {}",
            ms * 2
        );
        match tokio::time::timeout(CONNECT_TIMEOUT, client.batch_execute(&settings)).await {
            Ok(Ok(())) => Ok((client, driver)),
            Ok(Err(e)) => {
                driver.abort();
                Err(self.failed("refused the session settings", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late("setting up a connection"))
            }
        }
    }

    /// `client` with its statements prepared.
    async fn ready(&self, client: pg::Client, driver: AbortHandle) -> Result<Conn, StoreError> {
        let prepare = async {
            Ok::<_, pg::Error>(Statements {
                read: client.prepare(READ).await?,
                write: client.prepare(WRITE).await?,
                restock: client.prepare(RESTOCK).await?,
                show: client.prepare(SHOW).await?,
                remove: client.prepare(REMOVE).await?,
            })
        };
        let prepared = tokio::time::timeout(CONNECT_TIMEOUT, prepare).await;
        match prepared {
            Ok(Ok(statements)) => Ok(Conn {
                client,
                statements,
                driver,
            }),
            Ok(Err(e)) => {
                driver.abort();
                Err(self.failed("refused to prepare the stock statements", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late("preparing the stock statements"))
            }
        }
    }
}

/// A connection checked out of the pool for one call. It goes back when dropped only if the
/// call marked it [`reusable`](Self::reusable), that is, ended cleanly: a call that failed
/// or was cut short may have left a transaction open or a reply in flight.
struct Checkout<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    reusable: bool,
    _slot: tokio::sync::SemaphorePermit<'a>,
}

impl Checkout<'_> {
    fn parts(&mut self) -> (&mut pg::Client, &Statements) {
        let conn = self.conn.as_mut().expect("present until dropped");
        (&mut conn.client, &conn.statements)
    }

    fn reusable(&mut self) {
        self.reusable = true;
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.reusable && !conn.client.is_closed() {
                self.pool.lock_idle().push(conn);
            }
        }
    }
}
