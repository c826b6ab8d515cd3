//! Starting on a database: the schema made on first use (by lockers racing to make it, or by
//! an operator for a user that may not), an older schema's functions replaced, a migration
//! waited for, the role's own timeouts kept out, and configuration errors.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, PgServer};
use tokio::time::Instant;

use super::{builder, client, count, locker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockers_starting_together_make_the_schema_once() {
    let pg = PgServer::start().await;
    let url = pg.url();
    let built = futures_join(
        (0..8)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { builder(&url).build().await })
            })
            .collect(),
    )
    .await;
    for b in &built {
        assert!(
            b.is_ok(),
            "a locker failed while others made the schema: {b:?}"
        );
    }
    let db = client(&url).await;
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_class WHERE relname IN ('leasehold_locks', 'leasehold_fences')"
        )
        .await,
        2
    );
    let locker = built.into_iter().next().unwrap().unwrap();
    let guard = locker.lock("k").acquire().await.expect("acquire");
    assert!(guard.fence() > 0);
}

/// Creating the schema is not bounded by the operations' timeouts: with a 10 ms
/// `op_timeout` (the session's `statement_timeout`, and 5 ms `lock_timeout`), creating it was
/// cancelled on every try and lockers starting together on a fresh database never connected.
/// The connect timeout is 2 s: a connection's set-up and the catalog read are bounded by it,
/// and on a loaded machine (load 10 on two cores) a 200 ms one ran out before the schema was
/// looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_timeouts_do_not_keep_a_fresh_database_from_getting_its_schema() {
    let pg = PgServer::start().await;
    let url = pg.url();
    let built = futures_join(
        (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move {
                    Locker::builder()
                        .postgres(&url)
                        .op_timeout(Duration::from_millis(10))
                        .connect_timeout(Duration::from_secs(2))
                        .build()
                        .await
                })
            })
            .collect(),
    )
    .await;
    for b in &built {
        assert!(b.is_ok(), "a locker could not make the schema: {b:?}");
    }
    let db = client(&url).await;
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_class WHERE relname = 'leasehold_lockers'"
        )
        .await,
        1
    );
}

/// Opening a connection is bounded by the connect timeout, not by the operation timeout: the
/// statements prepared for lock calls name the locks' table, and wait for a migration's lock
/// on it. The session's `statement_timeout` and `lock_timeout` were set from the operation
/// timeout before they were prepared, so a locker started while a migration held the table
/// failed to build ("refused to prepare the lock statements: ... lock timeout"), and with a
/// 10 ms `op_timeout` on a loaded machine, a statement timeout without any migration. Once
/// open, lock calls are bounded by the operation timeout again, on the server too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_started_during_a_migration_waits_for_it_within_the_connect_timeout() {
    // (400 ms, the server's lock timeout 200 ms, answered late with both cores busy with
    // other work: the client's own timeout came first.)
    const OP: Duration = Duration::from_secs(2);
    let pg = PgServer::start().await;
    let _schema = locker(&pg).await;
    let mut admin = client(&pg.url()).await;
    let observer = client(&pg.url()).await;
    let waiting_for_a_lock = || async {
        count(
            &observer,
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
        )
        .await
    };

    let migration = admin.transaction().await.unwrap();
    migration
        .batch_execute("LOCK TABLE leasehold_locks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let url = pg.url();
    let starting = tokio::spawn(async move {
        Locker::builder()
            .postgres(&url)
            .op_timeout(OP)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .await
    });
    // The locker's opening waits on the migration's lock, for longer than the operation
    // timeout (it would have given up after half of it, the session's `lock_timeout`).
    eventually(
        "a connection of the new locker waits for the migration",
        Duration::from_secs(5),
        || async { starting.is_finished() || waiting_for_a_lock().await > 0 },
    )
    .await;
    tokio::time::sleep(OP + OP / 2).await;
    migration.commit().await.unwrap();
    let started = starting.await.expect("task");
    let locker = started.expect("a locker started during a migration, once it committed");
    let guard = locker.lock("k").acquire().await.expect("acquire");

    // Open: a call that waits on a migration's lock gives up after the operation timeout
    // (the lock is busy, as when a transaction holds its row), and so does the server: its
    // `lock_timeout` (half the operation timeout) answers "busy" before the client gives up,
    // with half the operation timeout to spare for a loaded machine (20 ms were not enough
    // beside the rest of the suite, nor 200 ms with both cores busy: the client's timeout
    // came first, as `Unavailable`).
    let migration = admin.transaction().await.unwrap();
    migration
        .batch_execute("LOCK TABLE leasehold_locks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(5), locker.lock("j").try_acquire())
        .await
        .expect("bounded by the operation timeout");
    assert!(matches!(refused, Ok(None)), "{refused:?}");
    eventually(
        "the server stops waiting for a call the client gave up on",
        Duration::from_secs(5),
        || async { waiting_for_a_lock().await == 0 },
    )
    .await;
    migration.rollback().await.unwrap();
    guard.release().await.expect("release");
}

/// A database made by the previous version (its functions tagged `leasehold schema 8`, without
/// `leasehold_release_all`, which gives the keys of a `MultiGuard` back in one statement) gets
/// this version's functions when a locker starts on it, and `lock_all` of free keys is taken
/// and given back there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_previous_schema_gets_the_new_functions() {
    let schema = leasehold::postgres::SCHEMA;
    // The previous version's databases carry tag 8: a changed or added function needs a new
    // tag, or they keep the old bodies.
    assert!(
        schema.contains("leasehold schema 9") && !schema.contains("leasehold schema 8"),
        "the functions changed since schema 8 and must carry a new tag"
    );
    let start = schema
        .find("CREATE OR REPLACE FUNCTION leasehold_release_all(")
        .expect("the batch function");
    let end = start + schema[start..].find("\n$$;\n").expect("its end") + 5;
    let previous = format!("{}{}", &schema[..start], &schema[end..])
        .replace("leasehold schema 9", "leasehold schema 8");
    let pg = PgServer::start().await;
    let db = client(&pg.url()).await;
    db.batch_execute(&previous)
        .await
        .expect("the previous schema");
    let batch_function = "SELECT count(*) FROM pg_proc WHERE proname = 'leasehold_release_all'";
    assert_eq!(count(&db, batch_function).await, 0);

    let locker = locker(&pg).await;
    assert_eq!(count(&db, batch_function).await, 1, "no batch function");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_proc WHERE proname LIKE 'leasehold%' \
             AND prosrc LIKE '%leasehold schema 8%'"
        )
        .await,
        0,
        "functions of the previous version were kept"
    );
    let guard = locker
        .lock_all(["a", "b"])
        .read_keys(["c"])
        .acquire()
        .await
        .expect("free keys");
    guard.release().await.expect("release");
}

/// A database set up by an earlier version has the old function bodies (its fence check
/// row-locked the lock, blocking renewals). A locker of this version replaces them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_with_older_functions_gets_this_versions() {
    let pg = PgServer::start().await;
    let _first = locker(&pg).await;
    let db = client(&pg.url()).await;
    db.batch_execute(
        "CREATE OR REPLACE FUNCTION leasehold_check_fence(p_key text, p_fence bigint) \
         RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN \
         PERFORM 1 FROM leasehold_locks AS l WHERE l.key = p_key FOR SHARE; \
         RETURN FOUND; END $$",
    )
    .await
    .unwrap();
    let second = locker(&pg).await;
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_proc WHERE proname = 'leasehold_check_fence' \
             AND prosrc NOT LIKE '%FOR SHARE%' AND prosrc LIKE '%advisory%'"
        )
        .await,
        1,
        "the old fence check is still in place"
    );
    let guard = second.lock("upgraded").acquire().await.unwrap();
    guard.release().await.unwrap();
}

async fn futures_join<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_that_may_not_create_tables_is_told_how_and_works_once_granted() {
    let pg = PgServer::start().await;
    let admin = client(&pg.url()).await;
    admin
        .batch_execute("CREATE ROLE app LOGIN")
        .await
        .expect("create role");
    let app_url = format!("postgres://app@{}/postgres", pg.addr());
    let e = builder(&app_url).build().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    let message = e.to_string();
    assert!(message.contains("leasehold::postgres::SCHEMA"), "{message}");

    // The operator applies the documented schema and grants.
    admin
        .batch_execute(leasehold::postgres::SCHEMA)
        .await
        .expect("SCHEMA applies");
    admin
        .batch_execute(leasehold::postgres::SCHEMA)
        .await
        .expect("SCHEMA applies twice");
    admin
        .batch_execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON leasehold_locks, leasehold_waiters TO app; \
             GRANT USAGE ON SEQUENCE leasehold_fences TO app",
        )
        .await
        .expect("grants");
    let locker = builder(&app_url).build().await.expect("app's locker");
    let guard = locker.lock("granted").acquire().await.expect("acquire");
    guard.release().await.expect("release");
}

/// Low timeouts set on the database role (as a DBA may for every application) do not reach
/// the engine's own sessions: it sets its own, so acquires, renewals across several leases
/// and releases work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_timeouts_set_on_the_role_do_not_break_the_engine() {
    let pg = PgServer::start().await;
    let _schema = locker(&pg).await;
    let admin = client(&pg.url()).await;
    admin
        .batch_execute(
            "CREATE ROLE app LOGIN; \
             ALTER ROLE app SET statement_timeout = '50ms'; \
             ALTER ROLE app SET lock_timeout = '10ms'; \
             ALTER ROLE app SET idle_in_transaction_session_timeout = '100ms'; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON leasehold_locks, leasehold_waiters TO app; \
             GRANT USAGE, UPDATE ON SEQUENCE leasehold_fences TO app",
        )
        .await
        .unwrap();
    let app_url = format!("postgres://app@{}/postgres", pg.addr());
    let app_db = client(&app_url).await;
    let timeout: String = app_db
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        timeout, "50ms",
        "the role's setting applies to its sessions"
    );
    let app = builder(&app_url)
        .op_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("a locker under the role");
    // 2 s leases, as the other renewal tests: with 600 ms a renewal delayed by a loaded
    // machine could let one run out, which is not what this test is about.
    let lease = Duration::from_secs(2);
    let guard = app.lock("role").lease(lease).acquire().await.unwrap();
    let other = app.lock("role2").lease(lease).acquire().await.unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(
        guard.is_held() && other.is_held(),
        "renewals kept both leases"
    );
    // A fenced transaction of the role's own, under its lock timeout. Its idle and statement
    // timeouts are the test's, not the engine's, concern (the engine's sessions set their
    // own): on a loaded machine more than 100 ms passed between its `BEGIN` and the check,
    // and the server ended it; the check itself took more than 50 ms, and was cancelled; and
    // so was a `SET` of them run in a session already under the role's 50 ms. So the session
    // of the transaction sets them as it starts (a client's options come after the role's).
    drop(app_db);
    let mut tx_db = client(&format!(
        "{app_url}?options=-c%20statement_timeout%3D10s%20\
         -c%20idle_in_transaction_session_timeout%3D10s"
    ))
    .await;
    let timeout: String = tx_db
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(timeout, "10s", "the session's own setting");
    let tx = tx_db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &guard).await.unwrap();
    tx.commit().await.unwrap();
    guard.release().await.unwrap();
    other.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_clear_and_never_show_the_password() {
    let pg = PgServer::start().await;
    let missing_db = format!("postgres://postgres:s3cret@{}/nosuchdb", pg.addr());
    let e = builder(&missing_db).build().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("no such database"), "{e}");
    assert!(
        e.to_string().contains("nosuchdb"),
        "the server's message: {e}"
    );
    assert!(!e.to_string().contains("s3cret"), "{e}");

    for (url, says) in [
        (
            "postgres://u:s3cret@127.0.0.1/db?sslmode=verify-all",
            "accepted: disable, prefer, require, verify-ca, verify-full",
        ),
        ("redis://127.0.0.1:6379", "postgres://"),
        (
            "postgres://u:s3cret@127.0.0.1/db?nonsense=1",
            "could not read",
        ),
    ] {
        let e = builder(url).build().await.unwrap_err();
        assert!(matches!(e, LockError::Config { .. }), "{url}: {e:?}");
        assert!(e.to_string().contains(says), "{url}: {e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let e = builder(&format!(
        "postgres://postgres:s3cret@127.0.0.1:{port}/postgres"
    ))
    .connect_timeout(Duration::from_millis(500))
    .build()
    .await
    .unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    assert!(!e.to_string().contains("s3cret"), "{e}");
    assert!(
        e.to_string().to_lowercase().contains("refused"),
        "the cause is shown: {e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}
