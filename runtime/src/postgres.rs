//! Fenced writes in PostgreSQL, in your own transaction (feature `postgres`).
//!
//! With locks kept in the same database as the data ([`LockerBuilder::postgres`]), the fence
//! check and the write can commit together: [`check_fence`] asks, inside your transaction,
//! whether this guard's acquisition still holds the lock, and row-locks the lock until the
//! transaction ends, so no other holder can take it over before your writes are committed.
//! A holder that was paused past its lease (a GC pause, a stopped VM) and woke up after
//! another took the lock gets [`LockError::Lost`] with [`LostReason::StaleFence`] instead of
//! a committed stale write.
//!
//! ```no_run
//! # async fn buy(locker: leasehold::Locker, db: &mut leasehold::postgres::tokio_postgres::Client)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! let guard = locker.lock("stock:42").acquire().await?;
//! let tx = db.transaction().await?;
//! leasehold::postgres::check_fence(&tx, &guard).await?; // refuses a stale holder
//! tx.execute("UPDATE stock SET left = left - 1 WHERE sku = 42 AND left > 0", &[]).await?;
//! tx.commit().await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! Under `REPEATABLE READ` or `SERIALIZABLE`, the check fails with a serialization failure
//! (SQLSTATE `40001`, as a [`LockError::Unavailable`] whose source is the driver's error) when
//! the lock's row changed after the transaction's snapshot, a renewal included: retry the
//! transaction, as every serializable transaction must be ready to.
//!
//! Another driver (sqlx, diesel) does the same with one statement in its transaction:
//! `SELECT leasehold_check_fence($1, $2)` with [`store_key`] and the guard's
//! [`fence`](LockGuard::fence) as a `bigint`; `false` means the write must not happen.
//!
//! [`LockerBuilder::postgres`]: crate::LockerBuilder::postgres
//! [`LostReason::StaleFence`]: crate::LostReason::StaleFence

use crate::error::{LockError, LostReason};
use crate::guard::LockGuard;

pub use crate::store::postgres::SCHEMA;

/// How long past its lock's remaining lease a transaction that checked its fence may wait for
/// its client between two statements before the server ends it (see the module docs).
pub const FENCED_IDLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);
/// The driver [`check_fence`] takes a client or transaction of (re-exported, so versions
/// match).
pub use tokio_postgres;

/// Checks, inside the caller's transaction (or on a plain client, for one statement), that
/// `guard` still holds its lock in the database, and keeps the lock's row locked until that
/// transaction ends, so no other holder can take the lock before the transaction's writes
/// commit.
///
/// # Errors
/// - [`LockError::Lost`] when the guard is no longer held on this process's clock, or the
///   database shows another holder or none ([`LostReason::StaleFence`](crate::LostReason));
///   the lease is then reported lost to the guard (its `lost()` resolves).
/// - [`LockError::Unavailable`] when the statement failed (its source is the driver's error:
///   a serialization failure means "retry the transaction").
pub async fn check_fence<C>(client: &C, guard: &LockGuard) -> Result<(), LockError>
where
    C: tokio_postgres::GenericClient + Sync,
{
    if !guard.is_held() {
        return Err(guard.lost_error());
    }
    let key = store_key(guard);
    let fence = i64::try_from(guard.fence()).map_err(|_| LockError::Lost {
        reason: LostReason::StaleFence,
    })?;
    let row = client
        .query_one("SELECT leasehold_check_fence($1, $2)", &[&key, &fence])
        .await
        .map_err(|e| {
            LockError::unavailable(
                format!(
                    "the fence check of {:?} failed: {}",
                    guard.key(),
                    crate::store::postgres::error_text(&e)
                ),
                Some(Box::new(e)),
            )
        })?;
    if row.get::<_, bool>(0) {
        Ok(())
    } else {
        guard.refused_by_store("the database showed another holder at a fence check");
        Err(LockError::Lost {
            reason: LostReason::StaleFence,
        })
    }
}

/// The lock's name in the `leasehold_locks` table, for [`check_fence`]'s SQL when another
/// driver runs it (`SELECT leasehold_check_fence($1, $2)`).
pub fn store_key(guard: &LockGuard) -> String {
    crate::store::postgres::db_text(guard.store_key()).into_owned()
}
