//! Measuring primitives every scenario shares: cycles per second of concurrent tasks (alone or
//! two contenders taking turns), percentiles, the process's CPU time and the monotonic clock.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Uncontended runs take turns in this many short windows, so that a change in the machine's
/// speed during the run (other processes, CPU frequency) falls on every contender alike rather
/// than on whichever ran at the time.
pub(crate) const UNCONTENDED_ROUNDS: u32 = 5;

/// Runs `tasks` copies of `cycle(task, i)` for `duration`; cycles per second.
pub(crate) async fn cycles_per_sec<F, Fut>(tasks: usize, duration: Duration, cycle: F) -> f64
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (cycle, done) = (cycle.clone(), done.clone());
        handles.push(tokio::spawn(async move {
            let mut i = 0;
            while start.elapsed() < duration {
                cycle(t, i).await;
                i += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Cycles per second of `first` and of `second`, `tasks` tasks each, taking turns over
/// [`UNCONTENDED_ROUNDS`] windows that share `duration`: the mean of each over the rounds.
pub(crate) async fn in_turns<F, Fut, G, Gut>(
    tasks: usize,
    duration: Duration,
    first: F,
    second: G,
) -> (f64, f64)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + Send,
    G: Fn(usize, u64) -> Gut + Send + Sync + Clone + 'static,
    Gut: Future<Output = ()> + Send,
{
    let window = duration / UNCONTENDED_ROUNDS;
    let (mut a, mut b) = (0.0, 0.0);
    for _ in 0..UNCONTENDED_ROUNDS {
        a += cycles_per_sec(tasks, window, first.clone()).await;
        b += cycles_per_sec(tasks, window, second.clone()).await;
    }
    let rounds = f64::from(UNCONTENDED_ROUNDS);
    (a / rounds, b / rounds)
}

/// The `p` quantile of `sorted` (nearest rank); NaN when empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// CPU time (user + system) used by this process so far, in seconds: `getrusage`. The
/// servers are processes of their own, so this is the client's alone.
pub(crate) fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Monotonic nanoseconds, comparable across the processes of one machine (unlike `Instant`).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
