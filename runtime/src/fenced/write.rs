//! Fenced writes: under a claim ([`write_if_claimed`]), or blind ([`write_if_newer`]).

use redis::aio::ConnectionLike;
use redis::{ErrorKind, FromRedisValue, RedisError, ToRedisArgs};

use super::scripts::{WRITE_ALL_IF_CLAIMED, WRITE_IF_CLAIMED, WRITE_IF_NEWER};
use crate::error::LockError;

/// The outcome of a fenced write ([`write_if_claimed`], [`write_if_newer`]): written, or
/// refused.
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
    /// Nothing was written. For [`write_if_newer`]: the record had seen a newer token, so the
    /// writer's lease had been lost and another holder took the lock after it. For
    /// [`write_if_claimed`]: the record's token is not the writer's, because a newer holder
    /// claimed it (`newest` above the writer's), or the record lost its claim (`newest` below
    /// it, 0 when it has no token: deleted, expired or evicted since the claim, or never
    /// claimed).
    Refused {
        /// The token stored in the record (0 for none).
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

/// A blind fenced write, which **can lose an update when the values were computed from an
/// earlier read of the record**: claim the record first ([`claim`](super::claim)) and write
/// with [`Claim::write`](super::Claim::write). Right only for values that depend on no read
/// (a status set, a value recomputed from elsewhere).
///
/// Sets `fields` of the hash `key` if `fence` is not older than the token in the hash's
/// [`FENCE_FIELD`](super::FENCE_FIELD), and stores `fence` there: one script, so no other
/// write comes between the check and the write. A hash without a token accepts any; an equal
/// token is accepted (the same holder writing again). Tokens compare exactly over the whole
/// `u64` range.
///
/// Why blind loses updates: an older holder's write delayed in the network can land between
/// the newer holder's read and its write. No newer token has written yet, so it is accepted;
/// the newer holder's write, computed from a read that did not see it, is accepted too. A
/// claim raises the record's token before the read, so the late write is refused.
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
/// [`FENCE_FIELD`](super::FENCE_FIELD) or the hash's `fence` field holds something else than
/// a token (written there by other code).
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
    Ok(FencedWrite::Refused {
        newest: stored_token(stored)?,
    })
}

/// The token a record carries, as a script answered it: `""` for none (0).
fn stored_token(stored: &str) -> Result<u64, RedisError> {
    if stored.is_empty() {
        return Ok(0);
    }
    stored.parse().map_err(|_| {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "the record's fencing token does not fit in a u64",
            format!("{} digits", stored.len()),
        ))
    })
}

/// Sets `fields` of the hash `key` only while its [`FENCE_FIELD`](super::FENCE_FIELD) holds
/// exactly `fence`, which a claim put there ([`claim_with_fence`](super::claim_with_fence)),
/// in one script ([`WRITE_IF_CLAIMED_LUA`](super::WRITE_IF_CLAIMED_LUA)). The guard-free form of
/// [`Claim::write`](super::Claim::write).
///
/// ```no_run
/// # async fn run(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use leasehold::fenced::{claim_with_fence, write_if_claimed, Claimed, FencedWrite};
///
/// let fence = 65;
/// if let Claimed::Yes(record) = claim_with_fence(conn, "stock:42", fence).await? {
///     let left: i64 = record.get("left")?.unwrap_or(0);
///     let written = write_if_claimed(conn, "stock:42", &[("left", left - 1)], fence).await?;
///     assert!(matches!(written, FencedWrite::Accepted | FencedWrite::Refused { .. }));
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The connection's error when Redis fails or times out (the write may then have happened
/// or not), and a server error, with nothing written, when a field is named
/// [`FENCE_FIELD`](super::FENCE_FIELD).
pub async fn write_if_claimed<C, F, V>(
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
    let mut call = WRITE_IF_CLAIMED.key(key);
    call.arg(fence);
    for (field, value) in fields {
        call.arg(field).arg(value);
    }
    let (written, stored): (i64, String) = call.invoke_async(conn).await?;
    outcome(written, &stored)
}

/// The outcome of a [`write_all_if_claimed`]: every record written, or none.
///
/// ```
/// use leasehold::fenced::FencedWrites;
///
/// let refused = FencedWrites::Refused { index: 1, newest: 65 };
/// assert!(!refused.is_accepted());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a refused write did not happen"]
pub enum FencedWrites {
    /// Every record carried its writer's claim, and every field was set.
    Accepted,
    /// Nothing was written: the record at `index` (from 0, in the order given) carried
    /// another token than its writer's (`newest`, 0 for none), as
    /// [`FencedWrite::Refused`] tells for one record.
    Refused {
        /// Which record refused.
        index: usize,
        /// The token it carries (0 for none).
        newest: u64,
    },
}

impl FencedWrites {
    /// True for [`FencedWrites::Accepted`].
    pub fn is_accepted(&self) -> bool {
        matches!(self, FencedWrites::Accepted)
    }
}

/// One record's part of a [`write_all_if_claimed`]: its key, its writer's fence (its claim),
/// and the fields to set.
pub type RecordWrite<'a, F, V> = (&'a str, u64, &'a [(F, V)]);

/// Sets fields of several records at once, each `(key, fence, fields)`, only while every
/// record's [`FENCE_FIELD`](super::FENCE_FIELD) holds exactly its `fence` (its claim), in one
/// script ([`WRITE_ALL_IF_CLAIMED_LUA`](super::WRITE_ALL_IF_CLAIMED_LUA)): all written, or
/// none. The guard-free form of [`write_all`](super::write_all). On a Redis Cluster the keys
/// must share a slot (a hash tag: `{wallets}:1`, `{wallets}:2`).
///
/// # Errors
/// The connection's error when Redis fails or times out (the write may then have happened
/// or not), and a server error, with nothing written, when a field is named
/// [`FENCE_FIELD`](super::FENCE_FIELD) or the keys do not share a Cluster slot.
pub async fn write_all_if_claimed<C, F, V>(
    conn: &mut C,
    writes: &[RecordWrite<'_, F, V>],
) -> Result<FencedWrites, RedisError>
where
    C: ConnectionLike,
    F: ToRedisArgs,
    V: ToRedisArgs,
{
    let mut call = WRITE_ALL_IF_CLAIMED.prepare_invoke();
    for (key, fence, fields) in writes {
        call.key(*key);
        call.arg(*fence).arg(fields.len());
        for (field, value) in *fields {
            call.arg(field).arg(value);
        }
    }
    let reply: Vec<redis::Value> = call.invoke_async(conn).await?;
    match reply.as_slice() {
        [redis::Value::Int(1)] => Ok(FencedWrites::Accepted),
        [redis::Value::Int(0), index, stored] => {
            let index = usize::from_redis_value_ref(index)?;
            let stored = String::from_redis_value_ref(stored)?;
            Ok(FencedWrites::Refused {
                index: index.saturating_sub(1),
                newest: stored_token(&stored)?,
            })
        }
        _ => Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "a fenced write of several records answered neither written nor refused",
        ))),
    }
}

/// A fenced call to Redis that failed: it may or may not have happened.
pub(super) fn unavailable(what: &str, e: RedisError) -> LockError {
    LockError::unavailable(
        format!(
            "the fenced {what} on redis failed ({e}); it may or may not have happened: do it \
             again with the same guard (a record accepts the same fence again)"
        ),
        Some(Box::new(e)),
    )
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
}
