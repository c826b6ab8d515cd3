//! Fenced writes to Redis: the storage half of fencing tokens. A write carries its lock's
//! fence, and the record refuses it once a newer holder has written, so a holder that lost
//! its lease while paused is refused instead of overwriting the data of the one after it.
//!
//! A record is a Redis hash whose field [`FENCE_FIELD`] (`fence`) keeps the newest token that
//! wrote to it. [`write_if_newer`] sets fields of the hash only if the writer's token is not
//! older than that one, and records the token, in one Lua script ([`WRITE_IF_NEWER_LUA`]).
//! An equal token is the same holder writing again, and is accepted. [`write_guarded`] does
//! the same with a [`LockGuard`]: it sends nothing once the guard's lease is known lost, and
//! turns a refusal into [`LockError::Lost`]. The guard's locker may be on any engine
//! (ZooKeeper, etcd, PostgreSQL, ...): only the records live in Redis.
//!
//! ```no_run
//! # async fn sell(locker: leasehold::Locker) -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379")?;
//! let mut conn = client.get_multiplexed_async_connection().await?;
//!
//! let guard = locker.lock("stock:42").acquire().await?;
//! // ... read the stock, compute the new quantity, call the payment service ...
//! // A holder paused past its lease gets LockError::Lost here, and nothing is written.
//! leasehold::fenced::write_guarded(&mut conn, &guard, "stock:42", &[("left", "6")]).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Exact comparison
//! Tokens are compared as decimal strings (by length, then digit by digit), never as Lua
//! numbers: those are doubles, and `tonumber` calls 9007199254740993 and 9007199254740992
//! equal. The comparison is exact for every `u64`, from 0 to 2^64 − 1; leasehold's own fences
//! are positive and below 2^53 today, and nothing here relies on that. Scripts of your own
//! that compare tokens can start with [`FENCE_CMP_LUA`] to compare them the same way.
//!
//! # What the record must keep
//! The newest token lives in the hash: deleting the hash, letting it expire, or having it
//! evicted (`maxmemory-policy`) forgets it, and the next write is accepted whatever its token.
//! Keep the record for longer than a holder could stay paused with an old token, and write
//! its fields only through fenced writes: a plain `HSET` is not checked.
//!
//! # Relational storage
//! The same rule is one SQL statement: keep the newest token in a column of the row, and make
//! the write conditional on it.
//!
//! ```sql
//! ALTER TABLE stock ADD COLUMN fence bigint NOT NULL DEFAULT 0;
//!
//! -- $1 the row's id, $2 the new value, $3 the writer's fence
//! UPDATE stock SET left_ = $2, fence = $3 WHERE id = $1 AND fence <= $3;
//! -- one row updated: written; none: refused (a newer holder wrote) or no such row
//!
//! -- the first write of a row, in the same way
//! INSERT INTO stock (id, left_, fence) VALUES ($1, $2, $3)
//! ON CONFLICT (id) DO UPDATE SET left_ = EXCLUDED.left_, fence = EXCLUDED.fence
//! WHERE stock.fence <= EXCLUDED.fence;
//! ```
//!
//! The check and the write are one statement on one row, so no other writer comes between
//! them. A `bigint` is signed: pass the fence as `i64::try_from(guard.fence())`, which holds
//! every leasehold fence (they are below 2^53). With the locks themselves in PostgreSQL
//! (`LockerBuilder::postgres`), `leasehold::postgres::check_fence` (feature `postgres`) is
//! stronger: inside your transaction it checks that the guard still holds the lock itself,
//! and keeps the lock's row locked until the transaction commits, so it needs no fence column.

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, ToRedisArgs};

use crate::error::{LockError, LostReason};
use crate::primitives::guard::LockGuard;

/// The hash field that keeps the newest fencing token that wrote to a record. A fenced write
/// refuses to set it as one of its fields.
///
/// ```
/// assert_eq!(leasehold::fenced::FENCE_FIELD, "fence");
/// ```
pub const FENCE_FIELD: &str = "fence";

/// Lua source that defines two local functions for scripts that compare fencing tokens:
/// `leasehold_is_fence(s)`, true when `s` is a canonical decimal (`"0"`, or digits without a
/// leading zero), and `leasehold_fence_cmp(a, b)`, -1, 0 or 1 as token `a` is older than, the
/// same as, or newer than token `b`. It compares the decimal strings, so it is exact for every
/// `u64`, where `tonumber` is not above 2^53. Put it in front of your own script:
///
/// ```no_run
/// # async fn run(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use std::sync::LazyLock;
///
/// // Counts a sale only for a writer whose fence is not older than the record's.
/// static SELL: LazyLock<redis::Script> = LazyLock::new(|| {
///     redis::Script::new(&format!(
///         "{}{}",
///         leasehold::fenced::FENCE_CMP_LUA,
///         r#"
///         local seen = redis.call('HGET', KEYS[1], 'fence')
///         if seen and leasehold_fence_cmp(ARGV[1], seen) < 0 then return 0 end
///         redis.call('HSET', KEYS[1], 'fence', ARGV[1])
///         redis.call('HINCRBY', KEYS[1], 'sold', 1)
///         return 1
///         "#
///     ))
/// });
/// let fence: u64 = 9_007_199_254_740_993;
/// let sold: i64 = SELL.key("stock:42").arg(fence).invoke_async(conn).await?;
/// # Ok(()) }
/// ```
pub const FENCE_CMP_LUA: &str = include_str!("fenced/fence_cmp.lua");

/// The Lua script of [`write_if_newer`], for applications that run their scripts themselves
/// (another client library, a script manager, `redis-cli`). It starts with [`FENCE_CMP_LUA`].
///
/// - `KEYS[1]`: the hash.
/// - `ARGV[1]`: the writer's fencing token, a canonical decimal.
/// - `ARGV[2]`, `ARGV[3]`, ...: field, value, field, value, ... (none to record the token
///   only).
///
/// Returns `{1, token}` when written, and `{0, newest}` when refused, with `newest` the newer
/// token stored in the hash, as a string. Fails, writing nothing, when the token is not a
/// canonical decimal, the fields do not come in pairs or name [`FENCE_FIELD`], or the hash's
/// `fence` field holds something else than a token.
///
/// ```
/// let script = redis::Script::new(leasehold::fenced::WRITE_IF_NEWER_LUA);
/// assert_eq!(script.get_hash().len(), 40); // EVALSHA it like any other script
/// ```
pub const WRITE_IF_NEWER_LUA: &str = concat!(
    include_str!("fenced/fence_cmp.lua"),
    include_str!("fenced/write_if_newer.lua")
);

static WRITE_IF_NEWER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(WRITE_IF_NEWER_LUA));

/// The outcome of a [`write_if_newer`]: written, or refused because a newer holder wrote
/// first.
///
/// ```
/// use leasehold::fenced::FencedWrite;
///
/// let refused = FencedWrite::Refused { newest: 65 };
/// assert!(!refused.is_accepted());
/// assert!(FencedWrite::Accepted.is_accepted());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a refused write did not happen: the holder's lease was lost"]
pub enum FencedWrite {
    /// The fields were written and the writer's token is now the record's: the record had
    /// no token, an older one, or this one (the same holder writing again).
    Accepted,
    /// Nothing was written: the record had seen a newer token, so the writer's lease had
    /// been lost and another holder took the lock after it.
    Refused {
        /// The newer token stored in the record.
        newest: u64,
    },
}

impl FencedWrite {
    /// True for [`FencedWrite::Accepted`].
    ///
    /// ```
    /// assert!(leasehold::fenced::FencedWrite::Accepted.is_accepted());
    /// ```
    pub fn is_accepted(&self) -> bool {
        matches!(self, FencedWrite::Accepted)
    }
}

/// Sets `fields` of the hash `key` if `fence` is not older than the token in the hash's
/// [`FENCE_FIELD`], and stores `fence` there: one script, so no other write comes between the
/// check and the write. A hash without a token accepts any; an equal token is accepted (the
/// same holder writing again). Tokens compare exactly over the whole `u64` range.
///
/// Works on any async connection of the `redis` crate (multiplexed, connection manager,
/// cluster: the script touches one key). Each field and value must be one Redis argument (a
/// string, a number, bytes); an empty `fields` only records the token.
///
/// ```no_run
/// # async fn sell(locker: leasehold::Locker) -> Result<(), Box<dyn std::error::Error>> {
/// use leasehold::fenced::{write_if_newer, FencedWrite};
///
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let mut conn = client.get_multiplexed_async_connection().await?;
/// let guard = locker.lock("stock:42").acquire().await?;
/// let fields = [("left", "6"), ("last_order", "ord-17")];
/// match write_if_newer(&mut conn, "stock:42", &fields, guard.fence()).await? {
///     FencedWrite::Accepted => guard.release().await?,
///     FencedWrite::Refused { newest } => {
///         eprintln!("a newer holder (fence {newest}) wrote first; nothing was written");
///     }
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The connection's error when Redis fails or times out (the write may then have happened
/// or not), and a server error, with nothing written, when a field is named
/// [`FENCE_FIELD`] or the hash's `fence` field holds something else than a token (written
/// there by other code).
pub async fn write_if_newer<C, F, V>(
    conn: &mut C,
    key: &str,
    fields: &[(F, V)],
    fence: u64,
) -> Result<FencedWrite, RedisError>
where
    C: ConnectionLike,
    F: ToRedisArgs,
    V: ToRedisArgs,
{
    let mut call = WRITE_IF_NEWER.key(key);
    // `u64` as Redis arguments is its canonical decimal, which the script requires.
    call.arg(fence);
    for (field, value) in fields {
        call.arg(field).arg(value);
    }
    let (written, stored): (i64, String) = call.invoke_async(conn).await?;
    outcome(written, &stored)
}

/// Reads the script's reply `{written, the record's token}`.
fn outcome(written: i64, stored: &str) -> Result<FencedWrite, RedisError> {
    if written == 1 {
        return Ok(FencedWrite::Accepted);
    }
    match stored.parse() {
        Ok(newest) => Ok(FencedWrite::Refused { newest }),
        Err(_) => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "the record's fencing token does not fit in a u64",
            format!("{} digits", stored.len()),
        ))),
    }
}

/// [`write_if_newer`] with `guard`'s fence, for a holder: sends nothing when the guard's
/// lease is known lost, and treats a refusal as the loss it proves (a newer holder of the
/// key wrote, so this one's lease had ended).
///
/// Works with a [`MultiGuard`](crate::MultiGuard) too, one key at a time:
/// `write_guarded(conn, multi.guard("wallet:1").unwrap(), ...)`. To learn the newer token of
/// a refusal, call [`write_if_newer`] with [`guard.fence()`](LockGuard::fence).
///
/// ```no_run
/// # async fn sell(
/// #     locker: leasehold::Locker,
/// #     mut conn: redis::aio::MultiplexedConnection,
/// # ) -> Result<(), leasehold::LockError> {
/// let guard = locker.lock("stock:42").acquire().await?;
/// leasehold::fenced::write_guarded(&mut conn, &guard, "stock:42", &[("left", 6)]).await?;
/// guard.release().await
/// # }
/// ```
///
/// # Errors
/// - [`LockError::Lost`] with the guard's reason ([`LostReason::Expired`], ...) when the
///   guard no longer holds its lease on this process's clock: nothing was sent.
/// - [`LockError::Lost`] with [`LostReason::StaleFence`] when the record had seen a newer
///   token: nothing was written, and the lease is reported lost to the guard (its
///   [`lost()`](LockGuard::lost) resolves).
/// - [`LockError::Unavailable`] when Redis failed or timed out (the write may then have
///   happened or not), or refused the write (see [`write_if_newer`]); its source is the
///   `redis` error.
pub async fn write_guarded<C, F, V>(
    conn: &mut C,
    guard: &LockGuard,
    key: &str,
    fields: &[(F, V)],
) -> Result<(), LockError>
where
    C: ConnectionLike,
    F: ToRedisArgs,
    V: ToRedisArgs,
{
    if !guard.is_held() {
        return Err(guard.lost_error());
    }
    match write_if_newer(conn, key, fields, guard.fence()).await {
        Ok(FencedWrite::Accepted) => Ok(()),
        Ok(FencedWrite::Refused { .. }) => {
            guard.refused_by_store("a fenced write was refused: a newer holder wrote first");
            Err(LockError::Lost {
                reason: LostReason::StaleFence,
            })
        }
        Err(e) => Err(LockError::unavailable(
            format!(
                "the fenced write to redis failed ({e}); it may or may not have happened: \
                 write again with the same guard (a record accepts the same fence again)"
            ),
            Some(Box::new(e)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_map_to_outcomes() {
        assert_eq!(outcome(1, "33").unwrap(), FencedWrite::Accepted);
        assert_eq!(
            outcome(0, "65").unwrap(),
            FencedWrite::Refused { newest: 65 }
        );
        assert_eq!(
            outcome(0, "18446744073709551615").unwrap(),
            FencedWrite::Refused { newest: u64::MAX }
        );
        // Written by another client of the script: a token past u64 is an error, not a guess.
        let err = outcome(0, "18446744073709551616").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnexpectedReturnType);
    }

    #[test]
    fn u64_arguments_are_canonical_decimals() {
        // The script refuses leading zeros and signs; a `u64` argument never has them.
        for fence in [0, 1, 9_007_199_254_740_993, u64::MAX] {
            assert_eq!(fence.to_redis_args(), vec![fence.to_string().into_bytes()]);
        }
    }

    #[test]
    fn scripts_never_turn_tokens_into_lua_numbers() {
        // tonumber rounds tokens above 2^53; the integration tests show the failure itself.
        let code = WRITE_IF_NEWER_LUA
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"));
        for line in code {
            assert!(!line.contains("tonumber"), "{line}");
        }
        assert!(WRITE_IF_NEWER_LUA.starts_with(FENCE_CMP_LUA));
        assert!(WRITE_IF_NEWER_LUA.contains(&format!("'{FENCE_FIELD}'")));
    }
}
