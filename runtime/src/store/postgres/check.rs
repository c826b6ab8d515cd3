//! Fenced writes in PostgreSQL, in your own transaction (feature `postgres`).
//!
//! With locks kept in the same database as the data ([`LockerBuilder::postgres`]), the fence
//! check and the write can commit together: [`check_fence`] asks, inside your transaction,
//! whether this guard's acquisition still holds the lock, and keeps any other holder from
//! taking it over until the transaction ends, so none can before your writes are committed.
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
//! The transaction holds a shared advisory lock on the lock's key (not a row lock), which only
//! acquires look at: the watchdog keeps renewing the lease (this lock's and every other) for as
//! long as the transaction runs, and another process's `try_acquire` answers at once that the
//! lock is taken. No other process takes the lock while the transaction is open, even once the
//! lease ended.
//!
//! **A holder stalled inside its transaction** (its process stopped, its network cut) must not
//! keep the lock for good: the check sets the transaction's
//! `idle_in_transaction_session_timeout` to the lease left at the check plus
//! [`FENCED_IDLE_MARGIN`] (5 s), unless the session has a shorter one. The server then ends a
//! transaction that waits for its client longer than that between two statements, and the
//! lock is free at most the lease plus 5 s after the holder stalled. A transaction busy in a
//! statement is not ended (a stalled holder's statement ends by itself, and the idle bound
//! starts then); while its holder is alive its watchdog keeps the lease, and if the lease is
//! lost, the guard's loss tells the holder. So do not wait between statements of a fenced
//! transaction for longer than the lease left plus 5 s (a lease of 1.5 s allows at least
//! 6 s); the server would end the session, and the transaction would roll back.
//!
//! Under `REPEATABLE READ` or `SERIALIZABLE`, the check also key-share locks the lock's row
//! (which does not block renewals, but holds off deleting it: a release or `force_release`
//! during such a transaction waits for its end), and fails with a serialization failure
//! (SQLSTATE `40001`, as a [`LockError::Unavailable`] whose source is the driver's error) when
//! the lock's row changed after the transaction's snapshot, a renewal included: retry the
//! transaction, as every serializable transaction must be ready to.
//!
//! **A reader's check** (a guard of [`Locker::read_lock`]) asks whether this reader still
//! holds its share: its own lease in the database, with readers (not a writer) holding the
//! lock. It holds the same advisory lock shared, so no writer takes the lock until the
//! transaction ends, even if every reader leaves meanwhile, while other readers still come and
//! go: a write made under a reader's check is never committed after a writer's. Readers do
//! not exclude each other, so a reader's check keeps other readers' writes out of nothing;
//! under `REPEATABLE READ` or `SERIALIZABLE` it key-share locks the reader's own row (its
//! renewals go on; its release waits for the transaction's end, as a writer's does).
//!
//! Another driver (sqlx, diesel) does the same with one statement in its transaction:
//! `SELECT leasehold_check_fence($1, $2)` with [`store_key`] and the guard's
//! [`fence`](LockGuard::fence) as a `bigint`; `false` means the write must not happen.
//!
//! **Your own connection** can be anything tokio-postgres connects with (any TLS connector,
//! a pool): the check is one statement and does not care how it travels. [`connect`] opens one
//! by the locker's rules, the same URL (`sslmode`, `sslrootcert`, ... with the `tls`
//! feature) giving the same TLS:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "postgres://shop:secret@db.internal:5432/shop?sslmode=verify-full\
//!            &sslrootcert=/etc/shop/db-ca.pem";
//! let locker = leasehold::Locker::builder().postgres(url).build().await?;
//! let mut db = leasehold::postgres::connect(url).await?;
//! let guard = locker.lock("stock:42").acquire().await?;
//! let tx = db.transaction().await?;
//! leasehold::postgres::check_fence(&tx, &guard).await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! [`LockerBuilder::postgres`]: crate::LockerBuilder::postgres
//! [`Locker::read_lock`]: crate::Locker::read_lock
//! [`LostReason::StaleFence`]: crate::LostReason::StaleFence

use crate::error::{LockError, LostReason};
use crate::primitives::guard::LockGuard;

pub use super::SCHEMA;

/// How long past its lock's remaining lease a transaction that checked its fence may wait for
/// its client between two statements before the server ends it (see the module docs): also
/// how long past its lease a holder stalled inside such a transaction keeps the lock. The
/// same 5 s are written in [`SCHEMA`]'s `leasehold_check_fence`.
pub const FENCED_IDLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);
/// The driver [`check_fence`] takes a client or transaction of (re-exported, so versions
/// match).
pub use tokio_postgres;

/// Checks, inside the caller's transaction (or on a plain client, for one statement), that
/// `guard` still holds its lock in the database, and keeps any other holder from taking the
/// lock until that transaction ends, so none can before the transaction's writes commit. For a
/// reader's guard: that it still holds its share, and no writer takes the lock until the
/// transaction ends (see the module docs).
/// Renewals go on meanwhile; the transaction may wait for its client between statements for
/// at most the lease left plus [`FENCED_IDLE_MARGIN`] (see the module docs).
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
                    super::errors::error_text(&e)
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

/// Connects a client of your own by the rules a locker built with
/// [`LockerBuilder::postgres`](crate::LockerBuilder::postgres) and the same URL follows: the
/// same parameters, and the same TLS (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`; see
/// *Connections* in the builder's docs), for [`check_fence`] and your writes. Its connection
/// is driven by a task spawned on the current Tokio runtime, which ends when the client is
/// dropped; notifications are not delivered (use tokio-postgres's own `connect` for
/// `LISTEN`). Bounded only by the URL's `connect_timeout`, if any.
///
/// # Errors
/// - [`LockError::Config`] when the URL cannot be read, asks for TLS without the `tls`
///   feature, names a file that cannot be read, or the server refuses what retrying will not
///   mend: the credentials, the database, a certificate (see the builder's docs).
/// - [`LockError::Unavailable`] when the server cannot be reached.
///
/// # Panics
/// Outside a Tokio runtime.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, LockError> {
    super::conn::connect_client(url).await
}

/// The lock's name in the `leasehold_locks` table, for [`check_fence`]'s SQL when another
/// driver runs it (`SELECT leasehold_check_fence($1, $2)`).
pub fn store_key(guard: &LockGuard) -> String {
    super::text::db_text(guard.store_key()).into_owned()
}
