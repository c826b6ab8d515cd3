//! The Sentinel harness: the deployment starts, the sentinels name the master, and a killed master
//! is failed over to the replica, which then takes writes.

use std::time::{Duration, Instant};

use leasehold_tests::harness::Sentinels;

#[tokio::test]
async fn killing_the_master_fails_over_to_the_replica() {
    let started = Instant::now();
    let setup = Sentinels::start().await;
    eprintln!("the sentinel deployment started in {:?}", started.elapsed());
    assert_eq!(setup.master_name(), "mymaster");
    assert_eq!(setup.sentinel_urls().len(), 3);
    assert_eq!(setup.current_master_addr().await, setup.master().addr());

    // Written before the failover, so it must be on the replica once it is promoted.
    let mut conn = setup.master().conn().await;
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut conn)
        .await
        .unwrap();

    let failing_over = Instant::now();
    let promoted = setup
        .kill_master_and_wait_failover(Duration::from_secs(20))
        .await;
    eprintln!("failed over in {:?}", failing_over.elapsed());
    assert_eq!(promoted, setup.replica().addr());
    assert_eq!(setup.current_master_addr().await, promoted);
    assert_eq!(setup.master().pid(), None, "the old master stays down");

    let client = redis::Client::open(format!("redis://{promoted}")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("2")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before: String = redis::cmd("GET")
        .arg("before")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(before, "1");
    assert_eq!(setup.replica().keys("*").await, ["after", "before"]);
}
