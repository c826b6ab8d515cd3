//! The line of waiters under a lock's row: a contender never joins the line of a lock that a
//! release is freeing.

use std::time::Duration;

use leasehold_tests::harness::{eventually, PgServer};

use super::{client, count, locker};

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
