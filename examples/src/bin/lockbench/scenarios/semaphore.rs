//! Scenario 9: a semaphore of 8 permits, 64 tasks taking one permit each in a loop (holding
//! it for 1 ms), against what users write by hand on the same server in the same run: a
//! sorted set of expiring holders in Lua (drop the expired, `ZCARD`, `ZADD` when below the
//! limit; `ZREM` to release), waiting by polling every 1 ms (`baselines/permits/redis.rs`).
//! The two take turns in short windows (`permits/run.rs`, which scenario 12 shares).
//! Throughput and wait percentiles, as ratios.

use std::time::Duration;

use leasehold::Locker;

use crate::baselines::permits::{RedisZset, REDIS_ZSET};
use crate::report::Report;
use crate::scenarios::permits::{compare, OursPermits};

/// Scenario 9 on the server at `url`, `duration` per side.
pub(crate) async fn scenario(report: &mut Report, url: &str, duration: Duration) {
    let locker = Locker::builder()
        .url(url)
        .prefix("bench-sem")
        .default_wait(Duration::from_secs(120))
        .build()
        .await
        .expect("locker");
    let ours = OursPermits::on(locker, "sem").await;
    assert!(ours.is_some(), "semaphores on one Redis server");
    let hand = RedisZset::connect(url, "hand:sem").await;
    let scenario = "9 semaphore, 8 permits, 64 tasks";
    compare(report, scenario, ours, hand, REDIS_ZSET, duration).await;
}
