//! The MySQL and MariaDB engine: a lock is a row of a lease table, its expiry on the database
//! server's clock, as on PostgreSQL ([`super::postgres`], whose rules this engine follows
//! wherever the two servers allow the same), over the `mysql_async` driver.
//!
//! **The tables** (InnoDB; [`SCHEMA`], `schema.sql`): `leasehold_locks (id, lock_key, owner,
//! fence, expires)`, the guard rows `leasehold_guards (id, slot, used)`, the global fence floor
//! `leasehold_floor`, the line of waiters `leasehold_waiters (id, name, arrived, waits_until)`,
//! and for the optional parts `leasehold_readers`, `leasehold_semaphores`, `leasehold_permits`
//! and `leasehold_leaders`, the lockers' descriptions `leasehold_lockers`, and the wake log
//! `leasehold_wakes (seq, wake, to_name, at)`; with the `leasehold_*` procedures. Keys are
//! bytes (`VARBINARY`: no collation folds case or trims trailing spaces, and NUL needs no
//! escape, so every prefix is stored apart); rows are found by the SHA-256 of the stored key
//! (`id`, 32 bytes), since a stored key (up to about 3.2 KB) is longer than an InnoDB index key
//! may be (3072 bytes). Times are microseconds since the epoch on the server's clock,
//! `UTC_TIMESTAMP(6)` read in a statement of its own once the rows a call changes are locked
//! (each statement of a procedure has its own time; `UTC_TIMESTAMP` is replicated safely where
//! `SYSDATE` is not). The schema is created, or upgraded over an older version's procedures, on
//! first use under the named lock `leasehold_schema.<database>` (`GET_LOCK`), so lockers
//! starting together do not race; each procedure carries the comment `leasehold schema 3`,
//! which the check counts.
//!
//! **Procedures, no functions.** Every lock call is one round trip, `CALL leasehold_acquire(...)`
//! answering one row. Stored functions would need SUPER (or `log_bin_trust_function_creators`)
//! to be created with binary logging on, procedures do not; and a procedure may run a prepared
//! statement, which the guard needs (below). Each procedure runs its own transaction (under
//! autocommit each statement of a procedure would commit on its own) and rolls it back on any
//! error. The engine's sessions run READ COMMITTED: no gap locks, so two acquires of two free
//! keys never wait for each other and a look at a missing row locks nothing; binary logging
//! accepts READ COMMITTED in ROW or MIXED format (both servers' default), not STATEMENT.
//!
//! **Acquire** (`leasehold_acquire`) locks the lock's row (`FOR UPDATE`: a release, a renewal or
//! another acquire of the same key may hold it for a moment); if a live holder has it, answers
//! "held" with the time left (joining the line, see *The line*). Otherwise, only now, it takes
//! the key's guard row exclusively without waiting (see *Fenced transactions*), creating it when
//! missing, draws the fence with both locked, and inserts or takes over the row. **Release**
//! deletes the row if the token owns it (or leaves it to the next in line) and appends to the
//! wake log in the same transaction. **Renew** extends every lease of a batch that its token
//! still holds in one call (the batch as JSON, read with `JSON_TABLE`, keys and owners in hex);
//! when the server refuses the call, halves are renewed on their own, down to single leases,
//! so one lease's failure reads as unknown for that lease only
//! ([`renew_halving`](crate::store::renew_halving), shared with PostgreSQL). **Several at
//! once** (`lock_all` of free keys, readers' shares beside locks) is one `CALL
//! leasehold_acquire_all` with the batch as JSON, sorted by key: one transaction that takes
//! each key by the bodies the lone acquires run (`leasehold_acquire_in`,
//! `leasehold_acquire_shared_in`, each lone acquire being that body in a transaction of its
//! own) and rolls back at the first key that is not free; its owner tokens are all recorded
//! against the settlement of its connection when its answer is lost. A guard's locks given back
//! together are one `leasehold_release_all` (the release body of each, `leasehold_release_in`,
//! in one transaction, in key order; [`releases`]). Round trips: one per acquire (of one key or
//! of a batch), release (of one lock or of a guard's) and renewal batch (per kind of lease in
//! it).
//!
//! **Fences** are `slot × 32 + n`, the slot the greatest of the global floor + 1, the server
//! clock in units of 32 µs, and the key's last slot + 1 (`leasehold_draw_slot`, the writers',
//! readers' and semaphore holders' one rule). MySQL has no sequence, and one counter row for
//! the whole database would serialize every acquire on it: the key's last slot is kept on its
//! guard row instead (a per-key floor; the lock's row holds the last reader's slot), and
//! `leasehold_floor` holds a global one that no acquire writes: every sweep raises it to the
//! clock's slot, and to the slot of each guard row it deletes (a guard row is deleted ten
//! minutes after its last holder change, once nobody holds the key). So fences keep increasing
//! for a key after a restore from an older backup and after a failover to a replica that missed
//! the last transactions (the clock has moved on past every fence the lost rows held: fences
//! run with the clock, ahead of it only by one slot per acquire of the key within 32 µs), and a
//! server clock that steps back is covered by the key's guard row and the floor. Not covered,
//! as on PostgreSQL without its sequence: a clock stepping back by more than a restore took,
//! together with a restore that lost the guard rows.
//!
//! **Fenced transactions.** MySQL has no transaction-scoped advisory lock (`GET_LOCK` belongs to
//! the session, and a pooled connection outlives the transaction): the guard row plays its
//! part. `leasehold_check_fence`, called in the user's transaction, share-locks the key's guard
//! row (`LOCK IN SHARE MODE`, which both servers spell alike and InnoDB holds until that
//! transaction ends), then judges the fence: a writer's when its slot is the guard's and the
//! lock's row holds it unexpired, a reader's when a live reader has it. Everything that could
//! change the holder (an acquire that inserts or takes over the row, a reader taking it over,
//! the handover) takes the guard row exclusively *without waiting* and answers "held" when it
//! cannot; MariaDB refuses `NOWAIT` in a procedure's own statements, so `leasehold_take_guard`
//! prepares it (errors 1205 on MariaDB, 3572 on MySQL 8). Renewals and releases never touch the
//! guard row: a checked transaction held open never blocks them and never costs the holder its
//! lease. The check then bounds how long the transaction may sit idle to the lease left plus
//! [`FENCED_IDLE_MARGIN`](sql::FENCED_IDLE_MARGIN) (5 s): MariaDB's `idle_transaction_timeout`
//! (whole seconds, so up to 1 s more), MySQL 8's session `wait_timeout` (it has no bound for
//! idle transactions only; the lowered bound stays with the session). How it is called and what
//! it answers: [`sql`].
//!
//! **Loss** is judged on this process's monotonic clock from the send time of the last
//! acknowledged acquire or renewal, as on Redis and PostgreSQL; the server's expiry is counted
//! from a later moment, so it never ends before the client's belief does, as long as the
//! server's clock does not jump forward by more than the lease's margin.
//!
//! **Waiting.** MySQL has no LISTEN/NOTIFY. Every release (a lock's, a last reader's, permits',
//! a withdrawal that passes a lock on, a forced release) and every turn a release gives to a
//! contender appends a row to `leasehold_wakes` in its own transaction: the wake key and, for a
//! turn, the contender's name. One task per locker ([`listener`]) reads the rows after the last
//! one it read every [`READ_EVERY`](listener::READ_EVERY) (25 ms), **only while this process has
//! a waiter**, and feeds the same wake-up channels as PostgreSQL's notifications
//! ([`WakeSubscription`]). A waiter subscribes before its next attempt; a subscription that
//! finds the reader idle wakes it and returns once the reader has read its starting point, so a
//! release committed after the subscription is never missed. Auto-increment numbers are drawn
//! at insert and seen at commit, out of order: the reader asks again for the numbers below the
//! highest it read that it has not seen, for twice the operation timeout (at least 2 s), and
//! never delivers a row twice.
//!
//! Figures: a waiter wakes at most 25 ms (12.5 ms on average) after the release committed, plus
//! one round trip of the reader and the waiter's next attempt. Measured from the release call
//! to the waiter's grant in another locker (60 hand-offs, MariaDB 10.11 on the same 2-core
//! machine, busy compiling meanwhile): p50 17 ms, p90 29 ms, p99 33 ms. N waiters in one process (on any
//! number of locks) cost the server one indexed read per 25 ms (40 per second) while they wait,
//! not N: an idle process reads nothing (a `SELECT 1` every 2 s proves its connection), so a
//! fleet of P processes with waiters costs 40 P reads per second, each a primary-key range scan
//! of the rows appended since (one row per release). Polling each lock's row per waiter with a
//! back-off would cost each waiter a query per interval, and GET_LOCK per wake channel would
//! cost a connection per lock waited for (a session holds its named locks): a reader per
//! process is the cheapest of the three for the server at the same latency. The price is one
//! row inserted per release (in the release's transaction, no extra round trip) and the sweep's
//! trimming of rows older than a minute.
//!
//! **The line**, as on PostgreSQL: an acquire that will wait and finds the lock held puts its
//! contender in `leasehold_waiters` (the process's name, or a fair request's own), keeping its
//! first arrival, for as long as it still waits and at most
//! [`MAX_INTEREST`](waiters::MAX_INTEREST) (2 s) past that attempt. A release, when a contender
//! other than the releasing process waits, leaves the row to the one that waited longest for
//! [`YIELD_WINDOW`](waiters::YIELD_WINDOW) (200 ms: owner `~` and its name, which only its
//! acquire may take, and which neither counts as held nor passes a fence check) and appends its
//! turn to the wake log; otherwise it deletes the row. A waiter that stops without the lock
//! withdraws in the background (`leasehold_withdraw`, passing on a lock left to it). Every
//! change of the line locks the lock's row first, so they never deadlock; `try_acquire` never
//! touches the line.
//!
//! **Connections.** [`POOL`](pool::POOL) (8) connections for lock calls, opened at connect and
//! again on demand after a failure, each carrying one call at a time (the protocol has no
//! pipelining): a call takes a free one, or waits for one within its operation timeout. Every
//! call is bounded by the operation timeout on the client, and on the server by
//! `innodb_lock_wait_timeout` (half the operation timeout, at least 1 s: InnoDB counts whole
//! seconds) and, on MariaDB, `max_statement_time` (the operation timeout); MySQL 8's
//! `max_execution_time` bounds SELECTs only, so a `CALL` there is bounded by its lock waits and
//! the client. Plus one connection for the wake log's reader.
//!
//! **Calls whose outcome is unknown.** An acquire that timed out, whose connection broke, or
//! that the server stopped midway may still run later (its bytes in the network or in its
//! session's input), after its give-back found nothing: it would then hold the lock for a token
//! nobody holds, for its whole lease. So the connection it was on is settled first: its session,
//! named by the id the server gave it in its handshake, is ended from another connection (`KILL
//! CONNECTION`, which a user may do to its own sessions) and confirmed gone from
//! `information_schema.PROCESSLIST`; every give-back of the token ([`Store::settle`]) waits for
//! that. An acquire sent again after its connection broke is sent only once the first is
//! settled. Bound as on PostgreSQL ([`settle`]): one round trip while the server answers, tried
//! again every second at most for up to two minutes while it does not. The registry of unsettled
//! tokens is shared with PostgreSQL ([`crate::store::settling`]).
//!
//! **Read locks, semaphores, leader records**: as on PostgreSQL, table for table (its docs
//! describe them). A reader that joins readers changes no holder and leaves the guard row alone;
//! one that takes the row over takes the guard without waiting. A renewal of readers locks the
//! locks' rows first (in key order: the batch is sorted), as acquires do; a renewal of permit
//! holders share-locks the semaphores' rows first. Leader records are believed only while their
//! owner token holds the election's lock on the server's clock; publishing and clearing append
//! to the wake log addressed to `leader`.
//!
//! **Growth.** A released row is deleted; a row left behind by a crashed holder is taken over
//! by the next acquirer or deleted by the periodic sweep (`leasehold_sweep`, every 30 s from
//! every locker), which also deletes readers', permit holders' and waiters' rows that ended
//! more than a second ago, semaphores nobody holds that granted nothing for a minute, lockers'
//! descriptions expired a minute ago, wake-log rows older than a minute (in rounds of 10000, 20
//! rounds at most per sweep: up to about 6600 releases per second per sweeping locker), and
//! guard rows of keys nobody holds whose last holder change is ten minutes old (skipping any a
//! transaction has locked). A leader record stays until its leader resigns or the next one
//! overwrites it.
//!
//! **Privileges.** Creating the schema (once, by the engine or an operator): `CREATE`, `INDEX`,
//! `INSERT` (the floor's row), `CREATE ROUTINE` and `ALTER ROUTINE` (to replace an older
//! version's procedures) on the database. Running, for a user that did not create it:
//! `EXECUTE` on the `leasehold_*` procedures (they run with their definer's rights, SQL
//! SECURITY DEFINER, the default) and `SELECT` on the `leasehold_*` tables (inspection, leader
//! records, the wake log, the schema check). Ending its own stalled sessions needs no
//! privilege; `information_schema.PROCESSLIST` shows a user its own sessions. No SUPER, no
//! `log_bin_trust_function_creators`, no `PROCESS`, no `CONNECTION_ADMIN`.
//!
//! **MySQL 8 and MariaDB.** The SQL is written for both (MySQL 8.0, MariaDB 10.6 and later:
//! `JSON_TABLE`, `SKIP LOCKED`, `NOWAIT`, `LOCK IN SHARE MODE`; no `RETURNING`, no sequences, no
//! `CREATE OR REPLACE PROCEDURE`, no stored functions). Where they differ: MariaDB refuses
//! `NOWAIT` in a procedure's own statements (prepared instead) and answers it with 1205, MySQL
//! with 3572; the statement bound (`max_statement_time`, seconds, every statement, on MariaDB;
//! `max_execution_time`, milliseconds, SELECT only, on MySQL); the idle bound of a fenced
//! transaction (`idle_transaction_timeout` on MariaDB, `wait_timeout` on MySQL, set through a
//! prepared statement so that each server parses only its own). MySQL 8.0.20 and later warn
//! that `VALUES(col)` in `ON DUPLICATE KEY UPDATE` is deprecated (it still works; MariaDB has
//! no row alias to replace it with). Only MariaDB 10.11 is tested here: the schema was written
//! against both servers' documented grammar, and what MySQL 8 parses differently (system
//! variables it lacks, resolved when a procedure is created) is kept out of its path.
//!
//! By job: [`schema`] (`schema.sql`, created on first use), [`sql`] (the statements), [`url`],
//! [`conn`] (one connection), [`pool`], [`settle`] (calls whose outcome is unknown), [`lease`]
//! (acquire, handover, renew), [`releases`], [`waiters`] (the line), [`readers`], [`semaphores`],
//! [`leaders`], [`wakes`] and [`listener`] (the wake log), [`admin`], [`text`] (keys and
//! tokens as stored), and [`errors`].

mod admin;
pub(crate) mod conn;
pub(crate) mod errors;
mod leaders;
mod lease;
mod listener;
mod pool;
mod readers;
mod releases;
mod schema;
mod semaphores;
mod settle;
pub(crate) mod sql;
mod ssl;
#[cfg(test)]
mod tests;
pub(crate) mod text;
#[cfg(feature = "tls")]
mod tls;
pub(crate) mod url;
pub(crate) mod waiters;
mod wakes;

use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use self::conn::Shared;
use self::pool::{Pool, POOL};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Attempt, Leave, Renewal, Renewed, Settings, Settling, Store, StoreFuture,
    WakeSubscription,
};

// Public as `leasehold::mysql::SCHEMA`.
#[allow(unused_imports)]
pub use self::schema::SCHEMA;
pub(crate) use self::text::check_prefix;
pub(crate) use self::url::validate;

pub(crate) struct MysqlStore {
    pool: Arc<Pool>,
    shared: Arc<Shared>,
    /// True while the wake log's reader has its connection.
    reader_up: watch::Receiver<bool>,
    reader: AbortHandle,
    /// This process's name in the lines of waiters ([`contender_name`](crate::store::token::contender_name)).
    contender: Arc<str>,
    /// The lock keys whose line this process may be in under its own name: an acquire that
    /// would wait was sent for them, and neither a grant nor a withdrawal came since. Only
    /// these cost a round trip when their waiter leaves ([`Store::leave`]).
    queued: Mutex<HashSet<String>>,
    /// Lock releases: a guard's keys given back together go in one transaction.
    releases: Arc<releases::Releases>,
}

impl Drop for MysqlStore {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl MysqlStore {
    /// Connects, creates the schema if it is missing, opens the pool and starts the wake log's
    /// reader; fails with `Unavailable` when the server does not answer within the connect
    /// timeout, with `Config` when it refuses the credentials, the database or the schema.
    pub(crate) async fn connect(url: &str, settings: &Settings) -> Result<Self, LockError> {
        let target = url::parse(url)?;
        let shared = Arc::new(Shared {
            // Where the URL says: `url` keeps the driver from moving a connection onto the
            // server's Unix socket unless the URL asks for it.
            opts: target.opts,
            shown: target.shown,
            settings: settings.clone(),
            wakes: Default::default(),
            mariadb: OnceLock::new(),
        });
        let mut first = shared.open().await?;
        let limit = settings.connect_timeout;
        // The check that the schema is there answers within the connect timeout; creating it
        // (once per database) may take longer: see `SCHEMA_CREATION`.
        let creating = limit.max(schema::SCHEMA_CREATION);
        match tokio::time::timeout(creating, shared.ensure_schema(&mut first)).await {
            Ok(result) => result?,
            Err(_) => return Err(shared.late(creating)),
        }
        let _ = tokio::time::timeout(limit, first.disconnect()).await;
        let (up_tx, up_rx) = watch::channel(false);
        let reader = tokio::spawn(listener::listen(Arc::downgrade(&shared), up_tx)).abort_handle();
        let pool = Arc::new(Pool {
            shared: shared.clone(),
            slots: (0..POOL).map(|_| Arc::default()).collect(),
            next: AtomicUsize::new(0),
            unsettled: Default::default(),
        });
        let contender: Arc<str> = settings.locker_id.clone().into();
        let releases = releases::Releases::new(
            releases::Calls::new(
                pool.clone(),
                contender.clone(),
                format!("MySQL at {}", shared.shown),
            ),
            settings.op_timeout,
        );
        let store = MysqlStore {
            pool,
            shared,
            reader_up: up_rx,
            reader,
            contender,
            queued: Mutex::default(),
            releases,
        };
        // Every connection for lock calls now, side by side: a bad URL fails here rather than
        // later, and the first burst of acquires does not wait behind connections being opened.
        store.pool.open_all().await?;
        store.wait_reader(limit).await?;
        Ok(store)
    }
}

impl Store for MysqlStore {
    /// Fair per request: a fair request waits in leasehold_waiters under its own name, and the
    /// release that leaves the lock to it names it in the wake log.
    fn info(&self) -> super::Info {
        let mysql = super::Engine::Mysql;
        super::Info {
            // The wake log's reader: up while its connection answers.
            link: Some(self.reader_up.clone()),
            // Any keys, readers' shares beside locks: one transaction on one server.
            at_once: super::AtOnce {
                keys: super::Together::Always,
                reads: true,
            },
            ..super::Info::of(
                mysql,
                mysql.capabilities(Duration::ZERO),
                format!("MySQL at {}", self.shared.shown),
            )
        }
    }

    /// `SELECT 1` on a pooled connection.
    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.call("did not answer a probe", |conn| {
            Box::pin(conn.query_drop("SELECT 1"))
        }))
    }

    /// A batch of several locks and readers' shares: one call of `leasehold_acquire_all`,
    /// all or nothing.
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        if batch.len() > 1
            && batch
                .iter()
                .all(|r| matches!(r.kind, LeaseKind::Exclusive | LeaseKind::Read))
        {
            return Box::pin(self.acquire_all(batch));
        }
        super::one_at_a_time(batch, |req| match req.kind {
            LeaseKind::Exclusive => Box::pin(self.acquire_once(req)),
            LeaseKind::Read => Box::pin(self.acquire_shared_once(req)),
            LeaseKind::Permits { limit, count } => {
                Box::pin(self.acquire_permits_once(req, limit, count, req.waiter))
            }
        })
    }

    /// A lock's release knows when its holder counts it valid until; a holder's row of
    /// permits carries their count.
    ///
    /// A handover goes through the store, as on PostgreSQL: a transaction that checked an earlier holder's
    /// fence may still be open; the next holder gets a fence of a slot of its own once none is
    /// (`leasehold_hand_over`).
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: super::Ending,
    ) -> StoreFuture<'a, super::Ended> {
        use super::{answer, Ended, Ending};
        match ending {
            Ending::HandOver => answer(self.hand_over_once(keys, token), Ended::HandedOver),
            Ending::Release { kind, valid_until } => match kind {
                LeaseKind::Exclusive => answer(
                    self.releases.release(keys, token, Some(valid_until)),
                    Ended::Released,
                ),
                LeaseKind::Read => answer(self.release_shared_once(keys, token), Ended::Released),
                LeaseKind::Permits { .. } => {
                    answer(self.release_permits_once(keys, token), Ended::Released)
                }
            },
        }
    }

    /// Waits until the sessions that the token's acquires were on when their outcome became
    /// unknown are gone ([`settle`]).
    fn settle<'a>(&'a self, token: &'a OwnerToken) -> Option<Settling<'a>> {
        let pending = self.pool.unsettled.take(text::token_text(token))?;
        Some(Box::pin(async move {
            for settlement in pending {
                settlement.wait().await;
            }
        }))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    fn admin<'a>(&'a self, op: super::AdminOp<'a>) -> StoreFuture<'a, super::AdminAnswer> {
        super::admin_by(self, op)
    }

    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: super::LeaderOp<'a>,
    ) -> StoreFuture<'a, super::LeaderAnswer> {
        super::leader_by(self, keys, record, op)
    }

    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        match place {
            Leave::ProcessFront => self.withdraw_process(keys),
            Leave::Alone(contender) => self.withdraw_in_background(keys, contender.into()),
            Leave::PermitLine { waiter, count } => self.withdraw_permits(keys, waiter, count),
        }
    }
}
