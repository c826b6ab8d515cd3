//! A shop stopped with SIGTERM gives back what it holds before it exits (it closes its locker
//! after the graceful shutdown: `Locker::close_after`): two shop processes campaign for one
//! leadership (`--leader`), the leader is sent SIGTERM, and the other shop leads within a
//! handover, not after the leader's lease (10 s) as when the release died with the process.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;
use tokio::time::{timeout, Instant};

use crate::shop::Shop;

/// The shops' lease.
const SHOP_LEASE: Duration = Duration::from_secs(10);
/// What a handover may take on a loaded machine: well under the lease.
const HANDOVER: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_with_sigterm_is_replaced_at_once() {
    let redis = RedisServer::start().await;
    let args = [
        "--redis-url".to_owned(),
        redis.url(),
        "--leader".to_owned(),
        "reporter".to_owned(),
    ];
    let mut shops = [
        ("shop-axum", Shop::start("shop-axum", &args)),
        ("shop-actix", Shop::start("shop-actix", &args)),
    ];
    let observer = Locker::builder()
        .prefix("shop")
        .url(redis.url())
        .build()
        .await
        .expect("the observer's locker");
    let mut leaders = observer.observe_leader("reporter").expect("observe");
    let first = timeout(Duration::from_secs(20), async {
        loop {
            if let Some(leader) = leaders.next().await.expect("observed") {
                return leader;
            }
        }
    })
    .await
    .expect("one shop leads");
    let leading = shops
        .iter()
        .position(|(binary, shop)| first.identity() == format!("{binary}@{}", shop.addr.port()))
        .unwrap_or_else(|| panic!("no shop is {:?}", first.identity()));
    let (binary, shop) = &mut shops[leading];
    let stopped = Instant::now();
    shop.signal(libc::SIGTERM);
    let next = timeout(SHOP_LEASE * 2, async {
        loop {
            match leaders.next().await.expect("observed") {
                Some(leader) if leader.identity() != first.identity() => return leader,
                _ => {}
            }
        }
    })
    .await
    .expect("the other shop leads");
    let took = stopped.elapsed();
    eprintln!(
        "{binary} (term {}) stopped with SIGTERM; {} leads (term {}) after {took:?}",
        first.term(),
        next.identity(),
        next.term()
    );
    assert!(next.term() > first.term());
    assert!(
        took < HANDOVER,
        "the next leader took over after {took:?}: the stopped leader's lease ({SHOP_LEASE:?}) \
         ran out instead of being given back"
    );
    let status = shop
        .exited_within(Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("{binary} did not exit after SIGTERM"));
    assert!(status.success(), "{binary} exited with {status}");
}
