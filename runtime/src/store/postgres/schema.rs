//! The engine's schema: the script that creates the tables, sequence and functions
//! (`schema.sql`), and its creation on first use, serialized across lockers.

use tokio_postgres as pg;

use super::conn::Shared;
use super::errors::error_text;
use crate::error::LockError;

/// The tables, sequence and functions the engine uses, as an operator would apply them (the
/// engine applies them itself on first use when its database user may, and again when the
/// functions are an older version's). Idempotent. Needs PostgreSQL 11 or later. A user that
/// did not apply it needs SELECT, INSERT, UPDATE, DELETE on `leasehold_locks` and
/// `leasehold_waiters` (and, for read locks, semaphores and leader election,
/// `leasehold_readers`, `leasehold_semaphores`, `leasehold_permits` and `leasehold_leaders`;
/// for the lockers' descriptions, `leasehold_lockers`),
/// USAGE and UPDATE on `leasehold_fences` (without UPDATE, fences still follow the clock, but
/// a clock stepping back is no longer covered) and EXECUTE on the functions.
pub const SCHEMA: &str = include_str!("schema.sql");

/// Whether the schema is there, with this version's functions (their bodies carry the tag
/// `leasehold schema 9`: an older database gets the new bodies); read before creating it.
const SCHEMA_PRESENT: &str = "SELECT to_regclass('leasehold_locks') IS NOT NULL \
     AND to_regclass('leasehold_fences') IS NOT NULL \
     AND to_regclass('leasehold_waiters') IS NOT NULL \
     AND to_regclass('leasehold_readers') IS NOT NULL \
     AND to_regclass('leasehold_semaphores') IS NOT NULL \
     AND to_regclass('leasehold_permits') IS NOT NULL \
     AND to_regclass('leasehold_leaders') IS NOT NULL \
     AND to_regclass('leasehold_lockers') IS NOT NULL \
     AND (SELECT count(*) FROM pg_proc WHERE prosrc LIKE '%leasehold schema 9%' AND oid IN (\
          to_regprocedure('leasehold_acquire(text,text,bigint,bigint,text,bigint,boolean)'), \
          to_regprocedure('leasehold_acquire(text,text,bigint,bigint)'), \
          to_regprocedure('leasehold_wait_in_line(text,text,bigint)'), \
          to_regprocedure('leasehold_next_in_line(text,text)'), \
          to_regprocedure('leasehold_release(text,text,text,bigint,text)'), \
          to_regprocedure('leasehold_release_all(text[],text[],text,bigint,text[])'), \
          to_regprocedure('leasehold_withdraw(text,text,bigint,text)'), \
          to_regprocedure('leasehold_pass_on(text,text,bigint,text)'), \
          to_regprocedure('leasehold_check_fence(text,bigint)'), \
          to_regprocedure('leasehold_draw_slot(bigint)'), \
          to_regprocedure('leasehold_acquire_shared(text,text,bigint)'), \
          to_regprocedure('leasehold_release_shared(text,text,bigint,text)'), \
          to_regprocedure('leasehold_renew_shared(text[],text[],bigint[])'), \
          to_regprocedure('leasehold_acquire_all(text[],text[],boolean[],bigint[],bigint[],text)'), \
          to_regprocedure('leasehold_acquire_permits(text,text,bigint,integer,integer,text,bigint)'), \
          to_regprocedure('leasehold_renew_permits(text[],text[],bigint[])'), \
          to_regprocedure('leasehold_publish_leader(text,text,text,bigint,text,text)'), \
          to_regprocedure('leasehold_public(text)'), \
          to_regprocedure('leasehold_describe_locker(text,text,bigint)'))) = 19";

/// Serializes the creation of the schema across processes (`CREATE ... IF NOT EXISTS` races).
const SCHEMA_LOCK: i64 = 0x6c65_6173_6568_6f6c; // "leasehol"

/// The least time given to creating the schema, once per database, whatever the connect and
/// operation timeouts: bounded by those (a fifth of a second is a fine `op_timeout` for
/// locks), a creation that took longer on a loaded server was cancelled and rolled back on
/// every try, and lockers starting together on a fresh database never got one.
pub(super) const SCHEMA_CREATION: std::time::Duration = std::time::Duration::from_secs(30);

impl Shared {
    /// Creates the schema when it is missing, under an advisory lock that serializes lockers
    /// starting together, within [`SCHEMA_CREATION`] (or the connect timeout, if longer).
    pub(super) async fn ensure_schema(&self, client: &mut pg::Client) -> Result<(), LockError> {
        let present = |row: pg::Row| row.get::<_, bool>(0);
        let limit = self.settings.connect_timeout;
        let found = tokio::time::timeout(limit, client.query_one(SCHEMA_PRESENT, &[]))
            .await
            .map_err(|_| self.late(limit))?
            .map_err(|e| self.unavailable("refused a read of its catalog", e))?;
        if present(found) {
            return Ok(());
        }
        // The session's statement and lock timeouts are the operations' (short); creating the
        // schema, and waiting for another locker creating it, get their own bound.
        let bound = SCHEMA_CREATION
            .max(self.settings.connect_timeout)
            .as_millis();
        let create = async {
            let tx = client.transaction().await?;
            tx.batch_execute(&format!(
                "SET LOCAL statement_timeout = {bound}; SET LOCAL lock_timeout = {bound}"
            ))
            .await?;
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
                     one SELECT, INSERT, UPDATE, DELETE on leasehold_locks, \
                     leasehold_waiters, leasehold_readers, leasehold_semaphores, \
                     leasehold_permits, leasehold_leaders and leasehold_lockers, USAGE, UPDATE on \
                     leasehold_fences and EXECUTE on the functions: {}",
                    self.shown,
                    error_text(&e)
                ))
            } else {
                self.unavailable("could not create the lock tables", e)
            }
        })
    }
}
