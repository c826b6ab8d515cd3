//! Scenario 5: the holder's Tokio runtime blocked for longer than the lease; the lease is
//! reported lost and stays lost.

use std::sync::Arc;
use std::time::Duration;

use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::Run;
use tokio::time::sleep;

use super::support::{ms, runs, Deployment};

async fn blocked_runtime(nodes: usize) {
    for round in 0..runs() {
        let d = Deployment::start(nodes).await;
        let mut run = Run::new("blocked");
        let lease = Duration::from_millis(400);
        let spec = d
            .spec()
            .lease(lease)
            .hold(Duration::from_millis(40), 2)
            .duration(Duration::from_secs(7));
        // The blocker: every second hold blocks its current-thread runtime for 1.5 leases.
        let blocker = run.spawn(&spec.clone().block(lease * 3 / 2, 2));
        run.spawn(&spec);
        run.spawn(&spec);
        run.wait_all(Duration::from_secs(25)).await;
        let (history, report) = run.check_and_record(&format!("5-blocked-{}#{round}", d.name()));
        let blocked: Vec<_> = history
            .holds_of(blocker)
            .filter(|h| h.blocks.iter().any(|b| b.1.is_some()))
            .collect();
        assert!(!blocked.is_empty(), "no hold blocked its runtime: {report}");
        for hold in blocked {
            let (start, end) = hold.blocks[0];
            let end = end.expect("block ended");
            // Lost when the runtime came back: nothing believed after the block...
            assert!(
                hold.last_true.is_none_or(|t| t < end),
                "{} still believed it held the lock after its runtime was blocked past the \
                 lease: {hold:?}",
                hold.id
            );
            // ... and while blocked (no renewal can be sent), the sampler outside the
            // runtime saw the lease end within one lease of the block's start (plus 250 ms
            // for a sampler thread descheduled on a loaded machine).
            let first_false = hold.first_false.expect("the loss was seen");
            let lease_ns = lease.as_nanos() as u64;
            assert!(
                first_false <= start + lease_ns + 250_000_000,
                "{}: is_held() stayed true {:.0} ms into a block, with a lease of {lease:?}",
                hold.id,
                ms(first_false - start)
            );
            assert!(hold.lost.is_some(), "{} never noticed: {hold:?}", hold.id);
            if let Some((_, how)) = &hold.rel_done {
                assert_ne!(
                    how, "rok",
                    "{}: released a lease lost while blocked",
                    hold.id
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_a_blocked_runtime_reports_the_lease_lost_single() {
    blocked_runtime(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s5_a_blocked_runtime_reports_the_lease_lost_redlock() {
    blocked_runtime(3).await;
}

/// A lease that lapsed while the runtime was blocked, but not yet in Redis (the margin
/// between the client's validity and the server's expiry): the renewal that runs when the
/// runtime comes back still finds the token. The lease was reported lost; it must stay lost.
#[test]
fn s5_a_lease_that_lapsed_in_a_block_stays_lost() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let locks = outer.block_on(RedisServer::start());
    let url = locks.url();
    let resurrected = runtime.block_on(async move {
        let locker = leasehold::Locker::builder()
            .url(url)
            .op_timeout(Duration::from_millis(500))
            .build()
            .await
            .unwrap();
        let lease = Duration::from_millis(1000);
        let mut resurrected = 0;
        for _ in 0..3 {
            let guard = Arc::new(locker.lock("lapse").lease(lease).acquire().await.unwrap());
            // Let the first renewal (at lease/3) go out and come back.
            sleep(lease / 3 + Duration::from_millis(100)).await;
            let lapsed = Arc::new(AtomicBool::new(false));
            let back = Arc::new(AtomicU32::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let sampler = {
                let (guard, lapsed, back, stop) =
                    (guard.clone(), lapsed.clone(), back.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        let held = guard.is_held();
                        if !held {
                            lapsed.store(true, Ordering::Release);
                        } else if lapsed.load(Ordering::Acquire) {
                            back.fetch_add(1, Ordering::Relaxed);
                        }
                        std::thread::sleep(Duration::from_micros(200));
                    }
                })
            };
            // Block this runtime (watchdog included) until the lease lapsed on the client,
            // then a little longer, but less than the margin to the server's expiry.
            let spin_until = std::time::Instant::now() + lease * 2;
            while !lapsed.load(Ordering::Acquire) && std::time::Instant::now() < spin_until {
                std::hint::spin_loop();
            }
            std::thread::sleep(Duration::from_millis(2));
            // The runtime runs again: the overdue renewal goes out.
            sleep(Duration::from_millis(300)).await;
            stop.store(true, Ordering::Release);
            sampler.join().unwrap();
            assert!(lapsed.load(Ordering::Acquire), "the lease never lapsed");
            if back.load(Ordering::Relaxed) > 0 || guard.is_held() {
                resurrected += 1;
            }
            drop(guard);
            sleep(Duration::from_millis(50)).await;
        }
        resurrected
    });
    assert_eq!(
        resurrected, 0,
        "a lease reported lost (is_held() false, lost() resolved) was held again after a renewal"
    );
}
