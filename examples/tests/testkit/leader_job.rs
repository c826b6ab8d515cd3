//! A leader-only job (a scheduler that writes the next run to a shared table) and the
//! leadership it runs under. The bug: it writes without its term and never looks at
//! `lost()`, so after it is deposed its writes land after the new leader's. The fix: each
//! write carries the term, the table refuses a term older than one it accepted, and the job
//! stops on `lost()`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{Leadership, Locker};
use leasehold_testkit::{faulty_with, History, Report};
use tokio::sync::mpsc;

/// The shared table: the newest term it accepted. It refuses an older term only when
/// `fenced` (the fix); the history records the term each writer held either way.
#[derive(Clone)]
struct Table {
    newest: Arc<Mutex<u64>>,
    fenced: bool,
    history: History,
}

impl Table {
    fn write(&self, holder: &str, term: u64) {
        let mut newest = self.newest.lock().unwrap();
        let accepted = !self.fenced || term >= *newest;
        if accepted {
            *newest = (*newest).max(term);
        }
        self.history.write(holder, "schedule", term, accepted);
    }
}

/// The buggy job: one write per tick, as long as ticks come, whatever became of its term.
async fn job_ignoring_its_term(table: Table, name: &str, term: u64, mut ticks: mpsc::Receiver<()>) {
    while ticks.recv().await.is_some() {
        table.write(name, term);
    }
}

/// The fixed job: each write carries the term; it stops when the leadership is lost.
async fn job_under_its_term(
    table: Table,
    name: &str,
    leadership: Leadership,
    mut ticks: mpsc::Receiver<()>,
) {
    loop {
        tokio::select! {
            biased;
            () = leadership.lost() => return,
            tick = ticks.recv() => match tick {
                Some(()) => table.write(name, leadership.term()),
                None => return,
            },
        }
    }
}

/// Leader `a` runs its job; it is deposed, `b` wins the next term and writes; then `a`'s job
/// gets one more tick, before and after `a` could learn that it lost.
async fn deposed_leader(fixed: bool) -> Report {
    const LEASE: Duration = Duration::from_secs(9);
    let (node_a, faults) = faulty_with(Locker::builder().default_lease(LEASE)).unwrap();
    let node_b = faults.locker();
    let history = History::new();
    let table = Table {
        newest: Arc::default(),
        fenced: fixed,
        history: history.clone(),
    };
    let a = node_a.leader("scheduler").campaign().await.unwrap();
    let a_term = a.term();
    let (tick, ticks) = mpsc::channel(1);
    let job = tokio::spawn({
        let table = table.clone();
        async move {
            if fixed {
                job_under_its_term(table, "a", a, ticks).await;
            } else {
                let term = a.term();
                let _leadership = a;
                job_ignoring_its_term(table, "a", term, ticks).await;
            }
        }
    });
    tick.send(()).await.unwrap();
    settle(&history, 1, &job).await;

    assert!(faults.depose_leader("scheduler"));
    let b = node_b.leader("scheduler").campaign().await.unwrap();
    assert!(b.term() > a_term);
    table.write("b", b.term());
    // `a` has not heard yet: its next write is the one a fence must stop.
    let _ = tick.send(()).await;
    settle(&history, 3, &job).await;
    drop(tick);
    job.await.unwrap();
    history.check()
}

/// Lets the job run until the history holds `steps` steps, or the job ended.
async fn settle(history: &History, steps: usize, job: &tokio::task::JoinHandle<()>) {
    while history.len() < steps && !job.is_finished() {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_deposed_leader_that_ignores_its_term_writes_stale_and_the_kit_reports_it() {
    let report = deposed_leader(false).await;
    assert!(report.has_stale_write(), "{report}");
    assert!(report.to_string().contains("`a`'s write"), "{report}");
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_fences_its_writes_with_its_term_is_refused_once_deposed() {
    deposed_leader(true).await.assert_clean();
}
