//! Property 14, semaphores: three lockers (as three processes would be) never hold more than
//! the limit's permits at once, a holder that crashed gives its permit back after its lease, the
//! watchdog renews a permit, a waiter wakes on a release (not at the lease's end), callers that disagree on the limit are
//! refused, and inspection shows the holders. Engines without semaphores refuse them with a
//! clear `Config` error.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

use super::support::{unless_unanswered, CONTENDER_WAIT, HANDOVER, LONG_LEASE, SLACK};

const LIMIT: u32 = 3;

pub async fn never_more_than_the_limit(engine: &Engine) {
    let lockers = [
        engine.locker().await,
        engine.locker().await,
        engine.locker().await,
    ];
    load(engine, &lockers).await;

    // A holder that crashed (nothing renews it, nothing releases it) gives its permit back
    // after its lease.
    let key = "sem:crash";
    let lease = Duration::from_secs(1);
    let crashed = lockers[0]
        .semaphore(key, 1)
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    std::mem::forget(crashed);
    let start = Instant::now();
    let permit = lockers[2]
        .semaphore(key, 1)
        .wait(CONTENDER_WAIT)
        .acquire()
        .await
        .expect("the crashed holder's permit comes back");
    let waited = start.elapsed();
    assert!(waited <= lease + SLACK, "{waited:?}");
    permit.release().await.unwrap();

    // A waiter wakes on the release, not at the end of the holder's long lease.
    let key = "sem:wake";
    let holder = lockers[0]
        .semaphore(key, 1)
        .lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let locker = lockers[1].clone();
        tokio::spawn(async move {
            let permit = locker
                .semaphore(key, 1)
                .lease(LONG_LEASE)
                .wait(CONTENDER_WAIT)
                .acquire()
                .await;
            (Instant::now(), permit)
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "a second holder of one permit");
    let released = Instant::now();
    holder.release().await.unwrap();
    let (got, permit) = waiter.await.unwrap();
    let permit = permit.expect("the waiter gets the released permit");
    assert!(got - released < HANDOVER, "{:?}", got - released);

    // Inspection shows the holder, never its token.
    let info = lockers[2].inspect_semaphore(key).await.unwrap();
    assert_eq!(
        (info.limit, info.in_use(), info.holders.len()),
        (Some(1), 1, 1)
    );
    assert!(info.holders[0].remaining <= LONG_LEASE);
    permit.release().await.unwrap();

    // The watchdog renews a permit over several leases.
    let short = Duration::from_millis(600);
    let renewed = lockers[0]
        .semaphore("sem:renew", 1)
        .lease(short)
        .acquire()
        .await
        .unwrap();
    sleep(short * 4).await;
    assert!(renewed.is_held(), "the watchdog let the permit lapse");
    assert!(lockers[1]
        .semaphore("sem:renew", 1)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    renewed.release().await.unwrap();

    // Disagreeing on the limit is refused while permits are held, by name.
    let key = "sem:agree";
    let two = lockers[0].semaphore(key, 2).acquire().await.unwrap();
    let e = lockers[1].semaphore(key, 3).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("limit of 2"), "{e}");
    let same = lockers[1].semaphore(key, 2).acquire().await.unwrap();
    drop(same);
    two.release().await.unwrap();
    sleep(Duration::from_millis(100)).await;
    // Nobody holds one: the limit may change now.
    let three = lockers[1].semaphore(key, 3).acquire().await.unwrap();
    three.release().await.unwrap();
}

/// Twelve tasks over three lockers take permits of one semaphore (now and then several at
/// once): never more than the limit at once, the limit is reached (the load goes on until it
/// was, for 30 s at most), nothing hangs.
async fn load(engine: &Engine, lockers: &[Locker; 3]) {
    let inside = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let unanswered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (l, locker) in lockers.iter().enumerate() {
        for t in 0..4 {
            let (locker, inside, most, unanswered) = (
                locker.clone(),
                inside.clone(),
                most.clone(),
                unanswered.clone(),
            );
            tasks.push(tokio::spawn(async move {
                // Two seconds of load, and on until the limit was reached once (a loaded
                // machine may take longer to overlap as many holders), within a bound.
                let until = Instant::now() + Duration::from_secs(2);
                let cap = Instant::now() + Duration::from_secs(30);
                let mut n = l * 4 + t;
                while Instant::now() < until
                    || (most.load(Ordering::SeqCst) < LIMIT && Instant::now() < cap)
                {
                    n += 1;
                    let count = if n % 5 == 0 { 2 } else { 1 };
                    let acquired = locker
                        .semaphore("sem:load", LIMIT)
                        .wait(LONG_LEASE)
                        .acquire_many(count)
                        .await;
                    let Some(permit) = unless_unanswered("permits", acquired, &unanswered) else {
                        sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let now = inside.fetch_add(count, Ordering::SeqCst) + count;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= LIMIT, "{now} permits held at once, of {LIMIT}");
                    sleep(Duration::from_millis(3)).await;
                    inside.fetch_sub(count, Ordering::SeqCst);
                    unless_unanswered("a release of permits", permit.release().await, &unanswered);
                }
            }));
        }
    }
    let all = async {
        for task in tasks {
            task.await.expect("a task of the load failed");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .unwrap_or_else(|_| panic!("the semaphore load hung on {}", engine.kind()));
    eprintln!(
        "{}: semaphore load: {} calls unanswered in time",
        engine.kind(),
        unanswered.load(Ordering::Relaxed)
    );
    assert_eq!(
        most.load(Ordering::SeqCst),
        LIMIT,
        "the limit was never reached: the run proves little"
    );
}

/// Engines without semaphores say so at the request, naming themselves.
pub async fn refused_clearly(engine: &Engine) {
    let locker = engine.locker().await;
    let e = locker.semaphore("sem:x", 2).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(
        e.to_string().contains("semaphores are not supported"),
        "{e}"
    );
    let e = locker.inspect_semaphore("sem:x").await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
}
