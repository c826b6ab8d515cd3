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
            "GRANT SELECT, INSERT, UPDATE, DELETE ON leasehold_locks TO app; \
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

/// The fence check row-locks the lock until the caller's transaction ends: a holder whose
/// lease runs out in the middle of its transaction still commits before anyone else can take
/// the lock, so no later holder reads the data from before that write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_one_takes_the_lock_between_a_fence_check_and_its_commit() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
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
        (Instant::now(), guard.fence())
    });
    // Past the lease, with the transaction still open.
    tokio::time::sleep(lease * 2).await;
    tx.commit().await.unwrap();
    let committed = Instant::now();
    let (granted, fence) = contender.await.unwrap();
    assert!(
        granted >= committed,
        "the lock was taken {:?} before the fenced transaction committed",
        committed - granted
    );
    assert!(fence > old.fence());
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
            "postgres://u:s3cret@127.0.0.1/db?sslmode=require",
            "sslmode",
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
