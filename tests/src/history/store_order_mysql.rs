//! The order a MySQL / MariaDB lock store saw its fair requests in: the same [`StoreEvent`]s
//! as PostgreSQL's recorder gives ([`super::store_order`]), for the same judge
//! ([`judge_fifo`](super::judge_fifo)). Triggers on the engine's tables append, to a log table
//! whose `AUTO_INCREMENT` column is the sequence, every waiter that joins a lock's line
//! (`leasehold_waiters`: a new row; a waiter asking again updates its row and keeps its place,
//! which is no event) or leaves it (a deleted row), and every change of a lock's owner
//! (`leasehold_locks`: a new row, or an update that changes `owner`), each with its
//! transaction and the owner before. A lock's row deleted (freed) or an update of its lease or
//! fence alone is no event, as on PostgreSQL.
//!
//! Why the log's order is the store's order for one lock. InnoDB hands out `AUTO_INCREMENT`
//! values when a row is inserted, not when its transaction commits, in increasing order over
//! time. Every procedure that changes a lock's line or owner (`leasehold_acquire`,
//! `leasehold_release` and `leasehold_withdraw`, both through `leasehold_pass_on`,
//! `leasehold_force_release`) first locks the lock's row (`SELECT ... FOR UPDATE`), and InnoDB
//! holds that lock until the transaction ends; a procedure's own writes, and so the triggers'
//! appends, come after it. So of two transactions that change one lock's line or owner, the
//! second appends only after the first committed: their events do not interleave, and their
//! numbers follow their commits. Where there is no row to lock:
//! - an acquire that finds no row locks the key's guard row (`leasehold_take_guard`), which
//!   any other acquire that finds no row must take too, looks again, inserts the row, which
//!   it then holds locked, and only then appends (its grant, then its own leave): the same
//!   argument from the insert on (nothing else changes a lock that has no row but the two
//!   below, and a join needs the row);
//! - a withdrawal from the line of a lock that has no row, and the sweep's deletion of waiters
//!   whose wait ended more than a second before, delete a waiter without the lock's row: a
//!   waiter that stopped waiting. Its leave is numbered when the deletion ran, which may come
//!   before that deletion commits, so the judge stops counting the waiter in the line from
//!   the moment it stopped waiting. A release that chooses it meanwhile (from a read of the
//!   line that still shows it) waits for that deletion to end before its own deletion of the
//!   chosen waiter, and the lock goes to `~` and that name, as the judge reads it.
//!
//! Joins and grants never happen without the lock's row (or, as above, the guard row) locked.
//!
//! The transaction of an event: the log table is versioned by transaction
//! (`WITH SYSTEM VERSIONING`, `ROW START` a `BIGINT UNSIGNED`), so each row carries the id of
//! the InnoDB transaction that inserted it, as PostgreSQL's `txid_current()`. That is
//! MariaDB's (MySQL 8 has no system versioning: a recorder there would need another source,
//! such as `performance_schema.events_transactions_current`); MariaDB is the server tested
//! here.
//!
//! One difference of order inside a transaction: MySQL's acquire inserts or takes over the
//! lock's row before it takes its waiter out of the line (PostgreSQL's does the reverse). The
//! judge reads a grant's own leave before it (a waiter that took a free lock left the line in
//! the grant's transaction), so within each transaction of one lock the leaves are put before
//! its grant; events keep their numbers. A transaction is atomic: the order inside it is no
//! order the store showed anyone.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::store_order::StoreEvent;

/// The log and its triggers, installed once the engine's schema exists (a locker built on the
/// database first makes it), by a user who may create triggers. Each statement on its own.
const INSTALL: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS test_store_order (
        seq      BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        event    VARCHAR(5)      NOT NULL,
        id       BINARY(32)      NOT NULL,
        lock_key VARBINARY(3400) NULL,
        who      VARBINARY(255)  NOT NULL,
        prev     VARBINARY(255)  NULL,
        tx       BIGINT UNSIGNED GENERATED ALWAYS AS ROW START INVISIBLE,
        tx_end   BIGINT UNSIGNED GENERATED ALWAYS AS ROW END INVISIBLE,
        PERIOD FOR SYSTEM_TIME (tx, tx_end)
    ) ENGINE = InnoDB WITH SYSTEM VERSIONING",
    "DROP TRIGGER IF EXISTS test_log_join",
    "CREATE TRIGGER test_log_join AFTER INSERT ON leasehold_waiters FOR EACH ROW
        INSERT INTO test_store_order (event, id, who) VALUES ('join', NEW.id, NEW.name)",
    "DROP TRIGGER IF EXISTS test_log_leave",
    "CREATE TRIGGER test_log_leave AFTER DELETE ON leasehold_waiters FOR EACH ROW
        INSERT INTO test_store_order (event, id, who) VALUES ('leave', OLD.id, OLD.name)",
    "DROP TRIGGER IF EXISTS test_log_new_lock",
    "CREATE TRIGGER test_log_new_lock AFTER INSERT ON leasehold_locks FOR EACH ROW
        INSERT INTO test_store_order (event, id, lock_key, who)
            VALUES ('grant', NEW.id, NEW.lock_key, NEW.owner)",
    "DROP TRIGGER IF EXISTS test_log_new_owner",
    "CREATE TRIGGER test_log_new_owner AFTER UPDATE ON leasehold_locks FOR EACH ROW
        BEGIN
            IF NOT (NEW.owner <=> OLD.owner) THEN
                INSERT INTO test_store_order (event, id, lock_key, who, prev)
                    VALUES ('grant', NEW.id, NEW.lock_key, NEW.owner, OLD.owner);
            END IF;
        END",
];

/// Records the store's order on the database of `conn` from now on (see the module docs).
///
/// # Errors
/// When a statement fails: no lock schema yet, or the user may not create triggers.
pub async fn record_mysql_store_order(conn: &mut Conn) -> Result<(), String> {
    for statement in INSTALL {
        conn.query_drop(*statement)
            .await
            .map_err(|e| format!("{e}: {statement}"))?;
    }
    Ok(())
}

/// One row of the log as stored: seq, transaction, event, the lock's id, its key (grants),
/// who, the owner before.
pub type MysqlLogRow = (
    u64,
    u64,
    String,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<u8>,
    Option<Vec<u8>>,
);

/// Every event the store recorded on the database of `conn`, in its order.
///
/// # Errors
/// When the query fails (nothing was recorded there).
pub async fn mysql_store_order(conn: &mut Conn) -> Result<Vec<StoreEvent>, String> {
    let rows: Vec<MysqlLogRow> = conn
        .query("SELECT seq, tx, event, id, lock_key, who, prev FROM test_store_order ORDER BY seq")
        .await
        .map_err(|e| e.to_string())?;
    Ok(mysql_events(rows))
}

/// The store's events in the rows of its log, in its order: each lock named by its key (as
/// the grants carry it; the hex of its id before any), and within one transaction of a lock
/// its leaves before its grant (see the module docs).
pub fn mysql_events(rows: Vec<MysqlLogRow>) -> Vec<StoreEvent> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let keys: HashMap<Vec<u8>, String> = rows
        .iter()
        .filter_map(|r| Some((r.3.clone(), text(r.4.as_deref()?))))
        .collect();
    let events: Vec<StoreEvent> = rows
        .into_iter()
        .map(|(seq, tx, event, id, _, who, prev)| StoreEvent {
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
            tx: i64::try_from(tx).unwrap_or(i64::MAX),
            event,
            key: keys.get(&id).cloned().unwrap_or_else(|| hex(&id)),
            who: text(&who),
            prev: prev.as_deref().map(text),
        })
        .collect();
    // Each transaction of a lock, at the place of its first event: its leaves, its other
    // events, in their order each.
    let mut groups: Vec<Vec<StoreEvent>> = Vec::new();
    let mut group_of: HashMap<(i64, String), usize> = HashMap::new();
    for e in events {
        let at = *group_of.entry((e.tx, e.key.clone())).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(e);
    }
    groups
        .into_iter()
        .flat_map(|group| {
            let (leaves, rest): (Vec<_>, Vec<_>) =
                group.into_iter().partition(|e| e.event == "leave");
            leaves.into_iter().chain(rest)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::judge_fifo;

    const A: &str = "h1.0123456789abcdef.1700000000000.0-1-3.0123456789abcdef0123456789abcdef";
    const B: &str = "h1.0123456789abcdef.1700000000000.1-0-7.0123456789abcdef0123456789abcdef";

    fn row(seq: u64, tx: u64, event: &str, who: &str, prev: Option<&str>) -> MysqlLogRow {
        let key = (event == "grant").then(|| b"leasehold:lock:{k}".to_vec());
        (
            seq,
            tx,
            event.into(),
            vec![7; 32],
            key,
            who.as_bytes().to_vec(),
            prev.map(|p| p.as_bytes().to_vec()),
        )
    }

    #[test]
    fn an_acquires_own_leave_comes_before_its_grant_and_keys_are_named() {
        // a and b join; a takes the free lock (its grant, then its own leave, as MySQL's
        // acquire writes them); a's release leaves the lock to b, which takes it.
        let rows = vec![
            row(1, 10, "join", "a", None),
            row(2, 11, "join", "b", None),
            row(3, 12, "grant", A, None),
            row(4, 12, "leave", "a", None),
            row(5, 13, "leave", "b", None),
            row(6, 13, "grant", "~b", Some(A)),
            row(7, 14, "grant", B, Some("~b")),
        ];
        let events = mysql_events(rows);
        let shown: Vec<(i64, &str, &str)> = events
            .iter()
            .map(|e| (e.seq, e.event.as_str(), e.who.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (1, "join", "a"),
                (2, "join", "b"),
                (4, "leave", "a"),
                (3, "grant", A),
                (5, "leave", "b"),
                (6, "grant", "~b"),
                (7, "grant", B),
            ]
        );
        assert!(events.iter().all(|e| e.key == "leasehold:lock:{k}"));
        let judged = judge_fifo(&events);
        assert!(judged.violations.is_empty(), "{:?}", judged.violations);
        assert_eq!(judged.judged, 2);

        // b takes the free lock while a, which joined first, still waits: named.
        let rows = vec![
            row(1, 10, "join", "a", None),
            row(2, 11, "join", "b", None),
            row(3, 12, "grant", B, None),
            row(4, 12, "leave", "b", None),
        ];
        let judged = judge_fifo(&mysql_events(rows));
        assert_eq!(judged.violations.len(), 1, "{:?}", judged.violations);
    }
}
