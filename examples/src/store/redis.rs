//! The stock in Redis hashes, fenced by token: a write carries its lock's fencing token and
//! is refused if a newer token has written to the record already (`leasehold::fenced`).

use std::sync::LazyLock;
use std::time::Duration;

use leasehold::fenced;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;

use super::{Purchase, Stock, StoreError, PAYMENT_TIME};

// The library's exact token comparison in front of the purchase's own write.
static PURCHASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(&format!(
        "{}{}",
        fenced::FENCE_CMP_LUA,
        include_str!("scripts/purchase.lua")
    ))
});

/// The Redis hash of one sku: `quantity`, `sold`, and `fence` (the newest fencing token
/// that wrote to it).
pub fn stock_key(sku: &str) -> String {
    format!("shop:stock:{sku}")
}

/// The counter that numbers orders.
pub const ORDERS_KEY: &str = "shop:orders";

/// The stock of every sku, in one Redis server. Cheap to clone.
#[derive(Clone)]
pub struct RedisStock {
    conn: ConnectionManager,
}

impl RedisStock {
    /// Connects to Redis; every call is bounded (2 s to connect, 5 s per reply).
    ///
    /// # Errors
    /// When the URL is not a Redis URL or the server does not answer.
    pub async fn connect(url: &str) -> Result<RedisStock, StoreError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2);
        let conn = ConnectionManager::new_with_config(client, config).await?;
        Ok(RedisStock { conn })
    }

    /// Sets the stock of `sku` to `quantity` with nothing sold. With a fencing token, only if
    /// no newer token wrote to it; `Ok(None)` when refused.
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn restock(
        &self,
        sku: &str,
        quantity: i64,
        fence: Option<u64>,
    ) -> Result<Option<Stock>, StoreError> {
        let mut conn = self.conn.clone();
        let fields = [("quantity", quantity), ("sold", 0)];
        let written = match fence {
            Some(fence) => fenced::write_if_newer(&mut conn, &stock_key(sku), &fields, fence)
                .await?
                .is_accepted(),
            None => {
                conn.hset_multiple::<_, _, _, ()>(stock_key(sku), &fields)
                    .await?;
                true
            }
        };
        Ok(written.then(|| Stock {
            sku: sku.to_owned(),
            quantity,
            sold: 0,
        }))
    }

    /// The stock of `sku`, if it was ever set.
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn stock(&self, sku: &str) -> Result<Option<Stock>, StoreError> {
        let mut conn = self.conn.clone();
        let (quantity, sold): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(stock_key(sku))
            .arg("quantity")
            .arg("sold")
            .query_async(&mut conn)
            .await?;
        Ok(quantity.map(|quantity| Stock {
            sku: sku.to_owned(),
            quantity,
            sold: sold.unwrap_or(0),
        }))
    }

    /// Buys one item of `sku` the naive way: read the quantity, check it, do the payment,
    /// write back the quantity read minus one. Two purchases that overlap both read the same
    /// quantity and both sell: without a lock around it, this oversells.
    ///
    /// With `fence` (the lock's fencing token), the write is refused if a newer token wrote
    /// first ([`Purchase::Stale`]).
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn purchase(&self, sku: &str, fence: Option<u64>) -> Result<Purchase, StoreError> {
        let mut conn = self.conn.clone();
        let key = stock_key(sku);
        let quantity: Option<i64> = conn.hget(&key, "quantity").await?;
        let Some(quantity) = quantity else {
            return Ok(Purchase::UnknownSku);
        };
        if quantity <= 0 {
            return Ok(Purchase::SoldOut);
        }
        tokio::time::sleep(PAYMENT_TIME).await;
        let (written, value): (i64, u64) = PURCHASE
            .key(&key)
            .key(ORDERS_KEY)
            .arg(quantity - 1)
            .arg(fence.unwrap_or(0))
            .invoke_async(&mut conn)
            .await?;
        Ok(if written == 1 {
            Purchase::Sold { order: value }
        } else {
            Purchase::Stale
        })
    }

    /// Deletes the stock record of `sku`.
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn remove(&self, sku: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        Ok(conn.del::<_, ()>(stock_key(sku)).await?)
    }
}
