//! The stock in Redis hashes, fenced by token (`leasehold::fenced`): a purchase under a lock
//! first claims the stock record with its lock's fencing token, which raises the record's
//! `fence` and returns the quantity in one script, and its write is accepted only while the
//! record is still claimed by that token. A holder whose lease ended (paused, partitioned, its
//! write late in the network) writes nothing once a newer holder claimed the record, wherever
//! its write lands: also between the newer holder's read and its write.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold::fenced::{self, Claimed};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;

use super::{Purchase, PurchaseFencing, Stock, StoreError, PAYMENT_TIME};

// The purchase's write under its claim, behind the library's token checks.
static PURCHASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(&format!(
        "{}{}",
        fenced::FENCE_CMP_LUA,
        include_str!("scripts/purchase.lua")
    ))
});

// The write of the purchase before issue 44 (`--fence-write-only`): fenced alone.
static PURCHASE_FENCE_WRITE_ONLY: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(&format!(
        "{}{}",
        fenced::FENCE_CMP_LUA,
        include_str!("scripts/purchase_fence_write_only.lua")
    ))
});

/// The Redis hash of one sku: `quantity`, `sold`, and `fence` (the newest fencing token that
/// claimed it).
pub fn stock_key(sku: &str) -> String {
    format!("shop:stock:{sku}")
}

/// The counter that numbers orders.
pub const ORDERS_KEY: &str = "shop:orders";

/// The stock of every sku, in one Redis server. Cheap to clone.
#[derive(Clone)]
pub struct RedisStock {
    conn: ConnectionManager,
    fencing: PurchaseFencing,
}

impl RedisStock {
    /// Connects to Redis; every call is bounded (2 s to connect, 5 s per reply). Purchases
    /// claim the record before they read it ([`PurchaseFencing::Claim`]).
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
        Ok(RedisStock {
            conn,
            fencing: PurchaseFencing::Claim,
        })
    }

    /// The same store, its purchases under a lock fenced as `fencing` says.
    #[must_use]
    pub fn with_fencing(self, fencing: PurchaseFencing) -> RedisStock {
        RedisStock { fencing, ..self }
    }

    /// Sets the stock of `sku` to `quantity` with nothing sold. With a fencing token, the
    /// record is claimed first and written under the claim, as a purchase does, so every fenced
    /// write of the record follows one rule; `Ok(None)` when a newer token claimed it.
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
        let key = stock_key(sku);
        let fields = [("quantity", quantity), ("sold", 0)];
        let written = match fence {
            Some(fence) => match fenced::claim_with_fence(&mut conn, &key, fence).await? {
                Claimed::Yes(_) => fenced::write_if_claimed(&mut conn, &key, &fields, fence)
                    .await?
                    .is_accepted(),
                Claimed::Refused { .. } => false,
            },
            None => {
                conn.hset_multiple::<_, _, _, ()>(&key, &fields).await?;
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
    /// With `fence` (the lock's fencing token), the read is the record's claim
    /// ([`fenced::claim_with_fence`]: the record's `fence` becomes this token, and the quantity
    /// comes back with it), and the write is accepted only while the record is still claimed
    /// by this token; a newer holder's claim, before the read or after it, makes it
    /// [`Purchase::Stale`]. (With [`PurchaseFencing::WriteOnly`], the purchase before issue 44:
    /// a plain read, and a write refused only if a newer token wrote first.)
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn purchase(&self, sku: &str, fence: Option<u64>) -> Result<Purchase, StoreError> {
        let mut conn = self.conn.clone();
        let key = stock_key(sku);
        let claimed = fence.filter(|_| self.fencing == PurchaseFencing::Claim);
        let quantity: Option<i64> = match claimed {
            // The first touch carries the fence: from here on no older holder's write is
            // accepted, however late it arrives.
            Some(fence) => match fenced::claim_with_fence(&mut conn, &key, fence).await? {
                Claimed::Yes(record) => record.get("quantity")?,
                Claimed::Refused { .. } => return Ok(Purchase::Stale),
            },
            // No lock (nothing to fence), or the read of `--fence-write-only`.
            None => conn.hget(&key, "quantity").await?,
        };
        let Some(quantity) = quantity else {
            return Ok(Purchase::UnknownSku);
        };
        if quantity <= 0 {
            return Ok(Purchase::SoldOut);
        }
        tokio::time::sleep(PAYMENT_TIME).await;
        let script = match (fence, self.fencing) {
            (Some(_), PurchaseFencing::WriteOnly) => &*PURCHASE_FENCE_WRITE_ONLY,
            _ => &*PURCHASE,
        };
        let (written, value): (i64, redis::Value) = script
            .key(&key)
            .key(ORDERS_KEY)
            .arg(quantity - 1)
            .arg(fence.unwrap_or(0))
            .invoke_async(&mut conn)
            .await?;
        Ok(match (written, value) {
            (1, value) => Purchase::Sold {
                order: redis::from_redis_value(value).map_err(redis::RedisError::from)?,
            },
            // The record lost its claim with the record itself: removed since the read.
            (_, redis::Value::BulkString(fence)) if fence.is_empty() => Purchase::UnknownSku,
            _ => Purchase::Stale,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use leasehold_tests::harness::{Held, RedisServer, TcpProxy};

    use super::*;

    /// Issue 44 by hand: holder A (fence 33) reads 5 and writes 4, its write delayed in the
    /// network; holder B (fence 65) reads 5 and writes 4; A's write lands between B's read
    /// and B's write. The proxies order the steps: each holds its client's write until told.
    async fn a_delayed_write_between_the_next_read_and_write(
        fencing: PurchaseFencing,
    ) -> (Purchase, Purchase, Stock) {
        let redis = RedisServer::start().await;
        let (a_net, b_net) = (
            TcpProxy::start(redis.addr()).await,
            TcpProxy::start(redis.addr()).await,
        );
        let a = RedisStock::connect(&a_net.url()).await.unwrap();
        let b = RedisStock::connect(&b_net.url()).await.unwrap();
        let (a, b) = (a.with_fencing(fencing), b.with_fencing(fencing));
        a.restock("42", 5, Some(10))
            .await
            .unwrap()
            .expect("restocked");
        let write = ORDERS_KEY.as_bytes();
        let caught = Duration::from_secs(10);

        a_net.hold_next_sending(write, Held::Requests);
        let a_buys = tokio::spawn({
            let a = a.clone();
            async move { a.purchase("42", Some(33)).await }
        });
        assert!(a_net.wait_caught(1, caught).await, "A read and wrote");
        b_net.hold_next_sending(write, Held::Requests);
        let b_buys = tokio::spawn(async move { b.purchase("42", Some(65)).await });
        assert!(b_net.wait_caught(1, caught).await, "B read and wrote");
        a_net.release_held();
        let a_bought = a_buys.await.unwrap().unwrap();
        b_net.release_held();
        let b_bought = b_buys.await.unwrap().unwrap();
        (a_bought, b_bought, a.stock("42").await.unwrap().unwrap())
    }

    #[tokio::test]
    async fn a_write_delayed_past_the_next_holders_read_is_refused_by_its_claim() {
        let (a, b, stock) =
            a_delayed_write_between_the_next_read_and_write(PurchaseFencing::Claim).await;
        assert_eq!(a, Purchase::Stale, "B's claim came before A's write");
        assert!(matches!(b, Purchase::Sold { .. }), "{b:?}");
        assert_eq!((stock.quantity, stock.sold), (4, 1));
    }

    #[tokio::test]
    async fn a_purchase_that_fences_its_write_alone_loses_a_sale_to_a_delayed_write() {
        let (a, b, stock) =
            a_delayed_write_between_the_next_read_and_write(PurchaseFencing::WriteOnly).await;
        // Both accepted: A's fence was the newest that had written when it landed.
        assert!(matches!(a, Purchase::Sold { .. }), "{a:?}");
        assert!(matches!(b, Purchase::Sold { .. }), "{b:?}");
        assert_eq!(
            (stock.quantity, stock.sold),
            (4, 2),
            "two sales, the stock down by one"
        );
    }

    #[tokio::test]
    async fn a_refused_claim_reads_and_writes_nothing_and_no_lock_checks_nothing() {
        let redis = RedisServer::start().await;
        let store = RedisStock::connect(&redis.url()).await.unwrap();
        store.restock("7", 3, Some(100)).await.unwrap().unwrap();
        assert_eq!(
            store.purchase("7", Some(99)).await.unwrap(),
            Purchase::Stale
        );
        assert_eq!(store.restock("7", 9, Some(99)).await.unwrap(), None);
        assert!(matches!(
            store.purchase("7", Some(100)).await.unwrap(),
            Purchase::Sold { .. }
        ));
        // Without a lock: no claim, no check, and the record's fence stays.
        assert!(matches!(
            store.purchase("7", None).await.unwrap(),
            Purchase::Sold { .. }
        ));
        assert_eq!(
            store.purchase("7", Some(100)).await.unwrap(),
            Purchase::Sold { order: 3 }
        );
        let stock = store.stock("7").await.unwrap().unwrap();
        assert_eq!((stock.quantity, stock.sold), (0, 3));
        assert_eq!(
            store.purchase("7", Some(101)).await.unwrap(),
            Purchase::SoldOut
        );
        assert_eq!(
            store.purchase("none", Some(102)).await.unwrap(),
            Purchase::UnknownSku
        );
        assert!(store.stock("none").await.unwrap().is_none());
    }
}
