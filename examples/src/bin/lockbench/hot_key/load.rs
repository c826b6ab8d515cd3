//! How long each task of a hot-key run keeps taking the key, and what it does while it holds
//! it; passed to worker processes on their command line.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Load {
    /// This many acquisitions per task, nothing done while holding the lock (scenarios 2, 6, 7
    /// and 8).
    Rounds(usize),
    /// Acquisitions for `run`, each holding the lock for `hold` (a sleep), or with a zero
    /// `hold` yielding once to the runtime: the smallest critical section that lets other
    /// tasks run, as a handler's await would (scenario 5).
    Continuous { run: Duration, hold: Duration },
}

impl Load {
    /// The worker's command-line form: `rounds:20`, or `continuous-us:RUN:HOLD`.
    pub(crate) fn arg(self) -> String {
        match self {
            Load::Rounds(n) => format!("rounds:{n}"),
            Load::Continuous { run, hold } => {
                format!("continuous-us:{}:{}", run.as_micros(), hold.as_micros())
            }
        }
    }

    pub(crate) fn parse(s: &str) -> Load {
        let us = |x: &str| Duration::from_micros(x.parse().expect("microseconds"));
        match s.split(':').collect::<Vec<_>>()[..] {
            ["rounds", n] => Load::Rounds(n.parse().expect("rounds")),
            ["continuous-us", run, hold] => Load::Continuous {
                run: us(run),
                hold: us(hold),
            },
            _ => panic!("unknown load {s:?}: rounds:N or continuous-us:RUN:HOLD"),
        }
    }

    /// Whether a task that has made `done` acquisitions since `start` takes another.
    pub(crate) fn more(self, done: usize, start: Instant) -> bool {
        match self {
            Load::Rounds(n) => done < n,
            Load::Continuous { run, .. } => start.elapsed() < run,
        }
    }

    /// What a task does while it holds the lock.
    pub(crate) async fn critical_section(self) {
        match self {
            Load::Rounds(_) => {}
            Load::Continuous { hold, .. } if hold.is_zero() => tokio::task::yield_now().await,
            Load::Continuous { hold, .. } => tokio::time::sleep(hold).await,
        }
    }

    /// Samples room for one task.
    pub(crate) fn capacity(self) -> usize {
        match self {
            Load::Rounds(n) => n,
            Load::Continuous { .. } => 1024,
        }
    }
}
