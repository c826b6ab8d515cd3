//! The schema applied by an operator from `leasehold::mysql::SCHEMA`, for a user that may not
//! create it.

use leasehold::LockError;
use leasehold_tests::harness::{MysqlServer, MYSQL_DATABASE};

use super::builder;

/// A user that may not create tables nor routines gets a configuration error naming the
/// schema to apply; once an operator applied `leasehold::mysql::SCHEMA` (twice: it is
/// idempotent) with the command-line client and granted row and EXECUTE privileges, it locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_that_may_not_create_tables_is_told_how_and_works_once_granted() {
    let db = MysqlServer::start().await;
    db.execute(&format!(
        "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'apppw'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON {MYSQL_DATABASE}.* TO 'app'@'127.0.0.1'"
    ))
    .await
    .unwrap();
    let app_url = format!("mysql://app:apppw@{}/{MYSQL_DATABASE}", db.addr());
    let e = builder(&app_url).build().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("leasehold::mysql::SCHEMA"), "{e}");
    assert!(!e.to_string().contains("apppw"), "{e}");

    db.apply_with_client(leasehold::mysql::SCHEMA).await;
    db.apply_with_client(leasehold::mysql::SCHEMA).await;
    db.execute(&format!(
        "GRANT EXECUTE ON {MYSQL_DATABASE}.* TO 'app'@'127.0.0.1'"
    ))
    .await
    .unwrap();
    let locker = builder(&app_url).build().await.expect("app's locker");
    let guard = locker.lock("granted").acquire().await.expect("acquire");
    guard.release().await.expect("release");
}
