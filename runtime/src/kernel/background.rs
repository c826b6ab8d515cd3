//! Where a locker's work goes that must outlive its caller (the release of a dropped guard,
//! the clean-up after an abandoned attempt, a call in flight whose caller stopped waiting):
//! its background task, started on first use, each job counted for closing until it ends.

use std::sync::{Arc, OnceLock};

use tokio::sync::mpsc;

use crate::kernel::closing::Closing;
use crate::kernel::health::Calls;
use crate::kernel::watchdog::{self, Job, Schedule};

/// A locker's background task, as its parts hand it work.
pub(crate) struct Background {
    jobs: OnceLock<mpsc::UnboundedSender<Job>>,
    /// Counts the jobs not finished yet, for `close` to wait on.
    closing: Arc<Closing>,
    /// What the task works on: the watchdog renews the leases on `schedule` through `calls`,
    /// and the health monitor beside it feeds their health. The task holds them only weakly.
    calls: Arc<Calls>,
    schedule: Arc<Schedule>,
}

impl Background {
    pub(crate) fn new(calls: Arc<Calls>, schedule: Arc<Schedule>, closing: Arc<Closing>) -> Self {
        Background {
            jobs: OnceLock::new(),
            closing,
            calls,
            schedule,
        }
    }

    /// The locker's closing registry, where each job is counted.
    pub(crate) fn closing(&self) -> &Arc<Closing> {
        &self.closing
    }

    /// Runs `job` in the background task, starting it on first use; gives the job back when
    /// no background task can run (no Tokio runtime here, or the runtime it ran on is gone).
    pub(crate) fn run(&self, job: Job) -> Result<(), Job> {
        // Counted until it ends, for `close` to wait on.
        let pending = self.closing.job_started();
        let job: Job = Box::pin(async move {
            job.await;
            drop(pending);
        });
        let tx = match self.jobs.get() {
            Some(tx) => tx,
            None => {
                let Some(tx) = self.spawn() else {
                    return Err(job);
                };
                self.jobs.get_or_init(|| tx)
            }
        };
        tx.send(job).map_err(|e| e.0)
    }

    /// Starts the background task if it is not running yet.
    pub(crate) fn start(&self) {
        if self.jobs.get().is_none() {
            if let Some(tx) = self.spawn() {
                let _ = self.jobs.set(tx);
            }
        }
    }

    /// The background task, on the current runtime; `None` outside of one.
    fn spawn(&self) -> Option<mpsc::UnboundedSender<Job>> {
        watchdog::spawn(&self.calls, &self.schedule, self.calls.health())
    }
}
