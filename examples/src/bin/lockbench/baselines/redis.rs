//! Redis baselines: the lock users write by hand ([`Naive`]: `SET NX PX`, compare-and-delete,
//! a 1 ms polling loop; with a fence taken in one script, plain or restore-safe) and
//! [`Rslock`], the most used Rust RedLock crate.

use std::sync::Arc;
use std::time::Duration;

// The hand-written lock's compare-and-delete, and its `SET NX PX` with a restore-safe fence
// (the counter lifted to the server clock, as leasehold's `fence.lua` does): the shops'
// `--raw-lock` sends the same scripts.
use leasehold_examples::raw_lock::{GIVE_BACK as COMPARE_AND_DELETE, TAKE as SAFE_FENCED_SET};

use super::token;
use crate::key_lock::KeyLock;

/// The same lock with a fencing token taken in the same atomic step, as ours does: a script,
/// since Redis has no native "set if absent, then increment". Returns the token, or nil.
const FENCED_SET: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
     return redis.call('INCR', KEYS[2]) end return false";

/// Several free keys taken by hand in one round trip, each with the restore-safe fence of
/// [`SAFE_FENCED_SET`]: all or none (nothing is written if one key is held). `KEYS` are
/// pairs (lock, its fence counter); `ARGV` the token, the lease and the counter's lifetime in
/// ms. Returns each key's fence, in order, or nil. The floor of a one-round-trip `lock_all`
/// with our safety: no queue, no watchdog, no record of the attempt.
const SAFE_FENCED_SET_ALL: &str = "\
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then return false end
end
local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fences = {}
for i = 1, #KEYS, 2 do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  if tonumber(redis.call('GET', KEYS[i + 1]) or '0') < floor then
    redis.call('SET', KEYS[i + 1], string.format('%d', floor + 1), 'PX', ARGV[3])
    fences[#fences + 1] = floor + 1
  else
    fences[#fences + 1] = redis.call('INCR', KEYS[i + 1])
  end
end
return fences";

/// Compare-and-delete of every key in `KEYS` that holds the token `ARGV[1]`, in one round
/// trip; returns how many it deleted.
const COMPARE_AND_DELETE_ALL: &str = "\
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then n = n + redis.call('DEL', KEYS[i]) end
end
return n";

/// The lock users write by hand, done right as far as it goes: random token, `SET NX PX`,
/// compare-and-delete; waiting is a 1 ms polling loop.
#[derive(Clone)]
pub(crate) struct Naive {
    conn: redis::aio::MultiplexedConnection,
    delete: Arc<redis::Script>,
    fenced_set: Arc<redis::Script>,
    safe_fenced_set: Arc<redis::Script>,
    safe_fenced_set_all: Arc<redis::Script>,
    delete_all: Arc<redis::Script>,
}

impl Naive {
    pub(crate) async fn new(url: &str) -> Naive {
        let client = redis::Client::open(url).expect("url");
        Naive {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .expect("connect"),
            delete: Arc::new(redis::Script::new(COMPARE_AND_DELETE)),
            fenced_set: Arc::new(redis::Script::new(FENCED_SET)),
            safe_fenced_set: Arc::new(redis::Script::new(SAFE_FENCED_SET)),
            safe_fenced_set_all: Arc::new(redis::Script::new(SAFE_FENCED_SET_ALL)),
            delete_all: Arc::new(redis::Script::new(COMPARE_AND_DELETE_ALL)),
        }
    }

    /// `SET NX PX` and, when it took the lock, the next fencing token, in one script.
    pub(crate) async fn try_lock_fenced(
        &self,
        key: &str,
        fence_key: &str,
        token: &str,
    ) -> Option<u64> {
        let mut conn = self.conn.clone();
        self.fenced_set
            .key(key)
            .key(fence_key)
            .arg(token)
            .arg(30_000)
            .invoke_async(&mut conn)
            .await
            .expect("fenced SET")
    }

    /// [`try_lock_fenced`](Self::try_lock_fenced) with a restore-safe fence
    /// ([`SAFE_FENCED_SET`]).
    pub(crate) async fn try_lock_safe_fenced(
        &self,
        key: &str,
        fence_key: &str,
        token: &str,
    ) -> Option<u64> {
        let mut conn = self.conn.clone();
        self.safe_fenced_set
            .key(key)
            .key(fence_key)
            .arg(token)
            .arg(30_000)
            .arg(86_400_000)
            .invoke_async(&mut conn)
            .await
            .expect("restore-safe fenced SET")
    }

    /// Every lock of `pairs` (lock, fence counter) taken in one script call
    /// ([`SAFE_FENCED_SET_ALL`]), or none; each one's fence.
    pub(crate) async fn try_lock_all_safe_fenced(
        &self,
        pairs: &[(String, String)],
        token: &str,
    ) -> Option<Vec<u64>> {
        let mut conn = self.conn.clone();
        let mut call = self.safe_fenced_set_all.prepare_invoke();
        for (key, fence_key) in pairs {
            call.key(key).key(fence_key);
        }
        call.arg(token)
            .arg(30_000)
            .arg(86_400_000)
            .invoke_async(&mut conn)
            .await
            .expect("restore-safe fenced SET of every key")
    }

    /// Compare-and-delete of every lock in `keys` in one script call; how many it deleted.
    pub(crate) async fn unlock_all(&self, keys: &[String], token: &str) -> i64 {
        let mut conn = self.conn.clone();
        let mut call = self.delete_all.prepare_invoke();
        for key in keys {
            call.key(key);
        }
        call.arg(token)
            .invoke_async(&mut conn)
            .await
            .expect("compare-and-delete of every key")
    }

    pub(crate) async fn try_lock(&self, key: &str, token: &str) -> bool {
        let mut conn = self.conn.clone();
        let ok: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .expect("SET");
        ok.is_some()
    }

    pub(crate) async fn lock(&self, key: &str, token: &str) {
        while !self.try_lock(key, token).await {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    pub(crate) async fn unlock(&self, key: &str, token: &str) {
        let mut conn = self.conn.clone();
        let _: i64 = self
            .delete
            .key(key)
            .arg(token)
            .invoke_async(&mut conn)
            .await
            .expect("compare-and-delete");
    }
}

/// The polling loop, with a fresh token per acquisition.
impl KeyLock for Naive {
    type Held<'a> = String;

    async fn acquire<'a>(&'a self, key: &'a str) -> String {
        let tok = token();
        self.lock(key, &tok).await;
        tok
    }

    async fn release<'a>(&'a self, key: &'a str, tok: String) {
        self.unlock(key, &tok).await;
    }
}

/// rslock on one Redis server, with a 30 s lease as ours.
#[derive(Clone)]
pub(crate) struct Rslock(Arc<rslock::LockManager>);

impl Rslock {
    /// rslock's manager connects on first use.
    pub(crate) fn new(url: &str) -> Rslock {
        Rslock(Arc::new(rslock::LockManager::new(vec![url.to_owned()])))
    }
}

/// rslock's own wait: retries with its back-off until it holds the key.
impl KeyLock for Rslock {
    type Held<'a> = rslock::Lock;

    async fn acquire<'a>(&'a self, key: &'a str) -> rslock::Lock {
        self.0
            .acquire_no_guard(key.as_bytes(), Duration::from_secs(30))
            .await
            .expect("rslock acquire")
    }

    async fn release<'a>(&'a self, _: &'a str, lock: rslock::Lock) {
        self.0.unlock(&lock).await;
    }
}

/// One lock and unlock of `key` with rslock (30 s lease, as ours).
pub(crate) async fn rslock_lock_unlock(r: &rslock::LockManager, key: &str) {
    let lock = r
        .lock(key.as_bytes(), Duration::from_secs(30))
        .await
        .expect("rslock");
    r.unlock(&lock).await;
}
