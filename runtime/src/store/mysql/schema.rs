//! The engine's schema: the script that creates the tables and procedures (`schema.sql`), and
//! its creation on first use, serialized across lockers by a named lock.

use mysql_async::prelude::Queryable;

use super::conn::Shared;
use crate::error::LockError;

/// The tables and procedures the engine uses, as an operator applies them with the `mysql` or
/// `mariadb` client (which reads its `DELIMITER` lines); the engine applies them itself on
/// first use when its database user may, and again when the procedures are an older
/// version's. Idempotent. Needs MySQL 8.0 or MariaDB 10.6 or later, InnoDB. The privileges
/// are in the engine's docs (`leasehold::mysql`).
pub const SCHEMA: &str = include_str!("schema.sql");

/// The tag every procedure carries as its comment.
const TAG: &str = "leasehold schema 3";

/// The tables.
const TABLES: [&str; 10] = [
    "leasehold_locks",
    "leasehold_guards",
    "leasehold_floor",
    "leasehold_waiters",
    "leasehold_readers",
    "leasehold_semaphores",
    "leasehold_permits",
    "leasehold_leaders",
    "leasehold_lockers",
    "leasehold_wakes",
];

/// The least time given to creating the schema, once per database, whatever the connect and
/// operation timeouts (as on PostgreSQL).
pub(super) const SCHEMA_CREATION: std::time::Duration = std::time::Duration::from_secs(30);

/// The statements of `script`, as the command-line client splits them: at the current
/// delimiter (`;`, or what a `DELIMITER` line sets) at the end of a line.
pub(super) fn statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut delimiter = ";".to_owned();
    let mut current = String::new();
    for line in script.lines() {
        let trimmed = line.trim();
        if let Some(d) = trimmed.strip_prefix("DELIMITER ") {
            delimiter = d.trim().to_owned();
            continue;
        }
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with("--")) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix(delimiter.as_str()) {
            let indent = &line[..line.len() - line.trim_start().len()];
            current.push_str(indent);
            current.push_str(body);
            out.push(std::mem::take(&mut current));
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    out
}

/// How many procedures the script creates.
fn procedures() -> usize {
    SCHEMA.matches("\nCREATE PROCEDURE ").count()
}

/// Whether every table is there and every procedure carries this version's tag.
async fn present(conn: &mut mysql_async::Conn) -> Result<bool, mysql_async::Error> {
    let list = TABLES
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let found: Option<(i64, i64)> = conn
        .query_first(format!(
            "SELECT (SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({list})), \
             (SELECT COUNT(*) FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' \
             AND ROUTINE_NAME LIKE 'leasehold%' AND ROUTINE_COMMENT = '{TAG}')"
        ))
        .await?;
    Ok(found.is_some_and(|(t, p)| t as usize == TABLES.len() && p as usize == procedures()))
}

impl Shared {
    /// Creates the schema when it is missing or older, under the named lock
    /// `leasehold_schema.<database>` (lockers starting together wait for the first), within
    /// [`SCHEMA_CREATION`] (or the connect timeout, if longer).
    pub(super) async fn ensure_schema(
        &self,
        conn: &mut mysql_async::Conn,
    ) -> Result<(), LockError> {
        let limit = self.settings.connect_timeout;
        let found = tokio::time::timeout(limit, present(conn))
            .await
            .map_err(|_| self.late(limit))?
            .map_err(|e| self.unavailable("refused a read of its catalog", e))?;
        if found {
            return Ok(());
        }
        let bound = SCHEMA_CREATION.max(limit);
        let create = async {
            // The session's statement bound is the operations' (short): the creation gets its
            // own.
            let mariadb = self.mariadb.get().copied().unwrap_or(true);
            conn.query_drop(super::conn::session_bounds(mariadb, bound))
                .await?;
            let got: Option<i64> = conn
                .exec_first(
                    "SELECT GET_LOCK(CONCAT('leasehold_schema.', DATABASE()), ?)",
                    (bound.as_secs() as i64,),
                )
                .await?;
            if got != Some(1) {
                return Ok(false);
            }
            let mut result = Ok(true);
            if !present(conn).await? {
                for statement in statements(SCHEMA) {
                    if let Err(e) = conn.query_drop(statement).await {
                        result = Err(e);
                        break;
                    }
                }
            }
            conn.query_drop("DO RELEASE_LOCK(CONCAT('leasehold_schema.', DATABASE()))")
                .await?;
            result
        };
        match tokio::time::timeout(bound, create).await {
            Err(_) => Err(self.late(bound)),
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(LockError::unavailable(
                format!(
                    "MySQL at {}: another locker held the schema's lock for {bound:?}",
                    self.shown
                ),
                None,
            )),
            Ok(Err(e)) if matches!(super::errors::code(&e), Some(1044 | 1142 | 1227 | 1370)) => {
                Err(LockError::config(format!(
                    "MySQL at {} does not let this user create the lock tables and procedures; \
                     apply leasehold::mysql::SCHEMA as a user that may (once, with the mysql \
                     client), then grant this one EXECUTE on the leasehold_* procedures and \
                     SELECT on the leasehold_* tables: {e}",
                    self.shown
                )))
            }
            Ok(Err(e)) => Err(self.unavailable("could not create the lock tables", e)),
        }
    }
}
