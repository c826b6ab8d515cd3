//! Fences keep increasing: across crash restarts, after a restore from an older copy, and
//! when an acquire waited on another transaction's row.

use std::time::Duration;

use leasehold_tests::harness::PgServer;

use super::{client, locker};

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
