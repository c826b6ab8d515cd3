//! Fenced reads and writes in PostgreSQL, in your own transaction (feature `postgres`).
//!
//! The rule (see [`fenced`](crate::fenced) for the window it closes): the holder's first
//! touch of the resource carries its fence, so that no older holder's write can land between
//! its read and its write. Two ways, both inside the transaction that **reads** and writes:
//!
//! - **Data in any PostgreSQL database**, the locks anywhere (Redis, ZooKeeper, etcd, here):
//!   [`claim_fence`] is the transaction's first statement; it raises the resource's claim row
//!   (a table of its own, [`CLAIMS_SCHEMA`]) to the guard's fence, refuses a holder older than
//!   the row's, and keeps the row locked until the transaction ends.
//! - **Locks kept in the same database as the data** ([`LockerBuilder::postgres`]):
//!   [`check_fence`] asks, inside your transaction, whether this guard's acquisition still
//!   holds the lock, and keeps any other holder from taking it over until the transaction
//!   ends, so none can before your writes are committed. It needs no table of its own.
//!
//! A holder that was paused past its lease (a GC pause, a stopped VM) or whose statements were
//! late in the network, and woke up after another took the lock, gets [`LockError::Lost`] with
//! [`LostReason::StaleFence`] instead of a committed stale write.
//!
//! ```no_run
//! # async fn buy(locker: leasehold::Locker, db: &mut leasehold::postgres::tokio_postgres::Client)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! let guard = locker.lock("stock:42").acquire().await?;
//! let tx = db.transaction().await?;
//! leasehold::postgres::check_fence(&tx, &guard).await?; // refuses a stale holder
//! // Read and write in this transaction: the lock cannot change hands until it ends.
//! let left: i64 = tx.query_one("SELECT left FROM stock WHERE sku = 42", &[]).await?.get(0);
//! tx.execute("UPDATE stock SET left = $1 WHERE sku = 42", &[&(left - 1)]).await?;
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
//! same: it is the shape that stays right if the reads move (a read before the acquire, a
//! cached one, sees nothing of this).
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
//! **Clients.** [`check_fence`] takes the connection or transaction your write runs in:
//!
//! - tokio-postgres: `&` a [`Client`](tokio_postgres::Client) or
//!   [`Transaction`](tokio_postgres::Transaction), or `&` anything that derefs to one, so the
//!   pools built on it need no `&*`: deadpool-postgres's `Transaction` and pooled client,
//!   bb8-postgres's pooled connection, an `Arc<Client>`.
//! - sqlx (feature `sqlx`): `&mut` a `sqlx::Transaction<'_, Postgres>` (`pool.begin()`), a
//!   `PgConnection`, or a pool's connection (`pool.acquire()`), or
//!   `&mut` anything that derefs to one.
//!
//! ```no_run
//! # #[cfg(feature = "sqlx")]
//! # async fn buy(locker: leasehold::Locker, pool: leasehold::postgres::sqlx::PgPool)
//! # -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold::postgres::sqlx;
//!
//! let guard = locker.lock("stock:42").acquire().await?;
//! let mut tx = pool.begin().await?;
//! leasehold::postgres::check_fence(&mut tx, &guard).await?; // refuses a stale holder
//! sqlx::query("UPDATE stock SET left = left - 1 WHERE sku = 42 AND left > 0")
//!     .execute(&mut *tx)
//!     .await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! use std::ops::Deref;
//! use leasehold::postgres::tokio_postgres::Transaction;
//!
//! /// `tx`: a pool's transaction (deadpool-postgres), or tokio-postgres's own.
//! async fn pay<'c>(
//!     tx: &impl Deref<Target = Transaction<'c>>,
//!     guard: &leasehold::LockGuard,
//! ) -> Result<(), Box<dyn std::error::Error>> {
//!     leasehold::postgres::check_fence(tx, guard).await?;
//!     tx.execute("UPDATE payouts SET paid = true WHERE id = 7", &[]).await?;
//!     Ok(())
//! }
//! ```
//!
//! Every client gets the same answers: the driver's error is the source of a
//! [`LockError::Unavailable`] (a `tokio_postgres::Error` or a `sqlx::Error`), and a stale
//! holder gets [`LostReason::StaleFence`] and its guard is told. Two mistakes are
//! [`LockError::Config`], whatever the client: a guard of a locker on another engine (Redis,
//! ZooKeeper, etcd, in memory), refused before any SQL runs, since a PostgreSQL transaction
//! cannot check a lock kept elsewhere; and a transaction on a database without the leasehold
//! schema (not the locker's database, or a `search_path` that does not reach the schema the
//! locker made).
//!
//! Another driver (diesel, …) does the same with one statement in its transaction:
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

mod claim;
mod client;
mod fence;
#[cfg(feature = "sqlx")]
mod sqlx_pg;
mod tokio_pg;

pub use self::claim::{claim_fence, claim_with_fence, CLAIMS_SCHEMA};
pub use self::fence::{check_fence, store_key, FenceClient};
pub use crate::store::postgres::SCHEMA;

/// The statements a lock's acquire and release send, and those of `lock_all` of free keys and
/// of a guard of several keys given back, with their parameter types and the release's
/// window: for `lockbench`'s baselines, which send the engine's own statements raw (a copy of
/// them drifted once). Not a stable interface: the statements change with the schema.
#[doc(hidden)]
pub mod statements {
    pub use crate::store::postgres::sql::{
        ACQUIRE, ACQUIRE_ALL, ACQUIRE_ALL_TYPES, ACQUIRE_TYPES, RELEASE, RELEASE_ALL,
        RELEASE_ALL_TYPES, RELEASE_TYPES,
    };
    pub use crate::store::postgres::waiters::YIELD_WINDOW;
}

use crate::error::LockError;
#[cfg(doc)]
use crate::primitives::guard::LockGuard;

/// How long past its lock's remaining lease a transaction that checked its fence may wait for
/// its client between two statements before the server ends it (see the module docs): also
/// how long past its lease a holder stalled inside such a transaction keeps the lock. The
/// same 5 s are written in [`SCHEMA`]'s `leasehold_check_fence`.
pub const FENCED_IDLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);
/// The sqlx [`check_fence`] takes a connection or transaction of (feature `sqlx`; re-exported,
/// so versions match).
#[cfg(feature = "sqlx")]
pub use sqlx;
/// The driver [`check_fence`] takes a client or transaction of (re-exported, so versions
/// match).
pub use tokio_postgres;

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
    crate::store::postgres::conn::connect_client(url).await
}
