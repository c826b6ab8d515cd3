//! A lock written by hand on one Redis server (`--raw-lock`), as safe as leasehold's fenced
//! default where a benchmark can tell: a random owner token, `SET NX PX` and a fencing token
//! taken in one script, with the counter lifted to the server clock (so that tokens keep
//! increasing after a restore from an old snapshot), and a compare-and-delete release. What it
//! leaves out is what the library adds: no renewal (a purchase is far shorter than its 10 s
//! lease), no queue (a busy lock is polled every millisecond), no metrics, no tracing, no
//! retries. It is the floor `scripts/web-bench` measures the locked shop against: what a
//! locked purchase costs on this machine before any library work.

use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::time::Instant;

use crate::store::StoreError;

/// Takes the lock `KEYS[1]` for `ARGV[1]` (the token) for `ARGV[2]` ms, and returns the next
/// fencing token of `KEYS[2]` (at least the server clock in microseconds, the counter's TTL
/// `ARGV[3]` ms); `false` when the lock is taken. `SET NX PX` and a fence in one script, with
/// the fence rule leasehold keeps (its `fence.lua`): also `lockbench`'s restore-safe baseline.
pub const TAKE: &str = "\
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') < floor then
  redis.call('SET', KEYS[2], string.format('%d', floor + 1), 'PX', ARGV[3])
  return floor + 1
end
return redis.call('INCR', KEYS[2])";

/// Deletes the lock `KEYS[1]` if it still holds the token `ARGV[1]` (compare-and-delete; 1 when
/// it did): also `lockbench`'s raw release.
pub const GIVE_BACK: &str = "\
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// How long a fence counter outlives its last use (as leasehold's default).
const FENCE_TTL_MS: u64 = 7 * 24 * 3600 * 1000;

/// The hand-written lock of `--raw-lock`: cheap to clone.
#[derive(Clone)]
pub struct RawLock {
    conn: ConnectionManager,
    take: redis::Script,
    give_back: redis::Script,
    wait: Duration,
}

/// A held [`RawLock`]: its key, owner token and fencing token.
pub struct RawHold {
    key: String,
    token: String,
    /// The fencing token the purchase's write carries.
    pub fence: u64,
}

impl RawLock {
    /// Connects to the Redis at `url`; a busy lock is waited for at most `wait`.
    ///
    /// # Errors
    /// When the URL is not a Redis URL or the server does not answer.
    pub async fn connect(url: &str, wait: Duration) -> Result<RawLock, StoreError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(RawLock {
            conn,
            take: redis::Script::new(TAKE),
            give_back: redis::Script::new(GIVE_BACK),
            wait,
        })
    }

    /// Takes the lock of `sku` for `lease`, polling every millisecond while it is taken, for
    /// at most the wait given to [`RawLock::connect`]; `None` when the wait ran out.
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn lock(&self, sku: &str, lease: Duration) -> Result<Option<RawHold>, StoreError> {
        let key = format!("rawshop:lock:{sku}");
        let fence_key = format!("rawshop:fence:{sku}");
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).expect("the operating system's random numbers");
        let token = format!("{:032x}", u128::from_le_bytes(secret));
        let deadline = Instant::now() + self.wait;
        let mut conn = self.conn.clone();
        loop {
            let fence: Option<u64> = self
                .take
                .key(&key)
                .key(&fence_key)
                .arg(&token)
                .arg(lease.as_millis() as u64)
                .arg(FENCE_TTL_MS)
                .invoke_async(&mut conn)
                .await?;
            if let Some(fence) = fence {
                return Ok(Some(RawHold { key, token, fence }));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Gives `hold` back if it is still ours.
    ///
    /// # Errors
    /// When Redis fails.
    pub async fn unlock(&self, hold: RawHold) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .give_back
            .key(&hold.key)
            .arg(&hold.token)
            .invoke_async(&mut conn)
            .await?;
        Ok(())
    }
}
