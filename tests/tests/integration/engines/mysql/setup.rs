//! Starting on a database: the schema made on first use by lockers racing to make it, the
//! least-privilege user, and configuration errors.

use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::harness::{MysqlServer, MYSQL_DATABASE};
use tokio::time::Instant;

use super::{builder, locker, scalar};

/// The tables of the schema that exist in the test's database.
async fn tables(db: &MysqlServer) -> i64 {
    scalar(
        db,
        &format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = \
             '{MYSQL_DATABASE}' AND table_name LIKE 'leasehold\\_%'"
        ),
    )
    .await
    .parse()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockers_starting_together_make_the_schema_once() {
    let db = MysqlServer::start().await;
    assert_eq!(tables(&db).await, 0);
    let url = db.url();
    let mut handles = Vec::new();
    for _ in 0..8 {
        let url = url.clone();
        handles.push(tokio::spawn(async move { builder(&url).build().await }));
    }
    let mut built = Vec::new();
    for handle in handles {
        built.push(handle.await.expect("task"));
    }
    for b in &built {
        assert!(
            b.is_ok(),
            "a locker failed while others made the schema: {b:?}"
        );
    }
    assert!(tables(&db).await >= 2, "no schema made");
    let locker = built.into_iter().next().unwrap().unwrap();
    let guard = locker.lock("k").acquire().await.expect("acquire");
    assert!(guard.fence() > 0);
    guard.release().await.expect("release");
}

/// The harness's user has privileges on its database only (no global one): the engine makes
/// its schema and works with them, which is what the security guide asks operators to grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_privileged_user_makes_the_schema_and_locks() {
    let db = MysqlServer::start().await;
    let grants = db
        .execute("SHOW GRANTS FOR 'leasehold'@'127.0.0.1'")
        .await
        .unwrap();
    let grants: Vec<String> = grants.into_iter().flatten().flatten().collect();
    assert!(
        grants.iter().any(|g| g.starts_with("GRANT USAGE ON *.*")),
        "{grants:?}"
    );
    let locker = locker(&db).await;
    let guard = locker.lock("least").acquire().await.expect("acquire");
    let other = super::locker(&db).await;
    assert!(matches!(other.lock("least").try_acquire().await, Ok(None)));
    guard.release().await.expect("release");
    let next = other.lock("least").try_acquire().await.expect("try");
    assert!(next.is_some(), "free after the release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_clear_and_never_show_the_password() {
    let db = MysqlServer::start().await;
    // Wrong credentials, and a database that does not exist: refused by the server.
    for url in [
        format!("mysql://leasehold:s3cret@{}/{MYSQL_DATABASE}", db.addr()),
        format!("mysql://nobody:s3cret@{}/{MYSQL_DATABASE}", db.addr()),
    ] {
        let e = builder(&url).build().await.unwrap_err();
        assert!(matches!(e, LockError::Config { .. }), "{url}: {e:?}");
        assert!(e.to_string().contains("denied"), "the server's reason: {e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
    let missing_db = format!("mysql://leasehold:leasehold@{}/nosuchdb", db.addr());
    let e = builder(&missing_db).build().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("nosuchdb"), "{e}");

    // Malformed URLs: refused before connecting.
    for url in [
        "redis://127.0.0.1:6379",
        "mysql://u:s3cret@127.0.0.1:notaport/db",
        "mysql://u:s3cret@127.0.0.1/db?ssl-mode=SOMETIMES",
    ] {
        let e = builder(url).build().await.unwrap_err();
        assert!(matches!(e, LockError::Config { .. }), "{url}: {e:?}");
        assert!(!e.to_string().contains("s3cret"), "{url}: {e}");
    }

    // Nothing listens: unavailable within the connect timeout, the cause shown.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let e = builder(&format!("mysql://u:s3cret@127.0.0.1:{port}/db"))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    assert!(!e.to_string().contains("s3cret"), "{e}");
    assert!(
        e.to_string().to_lowercase().contains("refused"),
        "the cause: {e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Logins of the ed25519 user checked one after another.
const LOGINS: usize = 1500;

/// MariaDB's `ed25519` authentication: the driver signs the server's challenge (without its
/// `client_ed25519` part it panicked in its connection task, and the locker never answered
/// with an error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_of_mariadbs_ed25519_plugin_locks() {
    let db = MysqlServer::start().await;
    let plugin = db.execute("INSTALL SONAME 'auth_ed25519'").await;
    plugin.unwrap_or_else(|e| panic!("MariaDB's ed25519 plugin: {e}"));
    for sql in [
        "CREATE USER 'signer'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('s1gned')"
            .to_owned(),
        format!("GRANT ALL ON {MYSQL_DATABASE}.* TO 'signer'@'127.0.0.1'"),
    ] {
        db.execute(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let url = format!("mysql://signer:s1gned@{}/{MYSQL_DATABASE}", db.addr());
    let locker = builder(&url)
        .build()
        .await
        .expect("a locker as the ed25519 user");
    let guard = locker.lock("signed").acquire().await.expect("acquire");
    guard.release().await.expect("release");
    // Every login, not most: the driver drops the server's challenge's last byte when it is
    // zero, and one login in 256 was refused (this test failed so in CI). Lockers built one
    // after another, each logging in anew: without the engine's further tries about six of
    // them are refused (the first at login 83 when checked), and none in about 0.3% of runs.
    for n in 0..LOGINS {
        if let Err(e) = builder(&url).build().await {
            panic!("login {n} of {LOGINS} as the ed25519 user: {e:?}");
        }
    }
    let wrong = format!("mysql://signer:wrong@{}/{MYSQL_DATABASE}", db.addr());
    let e = builder(&wrong).build().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
}

/// The version tag `leasehold_acquire` carries as its comment.
async fn acquire_tag(db: &MysqlServer) -> String {
    scalar(
        db,
        &format!(
            "SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = \
             '{MYSQL_DATABASE}' AND ROUTINE_NAME = 'leasehold_acquire'"
        ),
    )
    .await
}

/// A database whose procedures are (partly) an older version's gets this version's on the next
/// locker's first use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_versions_procedures_are_brought_up_to_date_on_first_use() {
    let db = MysqlServer::start().await;
    drop(locker(&db).await);
    let current = acquire_tag(&db).await;
    assert!(current.starts_with("leasehold schema "), "{current:?}");
    let older =
        format!("ALTER PROCEDURE {MYSQL_DATABASE}.leasehold_acquire COMMENT 'leasehold schema 0'");
    db.execute(&older).await.expect("an older version's tag");
    assert_eq!(acquire_tag(&db).await, "leasehold schema 0");
    let locker = locker(&db).await;
    assert_eq!(
        acquire_tag(&db).await,
        current,
        "the procedure was not replaced"
    );
    let guard = locker.lock("upgraded").acquire().await.expect("acquire");
    guard.release().await.expect("release");
}
