//! Fenced writes in the caller's own transaction: a stale holder's write refused (also from a
//! serializable transaction racing the takeover), nobody let in before the commit, and a
//! transaction held open or stalled.

use std::time::Duration;

use leasehold::postgres::tokio_postgres::{self as pg, IsolationLevel};
use leasehold::{LockError, LostReason};
use leasehold_tests::harness::PgServer;
use tokio::time::Instant;

use super::{builder, client, count, locker};

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

/// A payout service's fenced transaction stays open across several renewals (lease 1.5 s, the
/// transaction 4 s, waiting on its client between statements as one calling another service
/// would). Renewals go on, of its lock and of another lock of the same locker that no
/// transaction touches; another process's `try_acquire` answers at once that the lock is
/// taken, every time, instead of waiting on the row; and nobody else takes the lock meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_transaction_held_open_blocks_no_renewal_and_no_try_acquire() {
    let pg = PgServer::start().await;
    let a = locker(&pg).await;
    // A long operation timeout: the engine's lock_timeout is half of it (10 s), which is how
    // long a try_acquire waited on the row. The bound below (5 s) tells that wait from an
    // answer at once with a margin a loaded machine does not eat (a try took 0.73 s in a
    // loaded CI run, against a 0.5 s bound with a 1 s lock_timeout).
    let b = builder(&pg.url())
        .op_timeout(Duration::from_secs(20))
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
        let got = tokio::time::timeout(Duration::from_secs(30), b.lock("payout:7").try_acquire())
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
        slowest < Duration::from_secs(5),
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
