//! The Redis semaphore users write by hand (scenario 9's baseline): a sorted set of holders
//! scored by the end of their lease, in Lua (drop the expired, `ZCARD`, `ZADD` when below the
//! limit; `ZREM` to release), waiting by polling every 1 ms.

use std::sync::Arc;
use std::time::Duration;

use crate::baselines::token;
use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const REDIS_ZSET: &str = "ZSET + Lua, 1 ms polling";

const LEASE: Duration = Duration::from_secs(30);

/// KEYS: the set. ARGV: the limit, the holder's token, the lease in ms. 1 when taken.
const ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
";

/// The semaphore `key` on one connection, shared by the tasks.
#[derive(Clone)]
pub(crate) struct RedisZset {
    conn: redis::aio::MultiplexedConnection,
    acquire: Arc<redis::Script>,
    key: String,
}

impl RedisZset {
    pub(crate) async fn connect(url: &str, key: &str) -> RedisZset {
        let conn = redis::Client::open(url)
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        RedisZset {
            conn,
            acquire: Arc::new(redis::Script::new(ACQUIRE)),
            key: key.to_owned(),
        }
    }
}

impl Permits for RedisZset {
    /// The holder's token.
    type Permit = String;

    async fn acquire(&self) -> String {
        let holder = token();
        loop {
            let got: i64 = self
                .acquire
                .key(&self.key)
                .arg(PERMITS)
                .arg(&holder)
                .arg(LEASE.as_millis() as u64)
                .invoke_async(&mut self.conn.clone())
                .await
                .expect("hand-written acquire");
            if got == 1 {
                return holder;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn release(&self, holder: String) {
        let _: i64 = redis::cmd("ZREM")
            .arg(&self.key)
            .arg(&holder)
            .query_async(&mut self.conn.clone())
            .await
            .expect("hand-written release");
    }
}
