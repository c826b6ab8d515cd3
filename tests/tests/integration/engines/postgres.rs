//! The PostgreSQL engine against real servers, beyond the conformance suite: the schema made
//! on first use (by lockers racing to make it, or by an operator for a user that may not),
//! fenced writes in the caller's own transaction (a stale holder's write refused, also from a
//! serializable transaction racing the takeover), fences across crash restarts, rows of
//! crashed holders taken over and swept, and configuration errors.

use std::time::Duration;

use leasehold::postgres::tokio_postgres::{self as pg, IsolationLevel, NoTls};
use leasehold::{LockError, Locker, LostReason};
use leasehold_tests::harness::{eventually, PgServer};
use tokio::time::Instant;

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .postgres(url)
        .prefix("pgt")
        .op_timeout(Duration::from_millis(500))
}

async fn locker(pg: &PgServer) -> Locker {
    builder(&pg.url())
        .build()
        .await
        .expect("locker on PostgreSQL")
}

/// A client of the test's own, as the user's application would have.
async fn client(url: &str) -> pg::Client {
    let (client, connection) = pg::connect(url, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

async fn count(client: &pg::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}

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
    const OP: Duration = Duration::from_millis(400);
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
    // beside the rest of the suite: the client's timeout came first, as `Unavailable`).
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
        Duration::from_secs(2),
        || async { waiting_for_a_lock().await == 0 },
    )
    .await;
    migration.rollback().await.unwrap();
    guard.release().await.expect("release");
}

/// A database made by the previous version (its functions tagged `leasehold schema 6`, with
/// the old `leasehold_renew_shared`, which only ever lengthened a read lock's row) gets this
/// version's bodies when a locker starts on it: the end of a read's `hold_at_least`, set as a
/// renewal that shortens its lease, needs the new one (the old kept the lock taken until the
/// longest lease its readers ever had).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_previous_schema_gets_the_new_functions() {
    const NEW_ROW_END: &str = "SET expires = greatest(d.last_end, (
                SELECT max(r.expires) FROM leasehold_readers AS r
                WHERE r.key = l.key AND r.expires > clock_timestamp()
                  AND NOT EXISTS (SELECT 1 FROM done AS x
                                  WHERE x.key = r.key AND x.owner = r.owner)))";
    const OLD_ROW_END: &str = "SET expires = greatest(l.expires, d.last_end)";
    let schema = leasehold::postgres::SCHEMA;
    assert!(schema.contains(NEW_ROW_END));
    // The previous version's databases carry tag 6: a changed function needs a new tag, or
    // they keep the old bodies.
    assert!(
        schema.contains("leasehold schema 7") && !schema.contains("leasehold schema 6"),
        "the functions changed since schema 6 and must carry a new tag"
    );
    let previous = schema
        .replace(NEW_ROW_END, OLD_ROW_END)
        .replace("leasehold schema 7", "leasehold schema 6");
    let pg = PgServer::start().await;
    let db = client(&pg.url()).await;
    db.batch_execute(&previous)
        .await
        .expect("the previous schema");
    let renew_shared = "SELECT prosrc FROM pg_proc WHERE proname = 'leasehold_renew_shared'";
    let body = |row: pg::Row| row.get::<_, String>(0);
    assert!(body(db.query_one(renew_shared, &[]).await.unwrap()).contains(OLD_ROW_END));

    let locker = locker(&pg).await;
    assert!(
        body(db.query_one(renew_shared, &[]).await.unwrap())
            .contains("NOT EXISTS (SELECT 1 FROM done"),
        "the old leasehold_renew_shared was kept"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM pg_proc WHERE proname LIKE 'leasehold%' \
             AND prosrc LIKE '%leasehold schema 6%'"
        )
        .await,
        0,
        "functions of the previous version were kept"
    );
    let guard = locker.read_lock("k").acquire().await.expect("a read");
    guard.release().await.expect("release");
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

/// The holder whose lock an operator deleted and another process took still believes it
/// holds (its lease is valid on its clock), as a paused holder would on waking. Its fence
/// check in its own transaction refuses it, and tells the guard; the new holder's write goes
/// through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_check_in_the_callers_transaction_refuses_a_stale_holder() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    db.batch_execute(
        "CREATE TABLE stock (sku int PRIMARY KEY, left_ int NOT NULL); \
         INSERT INTO stock VALUES (1, 10)",
    )
    .await
    .unwrap();

    let old = a.lock("stock:1").acquire().await.unwrap();
    {
        let tx = db.transaction().await.unwrap();
        leasehold::postgres::check_fence(&tx, &old)
            .await
            .expect("the holder's check passes");
        tx.execute("UPDATE stock SET left_ = left_ - 1 WHERE sku = 1", &[])
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    assert!(b.force_release("stock:1").await.unwrap());
    let new = b.lock("stock:1").acquire().await.unwrap();
    assert!(new.fence() > old.fence());
    assert!(
        old.is_held(),
        "the stale holder still believes (as after a pause)"
    );

    let tx = db.transaction().await.unwrap();
    let refused = leasehold::postgres::check_fence(&tx, &old).await;
    assert!(
        matches!(
            refused,
            Err(LockError::Lost {
                reason: LostReason::StaleFence
            })
        ),
        "{refused:?}"
    );
    drop(tx); // rolled back: the stale write never happens
    assert!(!old.is_held(), "the guard is told of its loss");

    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &new).await.unwrap();
    tx.execute("UPDATE stock SET left_ = left_ - 1 WHERE sku = 1", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&db, "SELECT left_::bigint FROM stock").await, 8);
}

/// A stale holder's serializable transaction took its snapshot before another process took the
/// lock over; its fence check comes after the takeover committed. It must fail (a serialization
/// failure or a stale fence), so the stale write is never committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serializable_transaction_racing_a_takeover_cannot_commit_a_stale_write() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    db.batch_execute(
        "CREATE TABLE stock (sku int PRIMARY KEY, left_ int NOT NULL); \
         INSERT INTO stock VALUES (1, 10)",
    )
    .await
    .unwrap();
    let old = a.lock("stock:1").acquire().await.unwrap();

    let tx = db
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .await
        .unwrap();
    // The snapshot is taken here, while `old` still holds.
    let left: i32 = tx
        .query_one("SELECT left_ FROM stock WHERE sku = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 10);

    assert!(b.force_release("stock:1").await.unwrap());
    let new = b.lock("stock:1").acquire().await.unwrap();
    let checked = leasehold::postgres::check_fence(&tx, &old).await;
    match &checked {
        Err(LockError::Lost {
            reason: LostReason::StaleFence,
        }) => {}
        Err(LockError::Unavailable {
            source: Some(source),
            ..
        }) => {
            let e = source
                .downcast_ref::<pg::Error>()
                .expect("the driver's error");
            assert_eq!(
                e.code(),
                Some(&pg::error::SqlState::T_R_SERIALIZATION_FAILURE),
                "{e}"
            );
        }
        other => panic!("the stale holder's check passed or failed oddly: {other:?}"),
    }
    drop(tx);

    // The new holder's write goes through, from the value the stale one never changed.
    let mut db2 = client(&pg.url()).await;
    let tx = db2
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .await
        .unwrap();
    leasehold::postgres::check_fence(&tx, &new).await.unwrap();
    tx.execute("UPDATE stock SET left_ = left_ - 1 WHERE sku = 1", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&db2, "SELECT left_::bigint FROM stock").await, 9);
}

/// The fence check keeps others out until the caller's transaction ends: a holder whose
/// lease runs out in the middle of its transaction still commits before anyone else can take
/// the lock, so no later holder reads the data from before that write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_one_takes_the_lock_between_a_fence_check_and_its_commit() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    let observer = client(&pg.url()).await;
    let lease = Duration::from_millis(600);
    let old = a
        .lock("slow")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &old).await.unwrap();
    let contender = tokio::spawn(async move {
        let guard = b
            .lock("slow")
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .expect("the contender gets the lock after the commit");
        guard.fence()
    });
    // Past the lease, with the transaction still open: the store must still show the old
    // holder's row, and the contender still waiting. Judged by the store's row (its fence),
    // not by when the commit's reply was read: a grant that comes between the server's commit
    // and the client reading its reply is right.
    tokio::time::sleep(lease * 2).await;
    let stored: i64 = observer
        .query_one(
            "SELECT fence FROM leasehold_locks WHERE key = 'pgt:lock:{slow}'",
            &[],
        )
        .await
        .expect("the old holder's row is still there")
        .get(0);
    assert_eq!(
        stored as u64,
        old.fence(),
        "another holder took the lock while the fenced transaction was open"
    );
    assert!(
        !contender.is_finished(),
        "the contender was granted while the fenced transaction was open"
    );
    tx.commit().await.unwrap();
    let fence = contender.await.unwrap();
    assert!(fence > old.fence());
}

/// A contender that finds the lock's advisory lock taken (another acquire runs, or a fenced
/// transaction is open) joins the line only under the lock's row, as every other change of the
/// line does: a release choosing the next in line either sees the join or has finished before
/// it. Joining beside a release that then freed the lock left a waiter in line for a free lock,
/// and the next newcomer took it first (the fair-lock test saw 1 to 53 such overtakes in 4 of
/// 6 runs, judged by the store's own order). Driven by the store's own locks: the release stays
/// open until the contender is seen waiting for it (or has answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contender_never_joins_the_line_of_a_lock_a_release_is_freeing() {
    let pg = PgServer::start().await;
    drop(locker(&pg).await); // the schema
    let (holder, busy, mut releaser, contender, observer) = (
        client(&pg.url()).await,
        client(&pg.url()).await,
        client(&pg.url()).await,
        client(&pg.url()).await,
        client(&pg.url()).await,
    );
    let acquire = "SELECT fence FROM leasehold_acquire('race', $1, 60000, 1, $2, 30000, false)";
    let granted: Option<i64> = holder
        .query_one(acquire, &[&"owner-h", &"h"])
        .await
        .unwrap()
        .get(0);
    assert!(granted.is_some(), "the holder takes the free lock");
    // Another acquire of the lock runs (its advisory lock held), so the contender's attempt
    // takes the path that does not try the row.
    busy.batch_execute(
        "SELECT pg_advisory_lock((h >> 32)::int, (h << 32 >> 32)::int) \
         FROM (SELECT hashtextextended('race', 0) AS h) AS s",
    )
    .await
    .unwrap();
    // The holder's release, with nobody in line: it frees the lock, not committed yet.
    let tx = releaser.transaction().await.unwrap();
    let released: Option<bool> = tx
        .query_one(
            "SELECT leasehold_release('race', 'owner-h', 'h', 200, 'w')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(released, Some(true));
    let pid: i32 = contender
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let attempt = tokio::spawn(async move {
        let row = contender
            .query_one(acquire, &[&"owner-a", &"a"])
            .await
            .expect("the contender's attempt");
        row.get::<_, Option<i64>>(0)
    });
    // Until the contender's attempt waits for a lock the release holds, or has answered.
    eventually(
        "the contender waits for the release, or answers",
        Duration::from_secs(30),
        || {
            let (observer, finished) = (&observer, attempt.is_finished());
            async move {
                finished
                    || count(
                        observer,
                        &format!(
                            "SELECT count(*) FROM pg_stat_activity \
                         WHERE pid = {pid} AND wait_event_type = 'Lock'"
                        ),
                    )
                    .await
                        == 1
            }
        },
    )
    .await;
    tx.commit().await.unwrap();
    assert_eq!(
        attempt.await.unwrap(),
        None,
        "the advisory lock was taken: not granted"
    );
    let rows = count(
        &observer,
        "SELECT count(*) FROM leasehold_locks WHERE key = 'race'",
    )
    .await;
    let line = count(
        &observer,
        "SELECT count(*) FROM leasehold_waiters WHERE key = 'race'",
    )
    .await;
    assert_eq!(rows, 0, "the release freed the lock");
    assert_eq!(
        line, 0,
        "a waiter is in line for a free lock: whoever comes next takes it before that waiter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_increasing_across_restarts() {
    let pg = PgServer::start().await;
    let mut last = 0;
    for round in 0..3 {
        let locker = locker(&pg).await;
        let guard = locker.lock("f").acquire().await.unwrap();
        assert!(
            guard.fence() > last,
            "round {round}: {} after {last}",
            guard.fence()
        );
        last = guard.fence();
        guard.release().await.unwrap();
        drop(locker);
        if round == 0 {
            pg.restart().await; // kill -9: crash recovery
        } else {
            pg.restart_fast().await;
        }
    }
}

/// Rows a crashed holder left are taken over at once once expired, and swept by lockers, so
/// the table stays about as large as the set of held locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_crashed_holders_are_taken_over_and_swept() {
    let pg = PgServer::start().await;
    let first = locker(&pg).await;
    let db = client(&pg.url()).await;
    db.batch_execute(
        "INSERT INTO leasehold_locks (key, owner, fence, expires) \
         SELECT 'pgt:lock:{dead' || i || '}', 'gone', i, now() - interval '1 minute' \
         FROM generate_series(1, 500) AS i",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let guard = first
        .lock("dead7")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect("an expired row is taken over at once");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A locker sweeps when it starts, then every half minute.
    let _second = locker(&pg).await;
    eventually(
        "expired rows are swept",
        Duration::from_secs(10),
        || async {
            count(
                &db,
                "SELECT count(*) FROM leasehold_locks WHERE expires < now()",
            )
            .await
                == 0
        },
    )
    .await;
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_locks").await,
        1,
        "only the held lock's row stays"
    );
    guard.release().await.unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM leasehold_locks").await, 0);
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

/// A fence is drawn only once the acquire has won the row. Here an acquire waits on the row
/// of an expired lock that another transaction has locked; meanwhile another lock is taken,
/// drawing a fence; then the row is deleted and the waiting acquire wins. Its fence must be
/// above the one drawn meanwhile: a fence drawn when the statement started (in the insert's
/// `VALUES`) would be below it, and after a pause of the statement a holder could come and go
/// on the same key with a higher fence than this one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_is_drawn_only_once_the_row_is_won() {
    let pg = PgServer::start().await;
    let _schema = locker(&pg).await;
    let url = pg.url();
    let (mut blocker, waiter, other) = (client(&url).await, client(&url).await, client(&url).await);
    blocker
        .batch_execute(
            "INSERT INTO leasehold_locks VALUES ('K', 'gone', 32, now() - interval '1 minute')",
        )
        .await
        .unwrap();
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM leasehold_locks WHERE key = 'K' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let pending = tokio::spawn(async move {
        waiter
            .query_one(
                "SELECT fence FROM leasehold_acquire('K', 'late', 60000, 1)",
                &[],
            )
            .await
            .map(|row| row.get::<_, Option<i64>>(0))
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !pending.is_finished(),
        "the acquire should wait on the locked row"
    );
    let meanwhile: i64 = other
        .query_one(
            "SELECT fence FROM leasehold_acquire('other', 'o', 60000, 1)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    tx.execute("DELETE FROM leasehold_locks WHERE key = 'K'", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let won = pending
        .await
        .unwrap()
        .unwrap()
        .expect("the waiting acquire wins the freed row");
    assert!(
        won > meanwhile,
        "fence {won} was drawn before the row was won (a fence of {meanwhile} came meanwhile)"
    );
}

/// A payout service's fenced transaction stays open across several renewals (lease 1.5 s, the
/// transaction 4 s, waiting on its client between statements as one calling another service
/// would). Renewals go on, of its lock and of another lock of the same locker that no
/// transaction touches; another process's `try_acquire` answers at once that the lock is
/// taken, every time, instead of waiting on the row; and nobody else takes the lock meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_transaction_held_open_blocks_no_renewal_and_no_try_acquire() {
    let pg = PgServer::start().await;
    let a = locker(&pg).await;
    // A longer operation timeout, as a service would set: the engine's lock_timeout is half
    // of it, which is how long a try_acquire waited on the row.
    let b = builder(&pg.url())
        .op_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let mut db = client(&pg.url()).await;
    db.batch_execute("CREATE TABLE payouts (id int PRIMARY KEY, paid bool NOT NULL)")
        .await
        .unwrap();
    let lease = Duration::from_millis(1500);
    let payout = a.lock("payout:7").lease(lease).acquire().await.unwrap();
    let ledger = a.lock("ledger").lease(lease).acquire().await.unwrap();

    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &payout)
        .await
        .expect("the holder's check passes");
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut tries = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let asked = Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(10), b.lock("payout:7").try_acquire())
            .await
            .expect("try_acquire answers")
            .expect("try_acquire does not fail");
        slowest = slowest.max(asked.elapsed());
        tries += 1;
        assert!(
            got.is_none(),
            "another process took the lock {:?} into the fenced transaction",
            started.elapsed()
        );
        assert!(
            payout.is_held(),
            "the fenced lock was lost {:?} into its transaction",
            started.elapsed()
        );
        assert!(
            ledger.is_held(),
            "a lock no transaction touched was lost {:?} into the transaction",
            started.elapsed()
        );
        // The service's own work: the transaction waits on its client.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    tx.execute("INSERT INTO payouts VALUES (7, true)", &[])
        .await
        .unwrap();
    tx.commit().await.expect("the fenced transaction commits");
    assert!(
        slowest < Duration::from_millis(500),
        "try_acquire waited {slowest:?} (slowest of {tries}) on the fenced lock's row"
    );
    assert!(payout.is_held() && ledger.is_held());
    payout.release().await.expect("released as held to the end");
    ledger.release().await.expect("released as held to the end");
}

/// A holder stops (its watchdog no longer renews, its client sends nothing) inside a fenced
/// transaction. Nobody may take the lock while its lease is valid, but once it ended, another
/// process gets the lock within the lease plus the documented margin: the server ends the idle
/// transaction, and the stale holder can no longer commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stalled_inside_its_fenced_transaction_frees_the_lock_after_lease_and_margin() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    let lease = Duration::from_millis(1500);
    let stalled = a
        .lock("stall")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &stalled)
        .await
        .unwrap();
    let checked = Instant::now();
    // From here the holder's client sends nothing, as a stopped process would.
    let bound = lease + leasehold::postgres::FENCED_IDLE_MARGIN;
    let slack = Duration::from_secs(3);
    let taken = b
        .lock("stall")
        .wait(bound + slack)
        .acquire()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "another process could not take the lock within {:?} of the stalled holder's \
                 check: {e}",
                bound + slack
            )
        });
    let after = checked.elapsed();
    assert!(
        after >= lease.mul_f64(0.9),
        "taken {after:?} after the check, within the holder's lease of {lease:?}"
    );
    assert!(taken.fence() > stalled.fence());
    assert!(
        tx.commit().await.is_err(),
        "the stalled holder's transaction could still commit after another took the lock"
    );
    eprintln!("the stalled holder's lock was taken {after:?} after its fence check");
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
    let mut app_db = client(&app_url).await;
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
    let lease = Duration::from_millis(600);
    let guard = app.lock("role").lease(lease).acquire().await.unwrap();
    let other = app.lock("role2").lease(lease).acquire().await.unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(
        guard.is_held() && other.is_held(),
        "renewals kept both leases"
    );
    // A fenced transaction of the role's own, short enough for its timeouts.
    let tx = app_db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &guard).await.unwrap();
    tx.commit().await.unwrap();
    guard.release().await.unwrap();
    other.release().await.unwrap();
}

/// The cluster is restored from a file-level copy made before later acquisitions of a lock (as
/// after restoring a backup, or promoting an asynchronous standby that had not received them):
/// the fence sequence goes back, but fences must keep increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_increasing_after_a_restore_from_an_older_copy() {
    let pg = PgServer::start().await;
    {
        let locker = locker(&pg).await;
        locker
            .lock("f")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    pg.stop_fast();
    let saved = pg.save_data("backup");
    pg.start_again();
    pg.wait_until_ready().await;
    let mut last = 0;
    {
        let locker = locker(&pg).await;
        // More than the 32 values a sequence logs ahead of its last one.
        for _ in 0..40 {
            let guard = locker.lock("f").acquire().await.unwrap();
            last = guard.fence();
            guard.release().await.unwrap();
        }
    }
    pg.stop_fast();
    pg.restore_data(&saved);
    pg.start_again();
    pg.wait_until_ready().await;
    let locker = locker(&pg).await;
    let guard = locker.lock("f").acquire().await.unwrap();
    assert!(
        guard.fence() > last,
        "fence {} after the restore, {last} before it",
        guard.fence()
    );
}

/// The connection of a release breaks after the server deleted the lock but before its answer
/// came back; the engine sends the release again on a new connection, which finds nothing to
/// delete. The lock was held to the end and given back: the release must succeed, not report
/// the lock lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_answer_was_lost_is_not_reported_lost() {
    let pg = PgServer::start().await;
    let proxy = ReplyDropper::start(pg.addr()).await;
    let a = builder(&format!("postgres://postgres@{}/postgres", proxy.addr))
        .op_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let b = locker(&pg).await;
    let guard = a
        .lock("answer")
        .lease(Duration::from_secs(30))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    // The next message naming the lock is the release: the server gets it, its answer is lost.
    proxy.arm(b"pgt:lock:{answer}");
    let released = guard.release().await;
    assert!(
        proxy.fired(),
        "the release's answer was never dropped: the test did not test"
    );
    assert!(
        released.is_ok(),
        "a release that took effect, retried after its answer was lost: {released:?}"
    );
    let next = b
        .lock("answer")
        .try_acquire()
        .await
        .unwrap()
        .expect("the lock is free");
    next.release().await.unwrap();
}

/// A TCP proxy in front of PostgreSQL that forwards everything, except that once armed with a
/// marker, the connection whose client sends the marker next gets its request through to the
/// server and is then closed instead of receiving the answer: a statement that took effect
/// while its answer was lost.
struct ReplyDropper {
    addr: std::net::SocketAddr,
    armed: std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for ReplyDropper {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl ReplyDropper {
    async fn start(target: std::net::SocketAddr) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let armed: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
        let fired = Arc::new(AtomicBool::new(false));
        let (armed2, fired2) = (armed.clone(), fired.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                    continue;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let doomed = Arc::new(AtomicBool::new(false));
                let (armed, fired, doomed2) = (armed2.clone(), fired2.clone(), doomed.clone());
                let up = tokio::spawn(async move {
                    let mut buf = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        let chunk = &buf[..n];
                        {
                            let mut armed = armed.lock().unwrap();
                            let hit = armed
                                .as_ref()
                                .is_some_and(|m| chunk.windows(m.len()).any(|w| w == m));
                            if hit {
                                // Doomed before the server can answer.
                                *armed = None;
                                doomed2.store(true, Ordering::SeqCst);
                            }
                        }
                        if to_server.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                        if doomed.load(Ordering::SeqCst) {
                            fired.store(true, Ordering::SeqCst);
                            break;
                        }
                        if to_client.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    // Both directions closed: the client sees its connection end.
                    up.abort();
                });
            }
        });
        ReplyDropper {
            addr,
            armed,
            fired,
            accepting,
        }
    }

    fn arm(&self, marker: &[u8]) {
        *self.armed.lock().unwrap() = Some(marker.to_vec());
    }

    fn fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
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
