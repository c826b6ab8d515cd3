//! The PostgreSQL engine: a lock is a row of a lease table, its expiry on the database
//! server's clock, its fence drawn from a sequence.
//!
//! **The tables.** `leasehold_locks (key, owner, fence, expires)` with `key` as primary key,
//! the line of waiters `leasehold_waiters (key, name, arrived, waits_until)`, the sequence
//! `leasehold_fences`, and for the optional parts (*Read locks*, *Semaphores*, *Leader
//! records* below) `leasehold_readers (key, owner, fence, expires)`,
//! `leasehold_semaphores (key, permit_limit, fence, granted)`,
//! `leasehold_permits (key, owner, permits, fence, expires)` and
//! `leasehold_leaders (record, key, term, identity, owner)`, with the `leasehold_*`
//! functions, created on first use under an advisory lock (or by an operator from
//! [`SCHEMA`], for a database user that may not create tables). All of them live in the first
//! schema of the connection's `search_path`.
//!
//! **Acquire** is one call of `leasehold_acquire`: it takes the lock's advisory lock without
//! waiting (see *Fenced transactions*), inserts the row, or takes over a row whose expiry has
//! passed (on the server's clock), and only then, holding the row's lock, draws the fence.
//! Drawing it in the same statement as the insert would not do: a statement paused between
//! drawing and inserting could take the lock after a later drawer released it, with a smaller
//! fence. **Several at once** (`lock_all` of free keys, readers' shares beside locks) is one
//! call of `leasehold_acquire_all`: one transaction that takes each key in key order by the
//! same functions (with the same fences), and rolls its block back at the first key that is
//! not free, answering every lease "held"; every row it writes carries that block's one
//! transaction id. Its owner tokens are all recorded against the settlement of its connection
//! when its answer is lost (*Calls whose outcome is unknown*). **Renew** extends every row of
//! a batch that its owner token still holds (one statement; when the server refuses it, halves
//! are renewed on their own, so one lease's failure reads as unknown for that lease only);
//! **release** deletes the row if the token owns it and notifies, in the same transaction,
//! the channel every locker listens on.
//!
//! **Fences** are `slot × 32 + n`, the slot the greatest of the sequence's next value, the
//! server clock in units of 32 µs and the row's last slot + 1, and the sequence is lifted to
//! it (given `UPDATE` on it). So fences keep increasing for a key when the sequence went back
//! (a restored backup, a promoted asynchronous standby that missed WAL), while the server's
//! clock does not step back by more than the restore or failover took (the rule Redis fences
//! follow), and stay close to the clock in microseconds, as Redis fences do. The rule is one
//! function, `leasehold_draw_slot`, called with the key's row locked by writers (`n` ≥ 1),
//! readers (`n` = 0) and semaphore holders (`n` = 1, the slot kept in the semaphore's row).
//!
//! **Fenced transactions.** `leasehold_check_fence`, in the user's transaction, holds the
//! lock's advisory lock (two-int key space, from a 64-bit hash of the stored key) shared until
//! that transaction ends; an acquire that could change the holder takes it exclusively with
//! `pg_try_advisory_xact_lock` and answers "held" when it cannot. So nobody takes the lock
//! over while a transaction that checked its fence is open, renewals and releases (which never
//! touch that lock) are never blocked by it, and acquires never wait for it (hash collisions
//! only cost a spurious "held"). An in-process handover of a fenced lease takes it the same way
//! ([`HAND_OVER`](sql::HAND_OVER)): the next task of the holder's process gets a fence of its
//! own, and only once no checked transaction is open; else the lock goes back to the table.
//! The check also sets the transaction's
//! `idle_in_transaction_session_timeout` to the lease left plus
//! [`FENCED_IDLE_MARGIN`](crate::postgres::FENCED_IDLE_MARGIN) (5 s), so a holder stalled inside
//! its transaction frees the lock at most that long after its lease ended.
//!
//! **Loss** is judged on this process's monotonic clock from the send time of the last
//! acknowledged acquire or renewal, as on Redis; the server's expiry is counted from a later
//! moment (when the statement ran), so it never ends before the client's belief does, as
//! long as the server's wall clock does not jump forward by more than the lease's margin.
//!
//! **Waiting.** One connection per locker listens on the channel `leasehold`, whose payload
//! names the released lock, and on `leasehold_turn` (see *The line*); a subscription
//! registers before the waiter's next attempt and the listener is up by then, so a release
//! after the attempt is never missed. When the listening connection drops (or stops answering
//! its health check), every waiter is woken once it is back, and retries.
//!
//! **The line**, as on Redis: an acquire that will wait and finds the lock taken puts its
//! contender in `leasehold_waiters` (the process's name, or a fair request's own), keeping
//! its first arrival, for as long as it still waits and at most [`MAX_INTEREST`](waiters::MAX_INTEREST) (2 s) past
//! that attempt. A release, when a contender other than the releasing process waits, leaves
//! the row to the one that waited longest for [`YIELD_WINDOW`](waiters::YIELD_WINDOW) (200 ms: owner `~` and its
//! name, which only its acquire may take, and which neither counts as held nor passes a fence
//! check) and names it on `leasehold_turn`; otherwise it deletes the row. Without that, the
//! releasing process's next local waiter, which needs no wake-up, would win nearly every time
//! and a waiter in another process would wait for as long as the load lasts. A waiter that
//! stops without the lock withdraws in the background (`leasehold_withdraw`, passing on a lock
//! left to it). Every change of the line that also touches the lock's row locks the row
//! first, so they never deadlock; `try_acquire` (no wait) never touches the line.
//!
//! **Connections.** [`POOL`](pool::POOL) connections, opened on demand and shared: tokio-postgres
//! pipelines the statements of concurrent callers on one connection, so a lock call never
//! waits for a connection to be free, and a connection that failed or timed out is replaced
//! on its next use. Every call is bounded by the operation timeout, on the client and as the
//! server's `statement_timeout`.
//!
//! **Calls whose outcome is unknown.** An acquire that timed out, or whose connection broke,
//! may still run later (its bytes in the network, or in its backend's input), after its
//! give-back found nothing on another pooled connection: it would then hold the lock for a
//! token nobody holds, for its whole lease. So the connection it was on is settled first: its
//! backend, named when it opened (pid and start time, read in the round trip that sets its
//! bounds), is ended from another connection (`pg_terminate_backend`, which a role may do to
//! its own sessions) and confirmed gone from `pg_stat_activity`; nothing it had not run can
//! run then, and every give-back of the token ([`Store::settle`]) waits for that. An acquire
//! sent again after its connection closed is sent only once the first is settled. Bound: one
//! round trip (and the backend's exit) while the server answers; while it does not, tried
//! again every second at most for up to two minutes, past which the give-back goes ahead and a
//! call that still lands keeps the lock for its lease at most ([`settle`]).
//!
//! **TLS.** Every connection of a locker (the pool's, the listening one, the one that checks
//! the schema) is opened with the same TLS setup, built once from the URL's libpq parameters,
//! which [`url`] reads (tokio-postgres knows only three modes): `sslmode=disable` never
//! encrypts; `prefer`, the default as in libpq, encrypts when the server offers TLS and the
//! build has the `tls` feature, checking nothing of the certificate, and falls back to plain
//! text when the server offers none (a build without `tls` connects in plain text, as libpq
//! built without SSL does); `require` encrypts or fails, and checks the certificate's chain
//! only when `sslrootcert` is given (libpq's rule), so without it it stops eavesdroppers, not
//! a man in the middle; `verify-ca` checks the chain, `verify-full` the chain and that the
//! certificate names the URL's host (not `hostaddr`). The roots are `sslrootcert`'s PEM file,
//! else the operating system's (or `SSL_CERT_FILE` / `SSL_CERT_DIR`, as for `rediss://`);
//! `sslrootcert=system` takes the system's and makes `verify-full` the default (and the only
//! mode allowed). `sslcert` and `sslkey` give a client certificate (PEM, key unencrypted).
//! Through rustls with the ring provider ([`tls`]; TLS 1.2 and 1.3, ALPN `postgresql`), without
//! channel binding (SCRAM goes as `SCRAM-SHA-256`). A URL asking for TLS without the `tls`
//! feature, an unknown mode or an unreadable file is a [`LockError::Config`] when the locker
//! is built; so are failures that retrying will not mend: a server without TLS under
//! `require`, a certificate that is not trusted or names another host, a server that refuses
//! an unencrypted connection (`hostssl`) or wants a client certificate.
//!
//! **Read locks.** While readers hold a lock, its row holds owner `R`, the last reader's fence
//! and the end of the longest reader's lease; each reader has a row of its own in
//! `leasehold_readers` with its lease and fence. Every change of a key's readers (acquire,
//! release, the renewal of a batch, which locks the rows in key order) locks the lock's row
//! first, as a writer's acquire does, so no reader slips in between a writer's look at the row
//! and its insert, and the row's expiry is never below a live reader's. A writer therefore
//! finds the row taken (and waits in the line) while any reader's lease runs, and takes it
//! over once every reader's lease ended: a crashed reader keeps writers out for its lease at
//! most. A reader is granted only when no writer holds the row and no contender waits in
//! `leasehold_waiters` (only writers wait there; one whose wait ran out, that withdrew or
//! died holds nobody back, at most [`MAX_INTEREST`](waiters::MAX_INTEREST) past its last
//! attempt). A reader's fence is `slot × 32` of a slot drawn by the writers' rule: above every
//! fence of the key before, below every later writer's (whose slot is above the row's and the
//! lifted sequence's, or, after a restore, the clock's). A reader that joins readers changes
//! no holder and takes no advisory lock; one that takes the row over takes it without waiting,
//! as writers do. The last reader to leave passes the lock to the writer that waited longest
//! (as a writer's release does) or deletes it, and the waiters hear it. A reader's
//! `check_fence` (see [`crate::postgres`]) holds the advisory lock shared: no writer takes the lock
//! until that transaction ends, while readers still come and go.
//!
//! **Semaphores.** One row per semaphore in `leasehold_semaphores` (the limit its holders
//! agreed on, the last holder's fence, when it last granted), locked by every acquire, so that
//! acquires count the holders one at a time; one row per holder in `leasehold_permits`, with
//! its permits, fence and lease. Only holders whose lease has not ended on the server's clock
//! count: a crashed holder's permits come back when its lease ends. A renewal share-locks the
//! semaphores' rows (in key order) before extending its holders, so an acquire never counts a
//! lease as ended that a renewal running at that moment then extends. Waiters for several
//! permits queue in `leasehold_waiters` under the semaphore's key, as `name:count`, by
//! arrival, with an interest that lapses after
//! [`PERMIT_INTEREST`](crate::store::PERMIT_INTEREST); every request is granted only if the
//! permits left still cover the waiters ahead of it. Releases and withdrawals notify the
//! semaphore's wake key on `leasehold`.
//!
//! **Leader records.** `leasehold_leaders` holds each election's record (term, identity, the
//! owner token of the leader's lease, its lock's key). It is written only while that token
//! holds the lock and never over a newer term, and read joined with `leasehold_locks`: it
//! counts only while its owner holds the lock on the server's clock, so it lapses with the
//! lease. Publishing and clearing notify `leasehold_turn` addressed to `leader` (never a
//! contender's name): observers look again, waiting campaigners sleep on.
//!
//! **Growth.** A released row is deleted; a row left behind by a crashed holder is taken over
//! by the next acquirer or deleted by the periodic sweep of every locker, so the table holds
//! about as many rows as there are locks held. The sweep also deletes readers' and permit
//! holders' rows whose lease ended more than a second ago, and the rows of semaphores nobody
//! holds that granted nothing for a minute. A leader record stays until its leader resigns
//! or the next one overwrites it: one row per election.
//!
//! By job: [`schema`] (`schema.sql`, created on first use), [`sql`] (the statements),
//! [`url`], [`conn`] (one connection), [`pool`], [`settle`] (calls whose outcome is
//! unknown), [`connect`], [`lease`] (acquire, release,
//! renew), [`waiters`] (the line), [`readers`], [`semaphores`], [`leaders`], [`wakes`] and
//! [`listener`] (LISTEN/NOTIFY), [`tls`] (the connector, with the `tls` feature), [`admin`],
//! [`text`] (keys and tokens as stored), and [`errors`]. The public `leasehold::postgres`
//! (fenced writes in the caller's own transaction) stands on them from outside the store.

mod admin;
mod backend;
pub(crate) mod conn;
mod connect;
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
#[cfg(test)]
mod tests;
pub(crate) mod text;
#[cfg(feature = "tls")]
mod tls;
mod url;
pub(crate) mod waiters;
mod wakes;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;

use self::conn::Shared;
use self::pool::Pool;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Attempt, Leave, Renewal, Renewed, Settling, Store, StoreFuture,
    WakeSubscription,
};

pub use self::schema::SCHEMA;
pub(crate) use self::text::check_prefix;
pub(crate) use self::url::validate;

pub(crate) struct PostgresStore {
    pool: Arc<Pool>,
    /// Lock releases: a guard's keys given back together go in one statement.
    releases: Arc<releases::Releases>,
    shared: Arc<Shared>,
    /// True while the listening connection listens.
    listening: watch::Receiver<bool>,
    listener: AbortHandle,
    /// This process's name in the lines of waiters ([`contender_name`](crate::store::token::contender_name)).
    contender: Arc<str>,
    /// The lock keys whose line this process may be in under its own name: an acquire that
    /// would wait was sent for them, and neither a grant nor a withdrawal came since. Only
    /// these cost a round trip when their waiter leaves ([`Store::leave`]).
    queued: Mutex<HashSet<String>>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Store for PostgresStore {
    /// Fair per request: a fair request waits in leasehold_waiters under its own name, and
    /// the release that leaves the lock to it says so on `leasehold_turn`.
    fn info(&self) -> super::Info {
        let postgres = super::Engine::Postgres;
        super::Info {
            // The listening connection: up while it listens and its health check answers.
            link: Some(self.listening.clone()),
            // Any keys, readers' shares beside locks: one transaction on one server.
            at_once: super::AtOnce {
                keys: super::Together::Always,
                reads: true,
            },
            ..super::Info::of(
                postgres,
                postgres.capabilities(Duration::ZERO),
                format!("PostgreSQL at {}", self.shared.shown),
            )
        }
    }

    /// `SELECT 1` on a pooled connection.
    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.call("did not answer a probe", |conn| async move {
            conn.client.simple_query("SELECT 1").await.map(|_| ())
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
    /// A handover goes through the store: a transaction that checked an earlier holder's fence
    /// (`check_fence`) may still be open, and the lease's fences all pass a check; the next
    /// holder gets a fence of a slot of its own once no such transaction is open
    /// ([`HAND_OVER`](sql::HAND_OVER)).
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

    /// Waits until the connections that the token's acquires were on when their outcome
    /// became unknown are settled: their backends ended from another connection ([`settle`]).
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
