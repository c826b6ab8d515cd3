//! Locks in MySQL or MariaDB, and fenced writes in your own transaction (feature `mysql`).
//!
//! **How the locks are stored.** A locker built with [`LockerBuilder::mysql`] keeps each lock
//! as a row of a lease table in the database of its URL (`leasehold_locks` and its siblings,
//! InnoDB, and the `leasehold_*` procedures every call runs; [`SCHEMA`] is their SQL, which
//! the locker applies on first use unless an operator did), on the database's clock: a lease ends when the server's time passes it, whatever the
//! clocks of the processes say. Keys and owner tokens are stored as bytes (`VARBINARY`), so
//! no collation folds case or trims spaces. Every lock key in use also has a **guard row**
//! (`leasehold_guards`), which a fenced transaction reads and only a change of holder writes.
//! MySQL 8 and MariaDB 10.11 run the same SQL.
//!
//! **Fenced writes.** The rule (see [`fenced`](crate::fenced) for the window it closes): the
//! holder's first touch of the resource carries its fence, so that no older holder's write
//! can land between its read and its write. With the locks in the same database as the data,
//! [`check_fence`] asks, inside your transaction, whether this guard's acquisition still
//! holds the lock, and keeps any other holder from taking it over until the transaction ends,
//! so none can before your writes are committed. A holder that was paused past its lease (a
//! GC pause, a stopped VM) or whose statements were late in the network, and woke up after
//! another took the lock, gets [`LockError::Lost`] with [`LostReason::StaleFence`] instead of
//! a committed stale write.
//!
//! ```no_run
//! # async fn buy(locker: leasehold::Locker, pool: leasehold::mysql::mysql_async::Pool)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold::mysql::mysql_async::{prelude::Queryable, TxOpts};
//!
//! let guard = locker.lock("stock:42").acquire().await?;
//! let mut conn = pool.get_conn().await?;
//! let mut tx = conn.start_transaction(TxOpts::default()).await?;
//! leasehold::mysql::check_fence(&mut tx, &guard).await?; // refuses a stale holder
//! // Read and write in this transaction: the lock cannot change hands until it ends.
//! let left: Option<i64> = tx.exec_first("SELECT left_ FROM stock WHERE sku = ?", (42,)).await?;
//! tx.exec_drop("UPDATE stock SET left_ = ? WHERE sku = ?", (left.unwrap_or(0) - 1, 42)).await?;
//! tx.commit().await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! Why no write of an older holder can come between this holder's read and its write: every
//! older holder's write commits in a transaction that passed its own check, and the lock
//! cannot pass to this holder while such a transaction is open; one that checks after the
//! lock passed is refused. So a read made after the acquire sees every write of the holders
//! before, and nothing of theirs lands later. Read inside the checked transaction all the
//! same: it is the shape that stays right if the reads move.
//!
//! MySQL has no transaction-scoped advisory lock (`GET_LOCK` belongs to the session, and
//! outlives the transaction). Instead the check reads the lock's guard row with a shared
//! lock (`LOCK IN SHARE MODE`), which InnoDB keeps until the transaction ends. Every
//! statement that could change the lock's holder (an acquire that takes the lock, a takeover
//! of an expired lease, a hand-over) locks that row exclusively **without waiting**
//! (`NOWAIT`), and answers "taken" when it cannot: so while the checked transaction is open,
//! `try_acquire` elsewhere answers at once that the lock is taken, and nobody takes the lock,
//! even once the lease ended. Renewals and releases never touch the guard row, so the
//! watchdog keeps renewing the lease (this lock's and every other) for as long as the
//! transaction runs: a fenced transaction held open never costs the holder its lease.
//!
//! **A holder stalled inside its transaction** (its process stopped, its network cut) must
//! not keep the lock for good: the check bounds how long the session may then sit idle to the
//! lease left at the check plus [`FENCED_IDLE_MARGIN`] (5 s), unless it has a shorter bound:
//! MariaDB's `idle_transaction_timeout`, MySQL 8's `wait_timeout` (MySQL has no idle bound
//! for transactions alone). The server then ends the session of a transaction that waits
//! for its client longer than that, the transaction rolls back and its shared lock goes, and
//! the lock is free at most the lease plus 5 s after the holder stalled (MariaDB counts the
//! bound in whole seconds, rounded up). A transaction busy
//! in a statement is not ended (a stalled holder's statement ends by itself, and the idle
//! bound starts then); while its holder is alive its watchdog keeps the lease, and if the
//! lease is lost, the guard's loss tells the holder. So do not wait between statements of a
//! fenced transaction for longer than the lease left plus 5 s (a lease of 1.5 s allows at
//! least 6 s): the server would close the connection, and the transaction would roll back.
//! The bound is a session variable (MySQL has no transaction-scoped one): it stays on the
//! connection after the transaction, until the connection is reset (mysql_async's pool
//! resets a connection when it is returned, sqlx's does not) or the next check sets it again.
//!
//! **A reader's check** (a guard of [`Locker::read_lock`]) asks whether this reader still
//! holds its share: its own lease in the database, with readers (not a writer) holding the
//! lock. It takes the same shared lock, so no writer takes the lock until the transaction
//! ends, even if every reader leaves meanwhile, while other readers still come and go.
//!
//! **Make the check the transaction's first statement**, before it reads anything. The
//! guard row is read with a locking read (the newest version, whatever the transaction's
//! snapshot), but the lease's row is read as the transaction sees it: under `REPEATABLE READ`
//! (InnoDB's default) from the snapshot of its first read. A check after an earlier read
//! could then see an older state of the lock and answer [`LostReason::StaleFence`] to a
//! holder that did acquire it (never the other way round: a stale holder is refused
//! whatever the snapshot). Under `READ COMMITTED` the order does not matter. A lock wait
//! timeout or a deadlock (an acquire never waits on the guard row, but your own statements
//! may) is a [`LockError::Unavailable`] whose source is the driver's error: roll back and
//! retry.
//!
//! **Clients.** [`check_fence`] takes `&mut` the connection or transaction your write runs
//! in:
//!
//! - mysql_async: a [`Transaction`](mysql_async::Transaction) (`conn.start_transaction(..)`)
//!   or a [`Conn`](mysql_async::Conn) (a pool's connection is one; after `BEGIN` on it), or
//!   anything that derefs mutably to one.
//! - sqlx (feature `sqlx-mysql`): a `sqlx::Transaction<'_, MySql>` (`pool.begin()`), a
//!   `MySqlConnection`, or a pool's connection (`pool.acquire()`), or anything that derefs
//!   to one.
//!
//! ```no_run
//! # #[cfg(feature = "sqlx-mysql")]
//! # async fn buy(locker: leasehold::Locker, pool: leasehold::mysql::sqlx::MySqlPool)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold::mysql::sqlx;
//!
//! let guard = locker.lock("stock:42").acquire().await?;
//! let mut tx = pool.begin().await?;
//! leasehold::mysql::check_fence(&mut tx, &guard).await?; // refuses a stale holder
//! sqlx::query("UPDATE stock SET left_ = left_ - 1 WHERE sku = 42 AND left_ > 0")
//!     .execute(&mut *tx)
//!     .await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! Outside a transaction (autocommit) the check answers for that one statement only: check
//! inside the transaction that writes.
//!
//! Every client gets the same answers: the driver's error is the source of a
//! [`LockError::Unavailable`] (a `mysql_async::Error` or a `sqlx::Error`), and a stale holder
//! gets [`LostReason::StaleFence`] and its guard is told. Two mistakes are
//! [`LockError::Config`], whatever the client: a guard of a locker on another engine, refused
//! before any SQL runs, since a MySQL transaction cannot check a lock kept elsewhere; and a
//! transaction on a database without the leasehold schema.
//!
//! Another driver does the same with one statement, the first of its transaction:
//! `CALL leasehold_check_fence(?, ?)` with [`store_key`] and the guard's
//! [`fence`](LockGuard::fence) as a `BIGINT`; its one row's `holds` is 1 when the guard
//! still holds the lock, and anything else means the write must not happen.
//!
//! **Grants and TLS.** The lockers' user and the application's user need different
//! privileges, and the URL says how connections are encrypted (`ssl-mode`, `ssl-ca`,
//! `ssl-cert`, `ssl-key`, with the `tls` feature): see `docs/security-mysql.md`. Connect your
//! own pool for the check with the same URL through [`opts`], which applies the same rules:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "mysql://shop:secret@db.internal:3306/shop?ssl-mode=VERIFY_IDENTITY\
//!            &ssl-ca=/etc/shop/db-ca.pem";
//! let locker = leasehold::Locker::builder().mysql(url).build().await?;
//! let pool = leasehold::mysql::mysql_async::Pool::new(leasehold::mysql::opts(url)?);
//! # Ok(()) }
//! ```
//!
//! [`LockerBuilder::mysql`]: crate::LockerBuilder::mysql
//! [`Locker::read_lock`]: crate::Locker::read_lock
//! [`LostReason::StaleFence`]: crate::LostReason::StaleFence

mod client;
mod fence;
mod mysql_async_conn;
#[cfg(feature = "sqlx-mysql")]
mod sqlx_my;

pub use self::fence::{check_fence, store_key, FenceClient};
pub use crate::store::mysql::SCHEMA;

use crate::error::LockError;
#[cfg(doc)]
use crate::error::LostReason;
#[cfg(doc)]
use crate::primitives::guard::LockGuard;

/// How long past its lock's remaining lease a transaction that checked its fence may wait for
/// its client between two statements before the server ends its session (see the module
/// docs): also how long past its lease a holder stalled inside such a transaction keeps the
/// lock. The same 5 s are written in [`SCHEMA`]'s `leasehold_check_fence`.
pub const FENCED_IDLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

#[cfg(test)]
#[test]
fn the_margin_is_the_one_the_schema_writes() {
    assert_eq!(
        FENCED_IDLE_MARGIN,
        crate::store::mysql::sql::FENCED_IDLE_MARGIN
    );
    assert!(SCHEMA.contains("+ 5000 * 1000"));
}

/// The driver [`check_fence`] takes a connection or transaction of (re-exported, so versions
/// match).
pub use mysql_async;
/// The sqlx [`check_fence`] takes a connection or transaction of (feature `sqlx-mysql`;
/// re-exported, so versions match).
#[cfg(feature = "sqlx-mysql")]
pub use sqlx;

/// mysql_async's options for a pool or connection of your own, by the rules a locker built
/// with [`LockerBuilder::mysql`](crate::LockerBuilder::mysql) and the same URL follows: the
/// same host, credentials, database and parameters, and the same TLS (`ssl-mode`, `ssl-ca`,
/// `ssl-cert`, `ssl-key`; the files read now), for [`check_fence`] and your writes.
///
/// ```
/// let opts = leasehold::mysql::opts("mysql://shop:secret@db.internal/shop?pool_max=4")?;
/// assert_eq!(opts.ip_or_hostname(), "db.internal");
/// # Ok::<(), leasehold::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::Config`] when the URL cannot be read, asks for TLS without the `tls`
/// feature, or names a file that cannot be read.
pub fn opts(url: &str) -> Result<mysql_async::Opts, LockError> {
    crate::store::mysql::url::parse(url).map(|target| target.opts)
}
