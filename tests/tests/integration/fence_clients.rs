//! `leasehold::postgres::check_fence` on the clients web services use, against a real
//! PostgreSQL: sqlx (a transaction, a connection, a pool's connection), deadpool-postgres and
//! bb8-postgres (their transactions and pooled connections, passed as they are, no `&*`).
//! For each: a fenced write commits while its guard holds, a stale holder is refused with
//! `Lost { StaleFence }` and its write never commits. For every client alike: a guard of
//! another engine (Redis, in memory) is a `Config` error before any SQL runs, and so is a
//! transaction on a database without the leasehold schema.

use std::time::Duration;

use bb8_postgres::{bb8, PostgresConnectionManager};
use leasehold::postgres::check_fence;
use leasehold::postgres::sqlx::{self, postgres::PgPoolOptions, PgPool};
use leasehold::postgres::tokio_postgres::{self as pg, NoTls};
use leasehold::{LockError, LockGuard, Locker, LostReason};
use leasehold_tests::harness::{PgServer, RedisServer};

async fn pg_locker(pg: &PgServer) -> Locker {
    Locker::builder()
        .postgres(pg.url())
        .prefix("fc")
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("locker on PostgreSQL")
}

/// A table of stock with 10 of sku 1 left, in the locker's database.
async fn stock(pg: &PgServer) {
    pg.execute(
        "CREATE TABLE stock (sku int PRIMARY KEY, left_ int NOT NULL); \
         INSERT INTO stock VALUES (1, 10)",
    )
    .await
    .expect("the stock table");
}

async fn left(pg: &PgServer) -> i64 {
    let rows = pg
        .execute("SELECT left_ FROM stock WHERE sku = 1")
        .await
        .unwrap();
    rows[0][0].as_deref().unwrap().parse().unwrap()
}

const SELL_ONE: &str = "UPDATE stock SET left_ = left_ - 1 WHERE sku = 1";

/// A holder that still believes it holds (as after a pause: its lease valid on its clock),
/// while an operator released its lock and another locker took it: the stale guard, the new
/// one, and the lockers that keep them.
async fn stale_and_new(pg: &PgServer) -> (LockGuard, LockGuard, [Locker; 2]) {
    let (a, b) = (pg_locker(pg).await, pg_locker(pg).await);
    let old = a.lock("stock:1").acquire().await.unwrap();
    assert!(b.force_release("stock:1").await.unwrap());
    let new = b.lock("stock:1").acquire().await.unwrap();
    assert!(new.fence() > old.fence());
    assert!(old.is_held(), "the stale holder still believes it holds");
    (old, new, [a, b])
}

fn assert_stale(checked: Result<(), LockError>, guard: &LockGuard) {
    assert!(
        matches!(
            checked,
            Err(LockError::Lost {
                reason: LostReason::StaleFence
            })
        ),
        "{checked:?}"
    );
    assert!(!guard.is_held(), "the stale guard is told of its loss");
}

async fn sqlx_pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .expect("sqlx pool")
}

fn deadpool(url: &str) -> deadpool_postgres::Pool {
    let config: pg::Config = url.parse().expect("URL");
    deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, NoTls))
        .max_size(2)
        .build()
        .expect("deadpool")
}

async fn bb8_pool(url: &str) -> bb8::Pool<PostgresConnectionManager<NoTls>> {
    let manager = PostgresConnectionManager::new_from_stringlike(url, NoTls).expect("URL");
    bb8::Pool::builder()
        .max_size(2)
        .build(manager)
        .await
        .expect("bb8 pool")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlx_fenced_writes_commit_while_held_and_a_stale_holder_is_refused() {
    let pg = PgServer::start().await;
    stock(&pg).await;
    let pool = sqlx_pool(&pg.url()).await;
    let (old, new, _lockers) = stale_and_new(&pg).await;

    // The holder's write, in a transaction (`pool.begin()`), passed as `&mut tx`.
    let mut tx = pool.begin().await.unwrap();
    check_fence(&mut tx, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    // On the transaction's connection itself (`&mut *tx`: a `PgConnection`).
    let mut tx = pool.begin().await.unwrap();
    check_fence(&mut *tx, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    // On a pool's connection (`pool.acquire()`), in a transaction of its own.
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("BEGIN").execute(&mut *conn).await.unwrap();
    check_fence(&mut conn, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *conn).await.unwrap();
    sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
    drop(conn);
    assert_eq!(left(&pg).await, 7);

    let mut tx = pool.begin().await.unwrap();
    let checked = check_fence(&mut tx, &old).await;
    if checked.is_ok() {
        sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    } else {
        drop(tx); // the caller's `?` returns: rolled back
    }
    assert_stale(checked, &old);
    assert_eq!(left(&pg).await, 7, "the stale write never commits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadpool_fenced_writes_commit_while_held_and_a_stale_holder_is_refused() {
    let pg = PgServer::start().await;
    stock(&pg).await;
    let pool = deadpool(&pg.url());
    let (old, new, _lockers) = stale_and_new(&pg).await;

    // deadpool-postgres's `Transaction`, passed as it is (it derefs to tokio-postgres's).
    let mut client = pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    check_fence(&tx, &new).await.expect("the holder's check");
    tx.execute(SELL_ONE, &[]).await.unwrap();
    tx.commit().await.unwrap();
    // Its pooled client (two derefs to tokio-postgres's `Client`), one statement.
    check_fence(&client, &new)
        .await
        .expect("the holder's check");
    assert_eq!(left(&pg).await, 9);

    let tx = client.transaction().await.unwrap();
    let checked = check_fence(&tx, &old).await;
    if checked.is_ok() {
        tx.execute(SELL_ONE, &[]).await.unwrap();
        tx.commit().await.unwrap();
    } else {
        drop(tx);
    }
    assert_stale(checked, &old);
    assert_eq!(left(&pg).await, 9, "the stale write never commits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bb8_fenced_writes_commit_while_held_and_a_stale_holder_is_refused() {
    let pg = PgServer::start().await;
    stock(&pg).await;
    let pool = bb8_pool(&pg.url()).await;
    let (old, new, _lockers) = stale_and_new(&pg).await;

    // bb8-postgres's pooled connection, passed as it is (it derefs to tokio-postgres's
    // `Client`), in a transaction it began.
    let conn = pool.get().await.unwrap();
    conn.batch_execute("BEGIN").await.unwrap();
    check_fence(&conn, &new).await.expect("the holder's check");
    conn.execute(SELL_ONE, &[]).await.unwrap();
    conn.batch_execute("COMMIT").await.unwrap();
    drop(conn);
    // A transaction of the pooled connection.
    let mut conn = pool.get().await.unwrap();
    let tx = conn.transaction().await.unwrap();
    check_fence(&tx, &new).await.expect("the holder's check");
    tx.execute(SELL_ONE, &[]).await.unwrap();
    tx.commit().await.unwrap();
    drop(conn);
    assert_eq!(left(&pg).await, 8);

    let conn = pool.get().await.unwrap();
    conn.batch_execute("BEGIN").await.unwrap();
    let checked = check_fence(&conn, &old).await;
    if checked.is_ok() {
        conn.execute(SELL_ONE, &[]).await.unwrap();
    }
    conn.batch_execute("ROLLBACK").await.unwrap();
    assert_stale(checked, &old);
    assert_eq!(left(&pg).await, 8, "the stale write never commits");
}

fn assert_config(checked: Result<(), LockError>, says: &[&str]) {
    match &checked {
        Err(LockError::Config { message, .. }) => {
            for part in says {
                assert!(message.contains(part), "{part:?} not in: {message}");
            }
        }
        other => panic!("expected a Config error saying {says:?}, got {other:?}"),
    }
}

/// A guard of a locker on Redis or in memory, given to the check with each client, on a
/// database with the leasehold schema (where a statement would answer "stale") and on one
/// without (where it would fail): a `Config` error that names the guard's engine, before any
/// SQL runs (the transaction is still usable after it), and the guard keeps its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_of_another_engine_is_a_config_error_before_any_sql() {
    let pg = PgServer::start().await;
    let _schema_made = pg_locker(&pg).await;
    pg.execute("CREATE DATABASE other").await.unwrap();
    let redis = RedisServer::start().await;
    let on_redis = Locker::builder().url(redis.url()).build().await.unwrap();
    let in_memory = Locker::in_memory();
    let guards = [
        (
            on_redis.lock("stock:1").acquire().await.unwrap(),
            "redis at",
        ),
        (
            in_memory.lock("stock:1").acquire().await.unwrap(),
            "in memory",
        ),
    ];
    for url in [pg.url(), format!("postgres://postgres@{}/other", pg.addr())] {
        for (guard, engine) in &guards {
            refused_by_every_client(&url, guard, &["PostgreSQL locker", engine]).await;
            assert!(
                guard.is_held(),
                "a refused check takes nothing from the guard"
            );
        }
    }
}

/// `guard`'s check is a `Config` error saying `says` with each client, in a transaction on
/// `url` that is still usable after it (no statement failed in it).
async fn refused_by_every_client(url: &str, guard: &LockGuard, says: &[&str]) {
    let sqlx = sqlx_pool(url).await;
    let mut tx = sqlx.begin().await.unwrap();
    assert_config(check_fence(&mut tx, guard).await, says);
    sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();

    let deadpool = deadpool(url);
    let mut client = deadpool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert_config(check_fence(&tx, guard).await, says);
    tx.execute("SELECT 1", &[]).await.unwrap();
    tx.commit().await.unwrap();

    let bb8 = bb8_pool(url).await;
    let conn = bb8.get().await.unwrap();
    conn.batch_execute("BEGIN").await.unwrap();
    assert_config(check_fence(&conn, guard).await, says);
    conn.execute("SELECT 1", &[]).await.unwrap();
    conn.batch_execute("COMMIT").await.unwrap();
    drop(conn);

    let (mut client, connection) = pg::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    let tx = client.transaction().await.unwrap();
    assert_config(check_fence(&tx, guard).await, says);
    tx.execute("SELECT 1", &[]).await.unwrap();
    tx.commit().await.unwrap();
}

/// A transaction on another database than the locker's (one with no leasehold schema), with
/// each client: a `Config` error saying so, with the driver's error as its source, and the
/// guard keeps its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_on_a_database_without_the_schema_is_a_config_error() {
    let pg = PgServer::start().await;
    let locker = pg_locker(&pg).await;
    pg.execute("CREATE DATABASE other").await.unwrap();
    let other = format!("postgres://postgres@{}/other", pg.addr());
    let guard = locker.lock("stock:1").acquire().await.unwrap();
    let says = [
        "no leasehold schema in the transaction's database",
        "leasehold_check_fence",
    ];

    let sqlx = sqlx_pool(&other).await;
    let mut tx = sqlx.begin().await.unwrap();
    let checked = check_fence(&mut tx, &guard).await;
    assert!(
        matches!(&checked, Err(LockError::Config { source: Some(s), .. }) if s.is::<sqlx::Error>()),
        "{checked:?}"
    );
    assert_config(checked, &says);
    drop(tx);

    let deadpool = deadpool(&other);
    let mut client = deadpool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert_config(check_fence(&tx, &guard).await, &says);
    drop(tx);

    let bb8 = bb8_pool(&other).await;
    let conn = bb8.get().await.unwrap();
    assert_config(check_fence(&conn, &guard).await, &says);
    drop(conn);

    let (mut client, connection) = pg::connect(&other, NoTls).await.unwrap();
    tokio::spawn(connection);
    let tx = client.transaction().await.unwrap();
    let checked = check_fence(&tx, &guard).await;
    assert!(
        matches!(&checked, Err(LockError::Config { source: Some(s), .. }) if s.is::<pg::Error>()),
        "{checked:?}"
    );
    assert_config(checked, &says);
    drop(tx);

    assert!(
        guard.is_held(),
        "a wrong database takes nothing from the guard"
    );
    guard.release().await.unwrap();
}

/// A locker built with `lazy_connect` stands in for its engine until it connects: its guards
/// are still a PostgreSQL locker's, and pass the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_of_a_lazily_connected_postgres_locker_passes() {
    let pg = PgServer::start().await;
    let locker = Locker::builder()
        .postgres(pg.url())
        .lazy_connect(true)
        .build()
        .await
        .expect("lazy locker");
    let guard = locker
        .lock("stock:1")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquired once connected");
    let pool = deadpool(&pg.url());
    let mut client = pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    check_fence(&tx, &guard).await.expect("the holder's check");
    tx.commit().await.unwrap();
}

/// Two lockers on Redis, a stale holder of `stock:1` (it still believes it holds) and the
/// holder after it: for claims on data in PostgreSQL with the locks kept elsewhere.
async fn stale_and_new_on_redis(redis: &RedisServer) -> (LockGuard, LockGuard, [Locker; 2]) {
    let build = || Locker::builder().url(redis.url()).build();
    let (a, b) = (build().await.unwrap(), build().await.unwrap());
    let old = a.lock("stock:1").acquire().await.unwrap();
    assert!(b.force_release("stock:1").await.unwrap());
    let new = b.lock("stock:1").acquire().await.unwrap();
    assert!(new.fence() > old.fence());
    assert!(old.is_held(), "the stale holder still believes it holds");
    (old, new, [a, b])
}

/// The stock table and the claims' table, in a database that holds no locks.
async fn stock_with_claims(pg: &PgServer) {
    stock(pg).await;
    pg.execute(leasehold::postgres::CLAIMS_SCHEMA)
        .await
        .expect("the claims' table");
}

/// Issue 44's window on PostgreSQL, with the locks on Redis: the older holder A claims and
/// reads in its transaction; the newer holder B's claim waits for A's transaction (the claim
/// row is locked), so B reads what A committed; and an A that only gets to claim after B did
/// is refused, and its write never commits. Judged by what the server saw: B's backend
/// waiting on a lock, and the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_keeps_an_older_holders_write_out_of_the_next_holders_read_and_write() {
    use leasehold::postgres::claim_fence;

    let pg = PgServer::start().await;
    stock_with_claims(&pg).await;
    let redis = RedisServer::start().await;
    let (old, new, _lockers) = stale_and_new_on_redis(&redis).await;
    let (mut a_db, mut b_db) = (pg.connect().await.unwrap(), pg.connect().await.unwrap());
    const READ: &str = "SELECT left_::bigint FROM stock WHERE sku = 1";
    const WRITE: &str = "UPDATE stock SET left_ = $1::bigint WHERE sku = 1";

    // A got in first (before B's lease): it claims and reads 10, and is slow to write.
    let a_tx = a_db.transaction().await.unwrap();
    claim_fence(&a_tx, &old, "stock:1")
        .await
        .expect("A's claim");
    let a_read: i64 = a_tx.query_one(READ, &[]).await.unwrap().get(0);
    assert_eq!(a_read, 10);
    // B's claim waits for A's transaction: the row A claimed is locked.
    let b = tokio::spawn(async move {
        let b_tx = b_db.transaction().await.unwrap();
        claim_fence(&b_tx, &new, "stock:1")
            .await
            .expect("B's claim");
        let b_read: i64 = b_tx.query_one(READ, &[]).await.unwrap().get(0);
        b_tx.execute(WRITE, &[&(b_read - 1)]).await.unwrap();
        b_tx.commit().await.unwrap();
        (b_read, new)
    });
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting = pg
            .execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
            .await
            .unwrap();
        if waiting[0][0].as_deref() == Some("1") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "B's claim never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a_tx.execute(WRITE, &[&(a_read - 1)]).await.unwrap();
    a_tx.commit().await.unwrap();
    let (b_read, new) = b.await.unwrap();
    assert_eq!(
        b_read, 9,
        "B read what A committed before B's claim got through"
    );
    assert_eq!(left(&pg).await, 8, "two sales, two items");

    // A again, now after B's claim: refused at its claim, its write never commits.
    let a_tx = a_db.transaction().await.unwrap();
    let claimed = claim_fence(&a_tx, &old, "stock:1").await;
    if claimed.is_ok() {
        a_tx.execute(WRITE, &[&0i64]).await.unwrap();
        a_tx.commit().await.unwrap();
    } else {
        drop(a_tx);
    }
    assert_stale(claimed, &old);
    assert_eq!(left(&pg).await, 8, "the stale write never commits");
    // The same holder claiming again is fine (a transaction per step of its section).
    claim_fence(&a_db, &new, "stock:1")
        .await
        .expect("B claims again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_work_on_sqlx_and_a_database_without_the_table_is_a_config_error() {
    use leasehold::postgres::claim_fence;

    let pg = PgServer::start().await;
    stock(&pg).await;
    let redis = RedisServer::start().await;
    let (old, new, lockers) = stale_and_new_on_redis(&redis).await;
    let pool = sqlx_pool(&pg.url()).await;

    let mut tx = pool.begin().await.unwrap();
    assert_config(
        claim_fence(&mut tx, &new, "stock:1").await,
        &["leasehold_claims", "CLAIMS_SCHEMA"],
    );
    drop(tx);
    assert!(
        new.is_held(),
        "a missing table takes nothing from the guard"
    );

    sqlx::query(leasehold::postgres::CLAIMS_SCHEMA)
        .execute(&pool)
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    claim_fence(&mut tx, &new, "stock:1")
        .await
        .expect("B's claim");
    sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let claimed = claim_fence(&mut tx, &old, "stock:1").await;
    if claimed.is_ok() {
        sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    } else {
        drop(tx);
    }
    assert_stale(claimed, &old);
    assert_eq!(left(&pg).await, 9, "only the holder's sale");

    // The guard-free form, with a fence from elsewhere, and a leader claiming with its term.
    use leasehold::postgres::claim_with_fence;
    let mut conn = pool.acquire().await.unwrap();
    assert!(claim_with_fence(&mut conn, "job", 50).await.unwrap());
    assert!(
        claim_with_fence(&mut conn, "job", 50).await.unwrap(),
        "the same again"
    );
    assert!(!claim_with_fence(&mut conn, "job", 49).await.unwrap());
    let leader = lockers[0].leader("job").campaign().await.unwrap();
    assert!(leader.term() > 50);
    claim_fence(&mut conn, &leader, "job")
        .await
        .expect("a leader claims with its term");
    assert!(!claim_with_fence(&mut conn, "job", 50).await.unwrap());
}

/// The claims' table lives beside the locks' schema when the data and the locks share a
/// database: its name is not one the lock schema takes (a table named like the fence sequence
/// was refused as "already exists", and every claim then failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_work_in_the_database_that_holds_the_locks() {
    use leasehold::postgres::claim_fence;

    let pg = PgServer::start().await;
    let locker = pg_locker(&pg).await; // the lock schema first
    stock_with_claims(&pg).await;
    let guard = locker.lock("stock:1").acquire().await.unwrap();
    let mut db = pg.connect().await.unwrap();
    let tx = db.transaction().await.unwrap();
    claim_fence(&tx, &guard, "stock:1")
        .await
        .expect("a claim beside the lock schema");
    tx.execute(SELL_ONE, &[]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(left(&pg).await, 9);
}
