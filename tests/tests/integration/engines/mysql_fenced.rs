//! Fenced writes in the caller's own MariaDB transaction (`leasehold::mysql::check_fence`) on
//! mysql_async and sqlx alike: a stale holder's write refused and never committed, nobody let
//! in between a check and its commit, a fenced transaction held open costing no lease and no
//! wait, a holder stalled inside one bounded by its lease plus the documented margin, a
//! reader's check, and the two mistakes that are `Config` errors (a guard of another engine, a
//! database without the schema).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use leasehold::mysql::mysql_async::{self, prelude::Queryable, Pool, TxOpts};
use leasehold::mysql::sqlx::{self, mysql::MySqlPoolOptions, MySqlPool};
use leasehold::mysql::{check_fence, FENCED_IDLE_MARGIN};
use leasehold::{LockError, LockGuard, Locker, LostReason};
use leasehold_tests::harness::MysqlServer;
use tokio::time::Instant;

/// The lockers' prefix: their lock keys are `myf:lock:{K}`.
const PREFIX: &str = "myf";

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .mysql(url)
        .prefix(PREFIX)
        .op_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(10))
}

async fn locker(db: &MysqlServer) -> Locker {
    builder(&db.url()).build().await.expect("locker on MariaDB")
}

/// A mysql_async pool of the application's own, by the locker's rules for the same URL.
fn pool(url: &str) -> Pool {
    Pool::new(leasehold::mysql::opts(url).expect("the URL"))
}

async fn sqlx_pool(url: &str) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(4)
        .connect(url)
        .await
        .expect("sqlx pool")
}

/// A table of stock with 10 of sku 1 left, in the locker's database.
async fn stock(db: &MysqlServer) {
    db.execute(
        "CREATE TABLE stock (sku INT PRIMARY KEY, left_ INT NOT NULL) ENGINE = InnoDB; \
         INSERT INTO stock VALUES (1, 10)",
    )
    .await
    .expect("the stock table");
}

async fn left(db: &MysqlServer) -> i64 {
    let rows = db
        .execute("SELECT left_ FROM stock WHERE sku = 1")
        .await
        .unwrap();
    rows[0][0].as_deref().unwrap().parse().unwrap()
}

/// The fence of the row that holds `key` in the lease table, as the store has it (`None`:
/// no row).
async fn stored_fence(db: &MysqlServer, key: &str) -> Option<u64> {
    let rows = db
        .execute(&format!(
            "SELECT fence FROM leasehold_locks \
             WHERE id = UNHEX(SHA2('{PREFIX}:lock:{{{key}}}', 256))"
        ))
        .await
        .unwrap();
    rows.first()
        .map(|row| row[0].as_deref().unwrap().parse().unwrap())
}

const SELL_ONE: &str = "UPDATE stock SET left_ = left_ - 1 WHERE sku = 1";

/// A holder that still believes it holds (as after a pause: its lease valid on its clock),
/// while an operator released its lock and another locker took it: the stale guard, the new
/// one, and the lockers that keep them.
async fn stale_and_new(db: &MysqlServer) -> (LockGuard, LockGuard, [Locker; 2]) {
    let (a, b) = (locker(db).await, locker(db).await);
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
    assert!(!guard.is_held(), "the guard is told of its loss");
}

/// On mysql_async: the holder's writes commit (in a `Transaction`, and on a pool's `Conn`
/// after `BEGIN`); the stale holder's check refuses it, tells its guard, and its write never
/// commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_fenced_writes_commit_while_held_and_a_stale_holder_is_refused() {
    let db = MysqlServer::start().await;
    stock(&db).await;
    let pool = pool(&db.url());
    let (old, new, _lockers) = stale_and_new(&db).await;

    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    check_fence(&mut tx, &new)
        .await
        .expect("the holder's check");
    tx.query_drop(SELL_ONE).await.unwrap();
    tx.commit().await.unwrap();
    // On the pool's connection itself, in a transaction of its own.
    conn.query_drop("BEGIN").await.unwrap();
    check_fence(&mut conn, &new)
        .await
        .expect("the holder's check");
    conn.query_drop(SELL_ONE).await.unwrap();
    conn.query_drop("COMMIT").await.unwrap();
    assert_eq!(left(&db).await, 8);

    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    let checked = check_fence(&mut tx, &old).await;
    if checked.is_ok() {
        tx.query_drop(SELL_ONE).await.unwrap();
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap(); // the caller's `?` returns: rolled back
    }
    assert_stale(checked, &old);
    assert_eq!(left(&db).await, 8, "the stale write never commits");
}

/// On sqlx: a `Transaction<'_, MySql>`, its `MySqlConnection` and a pool's connection; the
/// stale holder refused as on mysql_async.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlx_fenced_writes_commit_while_held_and_a_stale_holder_is_refused() {
    let db = MysqlServer::start().await;
    stock(&db).await;
    let pool = sqlx_pool(&db.url()).await;
    let (old, new, _lockers) = stale_and_new(&db).await;

    let mut tx = pool.begin().await.unwrap();
    check_fence(&mut tx, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    check_fence(&mut *tx, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("BEGIN").execute(&mut *conn).await.unwrap();
    check_fence(&mut conn, &new)
        .await
        .expect("the holder's check");
    sqlx::query(SELL_ONE).execute(&mut *conn).await.unwrap();
    sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
    drop(conn);
    assert_eq!(left(&db).await, 7);

    let mut tx = pool.begin().await.unwrap();
    let checked = check_fence(&mut tx, &old).await;
    if checked.is_ok() {
        sqlx::query(SELL_ONE).execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    } else {
        drop(tx);
    }
    assert_stale(checked, &old);
    assert_eq!(left(&db).await, 7, "the stale write never commits");
}

/// The fence check keeps others out until the caller's transaction ends: a holder whose lease
/// runs out in the middle of its transaction still commits before anyone else can take the
/// lock. Judged by the store's row (its fence), not by when the commit's reply was read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_one_takes_the_lock_between_a_fence_check_and_its_commit() {
    let db = MysqlServer::start().await;
    let (a, b) = (locker(&db).await, locker(&db).await);
    let pool = pool(&db.url());
    let lease = Duration::from_millis(600);
    let old = a
        .lock("slow")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    check_fence(&mut tx, &old).await.unwrap();
    let contender = tokio::spawn(async move {
        let guard = b
            .lock("slow")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .expect("the contender gets the lock after the commit");
        guard.fence()
    });
    // Past the lease, with the transaction still open: the store must still show the old
    // holder's row, and the contender still waiting.
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        stored_fence(&db, "slow").await,
        Some(old.fence()),
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

/// A payout service's fenced transaction stays open across several renewals (lease 1.5 s, the
/// transaction 4 s, waiting on its client between statements). Renewals go on, of its lock
/// and of another lock of the same locker; another process's `try_acquire` answers that the
/// lock is taken every time (within its operation timeout: it does not wait on the guard row);
/// and nobody else takes the lock meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_transaction_held_open_blocks_no_renewal_and_no_try_acquire() {
    let db = MysqlServer::start().await;
    let a = locker(&db).await;
    let b = locker(&db).await;
    db.execute("CREATE TABLE payouts (id INT PRIMARY KEY, paid BOOL NOT NULL) ENGINE = InnoDB")
        .await
        .unwrap();
    let pool = pool(&db.url());
    let lease = Duration::from_millis(1500);
    let payout = a.lock("payout:7").lease(lease).acquire().await.unwrap();
    let ledger = a.lock("ledger").lease(lease).acquire().await.unwrap();
    let (payout_fence, ledger_fence) = (payout.fence(), ledger.fence());

    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    check_fence(&mut tx, &payout)
        .await
        .expect("the holder's check passes");
    let started = Instant::now();
    let mut tries = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let got = b
            .lock("payout:7")
            .try_acquire()
            .await
            .expect("try_acquire answers within its operation timeout");
        tries += 1;
        assert!(
            got.is_none(),
            "another process took the lock {:?} into the fenced transaction",
            started.elapsed()
        );
        assert!(
            payout.is_held() && ledger.is_held(),
            "a lock was lost {:?} into the fenced transaction",
            started.elapsed()
        );
        // The service's own work: the transaction waits on its client.
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    tx.query_drop("INSERT INTO payouts VALUES (7, true)")
        .await
        .unwrap();
    tx.commit().await.expect("the fenced transaction commits");
    assert!(tries >= 5, "{tries} tries");
    assert!(payout.is_held() && ledger.is_held());
    // The store still has both leases of this holder: renewed past their first 1.5 s.
    assert_eq!(stored_fence(&db, "payout:7").await, Some(payout_fence));
    assert_eq!(stored_fence(&db, "ledger").await, Some(ledger_fence));
    payout.release().await.expect("released as held to the end");
    ledger.release().await.expect("released as held to the end");
}

/// A holder stops (its watchdog no longer renews, its client sends nothing) inside a fenced
/// transaction, on `client`'s connection. Nobody may take the lock while its lease is valid,
/// but once it ended another process gets it within the lease plus the documented margin: the
/// server ends the idle transaction's session, and the stale holder can no longer commit.
async fn stalled_holder_is_bounded(db: &MysqlServer, client: &str) {
    let (a, b) = (locker(db).await, locker(db).await);
    let lease = Duration::from_millis(1500);
    let stalled = a
        .lock("stall")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    // The transaction's COMMIT, not sent until awaited at the end: from the check on, the
    // holder's client sends nothing, as a stopped process's would.
    let commit: Pin<Box<dyn Future<Output = bool> + Send>> = match client {
        "mysql_async" => {
            let mut conn = pool(&db.url()).get_conn().await.unwrap();
            conn.query_drop("BEGIN").await.unwrap();
            check_fence(&mut conn, &stalled).await.unwrap();
            Box::pin(async move { conn.query_drop("COMMIT").await.is_ok() })
        }
        _ => {
            let pool = sqlx_pool(&db.url()).await;
            let mut tx = pool.begin().await.unwrap();
            check_fence(&mut tx, &stalled).await.unwrap();
            Box::pin(async move { tx.commit().await.is_ok() })
        }
    };
    let checked = Instant::now();
    let bound = lease + FENCED_IDLE_MARGIN;
    // MariaDB counts the bound in whole seconds (rounded up), and the contender asks again
    // on its own schedule.
    let slack = Duration::from_secs(5);
    let taken = b
        .lock("stall")
        .wait(bound + slack)
        .acquire()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{client}: another process could not take the lock within {:?} of the stalled \
                 holder's check: {e}",
                bound + slack
            )
        });
    let after = checked.elapsed();
    assert!(
        after >= lease.mul_f64(0.9),
        "{client}: taken {after:?} after the check, within the holder's lease of {lease:?}"
    );
    assert!(taken.fence() > stalled.fence());
    assert!(
        !commit.await,
        "{client}: the stalled holder's transaction could still commit after another took the \
         lock"
    );
    eprintln!("{client}: the stalled holder's lock was taken {after:?} after its fence check");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stalled_inside_its_fenced_transaction_frees_the_lock_after_lease_and_margin() {
    let db = MysqlServer::start().await;
    stalled_holder_is_bounded(&db, "mysql_async").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stalled_inside_its_sqlx_transaction_frees_the_lock_after_lease_and_margin() {
    let db = MysqlServer::start().await;
    stalled_holder_is_bounded(&db, "sqlx").await;
}

/// A reader's check passes while it holds its share, keeps a writer out until its
/// transaction ends (even once the reader released), and refuses the reader once a writer
/// took the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_check_keeps_writers_out_until_its_transaction_ends() {
    let db = MysqlServer::start().await;
    let (a, b) = (locker(&db).await, locker(&db).await);
    let pool = pool(&db.url());
    let reader = a.read_lock("report").acquire().await.unwrap();
    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    check_fence(&mut tx, &reader)
        .await
        .expect("the reader's check");
    reader.release().await.unwrap();
    assert!(
        b.write_lock("report")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a writer took the lock while a reader's fenced transaction was open"
    );
    tx.commit().await.unwrap();
    let writer = b
        .write_lock("report")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the writer, once the reader's transaction ended");

    let stale = a.read_lock("other").acquire().await.unwrap();
    assert!(b.force_release("other").await.unwrap());
    let _taken = b.write_lock("other").acquire().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    assert_stale(check_fence(&mut tx, &stale).await, &stale);
    tx.rollback().await.unwrap();
    drop(writer);
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

/// A guard of an in-memory locker, with each client: a `Config` error naming the engines,
/// before any SQL runs (the transaction is still usable after it); and a transaction on a
/// database without the leasehold schema: a `Config` error saying so. The guards keep their
/// locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_guard_or_database_is_a_config_error_with_either_client() {
    let db = MysqlServer::start().await;
    let on_mysql = locker(&db).await;
    db.execute(
        "CREATE DATABASE other; \
         GRANT SELECT ON other.* TO 'leasehold'@'127.0.0.1'",
    )
    .await
    .unwrap();
    let other = format!(
        "{}/other",
        db.url()
            .strip_suffix("/leasehold")
            .expect("the URL's database")
    );
    let in_memory = Locker::in_memory();
    let foreign = in_memory.lock("stock:1").acquire().await.unwrap();
    let ours = on_mysql.lock("stock:1").acquire().await.unwrap();

    for url in [db.url(), other.clone()] {
        let pool = pool(&url);
        let mut conn = pool.get_conn().await.unwrap();
        let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
        assert_config(
            check_fence(&mut tx, &foreign).await,
            &["MySQL locker", "in memory"],
        );
        tx.query_drop("SELECT 1").await.unwrap();
        tx.commit().await.unwrap();

        let sqlx = sqlx_pool(&url).await;
        let mut tx = sqlx.begin().await.unwrap();
        assert_config(
            check_fence(&mut tx, &foreign).await,
            &["MySQL locker", "in memory"],
        );
        sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }
    assert!(foreign.is_held());

    let says = [
        "no leasehold schema in the transaction's database",
        "leasehold_check_fence",
    ];
    // A user without EXECUTE there: the server does not say whether the procedure exists.
    let pool = pool(&other);
    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    assert_config(
        check_fence(&mut tx, &ours).await,
        &["may not run leasehold_check_fence", "grant", "EXECUTE"],
    );
    drop(tx);
    db.execute("GRANT EXECUTE ON other.* TO 'leasehold'@'127.0.0.1'")
        .await
        .unwrap();
    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    let checked = check_fence(&mut tx, &ours).await;
    if let Err(LockError::Config {
        source: Some(source),
        ..
    }) = &checked
    {
        assert!(
            source.downcast_ref::<mysql_async::Error>().is_some(),
            "the driver's error is the source: {source:?}"
        );
    }
    assert_config(checked, &says);
    drop(tx);
    let sqlx = sqlx_pool(&other).await;
    let mut tx = sqlx.begin().await.unwrap();
    let checked = check_fence(&mut tx, &ours).await;
    if let Err(LockError::Config {
        source: Some(source),
        ..
    }) = &checked
    {
        assert!(
            source.downcast_ref::<sqlx::Error>().is_some(),
            "the driver's error is the source: {source:?}"
        );
    }
    assert_config(checked, &says);
    assert!(
        ours.is_held(),
        "a refused check takes nothing from the guard"
    );
}

/// Every table of the schema, for the lockers' user's `SELECT` grants.
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

/// The grants `docs/security-mysql.md` gives, and no more: with the schema an operator applied,
/// the lockers' user (`EXECUTE` on the database, `SELECT` on each `leasehold_*` table) locks,
/// waits and is woken, reads, takes permits, leads and inspects; the application's user
/// (`EXECUTE` on `leasehold_check_fence` alone) checks fences, and reads none of the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_least_privileges_are_enough() {
    let db = MysqlServer::start().await;
    db.apply_with_client(leasehold::mysql::SCHEMA).await;
    let mut grants = "CREATE USER 'locks'@'127.0.0.1' IDENTIFIED BY 'lockspw'; \
                      CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'apppw'; \
                      GRANT EXECUTE ON leasehold.* TO 'locks'@'127.0.0.1'; \
                      GRANT EXECUTE ON PROCEDURE leasehold.leasehold_check_fence \
                      TO 'app'@'127.0.0.1';"
        .to_owned();
    for table in TABLES {
        grants.push_str(&format!(
            "GRANT SELECT ON leasehold.{table} TO 'locks'@'127.0.0.1';"
        ));
    }
    db.execute(&grants).await.unwrap();
    let locks_url = format!("mysql://locks:lockspw@{}/leasehold", db.addr());
    let app_url = format!("mysql://app:apppw@{}/leasehold", db.addr());

    let (a, b) = (
        builder(&locks_url)
            .build()
            .await
            .expect("the lockers' user's locker"),
        builder(&locks_url)
            .build()
            .await
            .expect("the lockers' user's locker"),
    );
    let guard = a.lock("stock:1").acquire().await.unwrap();
    let info = a.inspect("stock:1").await.expect("inspection");
    assert!(info.held, "{info:?}");
    let reader = a.read_lock("doc").acquire().await.unwrap();
    reader.release().await.unwrap();
    let permits = a.semaphore("pool", 2).acquire().await.unwrap();
    permits.release().await.unwrap();
    let leadership = a.leader("cron").identity("a").campaign().await.unwrap();
    leadership.resign().await.unwrap();

    let pool = pool(&app_url);
    let mut conn = pool.get_conn().await.unwrap();
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    check_fence(&mut tx, &guard)
        .await
        .expect("the application's user checks the fence");
    tx.commit().await.unwrap();
    let denied = conn.query_drop("SELECT * FROM leasehold_locks").await;
    assert!(
        matches!(&denied, Err(mysql_async::Error::Server(e)) if e.code == 1142),
        "the application's user reads the lock table: {denied:?}"
    );

    // A contender of the lockers' user, woken by the release (the wake log it may read).
    let waiter = tokio::spawn(async move {
        b.lock("stock:1")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
            .map(|guard| guard.fence())
    });
    while !a.inspect("stock:1").await.unwrap().waiters {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fence = guard.fence();
    guard.release().await.unwrap();
    let taken = waiter.await.unwrap().expect("the contender gets the lock");
    assert!(taken > fence);
}
