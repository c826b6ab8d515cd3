-- The schema of the PostgreSQL engine, as `leasehold::postgres::SCHEMA` hands it to operators:
-- the lease table `leasehold_locks`, the line of waiters `leasehold_waiters`, the fence
-- sequence `leasehold_fences` and the `leasehold_*` functions every lock call runs.
-- Idempotent; needs PostgreSQL 11 or later. The engine applies it itself on first use, and
-- again over an older version's functions: each function body carries the version tag that
-- the engine's catalog check (`SCHEMA_PRESENT` in schema.rs) looks for, so a change to any
-- body bumps that tag in every body and in the check.

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
