//! The fence check, written once for every driver: what is refused before any SQL runs, and
//! what the procedure's answer (or the driver's error) means. The drivers only run the
//! statement (`client`, `mysql_async_conn`, `sqlx_my`).

use super::client::{RunsFenceCheck, StatementError, NO_EXECUTE, NO_SCHEMA};
use crate::checks::verdict::{checkable_fence, not_the_holder};
use crate::error::LockError;
use crate::primitives::guard::LockGuard;
use crate::store::Engine;

/// A connection or transaction that [`check_fence`] can run its statement on:
///
/// - `&mut` a mysql_async [`Conn`](mysql_async::Conn) (a pool's connection, from
///   `pool.get_conn()`, is one) or [`Transaction`](mysql_async::Transaction), or `&mut`
///   anything that derefs mutably to one;
/// - with the `sqlx-mysql` feature, `&mut` a sqlx `MySqlConnection`, or `&mut` anything that
///   derefs to one: a `sqlx::Transaction<'_, MySql>`, a `PoolConnection<MySql>`.
///
/// Implemented by leasehold only. `Via` records how the client reaches its driver's
/// connection (directly, or through `Deref`s); the compiler infers it, callers never name it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a MySQL connection that `check_fence` can use",
    label = "not `&mut` a mysql_async or sqlx connection or transaction",
    note = "pass `&mut` a mysql_async `Conn` or `Transaction` (or anything that derefs to one), \
            or, with the `sqlx-mysql` feature, `&mut` a sqlx `Transaction<'_, MySql>`, \
            `MySqlConnection` or pool connection"
)]
pub trait FenceClient<Via>: RunsFenceCheck<Via> {}

impl<C: RunsFenceCheck<Via>, Via> FenceClient<Via> for C {}

/// Checks, inside the caller's transaction, that `guard` still holds its lock in the
/// database, and keeps any other holder from taking the lock until that transaction ends, so
/// none can before the transaction's writes commit. For a reader's guard: that it still
/// holds its share, and no writer takes the lock until the transaction ends (see the
/// [module docs](crate::mysql)). Renewals go on meanwhile; the transaction may wait for its
/// client between statements for at most the lease left plus
/// [`FENCED_IDLE_MARGIN`](super::FENCED_IDLE_MARGIN) (see the module docs).
///
/// `client` is the transaction the write runs in ([`FenceClient`]), by `&mut`: a mysql_async
/// `Transaction` or `Conn`, or (feature `sqlx-mysql`) a sqlx transaction or connection.
///
/// ```no_run
/// # async fn buy(locker: leasehold::Locker, pool: leasehold::mysql::mysql_async::Pool)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// use leasehold::mysql::mysql_async::{prelude::Queryable, TxOpts};
///
/// let guard = locker.lock("stock:42").acquire().await?;
/// let mut conn = pool.get_conn().await?;
/// let mut tx = conn.start_transaction(TxOpts::default()).await?;
/// leasehold::mysql::check_fence(&mut tx, &guard).await?;
/// tx.query_drop("UPDATE stock SET left_ = left_ - 1 WHERE sku = 42 AND left_ > 0").await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// - [`LockError::Config`] when `guard` comes from a locker on another engine (nothing is
///   sent then), when the transaction's database has no leasehold schema (it is not the
///   locker's database), or when its user may not run `leasehold_check_fence` (grant it
///   `EXECUTE` on that procedure).
/// - [`LockError::Lost`] when the guard is no longer held on this process's clock, or the
///   database shows another holder or none ([`LostReason::StaleFence`](crate::LostReason));
///   the lease is then reported lost to the guard (its `lost()` resolves).
/// - [`LockError::Unavailable`] when the statement failed; its source is the driver's error
///   (a `mysql_async::Error` or a `sqlx::Error`): a deadlock or a lock wait timeout means
///   "retry the transaction".
pub async fn check_fence<C, Via>(client: C, guard: &LockGuard) -> Result<(), LockError>
where
    C: FenceClient<Via>,
{
    let fence = checkable_fence(
        guard,
        Engine::Mysql,
        "leasehold::mysql::check_fence",
        "mysql",
    )?;
    let answer = client
        .run_fence_check(STATEMENT, store_key(guard), fence)
        .await;
    judge(guard, answer)
}

/// The statement [`check_fence`] runs (`CALL leasehold_check_fence(?, ?)`, the engine's): the
/// lock's stored key (bytes), then the fence (`BIGINT`); one row of one column back, `holds`:
/// 1 when the guard still holds the lock, else 0. A procedure, not a function: with binary
/// logging on, creating a function needs privileges a procedure does not (see
/// [`SCHEMA`](super::SCHEMA)).
const STATEMENT: &str = crate::store::mysql::sql::CHECK_FENCE;

/// The lock's key as the engine stores it (`VARBINARY`, byte for byte), for [`check_fence`]'s
/// SQL when another driver runs it (`CALL leasehold_check_fence(?, ?)` with these bytes and
/// the guard's [`fence`](LockGuard::fence) as a `BIGINT`, as the transaction's first
/// statement; its one row's `holds` is 1 for "still the holder", and anything else means the
/// write must not happen).
pub fn store_key(guard: &LockGuard) -> Vec<u8> {
    crate::store::mysql::text::key_text(guard.hold().store_key()).to_vec()
}

/// What the statement's outcome means for the caller, and for the guard.
fn judge(guard: &LockGuard, answer: Result<Option<i64>, StatementError>) -> Result<(), LockError> {
    match answer {
        Ok(Some(1)) => Ok(()),
        // 0: another holder, or none.
        Ok(_) => Err(not_the_holder(guard)),
        Err(e) if e.code.is_some_and(|code| NO_SCHEMA.contains(&code)) => Err(LockError::Config {
            message: format!(
                "the fence check of {:?} found no leasehold schema in the transaction's \
                 database: check the fence in a transaction on the database of the guard's \
                 locker ({}) ({})",
                guard.key(),
                guard.hold().store().describe(),
                e.text
            ),
            source: Some(e.error),
        }),
        Err(e) if e.code == Some(NO_EXECUTE) => Err(LockError::Config {
            message: format!(
                "the fence check of {:?} may not run leasehold_check_fence in the \
                 transaction's database: grant the application's user EXECUTE ON PROCEDURE \
                 leasehold_check_fence in the database of the guard's locker ({}), and check \
                 the fence there ({})",
                guard.key(),
                guard.hold().store().describe(),
                e.text
            ),
            source: Some(e.error),
        }),
        Err(e) => Err(LockError::unavailable(
            format!("the fence check of {:?} failed: {}", guard.key(), e.text),
            Some(e.error),
        )),
    }
}
