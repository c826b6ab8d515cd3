//! Fencing's storage half, on Redis: the resource a lock protects refuses every holder older
//! than the one that touched it last, so a holder that lost its lease (paused, partitioned,
//! its packets late) cannot overwrite, or be read past, by the holder after it.
//!
//! # The rule: the first touch carries the fence
//!
//! Fencing only the *write* leaves a window. A stale holder's write delayed in the network can
//! land between the next holder's read and its write: no newer fence has written yet, so it is
//! accepted, and then the next holder's write, computed from a read that did not see it, is
//! accepted too. Two sales, the stock down by one:
//!
//! ```text
//! time    ──────────────────────────────────────────────────────────────────────────►
//! A       fence 33: read 5 ── write(4, 33) ······ delayed in the network ·····┐
//! lease   [── A's lease ──] expires  [── B's lease ──────────────────────────────────
//! B                                  fence 65: read 5 ────────────────────────┼──── write(4, 65)
//! record  fence 0, left 5 ···························· write(4, 33) accepted ┘  accepted: sold 2, left 4
//! ```
//!
//! So the new holder's **first** access to the record carries its fence: [`claim`] raises the
//! record's fence to the holder's (refusing a holder older than the record's) and returns the
//! record as it is then, in one script. From that instant no older holder's write is accepted,
//! however late it arrives, and the holder's writes ([`Claim::write`]) are accepted only while
//! the record's fence is still its own:
//!
//! ```text
//! B                                  claim(65): read 5 ── record fence 65 ─── write(4, 65) accepted
//! A's late write(4, 33)                                    refused: 33 < 65
//! ```
//!
//! The other safe shape is one conditional statement that reads and writes at once (a Lua
//! script of your own that starts with [`FENCE_CMP_LUA`], or SQL's `UPDATE … SET left = left - 1
//! … WHERE fence <= $fence`): nothing can come between its read and its write.
//!
//! ```no_run
//! # async fn sell(locker: leasehold::Locker) -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1:6379")?;
//! let mut conn = client.get_multiplexed_async_connection().await?;
//!
//! let guard = locker.lock("stock:42").acquire().await?;
//! // The first touch: from here on no older holder's write is accepted.
//! let claim = leasehold::fenced::claim(&mut conn, &guard, "stock:42").await?;
//! let left: i64 = claim.get("left")?.unwrap_or(0);
//! // ... call the payment service ...
//! // Written only while the record is still this holder's; a holder paused past its lease
//! // gets LockError::Lost here, and nothing is written.
//! claim.write(&mut conn, &[("left", left - 1)]).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! A record is a Redis hash whose field [`FENCE_FIELD`] (`fence`) keeps the newest token that
//! claimed or wrote it. The guard's locker may be on any engine (ZooKeeper, etcd, PostgreSQL,
//! ...): only the records live in Redis. Each helper has a guard-free form that takes a fence
//! ([`claim_with_fence`], [`write_if_claimed`]) and its Lua source for scripts run elsewhere
//! ([`CLAIM_LUA`], [`WRITE_IF_CLAIMED_LUA`]). [`write_if_newer`] is the blind write of earlier
//! versions: it cannot tell what its writer read, so it can lose an update when the value came
//! from a read of the record; it is right only for values that do not.
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
//! evicted (`maxmemory-policy`) forgets it, and the next claim or blind write is accepted
//! whatever its token (a claimed write then finds no claim of its own and is refused). Keep
//! the record for longer than a holder could stay paused with an old token, and write its
//! fields only through these helpers: a plain `HSET` is not checked.
//!
//! # Relational storage
//! The same rule in SQL: keep the newest token in a column of the row; the first statement of
//! the critical section claims the row, and the writes require the claim to be the holder's
//! own. With PostgreSQL, [`postgres::claim_fence`](crate::postgres::claim_fence) (feature
//! `postgres`) does the claim for any table, in your transaction, with tokio-postgres or sqlx.
//!
//! ```sql
//! ALTER TABLE stock ADD COLUMN fence bigint NOT NULL DEFAULT 0;
//!
//! -- The claim, first: $1 the row's id, $2 the holder's fence. No row: a newer holder
//! -- claimed it (this one's lease is over). Under READ COMMITTED the row's newest version is
//! -- claimed and read, and its lock is kept until the transaction ends.
//! UPDATE stock SET fence = $2 WHERE id = $1 AND fence <= $2 RETURNING left_;
//!
//! -- The write, later (in this transaction or another): only while the claim is its own.
//! UPDATE stock SET left_ = $3 WHERE id = $1 AND fence = $2;
//! -- one row updated: written; none: a newer holder claimed the row since
//!
//! -- Or read and write in one conditional statement, when the new value can be computed there:
//! UPDATE stock SET left_ = left_ - 1, fence = $2 WHERE id = $1 AND fence <= $2 AND left_ > 0;
//! ```
//!
//! A `bigint` is signed: pass the fence as `i64::try_from(guard.fence())`, which holds every
//! leasehold fence (they are below 2^53). With the locks themselves in PostgreSQL
//! (`LockerBuilder::postgres`), `leasehold::postgres::check_fence` (feature `postgres`) is
//! stronger: inside the transaction that reads and writes, it checks that the guard still holds
//! the lock itself and keeps the lock from changing hands until the transaction ends, so it
//! needs no fence column.

mod claim;
mod holder;
mod record;
mod scripts;
mod write;

pub use claim::{claim, claim_with_fence, write_all, Claim, Claimed};
pub use holder::FenceHolder;
pub use record::Record;
pub use scripts::{
    CLAIM_LUA, FENCE_CMP_LUA, FENCE_FIELD, WRITE_ALL_IF_CLAIMED_LUA, WRITE_IF_CLAIMED_LUA,
    WRITE_IF_NEWER_LUA,
};
pub use write::{
    write_all_if_claimed, write_if_claimed, write_if_newer, FencedWrite, FencedWrites, RecordWrite,
};
