//! 1. Mutual exclusion: many holders over a few keys, never two at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_tests::conformance::Engine;
use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::{History, Run};
use tokio::time::{sleep, Instant};

const KEYS: [&str; 3] = ["mx-a", "mx-b", "mx-c"];

/// Whether every one of three workers held locks at least three times and every key of
/// [`KEYS`] had holders in two processes or more: what makes a run of
/// [`across_processes`] prove something.
fn enough_contention(history: &History) -> bool {
    (0..3).all(|w| history.granted_to(w) >= 3)
        && KEYS.iter().all(|key| {
            let holders: BTreeSet<usize> = history
                .holds
                .iter()
                .filter(|h| h.key == *key && h.ok.is_some())
                .map(|h| h.worker)
                .collect();
            holders.len() >= 2
        })
}

/// Three worker processes of eight tasks each over [`KEYS`], run until they contended enough
/// (at least three seconds, at most 45: a loaded machine makes the run longer, not thinner);
/// the history checker must find no violation, every worker must have held locks and every
/// key must have had holders in several processes.
pub async fn across_processes(engine: &Engine) {
    let resource = RedisServer::start().await;
    let spec = engine
        .worker_spec(&resource.url())
        .expect("a server engine runs workers")
        .keys(&KEYS)
        .tasks(8)
        .duration(Duration::from_secs(120));
    let mut run = Run::new(&format!("conformance-{}", engine.kind()));
    for _ in 0..3 {
        run.spawn(&spec);
    }
    let started = Instant::now();
    run.run_until(Duration::from_secs(45), |history| {
        started.elapsed() >= Duration::from_secs(3) && enough_contention(history)
    })
    .await;
    run.wait_all(Duration::from_secs(10)).await;
    let (history, report) =
        run.check_and_record(&format!("conformance mutual_exclusion {}", engine.kind()));
    for worker in 0..3 {
        let held = history.granted_to(worker);
        assert!(
            held >= 3,
            "worker {worker} held a lock only {held} times: the run proves little\n{report}"
        );
    }
    for key in KEYS {
        let holders: BTreeSet<usize> = history
            .holds
            .iter()
            .filter(|h| h.key == key && h.ok.is_some())
            .map(|h| h.worker)
            .collect();
        assert!(
            holders.len() >= 2,
            "{key} was held by workers {holders:?} only: no contention across processes\n{report}"
        );
    }
    assert_fences_follow_acquisitions(&history);
}

/// Per key, the fences of the holds in the order their acquires returned strictly increase.
fn assert_fences_follow_acquisitions(history: &History) {
    let mut by_key: BTreeMap<&str, Vec<(u64, u64, &str)>> = BTreeMap::new();
    for hold in &history.holds {
        if let Some((at, fence)) = hold.ok {
            by_key
                .entry(hold.key.as_str())
                .or_default()
                .push((at, fence, &hold.id));
        }
    }
    for (key, mut holds) in by_key {
        holds.sort_unstable();
        for pair in holds.windows(2) {
            assert!(
                pair[1].1 > pair[0].1,
                "{key}: {} got fence {} after {} got {}",
                pair[1].2,
                pair[1].1,
                pair[0].2,
                pair[0].1
            );
        }
    }
}

/// 24 tasks of one process over [`KEYS`], each counting itself in and out of the critical
/// section: never two inside, fences in holding order.
pub async fn in_process(engine: &Engine) {
    let locker = engine.locker().await;
    // Per key: holders inside the critical section now, and the fences in holding order.
    let inside: Arc<Vec<AtomicUsize>> =
        Arc::new(KEYS.iter().map(|_| AtomicUsize::new(0)).collect());
    let fences: Arc<Vec<Mutex<Vec<u64>>>> =
        Arc::new(KEYS.iter().map(|_| Mutex::new(Vec::new())).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..24 {
        let (locker, inside, fences, overlaps) = (
            locker.clone(),
            inside.clone(),
            fences.clone(),
            overlaps.clone(),
        );
        tasks.spawn(async move {
            let mut n = task;
            while Instant::now() < deadline {
                n += 1;
                let k = n % KEYS.len();
                let acquired = locker
                    .lock(KEYS[k])
                    .lease(Duration::from_secs(5))
                    .wait(Duration::from_secs(3))
                    .acquire()
                    .await;
                let guard = match acquired {
                    Ok(guard) => guard,
                    Err(e) if e.is_busy() => continue,
                    Err(e) => panic!("acquire failed: {e}"),
                };
                if inside[k].fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                fences[k].lock().unwrap().push(guard.fence());
                // Let the other tasks run while this one is inside.
                sleep(Duration::from_millis(1)).await;
                inside[k].fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release of a held lock");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a locking task failed");
    }
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of one key at once"
    );
    for (key, fences) in KEYS.iter().zip(fences.iter()) {
        let fences = fences.lock().unwrap();
        assert!(
            fences.len() >= 10,
            "{key} was held only {} times",
            fences.len()
        );
        assert!(
            fences.windows(2).all(|w| w[1] > w[0]),
            "{key}: fences out of holding order: {fences:?}"
        );
    }
}
