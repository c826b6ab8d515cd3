//! A separate OS process that takes a lock in a loop and does a read-sleep-write on a counter
//! in Redis under it; multi-process tests run several and check the counter.
//!
//! Usage: `lock_worker REDIS_URL LOCK_KEY COUNTER_KEY ITERATIONS`

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, key, counter, iterations] = args.as_slice() else {
        eprintln!("usage: lock_worker REDIS_URL LOCK_KEY COUNTER_KEY ITERATIONS");
        std::process::exit(2);
    };
    let iterations: u32 = iterations.parse().expect("ITERATIONS is a number");
    let locker = leasehold::Locker::builder()
        .url(url.as_str())
        .default_wait(Duration::from_secs(30))
        .build()
        .await
        .expect("connect");
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..iterations {
        let guard = locker.lock(key.as_str()).acquire().await.expect("acquire");
        let n: i64 = conn.get(counter.as_str()).await.unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let _: () = conn.set(counter.as_str(), n + 1).await.unwrap();
        guard.release().await.expect("release");
    }
}
