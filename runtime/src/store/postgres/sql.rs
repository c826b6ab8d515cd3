//! The statements the engine sends, besides its schema: each lock call is one call of a
//! `leasehold_*` function (see `schema.sql`); the operator's reads and the sweeps are plain SQL.

use tokio_postgres::types::Type;

/// A lock's acquire: key, owner, lease (ms), fences to reserve, the contender's name in the
/// line, how long it waits (ms: 0 when it does not wait in line), whether it may be in line.
pub const ACQUIRE: &str =
    "SELECT fence, remaining_ms FROM leasehold_acquire($1, $2, $3, $4, $5, $6, $7)";

/// [`ACQUIRE`]'s parameter types, as the statement is prepared.
pub const ACQUIRE_TYPES: [Type; 7] = [
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::BOOL,
];

/// Leases of several keys taken together, or none (`lock_all` of free keys): keys, owners,
/// whether each is a reader's share, leases (ms), fences to reserve, the process's name in the
/// lines of waiters. One row per lease, in order.
pub const ACQUIRE_ALL: &str =
    "SELECT fence, remaining_ms FROM leasehold_acquire_all($1, $2, $3, $4, $5, $6)";

/// [`ACQUIRE_ALL`]'s parameter types, as the statement is prepared.
pub const ACQUIRE_ALL_TYPES: [Type; 6] = [
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::BOOL_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT,
];

/// A lock's release: key, owner, the releasing contender's name, how long the next in line
/// has to take the lock (ms), the wake-up's payload.
pub const RELEASE: &str = "SELECT leasehold_release($1, $2, $3, $4, $5)";

/// [`RELEASE`]'s parameter types, as the statement is prepared.
pub const RELEASE_TYPES: [Type; 5] = [Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT];

/// Several locks' releases in one statement: keys, owners, the releasing contender's name, how
/// long the next in line has to take each lock (ms), the wake-ups' payloads. One answer per
/// key, in order, as [`RELEASE`]'s. A lock busy past the lock timeout fails the whole (nothing
/// done).
pub const RELEASE_ALL: &str = "SELECT leasehold_release_all($1, $2, $3, $4, $5)";

/// [`RELEASE_ALL`]'s parameter types, as the statement is prepared.
pub const RELEASE_ALL_TYPES: [Type; 5] = [
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT,
    Type::INT8,
    Type::TEXT_ARRAY,
];

pub(super) const WITHDRAW: &str = "SELECT leasehold_withdraw($1, $2, $3, $4)";

/// A lock handed over to another holder of its owner's process: key, owner. Only while no
/// fenced transaction of the key is open (its advisory lock, which `leasehold_check_fence`
/// holds shared until such a transaction ends, is free for this statement) and the owner
/// still holds the lock, the row gets a fence of a new slot, `slot × 32 + 1` (drawn with the
/// row locked, as `leasehold_acquire` draws): the next holder's, above every fence of the
/// lease before it, so a check with an earlier holder's fence is refused from now on. One
/// row: whether the advisory lock was free, and the new fence (`NULL` when nothing was drawn).
/// An update, never an insert: sent again, or landing late after the lock was released or
/// taken over, it changes nothing.
pub(super) const HAND_OVER: &str = "WITH free AS (\
     SELECT pg_try_advisory_xact_lock((k.h >> 32)::int, (k.h << 32 >> 32)::int) AS yes \
     FROM (SELECT hashtextextended($1, 0) AS h) AS k), \
     mine AS (\
     SELECT l.key, l.fence FROM leasehold_locks AS l \
     WHERE (SELECT yes FROM free) AND l.key = $1 AND l.owner = $2 \
     AND l.expires > clock_timestamp() \
     FOR UPDATE), \
     drawn AS (\
     UPDATE leasehold_locks AS l SET fence = leasehold_draw_slot(mine.fence / 32) * 32 + 1 \
     FROM mine WHERE l.key = mine.key RETURNING l.fence) \
     SELECT (SELECT yes FROM free), (SELECT fence FROM drawn)";

/// This connection's backend as the server knows it: its process id, and when it started in
/// microseconds since the epoch (a pid alone may be reused by a later backend). Read once when
/// a connection for lock calls opens, in the round trip that sets its bounds; every role may
/// read both columns of its own sessions.
pub(super) const BACKEND: &str = "SELECT a.pid, \
     (extract(epoch FROM a.backend_start) * 1000000)::int8 \
     FROM pg_stat_activity AS a WHERE a.pid = pg_backend_pid()";

/// Ends the backend `pid` that started at `started` ([`BACKEND`]) if it is still there: one
/// row (`t`: signalled) while it is, none once it is gone. A role may end its own backends
/// (`pg_terminate_backend`: a member of the backend's role, and only a superuser ends a
/// superuser's). Plain integers, sent as a simple query: one round trip, nothing prepared.
pub(super) fn end_backend(pid: i32, started: i64) -> String {
    format!(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity AS a \
         WHERE a.pid = {pid} AND (extract(epoch FROM a.backend_start) * 1000000)::int8 = {started}"
    )
}

/// Whether the backend `pid` that started at `started` is still there (one row while it is):
/// where the role may not end it, the settlement waits for it to end by itself.
pub(super) fn backend_alive(pid: i32, started: i64) -> String {
    format!(
        "SELECT 1 FROM pg_stat_activity AS a \
         WHERE a.pid = {pid} AND (extract(epoch FROM a.backend_start) * 1000000)::int8 = {started}"
    )
}

/// Runs every path of the lock functions once on a new connection, in a block whose work is
/// rolled back (the exception it raises at the end undoes it; a notification is not sent), on
/// the keys `''` and `'~'` (no stored key is either): a server compiles a plpgsql function and plans
/// its statements on its first call in each session, and that first call would otherwise be
/// some waiter's first attempt, late to join the line of waiters (tens of ms on a busy
/// server), so that a request that came later would be served first. Leaves nothing behind
/// but fence values drawn (fences only need to increase). Best effort: a connection whose
/// warm-up failed is used all the same.
pub(super) const WARM_UP: &str = "DO $$ BEGIN \
     PERFORM leasehold_acquire('', '00000000000000000000000000000000', 60000, 1, '', 0, false); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, false); \
     PERFORM leasehold_release('', '00000000000000000000000000000000', '', 1, ''); \
     PERFORM leasehold_release_all(ARRAY['', '~'], ARRAY['00000000000000000000000000000000', \
         '00000000000000000000000000000000'], '', 1, ARRAY['', '']); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, true); \
     PERFORM leasehold_withdraw('', 'w', 1, ''); \
     PERFORM leasehold_acquire_shared('~', '00000000000000000000000000000000', 60000); \
     PERFORM leasehold_release_shared('~', '00000000000000000000000000000000', 1, ''); \
     PERFORM leasehold_acquire_permits('~', '00000000000000000000000000000000', 60000, 1, 1, '', 0); \
     PERFORM leasehold_acquire_all(ARRAY['', '~'], ARRAY['00000000000000000000000000000000', \
         '00000000000000000000000000000000'], ARRAY[false, true], ARRAY[60000, 60000]::bigint[], \
         ARRAY[1, 1]::bigint[], ''); \
     RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'leasehold warm-up'; \
     EXCEPTION WHEN raise_exception THEN NULL; \
     END $$";

pub(super) const RENEW: &str = "UPDATE leasehold_locks AS l \
     SET expires = clock_timestamp() + b.ms * interval '1 millisecond' \
     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS b(key, owner, ms) \
     WHERE l.key = b.key AND l.owner = b.owner AND l.expires > clock_timestamp() \
     RETURNING l.key, l.owner";

/// A row left to the next in line (owner `~` and its name) is not held. Then the public
/// parts of the holders' tokens (the writer's, or every live reader's; never a secret), and
/// the first `$2` waiters in line with how long each has waited (ms, server clock).
pub(super) const INSPECT: &str = "SELECT l.fence, \
     CASE WHEN left(l.owner, 1) = '~' THEN NULL \
     ELSE ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint END, \
     (SELECT count(*) FROM leasehold_waiters AS w \
      WHERE w.key = $1 AND w.waits_until > clock_timestamp()), \
     CASE WHEN l.expires <= clock_timestamp() OR left(l.owner, 1) = '~' THEN ARRAY[]::text[] \
     WHEN l.owner = 'R' THEN ARRAY(SELECT leasehold_public(r.owner) FROM leasehold_readers AS r \
      WHERE r.key = $1 AND r.expires > clock_timestamp() ORDER BY r.expires) \
     ELSE ARRAY[leasehold_public(l.owner)] END, \
     ARRAY(SELECT w.name FROM leasehold_waiters AS w \
      WHERE w.key = $1 AND w.waits_until > clock_timestamp() \
      ORDER BY w.arrived, w.name LIMIT $2), \
     ARRAY(SELECT greatest(0, floor(extract(epoch FROM clock_timestamp() - w.arrived) * 1000))::bigint \
      FROM leasehold_waiters AS w \
      WHERE w.key = $1 AND w.waits_until > clock_timestamp() \
      ORDER BY w.arrived, w.name LIMIT $2) \
     FROM leasehold_locks AS l WHERE l.key = $1";

/// Writes this locker's description (see `leasehold_describe_locker`).
pub(super) const DESCRIBE_LOCKER: &str = "SELECT leasehold_describe_locker($1, $2, $3)";

/// The stored descriptions of the lockers `$1`, where they still count.
pub(super) const DESCRIPTIONS: &str = "SELECT id, description FROM leasehold_lockers \
     WHERE id = ANY($1) AND expires > clock_timestamp()";

pub(super) const LIST: &str =
    "SELECT key FROM leasehold_locks WHERE starts_with(key, $1) ORDER BY key";

pub(super) const FORCE_RELEASE: &str = "WITH gone AS (\
     DELETE FROM leasehold_locks WHERE key = $1 \
     RETURNING expires > clock_timestamp() AND left(owner, 1) <> '~' AS held) \
     SELECT held, pg_notify('leasehold', $2) IS NULL FROM gone";

/// Deletes rows whose lease ended more than a second ago, a bounded number at a time; the
/// second condition is checked again on the row's newest version, so a row taken over
/// meanwhile stays. Rows another transaction has locked (a serializable fenced transaction
/// key-shares its row) are skipped, not waited for: the sweep runs on the listening
/// connection, which must not stall.
pub(super) const SWEEP: &str = "DELETE FROM leasehold_locks WHERE key IN (\
     SELECT key FROM leasehold_locks \
     WHERE expires < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED) \
     AND expires < clock_timestamp() - interval '1 second'";

/// Deletes waiters whose wait ended more than a second ago (they died, or could not
/// withdraw), as [`SWEEP`] does rows: a release passes over them anyway.
pub(super) const SWEEP_WAITERS: &str = "DELETE FROM leasehold_waiters WHERE (key, name) IN (\
     SELECT key, name FROM leasehold_waiters \
     WHERE waits_until < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED)";

pub(super) const ACQUIRE_SHARED: &str =
    "SELECT fence, remaining_ms FROM leasehold_acquire_shared($1, $2, $3)";

pub(super) const RELEASE_SHARED: &str = "SELECT leasehold_release_shared($1, $2, $3, $4)";

pub(super) const RENEW_SHARED: &str =
    "SELECT renewed_key, renewed_owner FROM leasehold_renew_shared($1, $2, $3)";

pub(super) const ACQUIRE_PERMITS: &str = "SELECT fence, remaining_ms, agreed \
     FROM leasehold_acquire_permits($1, $2, $3, $4, $5, $6, $7)";

/// Deletes a holder's permits, owner-checked, and wakes the semaphore's waiters when there
/// were any: a row when there were (whether its lease was still running), none otherwise.
pub(super) const RELEASE_PERMITS: &str = "WITH gone AS (\
     DELETE FROM leasehold_permits WHERE key = $1 AND owner = $2 \
     RETURNING expires > clock_timestamp() AS valid) \
     SELECT valid, pg_notify('leasehold', $3) IS NULL FROM gone";

pub(super) const RENEW_PERMITS: &str =
    "SELECT renewed_key, renewed_owner FROM leasehold_renew_permits($1, $2, $3)";

/// A waiter for several permits leaves the semaphore's queue; the others hear it when it was
/// there (the permits it kept may fit them now).
pub(super) const WITHDRAW_PERMITS: &str = "WITH gone AS (\
     DELETE FROM leasehold_waiters WHERE key = $1 AND name = $2 RETURNING 1) \
     SELECT pg_notify('leasehold', $3) IS NULL FROM gone";

/// The live holders of a semaphore, the soonest to end first, with the limit they agreed on
/// and the public part of each one's token (never the secret).
pub(super) const INSPECT_PERMITS: &str = "SELECT s.permit_limit, p.permits, \
     ceil(extract(epoch FROM p.expires - clock_timestamp()) * 1000)::bigint, \
     leasehold_public(p.owner) \
     FROM leasehold_permits AS p JOIN leasehold_semaphores AS s ON s.key = p.key \
     WHERE p.key = $1 AND p.expires > clock_timestamp() \
     ORDER BY p.expires";

pub(super) const PUBLISH_LEADER: &str = "SELECT leasehold_publish_leader($1, $2, $3, $4, $5, $6)";

/// Deletes the record of one term, and tells the observers when it was there.
pub(super) const CLEAR_LEADER: &str = "WITH gone AS (\
     DELETE FROM leasehold_leaders WHERE record = $1 AND term = $2 RETURNING 1) \
     SELECT pg_notify('leasehold_turn', 'leader ' || $3::text) IS NULL FROM gone";

/// The recorded leader, if its owner token holds the election's lock now (server clock).
pub(super) const READ_LEADER: &str = "SELECT r.term, r.identity \
     FROM leasehold_leaders AS r \
     JOIN leasehold_locks AS l ON l.key = $2 AND l.owner = r.owner \
     WHERE r.record = $1 AND l.expires > clock_timestamp()";

/// Deletes read leases that ended more than a second ago, as [`SWEEP`] does rows.
pub(super) const SWEEP_READERS: &str = "DELETE FROM leasehold_readers WHERE (key, owner) IN (\
     SELECT key, owner FROM leasehold_readers \
     WHERE expires < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED) \
     AND expires < clock_timestamp() - interval '1 second'";

/// Deletes semaphore holders whose lease ended more than a second ago (crashed holders).
pub(super) const SWEEP_PERMITS: &str = "DELETE FROM leasehold_permits WHERE (key, owner) IN (\
     SELECT key, owner FROM leasehold_permits \
     WHERE expires < clock_timestamp() - interval '1 second' LIMIT 1000 \
     FOR UPDATE SKIP LOCKED) \
     AND expires < clock_timestamp() - interval '1 second'";

/// Deletes the rows of semaphores that nobody holds and that granted nothing for a minute. The
/// grant time is checked again on the row's newest version: a grant committed after this
/// statement's snapshot (whose holder the `NOT EXISTS` cannot see) keeps its row.
pub(super) const SWEEP_SEMAPHORES: &str = "DELETE FROM leasehold_semaphores AS s WHERE s.key IN (\
     SELECT v.key FROM leasehold_semaphores AS v \
     WHERE v.granted < clock_timestamp() - interval '1 minute' \
     AND NOT EXISTS (SELECT 1 FROM leasehold_permits AS p WHERE p.key = v.key) \
     LIMIT 1000 FOR UPDATE SKIP LOCKED) \
     AND s.granted < clock_timestamp() - interval '1 minute' \
     AND NOT EXISTS (SELECT 1 FROM leasehold_permits AS p WHERE p.key = s.key)";
