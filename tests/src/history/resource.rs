//! The fenced resource the workers write to under their holds: a record on a Redis server of its
//! own that refuses stale fences, and the wallets multi-key holds move money between.

/// The fenced resource, as a Lua script on its own Redis server: a record that accepts a
/// write only with a fencing token newer than the last one it accepted (or the same token
/// again, from the same holder). Tokens are compared as decimal strings, exactly, since
/// leasehold's fences (microseconds of the server clock and up) are too large for Lua's
/// doubles to compare safely in general.
pub const FENCED_WRITE_SCRIPT: &str = r#"
-- KEYS[1]  the record (a hash: fence, writer, accepted, rejected)
-- ARGV[1]  the writer's fencing token, decimal
-- ARGV[2]  the writer (a hold id)
-- Returns 1 when the write was accepted, 0 when it was refused as stale.
local last = redis.call('HGET', KEYS[1], 'fence')
local newer
if not last then
  newer = true
elseif #ARGV[1] ~= #last then
  newer = #ARGV[1] > #last
elseif ARGV[1] == last then
  newer = redis.call('HGET', KEYS[1], 'writer') == ARGV[2]
else
  newer = ARGV[1] > last
end
if newer then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'writer', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'accepted', 1)
  return 1
end
redis.call('HINCRBY', KEYS[1], 'rejected', 1)
return 0
"#;

/// A transfer between two wallets under a multi-key hold, on the resource's server: every
/// key of the hold is fenced as [`FENCED_WRITE_SCRIPT`] fences one, and only when all of
/// them accept does it set the two balances the holder computed from what it read under the
/// lock (a read-modify-write: two holders overlapping would lose an update and change the
/// total).
pub const TRANSFER_SCRIPT: &str = r#"
-- KEYS[1], KEYS[2]  the balances of the two wallets (plain integers)
-- KEYS[3..]         the fenced records of every key of the hold (as FENCED_WRITE_SCRIPT)
-- ARGV[1], ARGV[2]  the new balances
-- ARGV[3]           the writer (a hold id)
-- ARGV[4..]         the writer's fence of each record's key, decimal, in KEYS[3..]'s order
-- Returns 1 when every record accepted the write (and the balances are set), 0 when one
-- refused it as stale (and nothing changed).
local n = #KEYS - 2
for i = 1, n do
  local rec, fence = KEYS[2 + i], ARGV[3 + i]
  local last = redis.call('HGET', rec, 'fence')
  local newer
  if not last then
    newer = true
  elseif #fence ~= #last then
    newer = #fence > #last
  elseif fence == last then
    newer = redis.call('HGET', rec, 'writer') == ARGV[3]
  else
    newer = fence > last
  end
  if not newer then
    for j = 1, n do
      redis.call('HINCRBY', KEYS[2 + j], 'rejected', 1)
    end
    return 0
  end
end
for i = 1, n do
  redis.call('HSET', KEYS[2 + i], 'fence', ARGV[3 + i], 'writer', ARGV[3])
  redis.call('HINCRBY', KEYS[2 + i], 'accepted', 1)
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
"#;

/// The Redis key of the balance of the wallet of lock key `key` (multi-key mode).
pub fn wallet_key(key: &str) -> String {
    format!("wallet:{key}")
}

/// The Redis key of the fenced record for lock key `key`.
pub fn resource_key(key: &str) -> String {
    format!("resource:{key}")
}

/// A client of the fenced resource.
#[derive(Clone)]
pub struct FencedResource {
    conn: redis::aio::MultiplexedConnection,
    script: redis::Script,
    transfer: redis::Script,
}

impl FencedResource {
    /// Connects to the resource's server.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn connect(url: &str) -> redis::RedisResult<Self> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(FencedResource {
            conn,
            script: redis::Script::new(FENCED_WRITE_SCRIPT),
            transfer: redis::Script::new(TRANSFER_SCRIPT),
        })
    }

    /// Writes to the record of `key` with `fence`; `Ok(true)` when accepted.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn write(&self, key: &str, fence: u64, writer: &str) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let accepted: i64 = self
            .script
            .key(resource_key(key))
            .arg(fence.to_string())
            .arg(writer)
            .invoke_async(&mut conn)
            .await?;
        Ok(accepted == 1)
    }

    /// Moves `amount` from the wallet of `from` to the wallet of `to` under a hold of every
    /// key of `fenced` (each with its fence): reads both balances (a missing one is 0), then
    /// writes both with [`TRANSFER_SCRIPT`]. `Ok(true)` when every record accepted it.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn transfer(
        &self,
        from: &str,
        to: &str,
        amount: i64,
        fenced: &[(&str, u64)],
        writer: &str,
    ) -> redis::RedisResult<bool> {
        let mut conn = self.conn.clone();
        let (a, b): (Option<i64>, Option<i64>) = redis::cmd("MGET")
            .arg(wallet_key(from))
            .arg(wallet_key(to))
            .query_async(&mut conn)
            .await?;
        let (a, b) = (a.unwrap_or(0), b.unwrap_or(0));
        let mut call = self.transfer.prepare_invoke();
        call.key(wallet_key(from)).key(wallet_key(to));
        for (key, _) in fenced {
            call.key(resource_key(key));
        }
        call.arg(a - amount).arg(b + amount).arg(writer);
        for (_, fence) in fenced {
            call.arg(fence.to_string());
        }
        let accepted: i64 = call.invoke_async(&mut conn).await?;
        Ok(accepted == 1)
    }

    /// The balance of the wallet of `key` (0 when it has none).
    ///
    /// # Errors
    /// When the server fails.
    pub async fn balance(&self, key: &str) -> redis::RedisResult<i64> {
        let mut conn = self.conn.clone();
        let balance: Option<i64> = redis::cmd("GET")
            .arg(wallet_key(key))
            .query_async(&mut conn)
            .await?;
        Ok(balance.unwrap_or(0))
    }

    /// Sets the balance of the wallet of `key`.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn set_balance(&self, key: &str, balance: i64) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(wallet_key(key))
            .arg(balance)
            .query_async(&mut conn)
            .await
    }

    /// The record's totals: `(accepted, rejected)`.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn totals(&self, key: &str) -> redis::RedisResult<(u64, u64)> {
        let mut conn = self.conn.clone();
        let (a, r): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(resource_key(key))
            .arg("accepted")
            .arg("rejected")
            .query_async(&mut conn)
            .await?;
        Ok((a.unwrap_or(0), r.unwrap_or(0)))
    }
}
