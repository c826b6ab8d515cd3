//! A guard's locks given back together: one `leasehold_release_all` call, as MariaDB's own log
//! of the statements it ran shows; one lock busy past the lock wait timeout holds up no other;
//! and a database of the previous schema (without that procedure) gets it on first use.

use leasehold::mysql::mysql_async::{self, prelude::Queryable};
use leasehold_tests::harness::{MysqlServer, MYSQL_DATABASE};

use super::{locker, scalar};

const SEATS: [&str; 3] = ["seat-1", "seat-2", "seat-3"];

/// `key` of this suite's locks as stored.
fn stored(key: &str) -> String {
    format!("myt:lock:{{{key}}}")
}

/// Rows of `keys` in the lock table whose lease still runs.
async fn live_rows(db: &MysqlServer, keys: &[&str]) -> usize {
    let list = keys
        .iter()
        .map(|k| format!("UNHEX(SHA2('{}', 256))", stored(k)))
        .collect::<Vec<_>>()
        .join(", ");
    scalar(
        db,
        &format!(
            "SELECT COUNT(*) FROM leasehold_locks WHERE id IN ({list}) AND expires > \
             TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
        ),
    )
    .await
    .parse()
    .expect("a count")
}

/// Store-observed: the three locks of a `MultiGuard` go back in one call, which MariaDB's log
/// of the statements it ran holds once (given back one by one, as before, it held three
/// `leasehold_release` calls); every lock is free after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guards_locks_go_back_in_one_call() {
    let db = MysqlServer::start().await;
    let a = locker(&db).await;
    let guard = a.lock_all(SEATS).acquire().await.expect("free keys");
    assert_eq!(live_rows(&db, &SEATS).await, 3);
    // The lock releases MariaDB ran (readers' releases are another procedure).
    let logged = db
        .statements_logged(
            "CALL leasehold\\_release",
            Some("CALL leasehold\\_release\\_shared"),
            async { guard.release().await.expect("released") },
        )
        .await;
    assert_eq!(live_rows(&db, &SEATS).await, 0, "every lock given back");
    assert_eq!(
        logged.len(),
        1,
        "the three releases ran {} calls: {logged:?}",
        logged.len()
    );
    assert!(
        logged[0].starts_with("CALL leasehold_release_all("),
        "{logged:?}"
    );
}

/// One lock of the guard is busy past the lock wait timeout (another transaction holds its
/// row): the one call changes nothing, and each lock is released by itself, so the two others
/// are given back and only the busy one's release fails (as it would alone). Without the
/// fallback, the call's error would fail every release and leave the three locks held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_lock_holds_up_no_other_of_the_guard() {
    let db = MysqlServer::start().await;
    let a = locker(&db).await;
    let guard = a.lock_all(SEATS).acquire().await.expect("free keys");
    let mut other = mysql_async::Conn::from_url(db.url())
        .await
        .expect("another session");
    other
        .query_drop("START TRANSACTION")
        .await
        .expect("a transaction");
    other
        .query_drop(format!(
            "SELECT 1 FROM leasehold_locks WHERE id = UNHEX(SHA2('{}', 256)) FOR UPDATE",
            stored(SEATS[1])
        ))
        .await
        .expect("the row locked");
    let released = guard.release().await;
    other.query_drop("ROLLBACK").await.expect("rolled back");
    assert!(
        released.is_err(),
        "the busy lock's release failed: {released:?}"
    );
    assert_eq!(live_rows(&db, &[SEATS[0], SEATS[2]]).await, 0, "given back");
    assert_eq!(
        live_rows(&db, &[SEATS[1]]).await,
        1,
        "the busy one still held"
    );
}

/// A database made by the previous version (its procedures tagged `leasehold schema 2`,
/// without `leasehold_release_in` and `leasehold_release_all`) gets the new procedures on the
/// next locker's first use, and a guard's locks go back through them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_previous_schema_gets_the_release_procedures() {
    let schema = leasehold::mysql::SCHEMA;
    assert!(
        schema.contains("'leasehold schema 3'") && !schema.contains("'leasehold schema 2'"),
        "the procedures changed since schema 2 and must carry a new tag"
    );
    let db = MysqlServer::start().await;
    drop(locker(&db).await);
    let procedures = format!(
        "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = \
         '{MYSQL_DATABASE}' AND ROUTINE_NAME IN ('leasehold_release_in', 'leasehold_release_all')"
    );
    assert_eq!(scalar(&db, &procedures).await, "2");
    let names = db
        .execute(&format!(
            "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = \
             '{MYSQL_DATABASE}' AND ROUTINE_NAME LIKE 'leasehold%'"
        ))
        .await
        .expect("the procedures");
    db.execute(&format!(
        "DROP PROCEDURE {MYSQL_DATABASE}.leasehold_release_all; \
         DROP PROCEDURE {MYSQL_DATABASE}.leasehold_release_in"
    ))
    .await
    .expect("the new procedures gone");
    for name in names.into_iter().flatten().flatten() {
        if name == "leasehold_release_all" || name == "leasehold_release_in" {
            continue;
        }
        db.execute(&format!(
            "ALTER PROCEDURE {MYSQL_DATABASE}.{name} COMMENT 'leasehold schema 2'"
        ))
        .await
        .expect("the previous tag");
    }
    assert_eq!(scalar(&db, &procedures).await, "0");
    let a = locker(&db).await;
    assert_eq!(scalar(&db, &procedures).await, "2", "not made on first use");
    let stale = format!(
        "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = \
         '{MYSQL_DATABASE}' AND ROUTINE_NAME LIKE 'leasehold%' \
         AND ROUTINE_COMMENT = 'leasehold schema 2'"
    );
    assert_eq!(
        scalar(&db, &stale).await,
        "0",
        "a procedure kept its old tag"
    );
    let guard = a.lock_all(SEATS).acquire().await.expect("free keys");
    guard.release().await.expect("released");
    assert_eq!(live_rows(&db, &SEATS).await, 0, "every lock given back");
}
