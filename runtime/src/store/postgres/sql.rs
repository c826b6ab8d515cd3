//! The statements the engine sends, besides its schema: each lock call is one call of a
//! `leasehold_*` function (see `schema.sql`); the operator's reads and the sweeps are plain SQL.

pub(super) const ACQUIRE: &str =
    "SELECT fence, remaining_ms FROM leasehold_acquire($1, $2, $3, $4, $5, $6, $7)";

pub(super) const RELEASE: &str = "SELECT leasehold_release($1, $2, $3, $4, $5)";

pub(super) const WITHDRAW: &str = "SELECT leasehold_withdraw($1, $2, $3, $4)";

/// Runs every path of the lock functions once on a new connection, in a block whose work is
/// rolled back (the exception it raises at the end undoes it; a notification is not sent), on
/// the key `''` (no stored lock key is empty): a server compiles a plpgsql function and plans
/// its statements on its first call in each session, and that first call would otherwise be
/// some waiter's first attempt, late to join the line of waiters (tens of ms on a busy
/// server), so that a request that came later would be served first. Leaves nothing behind
/// but fence values drawn (fences only need to increase). Best effort: a connection whose
/// warm-up failed is used all the same.
pub(super) const WARM_UP: &str = "DO $$ BEGIN \
     PERFORM leasehold_acquire('', '00000000000000000000000000000000', 60000, 1, '', 0, false); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, false); \
     PERFORM leasehold_release('', '00000000000000000000000000000000', '', 1, ''); \
     PERFORM leasehold_acquire('', '', 60000, 1, 'w', 60000, true); \
     PERFORM leasehold_withdraw('', 'w', 1, ''); \
     RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'leasehold warm-up'; \
     EXCEPTION WHEN raise_exception THEN NULL; \
     END $$";

pub(super) const RENEW: &str = "UPDATE leasehold_locks AS l \
     SET expires = clock_timestamp() + b.ms * interval '1 millisecond' \
     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS b(key, owner, ms) \
     WHERE l.key = b.key AND l.owner = b.owner AND l.expires > clock_timestamp() \
     RETURNING l.key, l.owner";

/// A row left to the next in line (owner `~` and its name) is not held.
pub(super) const INSPECT: &str = "SELECT l.fence, \
     CASE WHEN left(l.owner, 1) = '~' THEN NULL \
     ELSE ceil(extract(epoch FROM l.expires - clock_timestamp()) * 1000)::bigint END, \
     (SELECT count(*) FROM leasehold_waiters AS w \
      WHERE w.key = $1 AND w.waits_until > clock_timestamp()) \
     FROM leasehold_locks AS l WHERE l.key = $1";

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
