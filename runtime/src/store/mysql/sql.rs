//! The statements the engine sends, besides its schema: each lock call is one `CALL` of a
//! `leasehold_*` procedure (see `schema.sql`), answered by one row; the operator's reads are
//! plain SQL.
//!
//! **`leasehold_check_fence`** (for `leasehold::mysql::check_fence`) is a procedure, not a
//! function (creating a function with binary logging on needs SUPER): in the caller's
//! transaction, `CALL leasehold_check_fence(?, ?)` with the stored lock key (bytes, as
//! [`key_text`](super::text::key_text) gives them) and the fence (a signed 64-bit integer)
//! answers one row of one column, `holds`: 1 while the fence is the current holder's (its
//! writer, or one of its readers), else 0. It share-locks the key's guard row until the caller's
//! transaction ends, and bounds how long that transaction may sit idle to the lease left plus
//! [`FENCED_IDLE_MARGIN`](FENCED_IDLE_MARGIN) (MariaDB: `idle_transaction_timeout`, in whole
//! seconds; MySQL 8: the session's `wait_timeout`, which stays lowered). Under REPEATABLE READ
//! it reads the lock's row from the transaction's snapshot: call it as the transaction's first
//! read (or run it READ COMMITTED).

/// The idle bound a checked transaction gets beyond its holder's remaining lease, as
/// `leasehold_check_fence` sets it (`+ 5000 * 1000` µs in `schema.sql`).
#[allow(dead_code)] // `leasehold::mysql::FENCED_IDLE_MARGIN`
pub(crate) const FENCED_IDLE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The statement that checks a fence in the caller's transaction: the stored key, the fence.
#[allow(dead_code)] // `leasehold::mysql::check_fence`
pub(crate) const CHECK_FENCE: &str = "CALL leasehold_check_fence(?, ?)";

/// The server's clock in microseconds since the epoch, in one statement.
pub(super) const NOW_US: &str =
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// A lock's acquire: key, owner, lease (ms), fences to reserve, the contender's name in the
/// line, how long it waits (ms: 0 when it does not wait in line), whether it may be in line.
/// One row: the fence (NULL: held), the time left of the holder's lease (ms).
pub(super) const ACQUIRE: &str = "CALL leasehold_acquire(?, ?, ?, ?, ?, ?, ?)";

/// Leases of several keys taken together, or none (`lock_all` of free keys): the batch as
/// JSON (`[hex(key), hex(owner), read, lease_ms, fences]` each, in key order), the process's
/// name in the lines of waiters. One row: the fences in order, comma-separated (NULL: not all
/// free), the time left (ms) of the lease that was not free, and its place in the batch.
pub(super) const ACQUIRE_ALL: &str = "CALL leasehold_acquire_all(?, ?)";

/// A lock's release: key, owner, the releasing contender's name, how long the next in line has
/// to take the lock (ms), the wake key. One row: 1, 0, or NULL (not the owner's).
pub(super) const RELEASE: &str = "CALL leasehold_release(?, ?, ?, ?, ?)";
/// A guard's locks given back in one transaction (`leasehold_release_all`).
pub(super) const RELEASE_ALL: &str = "CALL leasehold_release_all(?, ?, ?)";

/// A contender leaves the line: key, its name, the window (ms), the wake key.
pub(super) const WITHDRAW: &str = "CALL leasehold_withdraw(?, ?, ?, ?)";

/// A lock handed over within its holder's process: key, owner. One row: whether the guard was
/// free, and the new fence (NULL: nothing drawn).
pub(super) const HAND_OVER: &str = "CALL leasehold_hand_over(?, ?)";

/// The renewals of locks, readers' leases and permit holders: one JSON batch of
/// `[i, hex(key), hex(owner), lease_ms]` each; the rows answered are the `i` extended.
pub(super) const RENEW: &str = "CALL leasehold_renew(?)";
pub(super) const RENEW_SHARED: &str = "CALL leasehold_renew_shared(?)";
pub(super) const RENEW_PERMITS: &str = "CALL leasehold_renew_permits(?)";

/// A reader's acquire: key, owner, lease (ms). One row as [`ACQUIRE`]'s.
pub(super) const ACQUIRE_SHARED: &str = "CALL leasehold_acquire_shared(?, ?, ?)";

/// A reader's release: key, owner, the window (ms), the wake key. One row: valid.
pub(super) const RELEASE_SHARED: &str = "CALL leasehold_release_shared(?, ?, ?, ?)";

/// Permits: key, owner, lease (ms), limit, count, the waiter's place (or ''), its wait (ms).
/// One row: fence, remaining_ms, agreed.
pub(super) const ACQUIRE_PERMITS: &str = "CALL leasehold_acquire_permits(?, ?, ?, ?, ?, ?, ?)";

/// A holder's permits given back: key, owner, wake key. One row: valid (NULL: none held).
pub(super) const RELEASE_PERMITS: &str = "CALL leasehold_release_permits(?, ?, ?)";

/// A waiter for several permits leaves the queue: key, place, wake key.
pub(super) const WITHDRAW_PERMITS: &str = "CALL leasehold_withdraw_permits(?, ?, ?)";

/// The live holders of a semaphore, the soonest to end first: the agreed limit, permits, ms
/// left, owner.
pub(super) const INSPECT_PERMITS: &str = "SELECT s.permit_limit, p.permits, \
     CAST(CEIL((p.expires - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))) / 1000) AS SIGNED), \
     p.owner \
     FROM leasehold_permits AS p JOIN leasehold_semaphores AS s ON s.id = p.id \
     WHERE p.id = UNHEX(SHA2(?, 256)) \
     AND p.expires > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
     ORDER BY p.expires";

/// Leader records: key, record, owner, term, identity, wake key. One row: 1, 0 or -1.
pub(super) const PUBLISH_LEADER: &str = "CALL leasehold_publish_leader(?, ?, ?, ?, ?, ?)";

/// Deletes the record of one term: record, term, wake key.
pub(super) const CLEAR_LEADER: &str = "CALL leasehold_clear_leader(?, ?, ?)";

/// The recorded leader (record, lock key), if its owner token holds the lock now.
pub(super) const READ_LEADER: &str = "SELECT r.term, r.identity \
     FROM leasehold_leaders AS r \
     JOIN leasehold_locks AS l ON l.id = UNHEX(SHA2(?, 256)) AND l.owner = r.owner \
     WHERE r.record_id = UNHEX(SHA2(?, 256)) \
     AND l.expires > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

/// One lock's row: fence, owner, ms left (may be negative).
pub(super) const INSPECT: &str = "SELECT l.fence, l.owner, \
     CAST(CEIL((l.expires - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))) / 1000) AS SIGNED) \
     FROM leasehold_locks AS l WHERE l.id = UNHEX(SHA2(?, 256))";

/// One lock's live readers, the soonest to end first.
pub(super) const INSPECT_READERS: &str = "SELECT r.owner FROM leasehold_readers AS r \
     WHERE r.id = UNHEX(SHA2(?, 256)) \
     AND r.expires > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
     ORDER BY r.expires";

/// One lock's live waiters in line, with how long each has waited (ms).
pub(super) const INSPECT_WAITERS: &str = "SELECT w.name, \
     CAST(GREATEST(0, FLOOR((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - w.arrived) / 1000)) AS SIGNED) \
     FROM leasehold_waiters AS w WHERE w.id = UNHEX(SHA2(?, 256)) \
     AND w.waits_until > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
     ORDER BY w.arrived, w.name";

/// Writes this locker's description: id, description, time to live (ms).
pub(super) const DESCRIBE_LOCKER: &str = "CALL leasehold_describe_locker(?, ?, ?)";

/// The lock keys stored under a prefix: its length in bytes, the prefix.
pub(super) const LIST: &str =
    "SELECT lock_key FROM leasehold_locks WHERE LEFT(lock_key, ?) = ? ORDER BY lock_key";

/// Deletes a lock whoever holds it: key, wake key. One row: held.
pub(super) const FORCE_RELEASE: &str = "CALL leasehold_force_release(?, ?)";

/// The periodic sweep: how long wake-log rows are kept (ms).
pub(super) const SWEEP: &str = "CALL leasehold_sweep(?)";

/// How long the wake log keeps a row: far longer than a reader may need it
/// ([`late_commits`](super::listener)).
pub(super) const WAKES_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// The stored descriptions of `n` lockers, where they still count.
pub(super) fn descriptions(n: usize) -> String {
    format!(
        "SELECT locker, description FROM leasehold_lockers WHERE locker IN ({}) \
         AND expires > {NOW_US}",
        vec!["?"; n].join(", ")
    )
}
