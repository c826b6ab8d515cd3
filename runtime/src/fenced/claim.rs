//! The first touch of a record: the claim that raises its fence before anything is read, and
//! the holder's writes under it.

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisResult, ToRedisArgs, Value};

use super::holder::FenceHolder;
use super::record::{unexpected, Record};
use super::scripts::CLAIM;
use super::write::{
    unavailable, write_all_if_claimed, write_if_claimed, FencedWrite, FencedWrites, RecordWrite,
};
use crate::error::{LockError, LostReason};
use crate::primitives::guard::LockGuard;

/// What [`claim_with_fence`] found.
///
/// ```
/// use leasehold::fenced::{Claimed, Record};
///
/// let refused = Claimed::Refused { newest: 65 };
/// assert!(!refused.is_claimed());
/// assert!(Claimed::Yes(Record::default()).is_claimed());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a refused claim means a newer holder has the record: read nothing, write nothing"]
pub enum Claimed {
    /// The record's fence is now this token (or was already): the record as it is after
    /// the claim.
    Yes(Record),
    /// A newer holder claimed or wrote the record: nothing changed.
    Refused {
        /// The newer token stored in the record.
        newest: u64,
    },
}

impl Claimed {
    /// True for [`Claimed::Yes`].
    pub fn is_claimed(&self) -> bool {
        matches!(self, Claimed::Yes(_))
    }
}

/// Claims the hash `key` for `fence`: raises its [`FENCE_FIELD`](super::FENCE_FIELD) to
/// `fence` unless a newer token is there, and returns the record as it is then, in one script
/// ([`CLAIM_LUA`](super::CLAIM_LUA)). A hash that does not exist is created with the claim
/// alone. An equal token is accepted (the same holder claiming again).
///
/// The guard-free form of [`claim`], for a holder whose fence comes from elsewhere.
///
/// ```no_run
/// # async fn run(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use leasehold::fenced::{claim_with_fence, Claimed};
///
/// match claim_with_fence(conn, "stock:42", 65).await? {
///     Claimed::Yes(record) => println!("left: {:?}", record.get::<i64>("left")?),
///     Claimed::Refused { newest } => println!("a newer holder ({newest}) has it"),
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The connection's error when Redis fails or times out (the claim may then have happened or
/// not: claim again), and a server error, with nothing changed, when the hash's `fence` field
/// holds something else than a token (written there by other code).
pub async fn claim_with_fence<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    fence: u64,
) -> RedisResult<Claimed> {
    // `u64` as a Redis argument is its canonical decimal, which the script requires.
    let reply: Value = CLAIM.key(key).arg(fence).invoke_async(conn).await?;
    claimed(&reply)
}

/// Reads the claim script's reply: `{1, field, value, ...}` or `{0, newest}`.
fn claimed(reply: &Value) -> RedisResult<Claimed> {
    let Value::Array(items) = reply else {
        return Err(unexpected("a claim's reply was not an array"));
    };
    match items.split_first() {
        Some((Value::Int(1), fields)) => Ok(Claimed::Yes(Record::from_reply(fields)?)),
        Some((Value::Int(0), [newest])) => {
            let newest = String::from_redis_value_ref(newest)?;
            match newest.parse() {
                Ok(newest) => Ok(Claimed::Refused { newest }),
                Err(_) => Err(unexpected(
                    "the record's fencing token does not fit in a u64",
                )),
            }
        }
        _ => Err(unexpected("a claim's reply had no outcome")),
    }
}

/// A holder's claim on a record: made by [`claim`], the first touch of the record in the
/// critical section. It holds the record as the claim read it, and writes only while the
/// record's fence is still the guard's ([`Claim::write`]).
#[derive(Debug)]
#[must_use = "a claim is how the holder reads and writes the record"]
pub struct Claim<'g> {
    guard: &'g LockGuard,
    fence: u64,
    key: String,
    record: Record,
}

/// Claims the record `key` for `holder` (a [`LockGuard`], a [`PermitGuard`](crate::PermitGuard),
/// a [`Leadership`](crate::Leadership): any [`FenceHolder`]): its first touch in the critical
/// section, before the holder reads anything of it. The record's fence becomes the guard's, so from this instant
/// no older holder's write is accepted, however late it arrives; the record is returned as it
/// is after the claim ([`Claim::get`]), and [`Claim::write`] writes only while the record is
/// still the guard's. Sends nothing when the guard's lease is known lost.
///
/// Works on any async connection of the `redis` crate (multiplexed, connection manager,
/// cluster: the script touches one key), whatever engine the guard's lock lives on. With a
/// [`MultiGuard`](crate::MultiGuard), claim each key's record with that key's guard
/// (`multi.guard("wallet:1")`); a leader claims with its term, a permit holder with its
/// permit's fence.
///
/// ```no_run
/// # async fn sell(
/// #     locker: leasehold::Locker,
/// #     mut conn: redis::aio::MultiplexedConnection,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// let guard = locker.lock("stock:42").acquire().await?;
/// let claim = leasehold::fenced::claim(&mut conn, &guard, "stock:42").await?;
/// let left: i64 = claim.get("left")?.unwrap_or(0);
/// if left > 0 {
///     claim.write(&mut conn, &[("left", left - 1)]).await?;
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// - [`LockError::Lost`] with the guard's reason ([`LostReason::Expired`], ...) when the guard
///   no longer holds its lease on this process's clock: nothing was sent.
/// - [`LockError::Lost`] with [`LostReason::StaleFence`] when a newer holder claimed or wrote
///   the record: nothing changed, and the lease is reported lost to the guard (its
///   [`lost()`](LockGuard::lost) resolves).
/// - [`LockError::Unavailable`] when Redis failed or timed out (the claim may then have
///   happened or not: claiming again with the same guard is harmless), or refused the claim
///   (the record's `fence` field holds something else than a token); its source is the
///   `redis` error.
pub async fn claim<'g, C, H>(conn: &mut C, holder: &'g H, key: &str) -> Result<Claim<'g>, LockError>
where
    C: ConnectionLike,
    H: FenceHolder + ?Sized,
{
    let guard = holder.fence_guard()?;
    if !guard.is_held() {
        return Err(guard.hold().lost_error());
    }
    let fence = holder.holder_fence();
    match claim_with_fence(conn, key, fence).await {
        Ok(Claimed::Yes(record)) => Ok(Claim {
            guard,
            fence,
            key: key.to_owned(),
            record,
        }),
        Ok(Claimed::Refused { .. }) => Err(stale(guard, "a claim was refused")),
        Err(e) => Err(unavailable("claim", e)),
    }
}

impl<'g> Claim<'g> {
    /// The value of `field` as the claim read it, as a `T`; `None` when the record has no
    /// such field. See [`Record::get`].
    ///
    /// # Errors
    /// The `redis` crate's error when the value is not a `T`.
    pub fn get<T: FromRedisValue>(&self, field: &str) -> RedisResult<Option<T>> {
        self.record.get(field)
    }

    /// The record as the claim read it.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The claimed record's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fence the record was claimed with: the holder's.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Sets `fields` of the record while it is still claimed by this guard (its fence is the
    /// guard's), in one script ([`WRITE_IF_CLAIMED_LUA`](super::WRITE_IF_CLAIMED_LUA)); sends
    /// nothing when the guard's lease is known lost. Each field and value must be one Redis
    /// argument (a string, a number, bytes). Writing again is harmless: the claim stays.
    ///
    /// # Errors
    /// - [`LockError::Lost`] with the guard's reason when the guard no longer holds its lease
    ///   on this process's clock: nothing was sent.
    /// - [`LockError::Lost`] with [`LostReason::StaleFence`] when a newer holder claimed the
    ///   record since: nothing was written, and the lease is reported lost to the guard.
    /// - [`LockError::Config`] when the record carries no claim at all any more (it was
    ///   deleted, expired or evicted since the claim): nothing was written; what the claim
    ///   read is gone, so claim it again.
    /// - [`LockError::Unavailable`] when Redis failed or timed out (the write may then have
    ///   happened or not: write again), or refused the write (a field named
    ///   [`FENCE_FIELD`](super::FENCE_FIELD)); its source is the `redis` error.
    pub async fn write<C, F, V>(&self, conn: &mut C, fields: &[(F, V)]) -> Result<(), LockError>
    where
        C: ConnectionLike,
        F: ToRedisArgs,
        V: ToRedisArgs,
    {
        if !self.guard.is_held() {
            return Err(self.guard.hold().lost_error());
        }
        match write_if_claimed(conn, &self.key, fields, self.fence).await {
            Ok(FencedWrite::Accepted) => Ok(()),
            Ok(FencedWrite::Refused { newest }) => Err(refusal(self, newest)),
            Err(e) => Err(unavailable("write", e)),
        }
    }
}

/// Sets fields of several claimed records at once (a transfer between two wallets under a
/// [`MultiGuard`](crate::MultiGuard), each record claimed with its key's guard): every
/// record's fields are set only while every record is still claimed by its holder, in one
/// script ([`WRITE_ALL_IF_CLAIMED_LUA`](super::WRITE_ALL_IF_CLAIMED_LUA)), so a holder that
/// lost one of its leases writes none of them. On a Redis Cluster the records must share a
/// slot (a hash tag). Sends nothing when a claim's guard is known lost.
///
/// ```no_run
/// # async fn transfer(
/// #     locker: leasehold::Locker,
/// #     mut conn: redis::aio::MultiplexedConnection,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// use leasehold::fenced::{claim, write_all};
///
/// let both = locker.lock_all(["wallet:1", "wallet:2"]).acquire().await?;
/// let from = claim(&mut conn, both.guard("wallet:1").unwrap(), "{wallets}:1").await?;
/// let to = claim(&mut conn, both.guard("wallet:2").unwrap(), "{wallets}:2").await?;
/// let (a, b): (i64, i64) = (from.get("balance")?.unwrap_or(0), to.get("balance")?.unwrap_or(0));
/// write_all(&mut conn, &[(&from, &[("balance", a - 10)]), (&to, &[("balance", b + 10)])]).await?;
/// both.release().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`Claim::write`], for whichever record refused: nothing was written to any.
pub async fn write_all<C, F, V>(
    conn: &mut C,
    writes: &[(&Claim<'_>, &[(F, V)])],
) -> Result<(), LockError>
where
    C: ConnectionLike,
    F: ToRedisArgs,
    V: ToRedisArgs,
{
    if let Some((claim, _)) = writes.iter().find(|(c, _)| !c.guard.is_held()) {
        return Err(claim.guard.hold().lost_error());
    }
    let plan: Vec<RecordWrite<'_, F, V>> = writes
        .iter()
        .map(|(claim, fields)| (claim.key.as_str(), claim.fence, *fields))
        .collect();
    match write_all_if_claimed(conn, &plan).await {
        Ok(FencedWrites::Accepted) => Ok(()),
        Ok(FencedWrites::Refused { index, newest }) => {
            let claim = writes[index.min(writes.len() - 1)].0;
            Err(refusal(claim, newest))
        }
        Err(e) => Err(unavailable("write", e)),
    }
}

/// What a claimed write's refusal means: a newer holder (the loss it proves, told to the
/// guard), or a record that lost its claim.
fn refusal(claim: &Claim<'_>, newest: u64) -> LockError {
    if newest > claim.fence {
        return stale(claim.guard, "a claimed write was refused");
    }
    LockError::config(
        "a claimed write found the record without its claim: it was deleted, expired or \
         evicted since it was claimed (keep fenced records for longer than a holder may be \
         paused); nothing was written: claim the record again, and read it again",
    )
}

/// A refusal by a newer holder: the loss it proves, told to the guard.
fn stale(guard: &LockGuard, why: &'static str) -> LockError {
    guard.hold().refused_by_store(why);
    LockError::Lost {
        reason: LostReason::StaleFence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_map_to_claims() {
        let reply = Value::Array(vec![
            Value::Int(1),
            bulk("left"),
            bulk("5"),
            bulk("fence"),
            bulk("65"),
        ]);
        let Claimed::Yes(record) = claimed(&reply).unwrap() else {
            panic!("claimed");
        };
        assert_eq!(record.get::<i64>("left").unwrap(), Some(5));
        assert_eq!(record.raw("fence"), None, "the claim is not a field");
        assert_eq!(
            claimed(&Value::Array(vec![
                Value::Int(0),
                bulk("18446744073709551615")
            ]))
            .unwrap(),
            Claimed::Refused { newest: u64::MAX }
        );
        let err = claimed(&Value::Array(vec![
            Value::Int(0),
            bulk("18446744073709551616"),
        ]))
        .unwrap_err();
        assert_eq!(err.kind(), redis::ErrorKind::UnexpectedReturnType);
        let odd = Value::Array(vec![Value::Int(1), bulk("left")]);
        assert!(claimed(&odd).is_err());
    }
}
