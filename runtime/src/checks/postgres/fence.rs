//! The fence check, written once for every driver: what is refused before any SQL runs, and
//! what the function's answer (or the driver's error) means. The drivers only run the
//! statement (`client`, `tokio_pg`, `sqlx_pg`).

use super::client::{RunsFenceCheck, StatementError, UNDEFINED_FUNCTION};
use crate::checks::verdict::{checkable_fence, not_the_holder};
use crate::error::LockError;
use crate::primitives::guard::LockGuard;
use crate::store::Engine;

/// A connection or transaction that [`check_fence`] and
/// [`claim_fence`](super::claim_fence) can run their statement on:
///
/// - `&` a tokio-postgres [`Client`](tokio_postgres::Client) or
///   [`Transaction`](tokio_postgres::Transaction) (or `&mut`), or `&` anything that derefs to
///   one: deadpool-postgres's `Transaction` and pooled client, bb8-postgres's pooled
///   connection, an `Arc<Client>`;
/// - with the `sqlx` feature, `&mut` a sqlx `PgConnection`, or `&mut` anything that derefs
///   to one: a `sqlx::Transaction<'_, Postgres>`, a `PoolConnection<Postgres>`.
///
/// Implemented by leasehold only. `Via` records how the client reaches its driver's
/// connection (directly, or through `Deref`s); the compiler infers it, callers never name it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a PostgreSQL connection that `check_fence` or `claim_fence` can use",
    label = "not a tokio-postgres or sqlx connection or transaction",
    note = "pass `&` a tokio-postgres `Client` or `Transaction` (or anything that derefs to one: \
            a deadpool-postgres or bb8-postgres connection or transaction), or, with the `sqlx` \
            feature, `&mut` a sqlx `Transaction<'_, Postgres>`, `PgConnection` or pool connection"
)]
pub trait FenceClient<Via>: RunsFenceCheck<Via> {}

impl<C: RunsFenceCheck<Via>, Via> FenceClient<Via> for C {}

/// Checks, inside the caller's transaction (or on a plain connection, for one statement), that
/// `guard` still holds its lock in the database, and keeps any other holder from taking the
/// lock until that transaction ends, so none can before the transaction's writes commit. For a
/// reader's guard: that it still holds its share, and no writer takes the lock until the
/// transaction ends (see the [module docs](crate::postgres)).
/// Renewals go on meanwhile; the transaction may wait for its client between statements for
/// at most the lease left plus [`FENCED_IDLE_MARGIN`](super::FENCED_IDLE_MARGIN) (see the
/// module docs).
///
/// `client` is the connection or transaction the write runs in ([`FenceClient`]): `&tx` for
/// tokio-postgres and the pools built on it, `&mut tx` for sqlx.
///
/// ```no_run
/// # async fn buy(locker: leasehold::Locker, db: &mut leasehold::postgres::tokio_postgres::Client)
/// # -> Result<(), Box<dyn std::error::Error>> {
/// let guard = locker.lock("stock:42").acquire().await?;
/// let tx = db.transaction().await?;
/// leasehold::postgres::check_fence(&tx, &guard).await?;
/// tx.execute("UPDATE stock SET left = left - 1 WHERE sku = 42 AND left > 0", &[]).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// - [`LockError::Config`] when `guard` comes from a locker on another engine (nothing is
///   sent then), or when the transaction's database has no leasehold schema (it is not the
///   locker's database, or its `search_path` does not reach the schema the locker made).
/// - [`LockError::Lost`] when the guard is no longer held on this process's clock, or the
///   database shows another holder or none ([`LostReason::StaleFence`](crate::LostReason));
///   the lease is then reported lost to the guard (its `lost()` resolves).
/// - [`LockError::Unavailable`] when the statement failed; its source is the driver's error
///   (a `tokio_postgres::Error` or a `sqlx::Error`): a serialization failure means "retry the
///   transaction".
pub async fn check_fence<C, Via>(client: C, guard: &LockGuard) -> Result<(), LockError>
where
    C: FenceClient<Via>,
{
    let fence = checkable_fence(
        guard,
        Engine::Postgres,
        "leasehold::postgres::check_fence",
        "postgres",
    )?;
    let answer = client
        .run_fence_check(STATEMENT, store_key(guard), fence)
        .await;
    judge(guard, answer)
}

/// The statement [`check_fence`] runs: `$1` the lock's stored key (`text`), `$2` the fence
/// (`bigint`); one `boolean` back.
const STATEMENT: &str = "SELECT leasehold_check_fence($1, $2)";

/// The lock's name in the `leasehold_locks` table, for [`check_fence`]'s SQL when another
/// driver runs it (`SELECT leasehold_check_fence($1, $2)`).
pub fn store_key(guard: &LockGuard) -> String {
    crate::store::postgres::text::db_text(guard.hold().store_key()).into_owned()
}

/// What the statement's outcome means for the caller, and for the guard.
fn judge(guard: &LockGuard, answer: Result<bool, StatementError>) -> Result<(), LockError> {
    match answer {
        Ok(true) => Ok(()),
        Ok(false) => Err(not_the_holder(guard)),
        Err(e) if e.is(UNDEFINED_FUNCTION) => Err(LockError::Config {
            message: format!(
                "the fence check of {:?} found no leasehold schema in the transaction's \
                 database: check the fence in a transaction on the database of the guard's \
                 locker ({}), with a search_path that reaches the schema the locker made ({})",
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
