//! A handler that works through a batch under a lock, writing each item to a shared log. The
//! bug: it never looks at `lost()`, so once its lease is lost it goes on writing while the
//! next holder holds the key. The fix: it stops when `lost()` fires (and records that it
//! let go).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{LockGuard, Locker};
use leasehold_testkit::{faulty_with, History, Report};
use tokio::sync::mpsc;

const LEASE: Duration = Duration::from_secs(9);

/// The shared log: it keeps every write (no fence check of its own, as many resources).
#[derive(Clone)]
struct Log {
    lines: Arc<Mutex<Vec<String>>>,
    history: History,
}

impl Log {
    fn append(&self, holder: &str, fence: u64, line: String) {
        self.lines.lock().unwrap().push(line);
        self.history.write(holder, "log", fence, true);
    }
}

/// The buggy handler: every item it is given, whatever became of its lease.
async fn handler_ignoring_lost(log: Log, guard: LockGuard, mut items: mpsc::Receiver<u32>) {
    while let Some(item) = items.recv().await {
        log.append("a", guard.fence(), format!("a wrote {item}"));
    }
    log.history.released("a", "batch");
}

/// The fixed handler: it stops at the loss.
async fn handler_stopping_on_lost(log: Log, guard: LockGuard, mut items: mpsc::Receiver<u32>) {
    loop {
        tokio::select! {
            biased;
            () = guard.lost() => break,
            item = items.recv() => match item {
                Some(item) => log.append("a", guard.fence(), format!("a wrote {item}")),
                None => break,
            },
        }
    }
    log.history.released("a", "batch");
}

/// `a` writes one item; its lease is lost; the next holder `b` takes the key and writes;
/// then `a` is given one more item.
async fn lost_mid_batch(fixed: bool) -> Report {
    let (node_a, faults) = faulty_with(Locker::builder().default_lease(LEASE)).unwrap();
    let node_b = faults.locker();
    let history = History::new();
    let log = Log {
        lines: Arc::default(),
        history: history.clone(),
    };
    let a = node_a.lock("batch").acquire().await.unwrap();
    history.acquired("a", "batch", a.fence());
    let (send, items) = mpsc::channel(1);
    let handler = tokio::spawn({
        let log = log.clone();
        async move {
            if fixed {
                handler_stopping_on_lost(log, a, items).await;
            } else {
                handler_ignoring_lost(log, a, items).await;
            }
        }
    });
    send.send(0).await.unwrap();
    settle(&history, 2, &handler).await;

    assert!(faults.lose("batch"));
    // On the paused clock this runs every timer due within a lease in order: `a`'s watchdog
    // renews at a third of it and finds the lease gone, and `lost()` fires then.
    tokio::time::sleep(LEASE).await;
    let b = node_b.lock("batch").acquire().await.unwrap();
    history.acquired("b", "batch", b.fence());
    log.append("b", b.fence(), "b wrote 0".into());
    let _ = send.send(1).await;
    settle(&history, 5, &handler).await;
    drop(send);
    handler.await.unwrap();
    history.check()
}

/// Lets the handler run until the history holds `steps` steps, or the handler ended.
async fn settle(history: &History, steps: usize, handler: &tokio::task::JoinHandle<()>) {
    while history.len() < steps && !handler.is_finished() {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_ignores_lost_overlaps_the_next_holder_and_the_kit_reports_it() {
    let report = lost_mid_batch(false).await;
    assert!(report.has_overlap() && report.has_stale_write(), "{report}");
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_stops_on_lost_leaves_the_key_to_the_next_holder() {
    lost_mid_batch(true).await.assert_clean();
}
