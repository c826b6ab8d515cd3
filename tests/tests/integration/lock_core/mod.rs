//! The core runtime against real `redis-server` processes: exclusion, release on every path,
//! leases and the watchdog, fencing, waiting, cancellation, and Redis failures. Read-write and
//! multi-key locks are in `read_write` and `multi`, which share the helpers of this module.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

mod exclusion;
mod fencing;
mod keys;
mod lease;
mod outage;
mod release;
mod waiting;

pub(crate) async fn locker(url: &str) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_millis(500))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("connect")
}

/// The lock keys of `srv`, read on the server itself (not through any proxy).
pub(crate) async fn lock_keys(srv: &RedisServer) -> Vec<String> {
    srv.keys("leasehold:lock:*").await
}

/// Script calls `srv` has run: acquires, releases and renewals are all scripts.
pub(crate) async fn script_calls(srv: &RedisServer) -> u64 {
    srv.info_stat("cmdstat_evalsha").await + srv.info_stat("cmdstat_eval").await
}
