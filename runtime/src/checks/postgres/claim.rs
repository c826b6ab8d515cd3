//! The first touch of a resource in any PostgreSQL database (not only the locks'): a claim row
//! in `leasehold_claims`, raised to the holder's fence inside the caller's transaction, for
//! tokio-postgres and sqlx alike.

use super::client::{StatementError, UNDEFINED_TABLE};
use super::fence::FenceClient;
use crate::error::{LockError, LostReason};
use crate::fenced::FenceHolder;
use crate::primitives::guard::LockGuard;

/// The table [`claim_fence`] keeps its claims in: one row per resource, its newest fence.
/// Create it once in the database of your data (a migration, or `client.batch_execute(..)`);
/// `CREATE TABLE IF NOT EXISTS`, so running it again is harmless. The role that claims needs
/// `SELECT, INSERT, UPDATE` on it.
///
/// ```
/// assert!(leasehold::postgres::CLAIMS_SCHEMA.contains("leasehold_claims"));
/// ```
pub const CLAIMS_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS leasehold_claims (
    resource text PRIMARY KEY,
    fence bigint NOT NULL
);
";

/// The claim: the row of `$1` raised to fence `$2` unless a newer fence is there (an equal one
/// is the same holder claiming again), in one statement that also locks the row until the
/// transaction ends (`ON CONFLICT DO UPDATE` locks the conflicting row whether its condition
/// holds or not). `true` when claimed.
const CLAIM: &str = "\
WITH claimed AS (
    INSERT INTO leasehold_claims (resource, fence) VALUES ($1, $2)
    ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence
    WHERE leasehold_claims.fence <= EXCLUDED.fence
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM claimed)";

/// Claims `resource` for `holder` (a [`LockGuard`], a [`PermitGuard`](crate::PermitGuard), a
/// [`Leadership`](crate::Leadership): any [`FenceHolder`]) in the caller's transaction: the first statement of every
/// transaction of the critical section, before it reads anything of the resource. The claim
/// row (in [`CLAIMS_SCHEMA`]'s table, in the database of your data, wherever the locks live)
/// is raised to the guard's fence, unless a newer holder's fence is there, and stays locked
/// until the transaction ends. So:
///
/// - an older holder's transaction, however late it arrives, is refused at its own claim (and
///   one that claimed before this one commits before this claim returns: this transaction then
///   reads what it wrote);
/// - this transaction reads and writes as if alone: no older holder commits anything to this
///   resource between its claim and its commit, and a newer holder's claim waits for it.
///
/// A critical section of several transactions (read, call a payment service, write) claims at
/// the start of each: a claim that finds a newer holder's fence refuses, and the transaction
/// must roll back. Works with the guard of a locker on any engine; with the locks in the same
/// database, [`check_fence`](super::check_fence) needs no table of its own.
///
/// ```no_run
/// # async fn buy(locker: leasehold::Locker, db: &mut leasehold::postgres::tokio_postgres::Client)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// // Once: db.batch_execute(leasehold::postgres::CLAIMS_SCHEMA).await?;
/// let guard = locker.lock("stock:42").acquire().await?; // Redis, ZooKeeper, etcd, ...
/// let tx = db.transaction().await?;
/// leasehold::postgres::claim_fence(&tx, &guard, "stock:42").await?; // the first touch
/// let left: i64 = tx.query_one("SELECT left_ FROM stock WHERE id = 42", &[]).await?.get(0);
/// tx.execute("UPDATE stock SET left_ = $1 WHERE id = 42", &[&(left - 1)]).await?;
/// tx.commit().await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// With sqlx: `claim_fence(&mut tx, &guard, "stock:42")` on a `sqlx::Transaction<'_,
/// Postgres>` (see [`FenceClient`]). `resource` names what the lock protects, in your terms
/// (the lock's key is a good choice); up to you, as long as every holder uses the same name.
///
/// Outside a transaction (autocommit) the claim still refuses older holders, but holds the row
/// for that one statement only: claim inside the transaction that reads and writes.
///
/// A holder stalled inside its transaction (its process stopped, its network cut) keeps the
/// claim row locked, and the next holder's claim waits for that transaction to end: give the
/// sessions that claim an `idle_in_transaction_session_timeout` (the lease plus a few seconds),
/// so that the server ends such a transaction, as [`check_fence`](super::check_fence) does for
/// its own.
///
/// # Errors
/// - [`LockError::Lost`] with the guard's reason when the guard no longer holds its lease on
///   this process's clock: nothing was sent.
/// - [`LockError::Lost`] with [`LostReason::StaleFence`] when a newer holder claimed the
///   resource: the lease is reported lost to the guard (its `lost()` resolves); roll the
///   transaction back.
/// - [`LockError::Config`] when the database has no `leasehold_claims` table (run
///   [`CLAIMS_SCHEMA`] first).
/// - [`LockError::Unavailable`] when the statement failed; its source is the driver's error (a
///   serialization failure, under `REPEATABLE READ` or `SERIALIZABLE`, means "retry the
///   transaction").
pub async fn claim_fence<C, Via, H>(client: C, holder: &H, resource: &str) -> Result<(), LockError>
where
    C: FenceClient<Via>,
    H: FenceHolder + ?Sized,
{
    let guard = holder.fence_guard()?;
    if !guard.is_held() {
        return Err(guard.hold().lost_error());
    }
    let fence = bigint(holder.holder_fence())?;
    let answer = client
        .run_fence_check(CLAIM, resource.to_owned(), fence)
        .await;
    judge(guard, answer)
}

/// Claims `resource` for `fence` in the caller's transaction: the guard-free form of
/// [`claim_fence`], for a holder whose fence comes from elsewhere (a lock by hand, another
/// client). `Ok(true)` when claimed, `Ok(false)` when a newer fence holds the resource (roll
/// the transaction back).
///
/// ```no_run
/// # async fn run(db: &mut leasehold::postgres::tokio_postgres::Client)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// let tx = db.transaction().await?;
/// if leasehold::postgres::claim_with_fence(&tx, "stock:42", 65).await? {
///     // read and write stock 42
///     tx.commit().await?;
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// - [`LockError::Config`] when the database has no `leasehold_claims` table, or `fence` is
///   above `i64::MAX`.
/// - [`LockError::Unavailable`] when the statement failed; its source is the driver's error.
pub async fn claim_with_fence<C, Via>(
    client: C,
    resource: &str,
    fence: u64,
) -> Result<bool, LockError>
where
    C: FenceClient<Via>,
{
    let answer = client
        .run_fence_check(CLAIM, resource.to_owned(), bigint(fence)?)
        .await;
    match answer {
        Ok(claimed) => Ok(claimed),
        Err(e) => Err(failed(e)),
    }
}

/// A fence as PostgreSQL's `bigint` takes it.
fn bigint(fence: u64) -> Result<i64, LockError> {
    i64::try_from(fence).map_err(|_| {
        LockError::config(
            "a fence above i64::MAX cannot be claimed in PostgreSQL's bigint (leasehold's own \
             fences stay below 2^53: is a fence offset set too high?)",
        )
    })
}

/// A claim statement that failed: a missing table is the caller's to mend.
fn failed(e: StatementError) -> LockError {
    if e.is(UNDEFINED_TABLE) {
        return LockError::Config {
            message: format!(
                "a fence claim found no table leasehold_claims in the transaction's database \
                 ({}): create it once with leasehold::postgres::CLAIMS_SCHEMA",
                e.text
            ),
            source: Some(e.error),
        };
    }
    LockError::unavailable(format!("a fence claim failed: {}", e.text), Some(e.error))
}

/// What the claim's outcome means for the caller, and for the guard.
fn judge(guard: &LockGuard, answer: Result<bool, StatementError>) -> Result<(), LockError> {
    match answer {
        Ok(true) => Ok(()),
        Ok(false) => {
            guard
                .hold()
                .refused_by_store("a claim found a newer holder's fence");
            Err(LockError::Lost {
                reason: LostReason::StaleFence,
            })
        }
        Err(e) => Err(failed(e)),
    }
}
