//! The PostgreSQL engine: a lock is a row of a lease table, its expiry on the database
//! server's clock, its fence drawn from a sequence.
//!
//! **The table.** `leasehold_locks (key, owner, fence, expires)` with `key` as primary key,
//! the line of waiters `leasehold_waiters (key, name, arrived, waits_until)`, the sequence
//! `leasehold_fences` and the `leasehold_*` functions, created on first use under an advisory
//! lock (or by an operator from [`SCHEMA`], for a database user that may not create tables).
//! All of them live in the first schema of the connection's `search_path`.
//!
//! **Acquire** is one call of `leasehold_acquire`: it takes the lock's advisory lock without
//! waiting (see *Fenced transactions*), inserts the row, or takes over a row whose expiry has
//! passed (on the server's clock), and only then, holding the row's lock, draws the fence.
//! Drawing it in the same statement as the insert would not do: a statement paused between
//! drawing and inserting could take the lock after a later drawer released it, with a smaller
//! fence. **Renew** extends every row of a batch that its owner token still holds (one
//! statement; when the server refuses it, halves are renewed on their own, so one lease's
//! failure reads as unknown for that lease only); **release** deletes the row if the token
//! owns it and notifies, in the same transaction, the channel every locker listens on.
//!
//! **Fences** are `slot × 32 + n`, the slot the greatest of the sequence's next value, the
//! server clock in units of 32 µs and the row's last slot + 1, and the sequence is lifted to
//! it (given `UPDATE` on it). So fences keep increasing for a key when the sequence went back
//! (a restored backup, a promoted asynchronous standby that missed WAL), while the server's
//! clock does not step back by more than the restore or failover took (the rule Redis fences
//! follow), and stay close to the clock in microseconds, as Redis fences do.
//!
//! **Fenced transactions.** `leasehold_check_fence`, in the user's transaction, holds the
//! lock's advisory lock (two-int key space, from a 64-bit hash of the stored key) shared until
//! that transaction ends; an acquire that could change the holder takes it exclusively with
//! `pg_try_advisory_xact_lock` and answers "held" when it cannot. So nobody takes the lock
//! over while a transaction that checked its fence is open, renewals and releases (which never
//! touch that lock) are never blocked by it, and acquires never wait for it (hash collisions
//! only cost a spurious "held"). The check also sets the transaction's
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
//! its first arrival, for as long as it still waits and at most [`MAX_INTEREST`] (2 s) past
//! that attempt. A release, when a contender other than the releasing process waits, leaves
//! the row to the one that waited longest for [`YIELD_WINDOW`] (200 ms: owner `~` and its
//! name, which only its acquire may take, and which neither counts as held nor passes a fence
//! check) and names it on `leasehold_turn`; otherwise it deletes the row. Without that, the
//! releasing process's next local waiter, which needs no wake-up, would win nearly every time
//! and a waiter in another process would wait for as long as the load lasts. A waiter that
//! stops without the lock withdraws in the background (`leasehold_withdraw`, passing on a lock
//! left to it). Every change of the line that also touches the lock's row locks the row
//! first, so they never deadlock; `try_acquire` (no wait) never touches the line.
//!
//! **Connections.** [`POOL`] connections, opened on demand and shared: tokio-postgres
//! pipelines the statements of concurrent callers on one connection, so a lock call never
//! waits for a connection to be free, and a connection that failed or timed out is replaced
//! on its next use. Every call is bounded by the operation timeout, on the client and as the
//! server's `statement_timeout`.
//!
//! **Growth.** A released row is deleted; a row left behind by a crashed holder is taken over
//! by the next acquirer or deleted by the periodic sweep of every locker, so the table holds
//! about as many rows as there are locks held.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_postgres as pg;

use super::{
    AcquireRequest, Admin, Attempt, LockState, Renewal, Renewed, Settings, Store, StoreFuture,
    WakeLog, WakeSubscription,
};
use crate::error::LockError;
use crate::store::keys::{unescape, LockKeys};
use crate::store::token::OwnerToken;

/// How many connections one locker uses for its lock calls (plus one that listens).
pub(crate) const POOL: usize = 4;

/// Fences of one acquisition: `sequence value × FENCE_SLOTS + n`.
pub(crate) const FENCE_SLOTS: u64 = 32;

/// How often the listening connection proves it is alive.
const LISTENER_CHECK: Duration = Duration::from_secs(2);

/// How often each locker deletes rows whose lease ended long ago.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// How many renewals one statement carries.
const RENEW_CHUNK: usize = 1000;

/// The tables, sequence and functions the engine uses, as an operator would apply them (the
/// engine applies them itself on first use when its database user may, and again when the
/// functions are an older version's). Idempotent. Needs PostgreSQL 11 or later. A user that
/// did not apply it needs SELECT, INSERT, UPDATE, DELETE on `leasehold_locks` and
/// `leasehold_waiters`, USAGE and
/// UPDATE on `leasehold_fences` (without UPDATE, fences still follow the clock, but a clock
/// stepping back is no longer covered) and EXECUTE on the functions.
pub const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS leasehold_locks (
    key     text        PRIMARY KEY,
    owner   text        NOT NULL,
    fence   bigint      NOT NULL,
    expires timestamptz NOT NULL
) WITH (fillfactor = 70);

CREATE SEQUENCE IF NOT EXISTS leasehold_fences;

-- The processes (or fair requests, each under a name of its own) waiting for a lock, in
-- arrival order, each until when it still waits (at most 2 s past its last attempt: a waiter
-- that died leaves the line by itself). A release lets the one that waited longest have the
-- lock for a short window: the lock's row then holds `~` and its name as owner.
CREATE TABLE IF NOT EXISTS leasehold_waiters (
    key         text        NOT NULL,
    name        text        NOT NULL,
    arrived     timestamptz NOT NULL,
    waits_until timestamptz NOT NULL,
    PRIMARY KEY (key, name)
);

-- The contender that waited longest for `p_key` and still waits, other than `p_me` (the
-- releasing process, whose own waiters get the lock handed over without a round trip; ''
-- for none); NULL when none. It leaves the line now: if it does not take the lock within the
-- window (it stopped waiting, or died), it costs the others that window once, and queues
-- again at the back if it still waits. Waiters whose wait ran out leave too (those another
-- call is changing now are left for later). Called with the lock's row locked: every change
-- of the line for a key that also touches the row locks the row first, so they never
-- deadlock. The one chosen is never skipped for being locked (it may be refreshing its wait
-- this instant): its delete waits for that statement.
CREATE OR REPLACE FUNCTION leasehold_next_in_line(p_key text, p_me text)
RETURNS text
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    next_name text;
BEGIN
    DELETE FROM leasehold_waiters AS w
        WHERE (w.key, w.name) IN (
            SELECT v.key, v.name FROM leasehold_waiters AS v
            WHERE v.key = p_key AND (v.waits_until <= clock_timestamp() OR v.name = p_me)
            FOR UPDATE SKIP LOCKED);
    -- Bounded: each turn, the one chosen had left the line meanwhile (it withdrew).
    FOR attempt IN 1..8 LOOP
        SELECT v.name INTO next_name
            FROM leasehold_waiters AS v
            WHERE v.key = p_key AND v.name <> p_me AND v.waits_until > clock_timestamp()
            ORDER BY v.arrived, v.name
            LIMIT 1;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        DELETE FROM leasehold_waiters AS w WHERE w.key = p_key AND w.name = next_name;
        IF FOUND THEN
            RETURN next_name;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- Takes the lock `p_key` for `p_owner` if it is free, its lease ended, or it is the owner's
-- already (a retried attempt). Granted: `fence` is the highest of the `p_fences` tokens
-- reserved. Held: `remaining_ms` is what is left of the holder's lease, or a short retry hint.
--
-- It first takes the lock's advisory lock (in the two-int key space, from a 64-bit hash of the
-- key) without waiting: while a transaction that checked the holder's fence is open, it holds
-- that lock shared (leasehold_check_fence), and nobody may take the lock over, even once the
-- lease ended, until that transaction is over. Renewals and releases never take it.
--
-- Fences: slot * 32 + n, the slot drawn while the row is locked (not in the INSERT's VALUES:
-- a statement paused between drawing and inserting could take the lock after a later drawer
-- released it, with a smaller fence) as the greatest of the sequence's next value, the server
-- clock in units of 32 microseconds, and the row's last slot + 1; the sequence is then lifted
-- to the slot. So fences keep increasing, and stay near the clock in microseconds like Redis
-- fences, even when the sequence went back (a restored backup, a promoted asynchronous
-- standby), while the server clock does not step back by more than that took.
--
-- The line of waiters: a contender that will wait (`p_wait_ms` > 0) and finds the lock taken
-- joins leasehold_waiters under `p_name` (keeping its first arrival), waiting `p_wait_ms`
-- more; when a release left the lock to it (owner `~` and its name), it takes it; granted, it
-- leaves the line (`p_queued`: it may be in it).
CREATE OR REPLACE FUNCTION leasehold_acquire(
    p_key text, p_owner text, p_lease_ms bigint, p_fences bigint,
    p_name text, p_wait_ms bigint, p_queued boolean,
    OUT fence bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    h constant bigint := hashtextextended(p_key, 0);
    holder text;
    last_slot bigint;
    drawn bigint;
    slot bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock((h >> 32)::int, (h << 32 >> 32)::int) THEN
        SELECT l.owner,
               greatest(1, ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000))::bigint
            INTO holder, remaining_ms
            FROM leasehold_locks AS l WHERE l.key = p_key AND l.expires > clock_timestamp();
        IF p_name <> '' AND holder = '~' || p_name THEN
            -- A release left the lock to us, and another acquire of it runs this instant (the
            -- others wake on the same notification): ask again at once, within the window
            -- (a few times at most: past the window this path is not taken).
            remaining_ms := 5;
        ELSE
            -- The holder's lease ended but its fenced transaction is still open (or another
            -- acquire runs): ask again soon.
            remaining_ms := greatest(coalesce(remaining_ms, 0), 50);
        END IF;
        IF p_wait_ms > 0 THEN
            PERFORM leasehold_wait_in_line(p_key, p_name, p_wait_ms);
        END IF;
        RETURN;
    END IF;
    INSERT INTO leasehold_locks AS l (key, owner, fence, expires)
    VALUES (p_key, p_owner, 0, clock_timestamp() + p_lease_ms * interval '1 millisecond')
    ON CONFLICT (key) DO UPDATE
        SET owner = excluded.owner,
            expires = clock_timestamp() + p_lease_ms * interval '1 millisecond'
        WHERE l.expires <= clock_timestamp() OR l.owner = excluded.owner
           OR (p_name <> '' AND l.owner = '~' || p_name)
        RETURNING l.fence / 32 INTO last_slot;
    IF FOUND THEN
        drawn := nextval('leasehold_fences');
        slot := greatest(drawn,
                         (extract(epoch FROM clock_timestamp()) * 1000000)::bigint / 32,
                         last_slot + 1);
        -- Without UPDATE on the sequence (an operator's older grants) fences still follow the
        -- clock; only a clock stepping back is no longer covered.
        IF slot > drawn AND has_sequence_privilege('leasehold_fences', 'UPDATE') THEN
            PERFORM setval('leasehold_fences', slot);
        END IF;
        UPDATE leasehold_locks AS l
            SET fence = slot * 32 + p_fences
            WHERE l.key = p_key
            RETURNING l.fence INTO fence;
        IF p_queued THEN
            DELETE FROM leasehold_waiters AS w WHERE w.key = p_key AND w.name = p_name;
        END IF;
    ELSE
        SELECT greatest(1, ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000))::bigint
            INTO remaining_ms
            FROM leasehold_locks AS l WHERE l.key = p_key;
        IF p_wait_ms > 0 THEN
            PERFORM leasehold_wait_in_line(p_key, p_name, p_wait_ms);
        END IF;
    END IF;
END
$$;

-- The acquire of earlier versions (and of tools that call it), for a contender that does not
-- wait in line; it respects the window a release left the lock to another for.
CREATE OR REPLACE FUNCTION leasehold_acquire(
    p_key text, p_owner text, p_lease_ms bigint, p_fences bigint,
    OUT fence bigint, OUT remaining_ms bigint)
LANGUAGE sql AS $$
-- leasehold schema 3
SELECT a.fence, a.remaining_ms FROM leasehold_acquire(p_key, p_owner, p_lease_ms, p_fences, '', 0, false) AS a
$$;

-- Puts `p_name` in line for `p_key` (keeping its first arrival) until `p_wait_ms` from now.
CREATE OR REPLACE FUNCTION leasehold_wait_in_line(p_key text, p_name text, p_wait_ms bigint)
RETURNS void
LANGUAGE sql AS $$
-- leasehold schema 3
INSERT INTO leasehold_waiters AS w (key, name, arrived, waits_until)
VALUES (p_key, p_name, clock_timestamp(),
        clock_timestamp() + p_wait_ms * interval '1 millisecond')
ON CONFLICT (key, name) DO UPDATE SET waits_until = excluded.waits_until
$$;

-- With the row of `p_key` locked, by the one that is letting go of it (its releasing holder,
-- or the contender it was left to, withdrawing): leaves the row to the contender that waited
-- longest other than `p_me` for `p_window_ms` (owner `~` and its name: only it may take the
-- lock then), and says so on the channel `leasehold_turn` (its name, a space, `p_wake`); with
-- nobody else in line, deletes the row and tells everyone on `leasehold` (`p_wake`).
CREATE OR REPLACE FUNCTION leasehold_pass_on(
    p_key text, p_me text, p_window_ms bigint, p_wake text)
RETURNS void
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    next_name text;
BEGIN
    next_name := leasehold_next_in_line(p_key, p_me);
    IF next_name IS NULL THEN
        DELETE FROM leasehold_locks AS l WHERE l.key = p_key;
        PERFORM pg_notify('leasehold', p_wake);
    ELSE
        UPDATE leasehold_locks AS l
            SET owner = '~' || next_name,
                expires = clock_timestamp() + p_window_ms * interval '1 millisecond'
            WHERE l.key = p_key;
        PERFORM pg_notify('leasehold_turn', next_name || ' ' || p_wake);
    END IF;
END
$$;

-- Releases the lock `p_key` if `p_owner` holds it: true when its lease was still running,
-- false when it had ended, NULL when the lock was not `p_owner`'s (nothing changed). When a
-- contender other than the releasing process `p_name` waits in line, the row is left to the
-- one that waited longest for `p_window_ms` (owner `~` and its name: only it may take the
-- lock then), else deleted; either way the channel `leasehold` hears `p_wake`. Without the
-- line, the releasing process's own next waiter, which needs no wake-up, would win every time.
CREATE OR REPLACE FUNCTION leasehold_release(
    p_key text, p_owner text, p_name text, p_window_ms bigint, p_wake text)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    valid boolean;
BEGIN
    SELECT l.expires > clock_timestamp() INTO valid
        FROM leasehold_locks AS l
        WHERE l.key = p_key AND l.owner = p_owner
        FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM leasehold_pass_on(p_key, p_name, p_window_ms, p_wake);
    RETURN valid;
END
$$;

-- A contender stopped waiting without the lock: it leaves the line; if a release had just left
-- the lock to it, the lock goes on to the next in line at once (or is freed), and the waiters
-- hear it, instead of everyone waiting out the window. True when the lock had been left to it.
CREATE OR REPLACE FUNCTION leasehold_withdraw(
    p_key text, p_name text, p_window_ms bigint, p_wake text)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    left_to_me boolean;
BEGIN
    -- The row first, as every other change of the line does.
    PERFORM 1 FROM leasehold_locks AS l
        WHERE l.key = p_key AND l.owner = '~' || p_name
        FOR UPDATE;
    left_to_me := FOUND;
    DELETE FROM leasehold_waiters AS w WHERE w.key = p_key AND w.name = p_name;
    IF NOT left_to_me THEN
        RETURN false;
    END IF;
    PERFORM leasehold_pass_on(p_key, p_name, p_window_ms, p_wake);
    RETURN true;
END
$$;

-- In the caller's transaction: whether the holder of fence `p_fence` still holds the lock
-- stored as `p_key`. Holds the lock's advisory lock shared until the transaction ends, so
-- nobody can take the lock over before the transaction's writes are committed, while
-- renewals go on. Under REPEATABLE READ or SERIALIZABLE it also key-share locks the row, so
-- a row changed after the transaction's snapshot fails the check with a serialization
-- failure instead of passing on an old view. It then bounds how long the transaction may wait
-- for its client between statements to the lease left plus 5 s (never longer than a bound the
-- session set already): a holder stalled inside it (stopped, cut off) keeps the lock at most
-- that long after its lease ended.
CREATE OR REPLACE FUNCTION leasehold_check_fence(p_key text, p_fence bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 3
DECLARE
    h constant bigint := hashtextextended(p_key, 0);
    left_ms bigint;
    idle_ms bigint;
    set_ms bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared((h >> 32)::int, (h << 32 >> 32)::int);
    IF current_setting('transaction_isolation') = 'read committed' THEN
        SELECT ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint
            INTO left_ms
            FROM leasehold_locks AS l
            WHERE l.key = p_key
              AND l.fence / 32 = p_fence / 32 AND p_fence <= l.fence
              AND l.expires > clock_timestamp()
              AND left(l.owner, 1) <> '~';
    ELSE
        SELECT ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint
            INTO left_ms
            FROM leasehold_locks AS l
            WHERE l.key = p_key
              AND l.fence / 32 = p_fence / 32 AND p_fence <= l.fence
              AND l.expires > clock_timestamp()
              AND left(l.owner, 1) <> '~'
            FOR KEY SHARE;
    END IF;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    idle_ms := greatest(left_ms, 1) + 5000;
    SELECT s.setting::bigint INTO set_ms
        FROM pg_settings AS s WHERE s.name = 'idle_in_transaction_session_timeout';
    IF set_ms = 0 OR set_ms > idle_ms THEN
        PERFORM set_config('idle_in_transaction_session_timeout', idle_ms::text, true);
    END IF;
    RETURN true;
END
$$;
"#;

/// Whether the schema is there, with this version's functions (their bodies carry the tag
/// `leasehold schema 3`: an older database gets the new bodies); read before creating it.
const SCHEMA_PRESENT: &str = "SELECT to_regclass('leasehold_locks') IS NOT NULL \
     AND to_regclass('leasehold_fences') IS NOT NULL \
     AND to_regclass('leasehold_waiters') IS NOT NULL \
     AND (SELECT count(*) FROM pg_proc WHERE prosrc LIKE '%leasehold schema 3%' AND oid IN (\
          to_regprocedure('leasehold_acquire(text,text,bigint,bigint,text,bigint,boolean)'), \
          to_regprocedure('leasehold_acquire(text,text,bigint,bigint)'), \
          to_regprocedure('leasehold_wait_in_line(text,text,bigint)'), \
          to_regprocedure('leasehold_next_in_line(text,text)'), \
          to_regprocedure('leasehold_release(text,text,text,bigint,text)'), \
          to_regprocedure('leasehold_withdraw(text,text,bigint,text)'), \
          to_regprocedure('leasehold_pass_on(text,text,bigint,text)'), \
          to_regprocedure('leasehold_check_fence(text,bigint)'))) = 8";

/// Serializes the creation of the schema across processes (`CREATE ... IF NOT EXISTS` races).
const SCHEMA_LOCK: i64 = 0x6c65_6173_6568_6f6c; // "leasehol"

const ACQUIRE: &str =
    "SELECT fence, remaining_ms FROM leasehold_acquire($1, $2, $3, $4, $5, $6, $7)";

const RELEASE: &str = "SELECT leasehold_release($1, $2, $3, $4, $5)";

const WITHDRAW: &str = "SELECT leasehold_withdraw($1, $2, $3, $4)";

/// Runs every path of the lock functions once on a new connection, in a block whose work is
/// rolled back (the exception it raises at the end undoes it; a notification is not sent), on
/// the key `''` (no stored lock key is empty): a server compiles a plpgsql function and plans
/// its statements on its first call in each session, and that first call would otherwise be
/// some waiter's first attempt, late to join the line of waiters (tens of ms on a busy
/// server), so that a request that came later would be served first. Leaves nothing behind
/// but fence values drawn (fences only need to increase). Best effort: a connection whose
/// warm-up failed is used all the same.
const WARM_UP: &str = "DO $$ BEGIN \
     PERFORM leasehold_acquire('', '00000000000000000000000000000000', 60000, 1, '', 0, false); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, false); \
     PERFORM leasehold_release('', '00000000000000000000000000000000', '', 1, ''); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, true); \
     PERFORM leasehold_withdraw('', 'w', 1, ''); \
     RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'leasehold warm-up'; \
     EXCEPTION WHEN raise_exception THEN NULL; \
     END $$";

/// How long the next process in line has to take a lock that a release left to it (the row
/// holds its name meanwhile). Its waiter needs the notification and one round trip; a process
/// that stopped waiting without leaving the line costs the other waiters this much, once.
/// As on Redis.
const YIELD_WINDOW: Duration = Duration::from_millis(200);

/// The longest a waiting process stays in line without asking again. Waiters ask again at
/// least every second (a wake-up, or `MAX_SLEEP` in acquire.rs). As on Redis.
const MAX_INTEREST: Duration = Duration::from_secs(2);

const RENEW: &str = "UPDATE leasehold_locks AS l \
     SET expires = clock_timestamp() + b.ms * interval '1 millisecond' \
     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS b(key, owner, ms) \
     WHERE l.key = b.key AND l.owner = b.owner AND l.expires > clock_timestamp() \
     RETURNING l.key, l.owner";

/// A row left to the next in line (owner `~` and its name) is not held.
const INSPECT: &str = "SELECT l.fence, \
     CASE WHEN left(l.owner, 1) = '~' THEN NULL \
     ELSE ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint END, \
     (SELECT count(*) FROM leasehold_waiters AS w \
      WHERE w.key = $1 AND w.waits_until > clock_timestamp()) \
     FROM leasehold_locks AS l WHERE l.key = $1";

const LIST: &str = "SELECT key FROM leasehold_locks WHERE starts_with(key, $1) ORDER BY key";

const FORCE_RELEASE: &str = "WITH gone AS (\
     DELETE FROM leasehold_locks WHERE key = $1 \
     RETURNING expires > clock_timestamp() AND left(owner, 1) <> '~' AS held) \
     SELECT held, pg_notify('leasehold', $2) IS NULL FROM gone";

/// Deletes rows whose lease ended more than a second ago, a bounded number at a time; the
/// second condition is checked again on the row's newest version, so a row taken over
/// meanwhile stays. Rows another transaction has locked (a serializable fenced transaction
/// key-shares its row) are skipped, not waited for: the sweep runs on the listening
/// connection, which must not stall.
const SWEEP: &str = "DELETE FROM leasehold_locks WHERE key IN (\
     SELECT key FROM leasehold_locks \
     WHERE expires < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED) \
     AND expires < clock_timestamp() - interval '1 second'";

/// Deletes waiters whose wait ended more than a second ago (they died, or could not
/// withdraw), as [`SWEEP`] does rows: a release passes over them anyway.
const SWEEP_WAITERS: &str = "DELETE FROM leasehold_waiters WHERE (key, name) IN (\
     SELECT key, name FROM leasehold_waiters \
     WHERE waits_until < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED)";

/// Text as PostgreSQL stores it: `text` cannot hold NUL, which lock keys may contain. Every
/// `%` of a stored key already starts an escape (`%25`, `%7B`, `%7D`), so `%00` is free.
pub(crate) fn db_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        text.replace('\0', "%00").into()
    } else {
        text.into()
    }
}

/// A driver error with its causes: tokio-postgres shows only its kind ("db error", "error
/// connecting to server") and keeps the server's message or the OS error as the source.
pub(crate) fn error_text(e: &pg::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The user's key back from a stored lock key's escaped part.
fn from_db(escaped: &str) -> Option<String> {
    unescape(&escaped.replace("%00", "\0"))
}

/// The prepared statements of one connection.
struct Statements {
    acquire: pg::Statement,
    release: pg::Statement,
    renew: pg::Statement,
}

/// One connection for lock calls.
struct Conn {
    client: pg::Client,
    statements: Statements,
    driver: AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The driver would otherwise live on behind a stalled socket.
        self.driver.abort();
    }
}

/// The wake-up channels of the locks this process waits for, by wake key: each a log that
/// says for whom each release was (everyone, or the one contender it left the lock to).
#[derive(Default)]
struct Wakes {
    channels: Mutex<HashMap<String, watch::Sender<WakeLog>>>,
}

impl Wakes {
    fn subscribe(&self, wake: &str) -> watch::Receiver<WakeLog> {
        let mut channels = self.channels.lock().unwrap();
        if channels.len() >= 64 && channels.len().is_power_of_two() {
            channels.retain(|_, tx| tx.receiver_count() > 0);
        }
        channels
            .entry(wake.to_owned())
            .or_insert_with(|| watch::channel(WakeLog::default()).0)
            .subscribe()
    }

    /// A release of the lock whose wake key is `wake`, for everyone (`None`) or for the one
    /// contender it was left to.
    fn wake(&self, wake: &str, to: Option<Arc<str>>) {
        if let Some(tx) = self.channels.lock().unwrap().get(wake) {
            tx.send_modify(|log| log.push(to));
        }
    }

    fn wake_all(&self) {
        let mut channels = self.channels.lock().unwrap();
        channels.retain(|_, tx| tx.receiver_count() > 0);
        for tx in channels.values() {
            tx.send_modify(|log| log.push(None));
        }
    }
}

/// A notification heard: the wake key of the released lock, and the contender it was left to
/// (`None`: anyone may take it). Releases for everyone come on the channel `leasehold` with
/// the wake key as payload; releases that left the lock to a contender on `leasehold_turn`,
/// as its name (hex digits), a space and the wake key.
fn heard(channel: &str, payload: &str) -> (String, Option<Arc<str>>) {
    match (channel, payload.split_once(' ')) {
        ("leasehold_turn", Some((name, wake))) => (wake.to_owned(), Some(name.into())),
        _ => (payload.to_owned(), None),
    }
}

/// What the listener and the lock calls share.
struct Shared {
    config: pg::Config,
    shown: String,
    settings: Settings,
    wakes: Wakes,
}

/// The connections for lock calls, shared with the withdrawals that run in the background.
struct Pool {
    shared: Arc<Shared>,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
}

pub(crate) struct PostgresStore {
    pool: Arc<Pool>,
    shared: Arc<Shared>,
    /// True while the listening connection listens.
    listening: watch::Receiver<bool>,
    listener: AbortHandle,
    /// This process's name in the lines of waiters ([`contender_name`](crate::store::token::contender_name)).
    contender: Arc<str>,
    /// The lock keys whose line this process may be in under its own name: an acquire that
    /// would wait was sent for them, and neither a grant nor a withdrawal came since. Only
    /// these cost a round trip when their waiter leaves ([`Store::withdraw`]).
    queued: Mutex<HashSet<String>>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// `postgres://[user[:password]@]host[:port]/database?...`, parsed, for messages without
/// the password.
fn parse(url: &str) -> Result<(pg::Config, String), LockError> {
    let shown = super::settings::redact(url);
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(LockError::config(format!(
            "postgres needs a URL such as postgres://user:password@host:5432/database; got \
             {shown:?}"
        )));
    }
    let config = pg::Config::from_str(url).map_err(|e| {
        LockError::config(format!("postgres could not read the URL {shown:?}: {e}"))
    })?;
    if config.get_hosts().is_empty() {
        return Err(LockError::config(format!(
            "postgres needs a host in its URL; got {shown:?}"
        )));
    }
    if config.get_ssl_mode() == pg::config::SslMode::Require {
        return Err(LockError::config(format!(
            "postgres: sslmode=require is not supported yet (this engine connects without \
             TLS); reach the server over a trusted network or a local TLS tunnel and drop \
             sslmode from {shown:?}"
        )));
    }
    Ok((config, shown))
}

/// Checks a URL without connecting.
pub(crate) fn validate(url: &str) -> Result<(), LockError> {
    parse(url).map(drop)
}

impl Shared {
    fn unavailable(&self, what: &str, e: pg::Error) -> LockError {
        if let Some(config) = self.refused(&e) {
            return config;
        }
        LockError::unavailable(
            format!("PostgreSQL at {} {what}: {}", self.shown, error_text(&e)),
            Some(Box::new(e)),
        )
    }

    /// The errors that retrying will not mend: credentials, a database or schema that is
    /// not there, privileges.
    fn refused(&self, e: &pg::Error) -> Option<LockError> {
        use pg::error::SqlState;
        let code = e.code()?;
        let hint = if *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        {
            "refused the user name or password"
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            "has no such database"
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            "refused a privilege the lock tables need (apply leasehold::postgres::SCHEMA as \
             the tables' owner, and grant this user SELECT, INSERT, UPDATE, DELETE on \
             leasehold_locks and leasehold_waiters, USAGE, UPDATE on leasehold_fences and EXECUTE on the functions)"
        } else if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::UNDEFINED_FUNCTION {
            "lacks the lock tables in this connection's search_path (apply \
             leasehold::postgres::SCHEMA there)"
        } else {
            return None;
        };
        Some(LockError::Config {
            message: format!("PostgreSQL at {} {hint}: {}", self.shown, error_text(e)),
            source: None,
        })
    }

    fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!(
                "PostgreSQL at {} did not answer within {limit:?}",
                self.shown
            ),
            None,
        )
    }

    /// A new connection whose driver runs on its own task, its notifications (if any) sent
    /// to `notices`. Bounded by the connect timeout.
    async fn open(
        &self,
        notices: Option<tokio::sync::mpsc::UnboundedSender<(String, Option<Arc<str>>)>>,
    ) -> Result<(pg::Client, AbortHandle), LockError> {
        let limit = self.settings.connect_timeout;
        let (client, mut connection) =
            match tokio::time::timeout(limit, self.config.connect(pg::NoTls)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(self.unavailable("could not be reached", e)),
                Err(_) => return Err(self.late(limit)),
            };
        let driver = tokio::spawn(async move {
            loop {
                match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(pg::AsyncMessage::Notification(n))) => {
                        if let Some(tx) = &notices {
                            let _ = tx.send(heard(n.channel(), n.payload()));
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => return,
                }
            }
        })
        .abort_handle();
        // Keep the server from working on a call after the client stopped waiting for it,
        // and from waiting long on a row another transaction locked (a fenced write).
        let op = self.settings.op_timeout.as_millis().max(1);
        let setup = format!(
            "SET statement_timeout = {op}; SET lock_timeout = {}; \
             SET idle_in_transaction_session_timeout = {}",
            (op / 2).max(1),
            op * 4
        );
        match tokio::time::timeout(limit, client.batch_execute(&setup)).await {
            Ok(Ok(())) => Ok((client, driver)),
            Ok(Err(e)) => {
                driver.abort();
                Err(self.unavailable("refused the session settings", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late(limit))
            }
        }
    }

    /// Creates the schema when it is missing, under an advisory lock that serializes lockers
    /// starting together.
    async fn ensure_schema(&self, client: &mut pg::Client) -> Result<(), LockError> {
        let present = |row: pg::Row| row.get::<_, bool>(0);
        let found = client
            .query_one(SCHEMA_PRESENT, &[])
            .await
            .map_err(|e| self.unavailable("refused a read of its catalog", e))?;
        if present(found) {
            return Ok(());
        }
        let create = async {
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                .await?;
            let found = tx.query_one(SCHEMA_PRESENT, &[]).await?;
            if !present(found) {
                tx.batch_execute(SCHEMA).await?;
            }
            tx.commit().await
        };
        create.await.map_err(|e| {
            if e.code() == Some(&pg::error::SqlState::INSUFFICIENT_PRIVILEGE) {
                LockError::config(format!(
                    "PostgreSQL at {} does not let this user create the lock tables; apply \
                     leasehold::postgres::SCHEMA as a user that may (once), then grant this \
                     one SELECT, INSERT, UPDATE, DELETE on leasehold_locks and \
                     leasehold_waiters, USAGE, UPDATE on \
                     leasehold_fences and EXECUTE on the functions: {}",
                    self.shown,
                    error_text(&e)
                ))
            } else {
                self.unavailable("could not create the lock tables", e)
            }
        })
    }

    async fn open_for_locks(&self) -> Result<Conn, LockError> {
        let (client, driver) = self.open(None).await?;
        let limit = self.settings.connect_timeout;
        let prepare = async {
            use pg::types::Type;
            let acquire = client
                .prepare_typed(
                    ACQUIRE,
                    &[
                        Type::TEXT,
                        Type::TEXT,
                        Type::INT8,
                        Type::INT8,
                        Type::TEXT,
                        Type::INT8,
                        Type::BOOL,
                    ],
                )
                .await?;
            let release = client
                .prepare_typed(
                    RELEASE,
                    &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT],
                )
                .await?;
            let renew = client
                .prepare_typed(
                    RENEW,
                    &[Type::TEXT_ARRAY, Type::TEXT_ARRAY, Type::INT8_ARRAY],
                )
                .await?;
            let _ = client.batch_execute(WARM_UP).await;
            Ok::<_, pg::Error>(Statements {
                acquire,
                release,
                renew,
            })
        };
        match tokio::time::timeout(limit, prepare).await {
            Ok(Ok(statements)) => Ok(Conn {
                client,
                statements,
                driver,
            }),
            Ok(Err(e)) => {
                driver.abort();
                Err(self.unavailable("refused to prepare the lock statements", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late(limit))
            }
        }
    }
}

impl PostgresStore {
    /// Connects, creates the schema if it is missing, and starts listening for releases;
    /// fails with `Unavailable` when the server does not answer within the connect timeout,
    /// with `Config` when it refuses the credentials, the database or the schema.
    pub(crate) async fn connect(url: &str, settings: &Settings) -> Result<Self, LockError> {
        let (config, shown) = parse(url)?;
        let shared = Arc::new(Shared {
            config,
            shown,
            settings: settings.clone(),
            wakes: Wakes::default(),
        });
        let (mut first, driver) = shared.open(None).await?;
        let limit = settings.connect_timeout;
        match tokio::time::timeout(limit, shared.ensure_schema(&mut first)).await {
            Ok(result) => result?,
            Err(_) => return Err(shared.late(limit)),
        }
        drop(first);
        driver.abort();
        let (up_tx, up_rx) = watch::channel(false);
        let listener = tokio::spawn(listen(Arc::downgrade(&shared), up_tx)).abort_handle();
        let store = PostgresStore {
            pool: Arc::new(Pool {
                shared: shared.clone(),
                slots: (0..POOL).map(|_| tokio::sync::Mutex::new(None)).collect(),
                next: AtomicUsize::new(0),
            }),
            shared,
            listening: up_rx,
            listener,
            contender: crate::store::token::contender_name().into(),
            queued: Mutex::default(),
        };
        // Every connection for lock calls now, side by side: a bad URL fails here rather than
        // later (the first one's error), and the first burst of acquires does not wait behind
        // connections being opened, which would let a request that came later reach the line
        // of waiters first. The others open again on use if they failed.
        let opened = super::join_all((0..POOL).map(|i| store.pool.conn(i))).await;
        if let Some(Err(e)) = opened.into_iter().next() {
            return Err(e);
        }
        store.wait_listening(limit).await?;
        Ok(store)
    }

    async fn wait_listening(&self, limit: Duration) -> Result<(), LockError> {
        let mut up = self.listening.clone();
        let listening = tokio::time::timeout(limit, up.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok());
        match listening {
            true => Ok(()),
            false => Err(LockError::unavailable(
                format!(
                    "PostgreSQL at {} did not let this locker listen for releases within \
                     {limit:?}",
                    self.shared.shown
                ),
                None,
            )),
        }
    }

    /// Runs one call on a pooled connection within the operation timeout (see [`Pool::call`]).
    async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        self.pool.call(what, f).await
    }
}

impl Pool {
    /// The connection of slot `i`, opened when it has none or its last one failed.
    async fn conn(&self, i: usize) -> Result<Arc<Conn>, LockError> {
        let mut slot = self.slots[i].lock().await;
        if let Some(conn) = slot.as_ref() {
            if !conn.client.is_closed() {
                return Ok(conn.clone());
            }
        }
        *slot = None;
        let conn = Arc::new(self.shared.open_for_locks().await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets slot `i`'s connection if it is still `conn` (it failed or timed out).
    fn discard(&self, i: usize, conn: &Arc<Conn>) {
        if let Ok(mut slot) = self.slots[i].try_lock() {
            if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                *slot = None;
            }
        } else {
            // Someone is replacing it already, or using the slot's lock briefly: the
            // connection's driver ends with it, and `is_closed` tells the next caller.
            conn.driver.abort();
        }
    }

    /// Runs one call on a pooled connection within the operation timeout. A call that
    /// failed because its connection was closed (the server restarted) is sent once more on
    /// a new one: every statement here may run twice.
    async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        let limit = self.shared.settings.op_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % POOL;
        let mut retried = false;
        loop {
            let conn = match tokio::time::timeout_at(deadline, self.conn(i)).await {
                Ok(conn) => conn?,
                Err(_) => return Err(self.shared.late(limit)),
            };
            match tokio::time::timeout_at(deadline, f(conn.clone())).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if e.is_closed() && !retried => {
                    self.discard(i, &conn);
                    retried = true;
                }
                Ok(Err(e)) => {
                    if e.code().is_none() {
                        self.discard(i, &conn);
                    }
                    return Err(self.shared.unavailable(what, e));
                }
                Err(_) => {
                    self.discard(i, &conn);
                    return Err(self.shared.late(limit));
                }
            }
        }
    }
}

impl PostgresStore {
    async fn acquire_once(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        debug_assert!(
            req.fences < FENCE_SLOTS,
            "fences of one acquisition overflow"
        );
        let key = db_text(req.keys.lock());
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let fences = req.fences as i64;
        let name: &str = req.contender.unwrap_or(&self.contender);
        let wait_ms = match req.interest.is_zero() {
            true => 0,
            false => req.interest.min(MAX_INTEREST).as_millis().max(1) as i64,
        };
        let queued = req.queued;
        // Recorded before sending: an acquire dropped before its answer may have queued us.
        let waits_as_process = wait_ms > 0 && req.contender.is_none();
        if waits_as_process {
            self.queued_set().insert(req.keys.lock().to_owned());
        }
        let answer = self
            .call("refused an acquire", |conn| {
                let (key, owner) = (key.clone(), owner);
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 7] = [
                        &key.as_ref(),
                        &owner,
                        &lease_ms,
                        &fences,
                        &name,
                        &wait_ms,
                        &queued,
                    ];
                    conn.client
                        .query_one(&conn.statements.acquire, &params)
                        .await
                }
            })
            .await;
        let row = match answer {
            Ok(row) => row,
            // A row locked past lock_timeout by another session (not ours: fenced transactions
            // hold an advisory lock, not the row): held.
            Err(LockError::Unavailable {
                source: Some(source),
                ..
            }) if is_lock_timeout(&*source) => {
                return Ok(Attempt::Held { remaining: None });
            }
            Err(e) => return Err(e),
        };
        let fence: Option<i64> = row.get(0);
        let remaining: Option<i64> = row.get(1);
        if waits_as_process && fence.is_some() {
            // The grant took us out of the line (leasehold_acquire).
            self.queued_set().remove(req.keys.lock());
        }
        Ok(match fence {
            Some(top) => Attempt::Granted { top: top as u64 },
            None => Attempt::Held {
                remaining: remaining.map(|ms| Duration::from_millis(ms.max(1) as u64)),
            },
        })
    }

    /// Deletes the lock if `token` owns it. `valid_until`: until when its holder counts the
    /// lease as valid, if known.
    async fn release_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        valid_until: Option<tokio::time::Instant>,
    ) -> Result<bool, LockError> {
        let key = db_text(keys.lock());
        let wake = db_text(keys.wake());
        let owner = token_text(token);
        let name: &str = &self.contender;
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let sent = AtomicUsize::new(0);
        let row = self
            .call("refused a release", |conn| {
                let (key, wake) = (key.clone(), wake.clone());
                sent.fetch_add(1, Ordering::Relaxed);
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 5] =
                        [&key.as_ref(), &owner, &name, &window_ms, &wake.as_ref()];
                    conn.client
                        .query_one(&conn.statements.release, &params)
                        .await
                }
            })
            .await?;
        Ok(match row.get::<_, Option<bool>>(0) {
            Some(valid) => valid,
            // Sent again on a new connection after the first one closed: the first may have
            // deleted the row, its answer lost. The row of a lease still valid when this
            // answer came cannot have expired on the server (its expiry is later than the
            // holder's validity), so only a delete removed it: the first attempt, or an
            // operator's force_release at that very moment, which reads as this release.
            None => {
                sent.load(Ordering::Relaxed) > 1
                    && valid_until.is_some_and(|v| tokio::time::Instant::now() < v)
            }
        })
    }

    async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut out = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(RENEW_CHUNK) {
            out.extend(self.renew_split(chunk).await?);
        }
        Ok(out)
    }

    /// Renews `batch` in one statement. When the server refuses that statement (an error with
    /// an SQLSTATE: a row waited on past `lock_timeout`, anything about one of its leases),
    /// each half is renewed on its own, down to single leases, and a single lease refused
    /// reads [`Renewed::Unknown`] (the watchdog retries it): one lease that cannot be renewed
    /// now never fails the others. A connection that failed or timed out still fails the whole
    /// batch: every lease on it is as much in doubt.
    fn renew_split<'a>(&'a self, batch: &'a [Renewal<'a>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(async move {
            match self.renew_statement(batch).await {
                Err(e) if sql_state(&e).is_some() => {
                    if batch.len() == 1 {
                        return Ok(vec![Renewed::Unknown]);
                    }
                    let (first, second) = batch.split_at(batch.len() / 2);
                    let mut out = self.renew_split(first).await?;
                    out.extend(self.renew_split(second).await?);
                    Ok(out)
                }
                other => other,
            }
        })
    }

    /// One renewal statement for every lease of `batch`.
    async fn renew_statement(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let keys: Vec<String> = batch
            .iter()
            .map(|r| db_text(r.keys.lock()).into_owned())
            .collect();
        let owners: Vec<&str> = batch.iter().map(|r| token_text(r.token)).collect();
        let leases: Vec<i64> = batch
            .iter()
            .map(|r| r.lease.as_millis().max(1) as i64)
            .collect();
        let rows = self
            .call("refused a renewal", |conn| {
                let (keys, owners, leases) = (&keys, &owners, &leases);
                async move {
                    conn.client
                        .query(&conn.statements.renew, &[keys, owners, leases])
                        .await
                }
            })
            .await?;
        let extended: HashSet<(String, String)> = rows
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
            .collect();
        Ok(keys
            .iter()
            .zip(&owners)
            .map(|(key, owner)| {
                if extended.contains(&(key.clone(), (*owner).to_owned())) {
                    Renewed::Yes
                } else {
                    Renewed::No
                }
            })
            .collect())
    }

    /// The lock keys this process may be in line for (never poisoned: nothing panics while
    /// holding it, and a set of names is valid after any panic).
    fn queued_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The front waiter of this process stopped waiting without the lock: the process leaves
    /// the line in the background (`leasehold_withdraw`), and a release that had left it the
    /// lock passes it on. Costs nothing when this process was not in line (a `try_acquire`).
    /// Without it (no runtime, the server unreachable) the process's place still lapses at
    /// most [`MAX_INTEREST`] after its last attempt.
    fn withdraw_process(&self, keys: &LockKeys) {
        if self.queued_set().remove(keys.lock()) {
            self.withdraw_in_background(keys, self.contender.clone());
        }
    }

    /// Runs `leasehold_withdraw` for `name` without blocking the caller.
    fn withdraw_in_background(&self, keys: &LockKeys, name: Arc<str>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the place lapses by itself
        };
        let pool = self.pool.clone();
        let key = db_text(keys.lock()).into_owned();
        let wake = db_text(keys.wake()).into_owned();
        runtime.spawn(async move {
            let window_ms = YIELD_WINDOW.as_millis() as i64;
            let params: [&(dyn pg::types::ToSql + Sync); 4] =
                [&key, &name.as_ref(), &window_ms, &wake];
            let done = pool
                .call("refused a withdrawal", |conn| async move {
                    conn.client.query(WITHDRAW, &params).await
                })
                .await;
            if let Err(e) = done {
                tracing::debug!(error = %e, "withdrawing a waiter failed; its place lapses");
            }
        });
    }

    async fn subscribe_once(&self, keys: &LockKeys) -> Result<WakeSubscription, LockError> {
        // Registered first: should the listener drop after this, its return wakes us.
        let rx = self.shared.wakes.subscribe(&db_text(keys.wake()));
        self.wait_listening(self.shared.settings.op_timeout).await?;
        Ok(WakeSubscription::addressed(rx, None))
    }

    /// One statement on a pooled connection, unprepared (the operator's calls).
    async fn query(
        &self,
        what: &str,
        sql: &'static str,
        params: &[&(dyn pg::types::ToSql + Sync)],
    ) -> Result<Vec<pg::Row>, LockError> {
        self.call(
            what,
            |conn| async move { conn.client.query(sql, params).await },
        )
        .await
    }
}

fn token_text(token: &OwnerToken) -> &str {
    // 32 lowercase hex digits.
    std::str::from_utf8(token.as_bytes()).unwrap_or_default()
}

/// The SQLSTATE of a statement the server refused, if that is what `e` is.
fn sql_state(e: &LockError) -> Option<&pg::error::SqlState> {
    match e {
        LockError::Unavailable {
            source: Some(source),
            ..
        } => source.downcast_ref::<pg::Error>().and_then(pg::Error::code),
        _ => None,
    }
}

fn is_lock_timeout(source: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    source
        .downcast_ref::<pg::Error>()
        .and_then(pg::Error::code)
        .is_some_and(|code| *code == pg::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// The listening connection: listens, wakes the waiters of each released lock, checks that it
/// is alive, sweeps old rows; reconnects when it dropped and wakes everyone then. Ends with
/// the store.
async fn listen(shared: Weak<Shared>, up: watch::Sender<bool>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(store) = shared.upgrade() else {
            return;
        };
        let (tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
        let opened = store.open(Some(tx)).await;
        let op = store.settings.op_timeout;
        let (client, driver) = match opened {
            Ok(pair) => pair,
            Err(_) => {
                drop(store);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let listening = tokio::time::timeout(
            op,
            client.batch_execute("LISTEN leasehold; LISTEN leasehold_turn"),
        )
        .await;
        if !matches!(listening, Ok(Ok(()))) {
            driver.abort();
            drop(store);
            tokio::time::sleep(backoff).await;
            continue;
        }
        backoff = Duration::from_millis(50);
        up.send_replace(true);
        // Releases while nobody listened were missed: everyone looks again.
        store.wakes.wake_all();
        drop(store);
        let mut check = tokio::time::interval(LISTENER_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                notice = notices.recv() => {
                    let (Some((wake, to)), Some(store)) = (notice, shared.upgrade()) else { break };
                    store.wakes.wake(&wake, to);
                }
                _ = check.tick() => {
                    let alive = tokio::time::timeout(op, client.simple_query("SELECT 1")).await;
                    if !matches!(alive, Ok(Ok(_))) {
                        break;
                    }
                }
                _ = sweep.tick() => {
                    // Best effort: the next sweep, or an acquirer, takes what this one left.
                    let _ = tokio::time::timeout(op, client.execute(SWEEP, &[])).await;
                    let _ = tokio::time::timeout(op, client.execute(SWEEP_WAITERS, &[])).await;
                }
            }
        }
        up.send_replace(false);
        driver.abort();
        drop(client);
        if let Some(store) = shared.upgrade() {
            store.wakes.wake_all();
        }
    }
}

/// The lock key of a stored row, if it is a lock of `prefix`: the user's key.
fn user_key_of(stored: &str, lock_prefix: &str) -> Option<String> {
    let escaped = stored.strip_prefix(lock_prefix)?.strip_suffix('}')?;
    from_db(escaped)
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        format!("PostgreSQL at {}", self.shared.shown)
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_once(req))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, None))
    }

    fn release_held<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        valid_until: tokio::time::Instant,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, Some(valid_until)))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    fn admin(&self) -> Result<&dyn Admin, LockError> {
        Ok(self)
    }

    /// Fair per request: a fair request waits in leasehold_waiters under its own name, and
    /// the release that leaves the lock to it says so on `leasehold_turn`.
    fn capabilities(&self) -> super::Capabilities {
        super::Engine::Postgres.capabilities(Duration::ZERO)
    }

    fn withdraw(&self, keys: &LockKeys) {
        self.withdraw_process(keys);
    }

    fn withdraw_request(&self, keys: &LockKeys, contender: &str) {
        self.withdraw_in_background(keys, contender.into());
    }
}

impl Admin for PostgresStore {
    fn inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let rows = self.query("refused a read", INSPECT, &[&key]).await?;
            let Some(row) = rows.first() else {
                return Ok(LockState::default());
            };
            let fence: i64 = row.get(0);
            let remaining: Option<i64> = row.get(1);
            let remaining = remaining.filter(|ms| *ms > 0);
            let waiting: i64 = row.get(2);
            Ok(LockState {
                held: remaining.is_some(),
                remaining: remaining.map(|ms| Duration::from_millis(ms as u64)),
                waiters: waiting > 0,
                waiting_processes: waiting.max(0) as u64,
                last_fence: (fence > 0).then_some(fence as u64),
            })
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let lock_prefix = format!("{}:lock:{{", db_text(prefix));
            let rows = self.query("refused a read", LIST, &[&lock_prefix]).await?;
            Ok(rows
                .iter()
                .filter_map(|row| user_key_of(row.get(0), &lock_prefix))
                .collect())
        })
    }

    fn force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let wake = db_text(keys.wake()).into_owned();
            let rows = self
                .query("refused a delete", FORCE_RELEASE, &[&key, &wake])
                .await?;
            Ok(rows.first().is_some_and(|row| row.get::<_, bool>(0)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_bounds_fenced_transactions_by_the_documented_margin() {
        let margin = crate::postgres::FENCED_IDLE_MARGIN.as_millis();
        assert!(SCHEMA.contains(&format!("greatest(left_ms, 1) + {margin};")));
    }

    #[test]
    fn keys_with_nul_round_trip_through_the_table() {
        let keys = LockKeys::new("p", "a\0b%00{c}");
        let stored = db_text(keys.lock());
        assert!(!stored.contains('\0'), "{stored}");
        assert_eq!(
            user_key_of(&stored, "p:lock:{").as_deref(),
            Some("a\0b%00{c}")
        );
    }

    #[test]
    fn urls_are_checked_without_showing_passwords() {
        for bad in [
            "redis://localhost",
            "postgres://u:s3cret@h/db?sslmode=require",
            "postgres://u:s3cret@h/db?bogus=1",
        ] {
            let e = validate(bad).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert!(validate("postgres://u:pw@127.0.0.1:5432/db").is_ok());
        assert!(validate("postgresql://localhost/db?application_name=x").is_ok());
    }
}
