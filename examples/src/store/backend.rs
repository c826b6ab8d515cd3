//! The store a shop was started with, Redis, PostgreSQL or MySQL, behind one set of methods, so the
//! shops' handlers never ask which: each fences a purchase its own way, from its read on,
//! given the lock's guard.

use leasehold::LockGuard;

use super::{MyStock, PgStock, Purchase, PurchaseFencing, RedisStock, Stock, StoreError};

/// The stock of every sku and the order counter, in Redis (fenced by token: a purchase claims
/// the record, which keeps the newest fence that claimed it, before it reads, and writes only
/// under its claim) or in PostgreSQL (fenced by the lock itself: the purchase's transaction
/// checks the lock's row, next to the stock, before it reads). Cheap to clone.
#[derive(Clone)]
pub enum Store {
    /// Redis hashes, `shop:stock:<sku>`, and the counter `shop:orders`.
    Redis(RedisStock),
    /// The table `shop_stock` and the sequence `shop_orders`, in the database of the locks.
    Postgres(PgStock),
    /// The tables `shop_stock` and `shop_orders`, in the MySQL database of the locks (fenced
    /// by the lock, as PostgreSQL's).
    Mysql(MyStock),
}

impl Store {
    /// Connects to the store `url` names: PostgreSQL for `postgres://` and `postgresql://`
    /// (see [`PgStock::connect`]), Redis otherwise (see [`RedisStock::connect`]).
    ///
    /// # Errors
    /// When the URL is not one of theirs, or the server does not answer.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        if Store::is_postgres(url) {
            PgStock::connect(url).await.map(Store::Postgres)
        } else if Store::is_mysql(url) {
            MyStock::connect(url).await.map(Store::Mysql)
        } else {
            RedisStock::connect(url).await.map(Store::Redis)
        }
    }

    /// The same store, its purchases under a lock fenced as `fencing` says in Redis; a
    /// PostgreSQL store checks the lock in the purchase's transaction whatever it says.
    #[must_use]
    pub fn with_fencing(self, fencing: PurchaseFencing) -> Store {
        match self {
            Store::Redis(redis) => Store::Redis(redis.with_fencing(fencing)),
            postgres => postgres,
        }
    }

    /// Whether `url` names a MySQL (or MariaDB) database.
    pub fn is_mysql(url: &str) -> bool {
        url.starts_with("mysql://") || url.starts_with("mariadb://")
    }

    /// Whether `url` names a PostgreSQL database.
    pub fn is_postgres(url: &str) -> bool {
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }

    /// Sets the stock of `sku` to `quantity` with nothing sold. With `holder` (the lock's
    /// guard), only while the holder's fence is current (in Redis: the record claimed with it,
    /// then written under the claim); `Ok(None)` when it is stale.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn restock(
        &self,
        sku: &str,
        quantity: i64,
        holder: Option<&LockGuard>,
    ) -> Result<Option<Stock>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let fence = holder.map(LockGuard::fence);
                redis.restock(sku, quantity, fence).await
            }
            Store::Postgres(postgres) => postgres.restock(sku, quantity, holder).await,
            Store::Mysql(mysql) => mysql.restock(sku, quantity, holder).await,
        }
    }

    /// The stock of `sku`, if it was ever set.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn stock(&self, sku: &str) -> Result<Option<Stock>, StoreError> {
        match self {
            Store::Redis(redis) => redis.stock(sku).await,
            Store::Postgres(postgres) => postgres.stock(sku).await,
            Store::Mysql(mysql) => mysql.stock(sku).await,
        }
    }

    /// Buys one item of `sku` the naive way (read, check, pay, write back the quantity read
    /// minus one), which oversells unless a lock serializes it. With `holder` (the lock's
    /// guard), the read is fenced (in Redis it is the record's claim, in PostgreSQL it runs in
    /// the transaction that checked the lock), so a holder whose lock was lost writes nothing
    /// ([`Purchase::Stale`]), even when its write lands after the next holder's read.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn purchase(
        &self,
        sku: &str,
        holder: Option<&LockGuard>,
    ) -> Result<Purchase, StoreError> {
        match self {
            Store::Redis(redis) => redis.purchase(sku, holder.map(LockGuard::fence)).await,
            Store::Postgres(postgres) => postgres.purchase(sku, holder).await,
            Store::Mysql(mysql) => mysql.purchase(sku, holder).await,
        }
    }

    /// Deletes the stock record of `sku`.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn remove(&self, sku: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.remove(sku).await,
            Store::Postgres(postgres) => postgres.remove(sku).await,
            Store::Mysql(mysql) => mysql.remove(sku).await,
        }
    }
}
