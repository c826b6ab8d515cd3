//! Fences keep increasing: across crash and normal restarts, and after the database is
//! restored from an older dump.

use leasehold_tests::harness::MysqlServer;

use super::locker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_increasing_across_restarts() {
    let db = MysqlServer::start().await;
    let mut last = 0;
    for round in 0..3 {
        let locker = locker(&db).await;
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
            db.restart().await; // kill -9: crash recovery
        } else {
            db.restart_fast().await;
        }
    }
}

/// The database is restored from a dump made before later acquisitions of a lock (as after
/// restoring a backup, or failing over to a replica that had not received them): every stored
/// fence floor goes back, but fences must keep increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_increasing_after_a_restore_from_an_older_dump() {
    let db = MysqlServer::start().await;
    {
        let locker = locker(&db).await;
        let guard = locker.lock("f").acquire().await.unwrap();
        guard.release().await.unwrap();
    }
    let dump = db.dump("backup").await;
    let mut last = 0;
    {
        let locker = locker(&db).await;
        for _ in 0..40 {
            let guard = locker.lock("f").acquire().await.unwrap();
            last = guard.fence();
            guard.release().await.unwrap();
        }
    }
    db.restore_dump(&dump).await;
    let locker = locker(&db).await;
    let guard = locker.lock("f").acquire().await.unwrap();
    assert!(
        guard.fence() > last,
        "fence {} after the restore, {last} before it",
        guard.fence()
    );
    // The same with the server restarted from the restored data.
    guard.release().await.unwrap();
    let before = locker.lock("f").acquire().await.unwrap();
    let last = before.fence();
    before.release().await.unwrap();
    drop(locker);
    db.restore_dump(&dump).await;
    db.restart().await;
    let locker = super::locker(&db).await;
    let guard = locker.lock("f").acquire().await.unwrap();
    assert!(guard.fence() > last, "{} after {last}", guard.fence());
}
