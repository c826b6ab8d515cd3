-- The schema of the MySQL / MariaDB engine, as `leasehold::mysql::SCHEMA` hands it to operators:
-- the lease table `leasehold_locks`, the guard rows `leasehold_guards` (one per key in use: what a
-- fenced transaction holds, and the key's fence floor), the global fence floor `leasehold_floor`,
-- the line of waiters `leasehold_waiters`, the readers of read-write locks `leasehold_readers`,
-- the semaphores `leasehold_semaphores` and their holders `leasehold_permits`, the leader records
-- `leasehold_leaders`, the lockers' descriptions `leasehold_lockers`, the wake log
-- `leasehold_wakes`, and the `leasehold_*` procedures every lock call runs (each one round trip:
-- `CALL leasehold_acquire(...)` answers one row).
--
-- For MySQL 8.0 and MariaDB 10.6 or later (JSON_TABLE, SKIP LOCKED, NOWAIT); InnoDB. Apply it with
-- the `mysql` / `mariadb` command-line client (it reads the DELIMITER lines), as a user with
-- CREATE, INDEX, CREATE ROUTINE and ALTER ROUTINE on the database. Idempotent; the engine applies
-- it itself on first use, and again over an older version's routines: each routine carries the
-- comment 'leasehold schema 3', which the engine's check counts, so a change to any routine bumps
-- that tag everywhere (schema.rs).
--
-- Only procedures, no stored functions: with binary logging on, creating a function needs SUPER
-- (or `log_bin_trust_function_creators`), a procedure does not. Each procedure runs its own
-- transaction (under autocommit, each statement of a procedure would commit on its own), except
-- `leasehold_check_fence`, which runs in its caller's.
--
-- Keys are bytes (VARBINARY: no collation folds case or trims spaces); a row is found by the
-- SHA-256 of its key (`id`, 32 bytes), since a stored key (up to about 3.2 KB) is longer than an
-- InnoDB index key may be. Times are microseconds since the epoch on the server's clock
-- (`UTC_TIMESTAMP(6)`, read in a statement of its own after the rows are locked: each statement
-- of a procedure has its own time). The engine's sessions run READ COMMITTED (no gap locks: two
-- acquires of two free keys never block each other), which binary logging accepts in ROW or MIXED
-- format (MySQL 8's and MariaDB's defaults), not STATEMENT.

CREATE TABLE IF NOT EXISTS leasehold_locks (
    id       BINARY(32)      NOT NULL PRIMARY KEY,
    lock_key VARBINARY(3400) NOT NULL,
    owner    VARBINARY(255)  NOT NULL,
    fence    BIGINT          NOT NULL,
    expires  BIGINT          NOT NULL
) ENGINE = InnoDB;

-- One row per key in use, kept for ten minutes after its last holder change. A transaction that
-- checked a holder's fence (leasehold_check_fence) share-locks it until it ends; everything that
-- could change the holder (an acquire that inserts or takes over the lock's row, a reader taking
-- it over, a handover) locks it exclusively without waiting, and answers "held" when it cannot.
-- Renewals and releases never touch it. `slot` is the last slot drawn for the key by a holder
-- change: its fence floor.
CREATE TABLE IF NOT EXISTS leasehold_guards (
    id   BINARY(32) NOT NULL PRIMARY KEY,
    slot BIGINT     NOT NULL,
    used BIGINT     NOT NULL
) ENGINE = InnoDB;

-- The global fence floor, one row: raised by every sweep to the server clock's slot and to the
-- slots of the guard rows it deletes. Read (never locked) by every draw.
CREATE TABLE IF NOT EXISTS leasehold_floor (
    one  TINYINT NOT NULL PRIMARY KEY,
    slot BIGINT  NOT NULL
) ENGINE = InnoDB;

INSERT IGNORE INTO leasehold_floor (one, slot) VALUES (1, 0);

-- The processes (or fair requests, each under a name of its own) waiting for a lock, in arrival
-- order, each until when it still waits; waiters for several permits of a semaphore, as
-- `name:count`, under the semaphore's key.
CREATE TABLE IF NOT EXISTS leasehold_waiters (
    id          BINARY(32)     NOT NULL,
    name        VARBINARY(255) NOT NULL,
    arrived     BIGINT         NOT NULL,
    waits_until BIGINT         NOT NULL,
    PRIMARY KEY (id, name),
    KEY by_arrival (id, arrived)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS leasehold_readers (
    id      BINARY(32)     NOT NULL,
    owner   VARBINARY(255) NOT NULL,
    fence   BIGINT         NOT NULL,
    expires BIGINT         NOT NULL,
    PRIMARY KEY (id, owner)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS leasehold_semaphores (
    id           BINARY(32)      NOT NULL PRIMARY KEY,
    sem_key      VARBINARY(3400) NOT NULL,
    permit_limit INT             NOT NULL,
    fence        BIGINT          NOT NULL,
    granted      BIGINT          NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS leasehold_permits (
    id      BINARY(32)     NOT NULL,
    owner   VARBINARY(255) NOT NULL,
    permits INT            NOT NULL,
    fence   BIGINT         NOT NULL,
    expires BIGINT         NOT NULL,
    PRIMARY KEY (id, owner)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS leasehold_leaders (
    record_id BINARY(32)      NOT NULL PRIMARY KEY,
    id        BINARY(32)      NOT NULL,
    term      BIGINT          NOT NULL,
    identity  BLOB            NOT NULL,
    owner     VARBINARY(255)  NOT NULL
) ENGINE = InnoDB;

-- Who the lockers are, for inspection: each locker's description by its id, counting until
-- `expires` (30 s after its last write).
CREATE TABLE IF NOT EXISTS leasehold_lockers (
    locker      VARBINARY(255) NOT NULL PRIMARY KEY,
    description BLOB           NOT NULL,
    expires     BIGINT         NOT NULL
) ENGINE = InnoDB;

-- The wake log: every release (and every turn a release gives to a contender, every leader
-- record written or cleared) appends a row in its own transaction; one task per locker reads
-- the new rows while it has waiters. `to_name`: the contender the lock was left to, `leader`
-- for leader records, NULL for everyone. Trimmed by the sweep after a minute.
CREATE TABLE IF NOT EXISTS leasehold_wakes (
    seq     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    wake    VARBINARY(3400) NOT NULL,
    to_name VARBINARY(255)  NULL,
    at      BIGINT          NOT NULL,
    KEY by_time (at)
) ENGINE = InnoDB;

DROP PROCEDURE IF EXISTS leasehold_draw_slot;
DROP PROCEDURE IF EXISTS leasehold_take_guard;
DROP PROCEDURE IF EXISTS leasehold_acquire_in;
DROP PROCEDURE IF EXISTS leasehold_acquire;
DROP PROCEDURE IF EXISTS leasehold_acquire_all;
DROP PROCEDURE IF EXISTS leasehold_wait_in_line;
DROP PROCEDURE IF EXISTS leasehold_pass_on;
DROP PROCEDURE IF EXISTS leasehold_release_in;
DROP PROCEDURE IF EXISTS leasehold_release;
DROP PROCEDURE IF EXISTS leasehold_release_all;
DROP PROCEDURE IF EXISTS leasehold_withdraw;
DROP PROCEDURE IF EXISTS leasehold_hand_over;
DROP PROCEDURE IF EXISTS leasehold_renew;
DROP PROCEDURE IF EXISTS leasehold_check_fence;
DROP PROCEDURE IF EXISTS leasehold_acquire_shared_in;
DROP PROCEDURE IF EXISTS leasehold_acquire_shared;
DROP PROCEDURE IF EXISTS leasehold_release_shared;
DROP PROCEDURE IF EXISTS leasehold_renew_shared;
DROP PROCEDURE IF EXISTS leasehold_acquire_permits;
DROP PROCEDURE IF EXISTS leasehold_release_permits;
DROP PROCEDURE IF EXISTS leasehold_withdraw_permits;
DROP PROCEDURE IF EXISTS leasehold_renew_permits;
DROP PROCEDURE IF EXISTS leasehold_publish_leader;
DROP PROCEDURE IF EXISTS leasehold_clear_leader;
DROP PROCEDURE IF EXISTS leasehold_force_release;
DROP PROCEDURE IF EXISTS leasehold_describe_locker;
DROP PROCEDURE IF EXISTS leasehold_sweep;

DELIMITER ;;

-- The engine's one fence rule, for writers, readers and semaphore holders alike: a new slot for
-- a key whose last slot was `p_last` (0 for none), the greatest of the global floor + 1, the
-- server clock `p_now` in units of 32 microseconds, and `p_last` + 1. A holder's fences are
-- `slot * 32 + n` (writers: n from 1 up to the tokens reserved; readers: n = 0; semaphore
-- holders: n = 1). So fences keep increasing for a key, and stay near the clock in microseconds
-- like Redis fences, also when the tables went back (a restored backup, a promoted replica that
-- missed the last transactions), while the server's clock does not step back by more than that
-- took; a clock that steps back is covered by the key's guard row (kept ten minutes after its
-- last use) and by the floor (the clock as the last sweep saw it). No counter row is written
-- by a draw: a global one would serialize every acquire of the database.
CREATE PROCEDURE leasehold_draw_slot(IN p_last BIGINT, IN p_now BIGINT, OUT p_slot BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_floor BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SELECT f.slot INTO v_floor FROM leasehold_floor AS f WHERE f.one = 1;
    SET p_slot = GREATEST(COALESCE(v_floor, 0) + 1, p_now DIV 32, COALESCE(p_last, 0) + 1);
END;;

-- Locks the guard row of `p_id` exclusively without waiting (creating it when missing), for a
-- statement about to change the key's holder: `p_slot` its slot, NULL when it is busy (a
-- transaction that checked a fence holds it, or another acquire of the key runs this instant).
-- MariaDB refuses NOWAIT in a procedure's own statements, not in one it prepares: hence the
-- prepared statement (and the session variables it reads and writes, `@leasehold_*`). MariaDB
-- answers a lock it may not wait for with error 1205, MySQL 8 with 3572; a duplicate key (1062)
-- is another acquire creating the row this instant.
CREATE PROCEDURE leasehold_take_guard(IN p_id BINARY(32), OUT p_slot BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_busy BOOLEAN DEFAULT FALSE;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1205, 3572 SET v_busy = TRUE;
        SET @leasehold_guard_id = p_id, @leasehold_guard_slot = NULL;
        PREPARE leasehold_guard FROM 'SELECT g.slot INTO @leasehold_guard_slot
            FROM leasehold_guards AS g WHERE g.id = ? FOR UPDATE NOWAIT';
        EXECUTE leasehold_guard USING @leasehold_guard_id;
        DEALLOCATE PREPARE leasehold_guard;
    END;
    SET p_slot = @leasehold_guard_slot;
    IF v_busy THEN
        SET p_slot = NULL;
    ELSEIF p_slot IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062, 1205, 3572 SET v_busy = TRUE;
            INSERT INTO leasehold_guards (id, slot, used) VALUES (p_id, 0, 0);
        END;
        SET p_slot = IF(v_busy, NULL, 0);
    END IF;
END;;

-- Puts `p_name` in line for `p_id` (keeping its first arrival) until `p_wait_ms` from `p_now`.
-- Called with the lock's row locked.
CREATE PROCEDURE leasehold_wait_in_line(
    IN p_id BINARY(32), IN p_name VARBINARY(255), IN p_wait_ms BIGINT, IN p_now BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    INSERT INTO leasehold_waiters (id, name, arrived, waits_until)
        VALUES (p_id, p_name, p_now, p_now + p_wait_ms * 1000)
        ON DUPLICATE KEY UPDATE waits_until = VALUES(waits_until);
END;;

-- With the row of `p_id` locked, by the one letting go of it (its releasing holder, the last
-- reader, or the contender it was left to, withdrawing): leaves the row to the contender that
-- waited longest other than `p_me` for `p_window_ms` (owner `~` and its name: only it may take
-- the lock then), and appends its turn to the wake log; with nobody else in line, deletes the
-- row and appends a wake-up for everyone. Waiters whose wait ran out, and `p_me`, leave the line.
-- Every change of a key's line locks the lock's row first, so no other one runs meanwhile.
CREATE PROCEDURE leasehold_pass_on(
    IN p_id BINARY(32), IN p_me VARBINARY(255), IN p_window_ms BIGINT, IN p_wake VARBINARY(3400),
    IN p_now BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_next VARBINARY(255) DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DELETE FROM leasehold_waiters
        WHERE id = p_id AND (waits_until <= p_now OR name = p_me);
    SELECT w.name INTO v_next FROM leasehold_waiters AS w
        WHERE w.id = p_id AND w.waits_until > p_now
        ORDER BY w.arrived, w.name LIMIT 1;
    IF v_next IS NULL THEN
        DELETE FROM leasehold_locks WHERE id = p_id;
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, NULL, p_now);
    ELSE
        DELETE FROM leasehold_waiters WHERE id = p_id AND name = v_next;
        UPDATE leasehold_locks
            SET owner = CONCAT('~', v_next), expires = p_now + p_window_ms * 1000
            WHERE id = p_id;
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, v_next, p_now);
    END IF;
END;;

-- Takes the lock `p_key` for `p_owner` if it is free, its lease ended, it is the owner's already
-- (a retried attempt), or a release left it to `p_name`, in the caller's transaction: `p_fence`
-- (the highest of the `p_fences` tokens reserved) when granted, else NULL and `p_remaining`,
-- the milliseconds left of the holder's lease or a short retry hint.
--
-- The lock's row is locked first (every change of the key's line does so too); then, only to
-- take it, the guard row, without waiting (leasehold_take_guard): while a transaction that
-- checked the holder's fence is open nobody takes the lock over, even once the lease ended.
-- The fence is drawn while both are locked. A contender that will wait (`p_wait_ms` > 0) and
-- finds the lock held joins the line under `p_name` (keeping its first arrival); granted, it
-- leaves the line (`p_queued`: it may be in it).
CREATE PROCEDURE leasehold_acquire_in(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_lease_ms BIGINT, IN p_fences BIGINT,
    IN p_name VARBINARY(255), IN p_wait_ms BIGINT, IN p_queued BOOLEAN,
    OUT p_fence BIGINT, OUT p_remaining BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_owner VARBINARY(255) DEFAULT NULL;
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_guard BIGINT DEFAULT NULL;
    DECLARE v_slot BIGINT;
    DECLARE v_granted BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_mine BOOLEAN;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SELECT l.owner, l.fence, l.expires INTO v_owner, v_fence, v_expires
        FROM leasehold_locks AS l WHERE l.id = v_id FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    SET v_mine = COALESCE(v_owner = p_owner OR (p_name <> '' AND v_owner = CONCAT('~', p_name)),
                          FALSE);
    IF v_owner IS NOT NULL AND v_expires > v_now AND NOT v_mine THEN
        SET v_remaining = GREATEST(1, CEIL((v_expires - v_now) / 1000));
        IF p_wait_ms > 0 THEN
            CALL leasehold_wait_in_line(v_id, p_name, p_wait_ms, v_now);
        END IF;
    ELSE
        CALL leasehold_take_guard(v_id, v_guard);
        IF v_guard IS NOT NULL AND v_owner IS NULL THEN
            -- No row was there to lock: another acquire may have inserted it and committed
            -- before this one took the guard. Looked at again now that nobody else may take it.
            SELECT l.owner, l.fence, l.expires INTO v_owner, v_fence, v_expires
                FROM leasehold_locks AS l WHERE l.id = v_id FOR UPDATE;
            SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
            SET v_mine = COALESCE(v_owner = p_owner OR (p_name <> '' AND v_owner = CONCAT('~', p_name)),
                          FALSE);
        END IF;
        IF v_guard IS NOT NULL AND v_owner IS NOT NULL AND v_expires > v_now AND NOT v_mine THEN
            SET v_remaining = GREATEST(1, CEIL((v_expires - v_now) / 1000));
            IF p_wait_ms > 0 THEN
                CALL leasehold_wait_in_line(v_id, p_name, p_wait_ms, v_now);
            END IF;
        ELSEIF v_guard IS NULL THEN
            IF v_mine AND LEFT(v_owner, 1) = '~' THEN
                -- Left to us, and another acquire of it runs this instant: ask again at once.
                SET v_remaining = 5;
            ELSE
                -- A fenced transaction of the holder is still open (or another acquire runs).
                SET v_remaining = GREATEST(50,
                    IF(v_expires > v_now, CEIL((v_expires - v_now) / 1000), 0));
            END IF;
            IF p_wait_ms > 0 AND v_expires > v_now THEN
                CALL leasehold_wait_in_line(v_id, p_name, p_wait_ms, v_now);
            END IF;
        ELSE
            CALL leasehold_draw_slot(GREATEST(v_guard, COALESCE(v_fence, 0) DIV 32), v_now, v_slot);
            SET v_granted = v_slot * 32 + p_fences;
            UPDATE leasehold_guards SET slot = v_slot, used = v_now WHERE id = v_id;
            INSERT INTO leasehold_locks (id, lock_key, owner, fence, expires)
                VALUES (v_id, p_key, p_owner, v_granted, v_now + p_lease_ms * 1000)
                ON DUPLICATE KEY UPDATE owner = VALUES(owner), fence = VALUES(fence),
                    expires = VALUES(expires);
            IF p_queued THEN
                DELETE FROM leasehold_waiters WHERE id = v_id AND name = p_name;
            END IF;
            -- Readers from before the row was taken over hold nothing any more.
            DELETE FROM leasehold_readers WHERE id = v_id;
        END IF;
    END IF;
    SET p_fence = v_granted, p_remaining = v_remaining;
END;;

-- The acquire above in a transaction of its own, answering one row: `fence` and
-- `remaining_ms`.
CREATE PROCEDURE leasehold_acquire(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_lease_ms BIGINT, IN p_fences BIGINT,
    IN p_name VARBINARY(255), IN p_wait_ms BIGINT, IN p_queued BOOLEAN)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    CALL leasehold_acquire_in(p_key, p_owner, p_lease_ms, p_fences, p_name, p_wait_ms, p_queued,
                              v_fence, v_remaining);
    COMMIT;
    SELECT v_fence AS fence, v_remaining AS remaining_ms;
END;;

-- Releases the lock `p_key` if `p_owner` holds it, in the caller's transaction: `p_valid` is 1
-- when its lease was still running, 0 when it had ended, NULL when the lock was not `p_owner`'s
-- (nothing changed). The row goes to the contender that waited longest other than the releasing
-- process `p_name`, for `p_window_ms`, or is deleted (leasehold_pass_on); the wake log hears
-- `p_wake` either way.
CREATE PROCEDURE leasehold_release_in(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_name VARBINARY(255),
    IN p_window_ms BIGINT, IN p_wake VARBINARY(3400), OUT p_valid BOOLEAN)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET p_valid = NULL;
    SELECT l.expires INTO v_expires FROM leasehold_locks AS l
        WHERE l.id = v_id AND l.owner = p_owner FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_expires IS NOT NULL THEN
        SET p_valid = v_expires > v_now;
        CALL leasehold_pass_on(v_id, p_name, p_window_ms, p_wake, v_now);
    END IF;
END;;

-- Releases the lock `p_key` if `p_owner` holds it (leasehold_release_in), in a transaction of
-- its own. One row: `valid`, leasehold_release_in's `p_valid`.
CREATE PROCEDURE leasehold_release(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_name VARBINARY(255),
    IN p_window_ms BIGINT, IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_valid BOOLEAN DEFAULT NULL;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    CALL leasehold_release_in(p_key, p_owner, p_name, p_window_ms, p_wake, v_valid);
    COMMIT;
    SELECT v_valid AS valid;
END;;

-- Releases several locks in one transaction, in the batch's order (the caller sorts it by key,
-- as leasehold_acquire_all's batches are, so that two batches lock their rows in the same
-- order). `p_batch`: a JSON array of `[key, owner, wake]`, each in hex. A lock busy past the lock
-- wait timeout (or a deadlock) rolls the whole transaction back: nothing is released, and the
-- caller releases each lock by itself. One row: `answers`, per lock in the batch's order `1`,
-- `0` or `N` (leasehold_release_in's 1, 0 and NULL), separated by commas.
CREATE PROCEDURE leasehold_release_all(
    IN p_batch LONGTEXT, IN p_name VARBINARY(255), IN p_window_ms BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_batch);
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_entry VARCHAR(64);
    DECLARE v_valid BOOLEAN;
    DECLARE v_answers LONGTEXT DEFAULT '';
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    WHILE v_i < v_n DO
        SET v_entry = CONCAT('$[', v_i, ']');
        CALL leasehold_release_in(
            UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[0]')))),
            UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[1]')))),
            p_name, p_window_ms,
            UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[2]')))),
            v_valid);
        SET v_answers = CONCAT(v_answers, IF(v_i = 0, '', ','), IFNULL(v_valid, 'N')),
            v_i = v_i + 1;
    END WHILE;
    COMMIT;
    SELECT v_answers AS answers;
END;;

-- A contender stopped waiting without the lock: it leaves the line; if a release had just left
-- the lock to it, the lock goes on to the next in line at once (or is freed). One row: 1 when
-- the lock had been left to it.
CREATE PROCEDURE leasehold_withdraw(
    IN p_key VARBINARY(3400), IN p_name VARBINARY(255), IN p_window_ms BIGINT,
    IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_owner VARBINARY(255) DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_left BOOLEAN DEFAULT FALSE;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    -- The row first, as every change of the line does.
    SELECT l.owner INTO v_owner FROM leasehold_locks AS l WHERE l.id = v_id FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    DELETE FROM leasehold_waiters WHERE id = v_id AND name = p_name;
    IF v_owner = CONCAT('~', p_name) THEN
        SET v_left = TRUE;
        CALL leasehold_pass_on(v_id, p_name, p_window_ms, p_wake, v_now);
    END IF;
    COMMIT;
    SELECT v_left AS left_to_me;
END;;

-- Hands the lock `p_key` that `p_owner` holds on to another holder of its process: only while
-- no fenced transaction of the key is open (the guard row is free for this call) and the owner
-- still holds the lock, the row gets a fence of a new slot, `slot * 32 + 1`: the next holder's,
-- above every fence of the lease before it, so a check with an earlier holder's fence fails
-- from now on. One row: whether the guard was free, and the new fence (NULL: nothing drawn). An
-- update, never an insert: sent again, or landing late after the lock was released or taken
-- over, it changes nothing.
CREATE PROCEDURE leasehold_hand_over(IN p_key VARBINARY(3400), IN p_owner VARBINARY(255))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_guard BIGINT DEFAULT NULL;
    DECLARE v_slot BIGINT;
    DECLARE v_free BOOLEAN DEFAULT TRUE;
    DECLARE v_drawn BIGINT DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT l.fence, l.expires INTO v_fence, v_expires FROM leasehold_locks AS l
        WHERE l.id = v_id AND l.owner = p_owner FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_expires > v_now THEN
        CALL leasehold_take_guard(v_id, v_guard);
        IF v_guard IS NULL THEN
            SET v_free = FALSE;
        ELSE
            CALL leasehold_draw_slot(GREATEST(v_guard, v_fence DIV 32), v_now, v_slot);
            SET v_drawn = v_slot * 32 + 1;
            UPDATE leasehold_guards SET slot = v_slot, used = v_now WHERE id = v_id;
            UPDATE leasehold_locks SET fence = v_drawn WHERE id = v_id;
        END IF;
    END IF;
    COMMIT;
    SELECT v_free AS free, v_drawn AS fence;
END;;

-- Extends every lease of the batch `p_batch` that its owner still holds: a JSON array of
-- `[i, hex(key), hex(owner), lease_ms]`. One row per lease extended: its `i`.
CREATE PROCEDURE leasehold_renew(IN p_batch LONGTEXT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_now BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    UPDATE leasehold_locks AS l
        JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
          ON l.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND l.owner = UNHEX(b.o)
        SET l.expires = v_now + b.ms * 1000
        WHERE l.expires > v_now;
    COMMIT;
    SELECT b.i FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
        JOIN leasehold_locks AS l
          ON l.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND l.owner = UNHEX(b.o)
        WHERE l.expires = v_now + b.ms * 1000;
END;;

-- In the caller's transaction: whether the holder of fence `p_fence` still holds the lock stored
-- as `p_key`: its writer (fences `slot * 32 + n`, n >= 1, of the slot the guard row holds), or
-- one of its readers (a reader's fence is `slot * 32`, its own, in leasehold_readers). One row,
-- one column `holds`: 1 or 0.
--
-- It first share-locks the key's guard row (a locking read: the newest version, whatever the
-- transaction's snapshot), which InnoDB holds until the caller's transaction ends: nobody can
-- take the lock over (no writer can take it from its readers either) before the transaction's
-- writes are committed, while renewals and releases go on (they never touch the guard row).
-- The lock's and readers' rows are then read without locking: under REPEATABLE READ from the
-- transaction's snapshot, so call it as the transaction's first read (or run the transaction
-- READ COMMITTED) lest a lock taken after the snapshot read as not held. It then bounds how long
-- the transaction may sit idle to the lease left plus 5 s (never longer than a bound the session
-- set already): MariaDB's `idle_transaction_timeout` (whole seconds), MySQL 8's `wait_timeout`
-- (the session's idle bound, in and out of transactions: it stays lowered for the session).
CREATE PROCEDURE leasehold_check_fence(IN p_key VARBINARY(3400), IN p_fence BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_guard BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_idle BIGINT;
    DECLARE v_set BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SELECT g.slot INTO v_guard FROM leasehold_guards AS g WHERE g.id = v_id LOCK IN SHARE MODE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_guard IS NOT NULL AND p_fence MOD 32 <> 0 AND p_fence DIV 32 = v_guard THEN
        SELECT l.expires INTO v_expires FROM leasehold_locks AS l
            WHERE l.id = v_id AND l.fence DIV 32 = v_guard AND p_fence <= l.fence
              AND l.expires > v_now AND LEFT(l.owner, 1) NOT IN ('~', 'R');
    ELSEIF v_guard IS NOT NULL AND p_fence MOD 32 = 0 THEN
        SELECT r.expires INTO v_expires FROM leasehold_readers AS r
            WHERE r.id = v_id AND r.fence = p_fence AND r.expires > v_now
              AND EXISTS (SELECT 1 FROM leasehold_locks AS l
                          WHERE l.id = v_id AND l.owner = 'R' AND l.expires > v_now);
    END IF;
    IF v_expires IS NOT NULL THEN
        SET v_idle = CEIL((GREATEST(v_expires - v_now, 1000) + 5000 * 1000) / 1000000);
        IF VERSION() LIKE '%MariaDB%' THEN
            -- Read and set through prepared statements: MySQL 8 would refuse to create the
            -- procedure over a variable it does not have.
            PREPARE leasehold_bound FROM
                'SELECT @@session.idle_transaction_timeout INTO @leasehold_idle';
            EXECUTE leasehold_bound;
            DEALLOCATE PREPARE leasehold_bound;
            SET v_set = @leasehold_idle;
            IF v_set = 0 OR v_set > v_idle THEN
                SET @leasehold_bound = CONCAT('SET SESSION idle_transaction_timeout = ', v_idle);
                PREPARE leasehold_bound FROM @leasehold_bound;
                EXECUTE leasehold_bound;
                DEALLOCATE PREPARE leasehold_bound;
            END IF;
        ELSEIF @@session.wait_timeout > v_idle THEN
            SET SESSION wait_timeout = v_idle;
        END IF;
    END IF;
    SELECT v_expires IS NOT NULL AS holds;
END;;

-- Takes a read lease of the lock `p_key` for `p_owner` if no writer holds it and none waits in
-- line for it, in the caller's transaction: `p_fence`, the reader's fence (`slot * 32`, by the
-- writers' rule) when granted, else NULL and `p_remaining`. A reader that joins readers changes no holder and leaves the
-- guard alone; one that takes the row over (free, or its holders' leases ended) takes the guard
-- without waiting, as writers do.
CREATE PROCEDURE leasehold_acquire_shared_in(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_lease_ms BIGINT,
    OUT p_fence BIGINT, OUT p_remaining BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_owner VARBINARY(255) DEFAULT NULL;
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_joining BOOLEAN;
    DECLARE v_writers BIGINT DEFAULT NULL;
    DECLARE v_guard BIGINT DEFAULT NULL;
    DECLARE v_slot BIGINT;
    DECLARE v_granted BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SELECT l.owner, l.fence, l.expires INTO v_owner, v_fence, v_expires
        FROM leasehold_locks AS l WHERE l.id = v_id FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    SET v_joining = COALESCE(v_owner = 'R' AND v_expires > v_now, FALSE);
    IF v_owner IS NOT NULL AND NOT v_joining AND v_expires > v_now THEN
        -- A writer holds it, or a release left it to the next in line.
        SET v_remaining = GREATEST(1, CEIL((v_expires - v_now) / 1000));
    ELSE
        SELECT MAX(w.waits_until) INTO v_writers FROM leasehold_waiters AS w
            WHERE w.id = v_id AND w.waits_until > v_now;
        IF v_writers IS NOT NULL THEN
            SET v_remaining = IF(v_joining,
                GREATEST(1, CEIL((LEAST(v_expires, v_writers) - v_now) / 1000)), 25);
        ELSE
            IF v_joining THEN
                SELECT g.slot INTO v_guard FROM leasehold_guards AS g WHERE g.id = v_id;
                SET v_guard = COALESCE(v_guard, 0);
            ELSE
                CALL leasehold_take_guard(v_id, v_guard);
                IF v_guard IS NOT NULL AND v_owner IS NULL THEN
                    -- As in leasehold_acquire: a row inserted meanwhile is looked at again.
                    SELECT l.owner, l.fence, l.expires INTO v_owner, v_fence, v_expires
                        FROM leasehold_locks AS l WHERE l.id = v_id FOR UPDATE;
                    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00',
                                              UTC_TIMESTAMP(6));
                    SET v_joining = COALESCE(v_owner = 'R' AND v_expires > v_now, FALSE);
                    IF v_owner IS NOT NULL THEN
                        -- Taken this instant (by readers too: join them on the next try).
                        SET v_guard = NULL;
                    END IF;
                END IF;
            END IF;
            IF v_guard IS NULL THEN
                SET v_remaining = IF(v_owner IS NOT NULL AND v_expires > v_now,
                    GREATEST(1, CEIL((v_expires - v_now) / 1000)), 50);
                IF v_joining THEN
                    SET v_remaining = 5;
                END IF;
            ELSE
                CALL leasehold_draw_slot(GREATEST(v_guard, COALESCE(v_fence, 0) DIV 32), v_now,
                                         v_slot);
                SET v_granted = v_slot * 32;
                IF NOT v_joining THEN
                    UPDATE leasehold_guards SET slot = v_slot, used = v_now WHERE id = v_id;
                    DELETE FROM leasehold_readers WHERE id = v_id;
                END IF;
                INSERT INTO leasehold_locks (id, lock_key, owner, fence, expires)
                    VALUES (v_id, p_key, 'R', v_granted, v_now + p_lease_ms * 1000)
                    ON DUPLICATE KEY UPDATE owner = 'R', fence = VALUES(fence),
                        expires = IF(v_joining, GREATEST(expires, VALUES(expires)),
                                     VALUES(expires));
                INSERT INTO leasehold_readers (id, owner, fence, expires)
                    VALUES (v_id, p_owner, v_granted, v_now + p_lease_ms * 1000)
                    ON DUPLICATE KEY UPDATE fence = VALUES(fence), expires = VALUES(expires);
            END IF;
        END IF;
    END IF;
    SET p_fence = v_granted, p_remaining = v_remaining;
END;;

-- The reader's acquire above in a transaction of its own, answering one row: `fence` and
-- `remaining_ms`.
CREATE PROCEDURE leasehold_acquire_shared(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_lease_ms BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    CALL leasehold_acquire_shared_in(p_key, p_owner, p_lease_ms, v_fence, v_remaining);
    COMMIT;
    SELECT v_fence AS fence, v_remaining AS remaining_ms;
END;;

-- Takes every lease of the batch `p_batch` in one transaction, or none (`lock_all` of free
-- keys): a JSON array of `[hex(key), hex(owner), read, lease_ms, fences]`, taken in that
-- order (the caller sends the keys sorted, so two batches never wait for each other's rows in
-- a circle), each by the procedure a lone acquire runs (a lock's `leasehold_acquire_in`, a
-- reader's `leasehold_acquire_shared_in`), with the same fence rule, none waiting in line;
-- `p_name`, the process's name in the lines of waiters (a lock a release left to it may be
-- taken, as a lone acquire takes it). At the first lease that is not free the transaction is
-- rolled back: nothing of the batch is left. One row: `fences`, the fences of every lease in
-- order separated by commas, when all were taken, else NULL; `remaining_ms` of the lease that
-- was not free (NULL when unknown), and `at`, its place in the batch from 0.
CREATE PROCEDURE leasehold_acquire_all(IN p_batch LONGTEXT, IN p_name VARBINARY(255))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_n INT DEFAULT JSON_LENGTH(p_batch);
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_entry VARCHAR(64);
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_fences LONGTEXT DEFAULT '';
    DECLARE v_taken BOOLEAN DEFAULT TRUE;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    WHILE v_taken AND v_i < v_n DO
        SET v_entry = CONCAT('$[', v_i, ']'), v_fence = NULL, v_remaining = NULL;
        IF JSON_EXTRACT(p_batch, CONCAT(v_entry, '[2]')) = 1 THEN
            CALL leasehold_acquire_shared_in(
                UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[0]')))),
                UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[1]')))),
                CAST(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[3]')) AS SIGNED),
                v_fence, v_remaining);
        ELSE
            CALL leasehold_acquire_in(
                UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[0]')))),
                UNHEX(JSON_UNQUOTE(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[1]')))),
                CAST(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[3]')) AS SIGNED),
                CAST(JSON_EXTRACT(p_batch, CONCAT(v_entry, '[4]')) AS SIGNED),
                p_name, 0, FALSE, v_fence, v_remaining);
        END IF;
        IF v_fence IS NULL THEN
            SET v_taken = FALSE;
        ELSE
            SET v_fences = CONCAT(v_fences, IF(v_i = 0, '', ','), v_fence), v_i = v_i + 1;
        END IF;
    END WHILE;
    IF v_taken THEN
        COMMIT;
        SELECT v_fences AS fences, NULL AS remaining_ms, NULL AS at;
    ELSE
        ROLLBACK;
        SELECT NULL AS fences, v_remaining AS remaining_ms, v_i AS at;
    END IF;
END;;

-- Ends the read lease of `p_owner` on `p_key`. One row: 1 when it was still running, 0 when it
-- had ended or the lock is not its readers' any more. The last reader to leave passes the lock
-- on (leasehold_pass_on); otherwise the row lives as long as the longest remaining lease.
CREATE PROCEDURE leasehold_release_shared(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_window_ms BIGINT,
    IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_marked VARBINARY(255) DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_last BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT l.owner INTO v_marked FROM leasehold_locks AS l
        WHERE l.id = v_id AND l.owner = 'R' FOR UPDATE;
    SELECT r.expires INTO v_expires FROM leasehold_readers AS r
        WHERE r.id = v_id AND r.owner = p_owner FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    DELETE FROM leasehold_readers WHERE id = v_id AND owner = p_owner;
    IF v_marked IS NOT NULL THEN
        SELECT MAX(r.expires) INTO v_last FROM leasehold_readers AS r
            WHERE r.id = v_id AND r.expires > v_now;
        IF v_last IS NULL THEN
            CALL leasehold_pass_on(v_id, '', p_window_ms, p_wake, v_now);
        ELSE
            UPDATE leasehold_locks SET expires = v_last WHERE id = v_id;
        END IF;
    END IF;
    COMMIT;
    SELECT v_marked IS NOT NULL AND COALESCE(v_expires > v_now, FALSE) AS valid;
END;;

-- Extends every read lease of the batch (as leasehold_renew's) still running while its lock is
-- its readers', and sets each lock's row to the longest lease of its live readers. The locks'
-- rows first (as acquires and releases lock them), then the readers. One row per lease extended.
CREATE PROCEDURE leasehold_renew_shared(IN p_batch LONGTEXT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_now BIGINT;
    DECLARE v_rows BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_rows FROM leasehold_locks AS l
        WHERE l.owner = 'R' AND l.id IN (
            SELECT UNHEX(SHA2(UNHEX(b.k), 256)) FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
                k VARCHAR(8000) PATH '$[1]')) AS b)
        FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    UPDATE leasehold_readers AS r
        JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
          ON r.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND r.owner = UNHEX(b.o)
        JOIN leasehold_locks AS l ON l.id = r.id AND l.owner = 'R' AND l.expires > v_now
        SET r.expires = v_now + b.ms * 1000
        WHERE r.expires > v_now;
    UPDATE leasehold_locks AS l
        SET l.expires = (SELECT MAX(r.expires) FROM leasehold_readers AS r
                         WHERE r.id = l.id AND r.expires > v_now)
        WHERE l.owner = 'R' AND l.expires > v_now AND l.id IN (
            SELECT UNHEX(SHA2(UNHEX(b.k), 256)) FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
                k VARCHAR(8000) PATH '$[1]')) AS b);
    COMMIT;
    SELECT b.i FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
        JOIN leasehold_readers AS r
          ON r.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND r.owner = UNHEX(b.o)
        WHERE r.expires = v_now + b.ms * 1000;
END;;

-- Takes `p_count` permits of the semaphore `p_key` among `p_limit` for `p_owner` if that many are
-- free and the waiters queued ahead leave them (every live waiter, for a caller that is not
-- queued: `p_place` = ''); a waiter (`p_place` = its name and count) that must wait queues by
-- arrival for `p_wait_ms` (> 0), keeping its first place while it asks again. One row: `fence`
-- (`slot * 32 + 1`) when granted; else `remaining_ms` until the first holder's lease ends (NULL:
-- nobody holds one); `agreed`: the holders agreed on another limit (nothing changed).
CREATE PROCEDURE leasehold_acquire_permits(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_lease_ms BIGINT, IN p_limit INT,
    IN p_count INT, IN p_place VARBINARY(255), IN p_wait_ms BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_limit INT;
    DECLARE v_last BIGINT;
    DECLARE v_now BIGINT;
    DECLARE v_mine BIGINT DEFAULT NULL;
    DECLARE v_used BIGINT;
    DECLARE v_first BIGINT;
    DECLARE v_arrived BIGINT DEFAULT NULL;
    DECLARE v_ahead BIGINT;
    DECLARE v_slot BIGINT;
    DECLARE v_granted BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_agreed INT DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    -- The semaphore's row, locked until the end: its acquires count one at a time, and
    -- renewals (which share-lock it) are either seen whole or wait.
    INSERT INTO leasehold_semaphores (id, sem_key, permit_limit, fence, granted)
        VALUES (v_id, p_key, p_limit, 0, 0)
        ON DUPLICATE KEY UPDATE fence = fence;
    SELECT s.permit_limit, s.fence INTO v_limit, v_last
        FROM leasehold_semaphores AS s WHERE s.id = v_id FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    -- A call sent again after its connection closed, whose first run took the permits.
    SELECT p.fence INTO v_mine FROM leasehold_permits AS p
        WHERE p.id = v_id AND p.owner = p_owner AND p.expires > v_now;
    IF v_mine IS NOT NULL THEN
        SET v_granted = v_mine;
    ELSE
        SELECT COALESCE(SUM(p.permits), 0), MIN(p.expires) INTO v_used, v_first
            FROM leasehold_permits AS p WHERE p.id = v_id AND p.expires > v_now;
        IF v_used > 0 AND v_limit <> p_limit THEN
            SET v_agreed = v_limit;
        ELSE
            -- Waiters that stopped asking leave the queue (asking again, they queue at the back).
            DELETE FROM leasehold_waiters WHERE id = v_id AND waits_until <= v_now;
            SELECT w.arrived INTO v_arrived FROM leasehold_waiters AS w
                WHERE w.id = v_id AND w.name = p_place;
            SELECT COALESCE(SUM(IF(LOCATE(':', w.name) > 0,
                                   CAST(SUBSTRING_INDEX(w.name, ':', -1) AS UNSIGNED), 0)), 0)
                INTO v_ahead
                FROM leasehold_waiters AS w
                WHERE w.id = v_id AND (v_arrived IS NULL OR w.arrived < v_arrived
                      OR (w.arrived = v_arrived AND w.name < p_place));
            IF v_used + p_count + v_ahead > p_limit THEN
                IF p_place <> '' AND p_wait_ms > 0 THEN
                    CALL leasehold_wait_in_line(v_id, p_place, p_wait_ms, v_now);
                END IF;
                IF v_first IS NOT NULL THEN
                    SET v_remaining = GREATEST(1, CEIL((v_first - v_now) / 1000));
                END IF;
            ELSE
                IF p_place <> '' THEN
                    DELETE FROM leasehold_waiters WHERE id = v_id AND name = p_place;
                END IF;
                CALL leasehold_draw_slot(v_last DIV 32, v_now, v_slot);
                SET v_granted = v_slot * 32 + 1;
                UPDATE leasehold_semaphores
                    SET permit_limit = p_limit, fence = v_granted, granted = v_now
                    WHERE id = v_id;
                INSERT INTO leasehold_permits (id, owner, permits, fence, expires)
                    VALUES (v_id, p_owner, p_count, v_granted, v_now + p_lease_ms * 1000)
                    ON DUPLICATE KEY UPDATE permits = VALUES(permits), fence = VALUES(fence),
                        expires = VALUES(expires);
            END IF;
        END IF;
    END IF;
    COMMIT;
    SELECT v_granted AS fence, v_remaining AS remaining_ms, v_agreed AS agreed;
END;;

-- Deletes a holder's permits and wakes the semaphore's waiters when there were any. One row:
-- whether its lease was still running (NULL: it held none).
CREATE PROCEDURE leasehold_release_permits(
    IN p_key VARBINARY(3400), IN p_owner VARBINARY(255), IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT p.expires INTO v_expires FROM leasehold_permits AS p
        WHERE p.id = v_id AND p.owner = p_owner FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_expires IS NOT NULL THEN
        DELETE FROM leasehold_permits WHERE id = v_id AND owner = p_owner;
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, NULL, v_now);
    END IF;
    COMMIT;
    SELECT v_expires > v_now AS valid;
END;;

-- A waiter for several permits leaves the semaphore's queue; the others hear it when it was
-- there (the permits it kept may fit them now).
CREATE PROCEDURE leasehold_withdraw_permits(
    IN p_key VARBINARY(3400), IN p_place VARBINARY(255), IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    DELETE FROM leasehold_waiters WHERE id = v_id AND name = p_place;
    IF ROW_COUNT() > 0 THEN
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, NULL,
            TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
    END IF;
    COMMIT;
END;;

-- Extends every permit holder's lease of the batch (as leasehold_renew's) that is still
-- running. The semaphores' rows are share-locked first: an acquire counting the holders (which
-- locks the row) sees a renewal whole or after its end. One row per lease extended.
CREATE PROCEDURE leasehold_renew_permits(IN p_batch LONGTEXT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_now BIGINT;
    DECLARE v_rows BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_rows FROM leasehold_semaphores AS s
        WHERE s.id IN (
            SELECT UNHEX(SHA2(UNHEX(b.k), 256)) FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
                k VARCHAR(8000) PATH '$[1]')) AS b)
        LOCK IN SHARE MODE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    UPDATE leasehold_permits AS p
        JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
          ON p.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND p.owner = UNHEX(b.o)
        SET p.expires = v_now + b.ms * 1000
        WHERE p.expires > v_now;
    COMMIT;
    SELECT b.i FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
            i INT PATH '$[0]', k VARCHAR(8000) PATH '$[1]', o VARCHAR(600) PATH '$[2]',
            ms BIGINT PATH '$[3]')) AS b
        JOIN leasehold_permits AS p
          ON p.id = UNHEX(SHA2(UNHEX(b.k), 256)) AND p.owner = UNHEX(b.o)
        WHERE p.expires = v_now + b.ms * 1000;
END;;

-- Records `p_identity` with term `p_term` as the leader in `p_record`, if `p_owner` holds the
-- lock `p_key` and no newer term is recorded. One row: 1 written, 0 the lock is not `p_owner`'s,
-- -1 a newer term is recorded. Written, the lock's subscribers hear it, addressed to `leader`.
CREATE PROCEDURE leasehold_publish_leader(
    IN p_key VARBINARY(3400), IN p_record VARBINARY(3400), IN p_owner VARBINARY(255),
    IN p_term BIGINT, IN p_identity BLOB, IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_record BINARY(32) DEFAULT UNHEX(SHA2(p_record, 256));
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_term BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT l.expires INTO v_expires FROM leasehold_locks AS l
        WHERE l.id = v_id AND l.owner = p_owner LOCK IN SHARE MODE;
    SELECT r.term INTO v_term FROM leasehold_leaders AS r WHERE r.record_id = v_record FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_expires IS NULL OR v_expires <= v_now THEN
        SET v_done = 0;
    ELSEIF v_term IS NOT NULL AND v_term > p_term THEN
        SET v_done = -1;
    ELSE
        INSERT INTO leasehold_leaders (record_id, id, term, identity, owner)
            VALUES (v_record, v_id, p_term, p_identity, p_owner)
            ON DUPLICATE KEY UPDATE id = VALUES(id), term = VALUES(term),
                identity = VALUES(identity), owner = VALUES(owner);
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, 'leader', v_now);
        SET v_done = 1;
    END IF;
    COMMIT;
    SELECT v_done AS written;
END;;

-- Deletes the record of one term, and tells the observers when it was there.
CREATE PROCEDURE leasehold_clear_leader(
    IN p_record VARBINARY(3400), IN p_term BIGINT, IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    DELETE FROM leasehold_leaders WHERE record_id = UNHEX(SHA2(p_record, 256)) AND term = p_term;
    IF ROW_COUNT() > 0 THEN
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, 'leader',
            TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));
    END IF;
    COMMIT;
END;;

-- Deletes a lock whoever holds it (and its readers), and wakes its waiters. One row: 1 when it
-- was held (a live lease that no release had left to a contender), 0 when there was a row
-- nobody held, NULL when there was none.
CREATE PROCEDURE leasehold_force_release(IN p_key VARBINARY(3400), IN p_wake VARBINARY(3400))
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_id BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
    DECLARE v_owner VARBINARY(255) DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_now BIGINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT l.owner, l.expires INTO v_owner, v_expires FROM leasehold_locks AS l
        WHERE l.id = v_id FOR UPDATE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    IF v_owner IS NOT NULL THEN
        DELETE FROM leasehold_locks WHERE id = v_id;
        DELETE FROM leasehold_readers WHERE id = v_id;
        INSERT INTO leasehold_wakes (wake, to_name, at) VALUES (p_wake, NULL, v_now);
    END IF;
    COMMIT;
    SELECT v_expires > v_now AND LEFT(v_owner, 1) <> '~' AS held;
END;;

-- Writes the description of the locker `p_id` to count for `p_ttl_ms` from now.
CREATE PROCEDURE leasehold_describe_locker(
    IN p_id VARBINARY(255), IN p_description BLOB, IN p_ttl_ms BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    INSERT INTO leasehold_lockers (locker, description, expires)
        VALUES (p_id, p_description,
                TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))
                + p_ttl_ms * 1000)
        ON DUPLICATE KEY UPDATE description = VALUES(description), expires = VALUES(expires);
END;;

-- Deletes, a bounded number at a time, what nobody holds any more: lock rows, readers and
-- permit holders whose lease ended more than a second ago, waiters whose wait ended more than a
-- second ago, semaphores nobody holds that granted nothing for a minute, lockers' descriptions
-- expired a minute ago, wake-log rows older than `p_wakes_ms`, and guard rows of keys nobody
-- holds whose last holder change is ten minutes old (skipping any a transaction locked, and
-- raising the global floor to their slots first). Also raises the global floor to the clock.
-- Each delete re-checks its condition on the row's newest version once it locked it, so a row
-- taken over meanwhile stays.
CREATE PROCEDURE leasehold_sweep(IN p_wakes_ms BIGINT)
    COMMENT 'leasehold schema 3'
BEGIN
    DECLARE v_now BIGINT;
    DECLARE v_id BINARY(32);
    DECLARE v_slot BIGINT;
    DECLARE v_end BOOLEAN DEFAULT FALSE;
    DECLARE v_round INT DEFAULT 0;
    DECLARE v_deleted BIGINT;
    DECLARE v_old CURSOR FOR
        SELECT g.id FROM leasehold_guards AS g
        WHERE g.used < v_now - 600000000
          AND NOT EXISTS (SELECT 1 FROM leasehold_locks AS l WHERE l.id = g.id)
        LIMIT 200;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = TRUE;
    SET v_now = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6));
    DELETE FROM leasehold_locks WHERE expires < v_now - 1000000 LIMIT 1000;
    DELETE FROM leasehold_waiters WHERE waits_until < v_now - 1000000 LIMIT 1000;
    DELETE FROM leasehold_readers WHERE expires < v_now - 1000000 LIMIT 1000;
    DELETE FROM leasehold_permits WHERE expires < v_now - 1000000 LIMIT 1000;
    DELETE FROM leasehold_semaphores
        WHERE granted < v_now - 60000000
          AND NOT EXISTS (SELECT 1 FROM leasehold_permits AS p WHERE p.id = leasehold_semaphores.id)
        LIMIT 1000;
    DELETE FROM leasehold_lockers WHERE expires < v_now - 60000000 LIMIT 1000;
    -- The wake log grows with the release rate: trimmed in rounds of 10000, 20 at most.
    REPEAT
        DELETE FROM leasehold_wakes WHERE at < v_now - p_wakes_ms * 1000 ORDER BY seq LIMIT 10000;
        SET v_deleted = ROW_COUNT();
        SET v_round = v_round + 1;
    UNTIL v_deleted < 10000 OR v_round >= 20 END REPEAT;
    UPDATE leasehold_floor SET slot = GREATEST(slot, v_now DIV 32) WHERE one = 1;
    OPEN v_old;
    sweep_guards: LOOP
        SET v_end = FALSE;
        FETCH v_old INTO v_id;
        IF v_end THEN
            LEAVE sweep_guards;
        END IF;
        START TRANSACTION;
        SET v_slot = NULL;
        SELECT g.slot INTO v_slot FROM leasehold_guards AS g
            WHERE g.id = v_id AND g.used < v_now - 600000000 FOR UPDATE SKIP LOCKED;
        IF v_slot IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM leasehold_locks AS l WHERE l.id = v_id) THEN
            UPDATE leasehold_floor SET slot = GREATEST(slot, v_slot) WHERE one = 1;
            DELETE FROM leasehold_guards WHERE id = v_id;
        END IF;
        COMMIT;
    END LOOP;
    CLOSE v_old;
END;;

DELIMITER ;
