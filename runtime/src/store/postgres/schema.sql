-- The schema of the PostgreSQL engine, as `leasehold::postgres::SCHEMA` hands it to operators:
-- the lease table `leasehold_locks`, the line of waiters `leasehold_waiters`, the fence
-- sequence `leasehold_fences`, the readers of read-write locks `leasehold_readers`, the
-- semaphores `leasehold_semaphores` and their holders `leasehold_permits`, the leader records
-- `leasehold_leaders`, the lockers' descriptions `leasehold_lockers`, and the `leasehold_*`
-- functions every lock call runs.
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
-- leasehold schema 9
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

-- The engine's one fence rule, for writers, readers and semaphore holders alike: a new slot
-- for the key whose row last held `p_last_slot` (0 for none), as the greatest of the
-- sequence's next value, the server clock in units of 32 microseconds and `p_last_slot` + 1;
-- the sequence is then lifted to it. A holder's fences are `slot * 32 + n` (writers: n from 1
-- up to the tokens reserved; readers: n = 0; semaphore holders: n = 1). So fences keep
-- increasing for a key, and stay near the clock in microseconds like Redis fences, even when
-- the sequence went back (a restored backup, a promoted asynchronous standby), while the
-- server clock does not step back by more than that took. Called with the key's row locked.
CREATE OR REPLACE FUNCTION leasehold_draw_slot(p_last_slot bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    drawn constant bigint := nextval('leasehold_fences');
    slot bigint;
BEGIN
    slot := greatest(drawn,
                     (extract(epoch FROM clock_timestamp()) * 1000000)::bigint / 32,
                     p_last_slot + 1);
    -- Without UPDATE on the sequence (an operator's older grants) fences still follow the
    -- clock; only a clock stepping back is no longer covered.
    IF slot > drawn AND has_sequence_privilege('leasehold_fences', 'UPDATE') THEN
        PERFORM setval('leasehold_fences', slot);
    END IF;
    RETURN slot;
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
-- Fences: slot * 32 + n, the slot drawn by leasehold_draw_slot while the row is locked (not in
-- the INSERT's VALUES: a statement paused between drawing and inserting could take the lock
-- after a later drawer released it, with a smaller fence).
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
-- leasehold schema 9
DECLARE
    h constant bigint := hashtextextended(p_key, 0);
    holder text;
    last_slot bigint;
    slot bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock((h >> 32)::int, (h << 32 >> 32)::int) THEN
        -- The row first, as every other change of the line does (FOR NO KEY UPDATE: a fenced
        -- transaction's key-share lock does not hold it up): a release choosing the next in
        -- line either sees this join or has finished before it. A lock that is free or whose
        -- lease ended has no line to join: a release that freed it chose no one, and a waiter
        -- joining now would be passed by whoever takes it next; ask again soon instead.
        SELECT l.owner,
               greatest(1, ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000))::bigint
            INTO holder, remaining_ms
            FROM leasehold_locks AS l WHERE l.key = p_key AND l.expires > clock_timestamp()
            FOR NO KEY UPDATE;
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
        IF p_wait_ms > 0 AND holder IS NOT NULL THEN
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
        slot := leasehold_draw_slot(last_slot);
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
-- leasehold schema 9
SELECT a.fence, a.remaining_ms FROM leasehold_acquire(p_key, p_owner, p_lease_ms, p_fences, '', 0, false) AS a
$$;

-- Puts `p_name` in line for `p_key` (keeping its first arrival) until `p_wait_ms` from now.
CREATE OR REPLACE FUNCTION leasehold_wait_in_line(p_key text, p_name text, p_wait_ms bigint)
RETURNS void
LANGUAGE sql AS $$
-- leasehold schema 9
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
-- leasehold schema 9
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
-- leasehold schema 9
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

-- Several locks' releases in one statement (a guard's keys given back together, releases that
-- met on their way): leasehold_release of each, the rows taken in the keys' order (as a batch of
-- acquires takes them), each answer at its key's place. A row locked past the lock timeout (a
-- fenced transaction of that lock still open) fails the statement, and with it every release
-- in it: the caller then releases each by itself, so that one busy lock holds up no other.
CREATE OR REPLACE FUNCTION leasehold_release_all(
    p_keys text[], p_owners text[], p_name text, p_window_ms bigint, p_wakes text[])
RETURNS boolean[]
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    n constant integer := coalesce(array_length(p_keys, 1), 0);
    answers boolean[] := array_fill(NULL::boolean, ARRAY[n]);
    i integer;
BEGIN
    FOR i IN SELECT o.i FROM generate_subscripts(p_keys, 1) AS o(i) ORDER BY p_keys[o.i] LOOP
        answers[i] := leasehold_release(p_keys[i], p_owners[i], p_name, p_window_ms, p_wakes[i]);
    END LOOP;
    RETURN answers;
END
$$;

-- A contender stopped waiting without the lock: it leaves the line; if a release had just left
-- the lock to it, the lock goes on to the next in line at once (or is freed), and the waiters
-- hear it, instead of everyone waiting out the window. True when the lock had been left to it.
CREATE OR REPLACE FUNCTION leasehold_withdraw(
    p_key text, p_name text, p_window_ms bigint, p_wake text)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 9
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
-- stored as `p_key`: its writer (the fences of writers are `slot * 32 + n`, n >= 1), or one of
-- its readers (a reader's fence is `slot * 32`, its own, in leasehold_readers). Holds the lock's
-- advisory lock shared until the transaction ends, so nobody can take the lock over (no writer
-- can take it from its readers either) before the transaction's writes are committed, while
-- renewals go on; other readers still come and go. Under REPEATABLE READ or SERIALIZABLE it
-- also key-share locks the holder's row (the lock's row for a writer, the reader's own row for
-- a reader), so a row changed after the transaction's snapshot fails the check with a
-- serialization failure instead of passing on an old view. It then bounds how long the
-- transaction may wait for its client between statements to the lease left plus 5 s (never
-- longer than a bound the session set already): a holder stalled inside it (stopped, cut off)
-- keeps the lock at most that long after its lease ended.
CREATE OR REPLACE FUNCTION leasehold_check_fence(p_key text, p_fence bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    h constant bigint := hashtextextended(p_key, 0);
    snapshot_reads constant boolean := current_setting('transaction_isolation') <> 'read committed';
    left_ms bigint;
    idle_ms bigint;
    set_ms bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared((h >> 32)::int, (h << 32 >> 32)::int);
    -- Its writer first; then one of its readers (a reader's fence is never a writer's: a
    -- reader has a slot of its own, and n = 0).
    IF snapshot_reads THEN
        SELECT ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint
            INTO left_ms
            FROM leasehold_locks AS l
            WHERE l.key = p_key
              AND l.fence / 32 = p_fence / 32 AND p_fence <= l.fence
              AND l.expires > clock_timestamp()
              AND left(l.owner, 1) NOT IN ('~', 'R')
            FOR KEY SHARE;
    ELSE
        SELECT ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint
            INTO left_ms
            FROM leasehold_locks AS l
            WHERE l.key = p_key
              AND l.fence / 32 = p_fence / 32 AND p_fence <= l.fence
              AND l.expires > clock_timestamp()
              AND left(l.owner, 1) NOT IN ('~', 'R');
    END IF;
    IF NOT FOUND THEN
        IF snapshot_reads THEN
            SELECT ceil(extract(epoch FROM r.expires - clock_timestamp()) * 1000)::bigint
                INTO left_ms
                FROM leasehold_readers AS r
                WHERE r.key = p_key AND r.fence = p_fence AND r.expires > clock_timestamp()
                  AND EXISTS (SELECT 1 FROM leasehold_locks AS l
                              WHERE l.key = p_key AND l.owner = 'R'
                                AND l.expires > clock_timestamp())
                FOR KEY SHARE OF r;
        ELSE
            SELECT ceil(extract(epoch FROM r.expires - clock_timestamp()) * 1000)::bigint
                INTO left_ms
                FROM leasehold_readers AS r
                WHERE r.key = p_key AND r.fence = p_fence AND r.expires > clock_timestamp()
                  AND EXISTS (SELECT 1 FROM leasehold_locks AS l
                              WHERE l.key = p_key AND l.owner = 'R'
                                AND l.expires > clock_timestamp());
        END IF;
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

-- Read-write locks. While readers hold a lock, its row in leasehold_locks holds owner `R`, the
-- last reader's fence, and the end of the longest reader's lease; each reader has a lease of
-- its own here. Every change of the readers of a key locks the lock's row first (as writers'
-- acquires do): so no reader slips in between a writer's look at the row and its insert, and a
-- writer takes the row over only once it expired, i.e. once every reader's lease ended (or
-- the last reader left). Waiting writers are the line, leasehold_waiters: readers never queue.
CREATE TABLE IF NOT EXISTS leasehold_readers (
    key     text        NOT NULL,
    owner   text        NOT NULL,
    fence   bigint      NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (key, owner)
);

-- Takes a read lease of the lock `p_key` for `p_owner` if no writer holds the lock and none
-- waits for it (a live contender in leasehold_waiters: its wait ended or it withdrew, and it
-- holds nobody back). Granted: `fence` is the reader's, `slot * 32` of a slot drawn by the
-- writers' rule, so above every fence of the key before and below every later writer's. Held:
-- `remaining_ms` says when to look again.
--
-- A reader that joins readers holding the lock changes no holder, and needs no advisory lock;
-- one that takes the row over (free, or its holders' leases ended) takes it without waiting,
-- as writers do, and answers "held" when a fenced transaction holds it.
CREATE OR REPLACE FUNCTION leasehold_acquire_shared(
    p_key text, p_owner text, p_lease_ms bigint,
    OUT fence bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    h constant bigint := hashtextextended(p_key, 0);
    lease constant interval := p_lease_ms * interval '1 millisecond';
    holder text;
    ends timestamptz;
    last_fence bigint;
    joining boolean;
    writers_until timestamptz;
    drawn bigint;
BEGIN
    SELECT l.owner, l.expires, l.fence INTO holder, ends, last_fence
        FROM leasehold_locks AS l WHERE l.key = p_key
        FOR NO KEY UPDATE;
    joining := FOUND AND holder = 'R' AND ends > clock_timestamp();
    IF FOUND AND NOT joining AND ends > clock_timestamp() THEN
        -- A writer holds it, or a release left it to the next in line.
        remaining_ms := greatest(1, ceil(extract(epoch FROM ends - clock_timestamp()) * 1000))::bigint;
        RETURN;
    END IF;
    SELECT max(w.waits_until) INTO writers_until
        FROM leasehold_waiters AS w
        WHERE w.key = p_key AND w.waits_until > clock_timestamp();
    IF writers_until IS NOT NULL THEN
        -- Look again when the readers' leases or the writers' waits end; while no row is
        -- there, the writers are about to take it: look again shortly.
        remaining_ms := CASE WHEN joining
            THEN greatest(1, ceil(extract(epoch FROM least(ends, writers_until) - clock_timestamp()) * 1000))::bigint
            ELSE 25 END;
        RETURN;
    END IF;
    -- Taking the row over changes its holder: only under the advisory lock, without waiting
    -- (never waiting, it cannot deadlock with the row lock taken first).
    IF NOT joining AND NOT pg_try_advisory_xact_lock((h >> 32)::int, (h << 32 >> 32)::int) THEN
        -- The holder's lease ended but its fenced transaction is still open.
        remaining_ms := 50;
        RETURN;
    END IF;
    drawn := leasehold_draw_slot(coalesce(last_fence, 0) / 32) * 32;
    IF holder IS NULL THEN
        INSERT INTO leasehold_locks AS l (key, owner, fence, expires)
            VALUES (p_key, 'R', drawn, clock_timestamp() + lease)
            ON CONFLICT (key) DO NOTHING;
        IF NOT FOUND THEN
            -- Another acquire made the row this instant: ask again.
            remaining_ms := 5;
            RETURN;
        END IF;
    ELSE
        UPDATE leasehold_locks AS l
            SET owner = 'R', fence = drawn,
                expires = CASE WHEN joining THEN greatest(l.expires, clock_timestamp() + lease)
                               ELSE clock_timestamp() + lease END
            WHERE l.key = p_key;
    END IF;
    IF NOT joining THEN
        -- Readers from before the row was taken over (their leases ended, or an operator
        -- deleted the lock) hold nothing any more.
        DELETE FROM leasehold_readers AS r WHERE r.key = p_key;
    END IF;
    INSERT INTO leasehold_readers AS r (key, owner, fence, expires)
        VALUES (p_key, p_owner, drawn, clock_timestamp() + lease)
        ON CONFLICT (key, owner) DO UPDATE SET fence = excluded.fence, expires = excluded.expires;
    fence := drawn;
END
$$;

-- Ends the read lease of `p_owner` on `p_key`: true when it was still running, false when it
-- had ended or the lock is not its readers' any more (nothing of it is left either way). The
-- last reader to leave frees the lock: it goes to the contender that waited longest for
-- `p_window_ms`, or is deleted, as a writer's release does (leasehold_pass_on), and the
-- waiters hear `p_wake`; otherwise the row lives as long as the longest remaining lease.
CREATE OR REPLACE FUNCTION leasehold_release_shared(
    p_key text, p_owner text, p_window_ms bigint, p_wake text)
RETURNS boolean
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    marked boolean;
    valid boolean;
    last_end timestamptz;
BEGIN
    -- The row first, as every change of the readers does.
    PERFORM 1 FROM leasehold_locks AS l
        WHERE l.key = p_key AND l.owner = 'R'
        FOR UPDATE;
    marked := FOUND;
    DELETE FROM leasehold_readers AS r
        WHERE r.key = p_key AND r.owner = p_owner
        RETURNING r.expires > clock_timestamp() INTO valid;
    IF NOT marked THEN
        RETURN false;
    END IF;
    SELECT max(r.expires) INTO last_end
        FROM leasehold_readers AS r
        WHERE r.key = p_key AND r.expires > clock_timestamp();
    IF last_end IS NULL THEN
        PERFORM leasehold_pass_on(p_key, '', p_window_ms, p_wake);
    ELSE
        UPDATE leasehold_locks AS l SET expires = last_end WHERE l.key = p_key;
    END IF;
    RETURN coalesce(valid, false);
END
$$;

-- Extends every read lease of the batch that is still running while its lock is its readers'
-- (one entry per lease: the lock key, the owner, the lease in ms), and sets the lock's row to
-- the longest lease of its live readers. A renewal may shorten a lease (the end of a hold,
-- set as a renewal with the time left): the row then ends with the longest remaining lease,
-- as a release leaves it (leasehold_release_shared), not with the longest it ever had. The
-- rows of the locks first, in key order (as acquires and releases lock them), then the
-- readers: so a writer never takes a row over between a reader's renewal and the row's
-- extension. Returns the leases extended.
CREATE OR REPLACE FUNCTION leasehold_renew_shared(
    p_keys text[], p_owners text[], p_ms bigint[])
RETURNS TABLE (renewed_key text, renewed_owner text)
LANGUAGE plpgsql AS $$
-- leasehold schema 9
BEGIN
    PERFORM 1 FROM leasehold_locks AS l
        WHERE l.key = ANY (p_keys) AND l.owner = 'R' AND l.expires > clock_timestamp()
        ORDER BY l.key
        FOR NO KEY UPDATE;
    RETURN QUERY
    WITH done AS (
        UPDATE leasehold_readers AS r
            SET expires = clock_timestamp() + b.ms * interval '1 millisecond'
            FROM unnest(p_keys, p_owners, p_ms) AS b(key, owner, ms)
            WHERE r.key = b.key AND r.owner = b.owner AND r.expires > clock_timestamp()
              AND EXISTS (SELECT 1 FROM leasehold_locks AS l
                          WHERE l.key = r.key AND l.owner = 'R'
                            AND l.expires > clock_timestamp())
            RETURNING r.key, r.owner, r.expires
    ), marked AS (
        -- The other live readers as they were before this statement (the batch's rows are
        -- in `done`, with their new ends).
        UPDATE leasehold_locks AS l
            SET expires = greatest(d.last_end, (
                SELECT max(r.expires) FROM leasehold_readers AS r
                WHERE r.key = l.key AND r.expires > clock_timestamp()
                  AND NOT EXISTS (SELECT 1 FROM done AS x
                                  WHERE x.key = r.key AND x.owner = r.owner)))
            FROM (SELECT d.key, max(d.expires) AS last_end FROM done AS d GROUP BY d.key) AS d
            WHERE l.key = d.key AND l.owner = 'R'
    )
    SELECT d.key, d.owner FROM done AS d;
END
$$;

-- Takes every lease of a batch in one transaction, or none (`lock_all` of free keys): one entry
-- per lease, in the caller's order (the lock's key, the owner, a reader's share or the lock,
-- the lease in ms, the fences to reserve for a lock), and `p_name`, the process's name in the
-- lines of waiters (a lock a release left to it may be taken, as a lone acquire takes it).
-- Each lease is taken by the same function a lone acquire calls, with the same fence rule,
-- none of them waiting in line. The keys are taken in key order, so two batches never wait
-- for each other's rows in a circle. When one lease is not free (or its row stays locked past
-- `lock_timeout`), the block that took the others is rolled back: nothing of the batch is
-- left, every answer reads "held" (`remaining_ms` where known) and `fence` is NULL. Granted:
-- one row per lease, in order, each with its fence. Every row the batch writes carries the
-- one transaction id of that block.
CREATE OR REPLACE FUNCTION leasehold_acquire_all(
    p_keys text[], p_owners text[], p_reads boolean[], p_lease_ms bigint[],
    p_fences bigint[], p_name text)
RETURNS TABLE (fence bigint, remaining_ms bigint)
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    n constant integer := coalesce(array_length(p_keys, 1), 0);
    fences bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    remaining bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    taken boolean := true;
    i integer;
    one record;
BEGIN
    BEGIN
        FOR i IN SELECT o.i FROM generate_subscripts(p_keys, 1) AS o(i) ORDER BY p_keys[o.i] LOOP
            IF p_reads[i] THEN
                SELECT a.fence, a.remaining_ms INTO one
                    FROM leasehold_acquire_shared(p_keys[i], p_owners[i], p_lease_ms[i]) AS a;
            ELSE
                SELECT a.fence, a.remaining_ms INTO one
                    FROM leasehold_acquire(p_keys[i], p_owners[i], p_lease_ms[i], p_fences[i],
                                           p_name, 0, false) AS a;
            END IF;
            fences[i] := one.fence;
            remaining[i] := one.remaining_ms;
            IF one.fence IS NULL THEN
                taken := false;
                EXIT;
            END IF;
        END LOOP;
        IF NOT taken THEN
            RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'leasehold: a lease of the batch is held';
        END IF;
    EXCEPTION
        -- The block's work is undone; its variables keep what they learnt.
        WHEN raise_exception THEN
            NULL;
        WHEN lock_not_available OR deadlock_detected THEN
            taken := false;
    END;
    RETURN QUERY
        SELECT CASE WHEN taken THEN fences[o.i] END, CASE WHEN NOT taken THEN remaining[o.i] END
        FROM generate_subscripts(p_keys, 1) AS o(i)
        ORDER BY o.i;
END
$$;

-- Semaphores: one row per semaphore (the limit its holders agreed on, the last holder's fence,
-- when it last granted permits), locked by every acquire of its permits, so that they count
-- its holders one at a time; a row per holder in leasehold_permits, with its own lease. A
-- holder that crashed stops counting when its lease ends. Waiters for several permits queue
-- in leasehold_waiters under the semaphore's key, named `name:count`.
CREATE TABLE IF NOT EXISTS leasehold_semaphores (
    key          text        PRIMARY KEY,
    permit_limit integer     NOT NULL,
    fence        bigint      NOT NULL,
    granted      timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS leasehold_permits (
    key     text        NOT NULL,
    owner   text        NOT NULL,
    permits integer     NOT NULL,
    fence   bigint      NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (key, owner)
);

-- Takes `p_count` permits of the semaphore `p_key` among `p_limit` for `p_owner` if that many
-- are free and the waiters queued ahead leave them (every live waiter, for a caller that is
-- not queued: `p_place` = ''); a waiter (`p_place` = its name and count) that must wait queues
-- by arrival for `p_wait_ms` (> 0), keeping its first place while it asks again. Granted:
-- `fence`, `slot * 32 + 1` by the writers' rule. Held: `remaining_ms` until the first holder's
-- lease ends (NULL: nobody holds one). `agreed`: the holders agreed on another limit (nothing
-- changed).
CREATE OR REPLACE FUNCTION leasehold_acquire_permits(
    p_key text, p_owner text, p_lease_ms bigint, p_limit integer, p_count integer,
    p_place text, p_wait_ms bigint,
    OUT fence bigint, OUT remaining_ms bigint, OUT agreed integer)
LANGUAGE plpgsql AS $$
-- leasehold schema 9
DECLARE
    agreed_limit integer;
    last_fence bigint;
    used bigint;
    first_end timestamptz;
    ahead bigint := 0;
    waiter record;
    drawn bigint;
BEGIN
    -- The semaphore's row, locked until the end: its acquires count one at a time, and
    -- renewals (which share-lock it) are either seen whole or wait.
    INSERT INTO leasehold_semaphores AS s (key, permit_limit, fence, granted)
        VALUES (p_key, p_limit, 0, clock_timestamp())
        ON CONFLICT (key) DO UPDATE SET fence = s.fence
        RETURNING s.permit_limit, s.fence INTO agreed_limit, last_fence;
    -- A call sent again after its connection closed, whose first run took the permits.
    SELECT p.fence INTO fence
        FROM leasehold_permits AS p
        WHERE p.key = p_key AND p.owner = p_owner AND p.expires > clock_timestamp();
    IF FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(sum(p.permits), 0), min(p.expires) INTO used, first_end
        FROM leasehold_permits AS p
        WHERE p.key = p_key AND p.expires > clock_timestamp();
    IF used > 0 AND agreed_limit <> p_limit THEN
        agreed := agreed_limit;
        RETURN;
    END IF;
    -- Waiters that stopped asking leave the queue (asking again, they queue at the back).
    DELETE FROM leasehold_waiters AS w
        WHERE w.key = p_key AND w.waits_until <= clock_timestamp();
    FOR waiter IN
        SELECT w.name FROM leasehold_waiters AS w
            WHERE w.key = p_key
            ORDER BY w.arrived, w.name
    LOOP
        EXIT WHEN waiter.name = p_place;
        ahead := ahead + coalesce(nullif(split_part(waiter.name, ':', 2), ''), '0')::bigint;
    END LOOP;
    IF used + p_count + ahead > p_limit THEN
        IF p_place <> '' AND p_wait_ms > 0 THEN
            PERFORM leasehold_wait_in_line(p_key, p_place, p_wait_ms);
        END IF;
        -- NULL when nobody holds a permit (waiters ahead keep them): no end to wait for.
        IF first_end IS NOT NULL THEN
            remaining_ms := greatest(1, ceil(extract(epoch FROM first_end - clock_timestamp()) * 1000))::bigint;
        END IF;
        RETURN;
    END IF;
    IF p_place <> '' THEN
        DELETE FROM leasehold_waiters AS w WHERE w.key = p_key AND w.name = p_place;
    END IF;
    drawn := leasehold_draw_slot(last_fence / 32) * 32 + 1;
    UPDATE leasehold_semaphores AS s
        SET permit_limit = p_limit, fence = drawn, granted = clock_timestamp()
        WHERE s.key = p_key;
    INSERT INTO leasehold_permits AS p (key, owner, permits, fence, expires)
        VALUES (p_key, p_owner, p_count, drawn,
                clock_timestamp() + p_lease_ms * interval '1 millisecond')
        ON CONFLICT (key, owner) DO UPDATE
            SET permits = excluded.permits, fence = excluded.fence, expires = excluded.expires;
    fence := drawn;
END
$$;

-- Extends every holder's lease of the batch that is still running (one entry per holder: the
-- semaphore's key, the owner, the lease in ms). The semaphores' rows are share-locked first,
-- in key order: an acquire counting the holders (which locks the row) sees a renewal whole or
-- after its own end, never a lease it counted as ended renewed behind its back. Returns the
-- leases extended.
CREATE OR REPLACE FUNCTION leasehold_renew_permits(
    p_keys text[], p_owners text[], p_ms bigint[])
RETURNS TABLE (renewed_key text, renewed_owner text)
LANGUAGE plpgsql AS $$
-- leasehold schema 9
BEGIN
    PERFORM 1 FROM leasehold_semaphores AS s
        WHERE s.key = ANY (p_keys)
        ORDER BY s.key
        FOR SHARE;
    RETURN QUERY
    WITH done AS (
        UPDATE leasehold_permits AS p
            SET expires = clock_timestamp() + b.ms * interval '1 millisecond'
            FROM unnest(p_keys, p_owners, p_ms) AS b(key, owner, ms)
            WHERE p.key = b.key AND p.owner = b.owner AND p.expires > clock_timestamp()
            RETURNING p.key, p.owner
    )
    SELECT d.key, d.owner FROM done AS d;
END
$$;

-- Leader records: the leader of an election, recorded beside its lock (`key`), counts only
-- while its owner token holds that lock (on the server's clock): it lapses with the lease.
-- A newer term is never overwritten by an older one. Publishing and clearing say so to the
-- lock's subscribers on `leasehold_turn`, addressed to `leader` (no contender's name: waiting
-- campaigners sleep on, observers look again).
CREATE TABLE IF NOT EXISTS leasehold_leaders (
    record   text   PRIMARY KEY,
    key      text   NOT NULL,
    term     bigint NOT NULL,
    identity text   NOT NULL,
    owner    text   NOT NULL
);

-- Records `p_identity` with term `p_term` as the leader in `p_record`, if `p_owner` holds the
-- lock `p_key` and no newer term is recorded. 1 written, 0 the lock is not `p_owner`'s, -1 a
-- newer term is recorded. Whatever happens to the lock after the look, the record is only
-- believed while its owner holds the lock (leasehold_read_leader), and terms only go up.
CREATE OR REPLACE FUNCTION leasehold_publish_leader(
    p_key text, p_record text, p_owner text, p_term bigint, p_identity text, p_wake text)
RETURNS integer
LANGUAGE plpgsql AS $$
-- leasehold schema 9
BEGIN
    PERFORM 1 FROM leasehold_locks AS l
        WHERE l.key = p_key AND l.owner = p_owner AND l.expires > clock_timestamp();
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    INSERT INTO leasehold_leaders AS r (record, key, term, identity, owner)
        VALUES (p_record, p_key, p_term, p_identity, p_owner)
        ON CONFLICT (record) DO UPDATE
            SET key = excluded.key, term = excluded.term, identity = excluded.identity,
                owner = excluded.owner
            WHERE r.term <= excluded.term;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    PERFORM pg_notify('leasehold_turn', 'leader ' || p_wake);
    RETURN 1;
END
$$;

-- Who the lockers are, for inspection (`Locker::inspect`, `leasehold show`): each locker's
-- description (service, host, pid, start, version, as `leasehold-locker 1` lines), by its
-- locker id, written by a background task of the locker from its first lock on, every 10 s,
-- never on the acquire path; a row counts until `expires` (30 s after the last write), so a
-- locker that stopped is forgotten by then. Every owner token a locker writes starts with
-- `h1.<locker id>.<ms>.<label>.` (who, since when on its clock, the acquisition's label)
-- before its 32-hex-digit secret; leasehold_public gives that part alone. Readable by anyone
-- who can read these tables.
CREATE TABLE IF NOT EXISTS leasehold_lockers (
    id          text        PRIMARY KEY,
    description text        NOT NULL,
    expires     timestamptz NOT NULL
);

-- The public part of an owner value: what is before the secret of a token that has one
-- (`h1.` ...), else ''. Never the secret.
CREATE OR REPLACE FUNCTION leasehold_public(p_owner text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
-- leasehold schema 9
SELECT CASE WHEN starts_with(p_owner, 'h1.') AND length(p_owner) > 32
            THEN left(p_owner, -32) ELSE '' END
$$;

-- Writes the description of the locker `p_id` to count for `p_ttl_ms` from now, and deletes
-- a few rows that expired a minute ago or more (lockers that stopped).
CREATE OR REPLACE FUNCTION leasehold_describe_locker(
    p_id text, p_description text, p_ttl_ms bigint)
RETURNS void
LANGUAGE sql AS $$
-- leasehold schema 9
DELETE FROM leasehold_lockers AS d WHERE d.id IN (
    SELECT v.id FROM leasehold_lockers AS v
    WHERE v.expires < clock_timestamp() - interval '1 minute' AND v.id <> p_id
    LIMIT 100 FOR UPDATE SKIP LOCKED);
INSERT INTO leasehold_lockers AS d (id, description, expires)
VALUES (p_id, p_description, clock_timestamp() + p_ttl_ms * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET description = excluded.description, expires = excluded.expires
$$;
