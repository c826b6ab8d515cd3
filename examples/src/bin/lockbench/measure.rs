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
    let (a, b) = in_turns_costs(tasks, duration, first, second, None).await;
    (a.rate, b.rate)
}

/// One contender's share of [`in_turns_costs`]: cycles per second, and per cycle the
/// client's CPU (this process) and the server's (its process), in microseconds.
pub(crate) struct Costs {
    pub(crate) rate: f64,
    pub(crate) client_us: f64,
    /// NaN without a server process to read.
    pub(crate) server_us: f64,
}

/// [`in_turns`], also measuring each contender's CPU per cycle over its own windows: this
/// process's (`getrusage`) and the server process `server`'s (`/proc/PID/stat`), so that a
/// gap in cycles/s can be told apart into the client's work and the server's.
pub(crate) async fn in_turns_costs<F, Fut, G, Gut>(
    tasks: usize,
    duration: Duration,
    first: F,
    second: G,
    server: Option<u32>,
) -> (Costs, Costs)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + Send,
    G: Fn(usize, u64) -> Gut + Send + Sync + Clone + 'static,
    Gut: Future<Output = ()> + Send,
{
    let window = duration / UNCONTENDED_ROUNDS;
    // Per contender: the sum of rates, cycles, client and server CPU seconds.
    let mut sums = [[0.0f64; 4]; 2];
    let servers: Vec<u32> = server.into_iter().collect();
    for _ in 0..UNCONTENDED_ROUNDS {
        for (which, sum) in sums.iter_mut().enumerate() {
            let (cpu, start) = (CpuWindow::open(&servers), Instant::now());
            let rate = if which == 0 {
                cycles_per_sec(tasks, window, first.clone()).await
            } else {
                cycles_per_sec(tasks, window, second.clone()).await
            };
            sum[0] += rate;
            sum[1] += rate * start.elapsed().as_secs_f64();
            let (client, server) = cpu.close();
            sum[2] += client;
            sum[3] += server;
        }
    }
    let rounds = f64::from(UNCONTENDED_ROUNDS);
    let costs = |[rate, cycles, client, server]: [f64; 4]| Costs {
        rate: rate / rounds,
        client_us: client * 1e6 / cycles,
        server_us: server * 1e6 / cycles,
    };
    (costs(sums[0]), costs(sums[1]))
}

/// The CPU this process and some server processes spend over a window: opened before the
/// work, closed after it. The one way every scenario tells a gap apart into the client's work
/// and the servers'.
pub(crate) struct CpuWindow<'a> {
    servers: &'a [u32],
    client: f64,
    server: Option<ThreadTimes>,
}

impl<'a> CpuWindow<'a> {
    /// Reads the CPU so far of this process and of the processes `servers` (and their
    /// children: [`server_threads`]).
    pub(crate) fn open(servers: &'a [u32]) -> CpuWindow<'a> {
        CpuWindow {
            servers,
            client: cpu_seconds(),
            server: servers_threads(servers),
        }
    }

    /// CPU seconds since [`open`](Self::open): this process's, and the servers' summed (NaN
    /// without servers, or when one of them cannot be read).
    ///
    /// The servers' is counted thread by thread: a thread (or a child process: a PostgreSQL
    /// backend whose connection closed) that ended during the window takes its time with it
    /// from `/proc`, so a difference of sums could go below zero. Each thread alive at the
    /// close counts what it ran since the open (all of it, if it started since); one that
    /// ended counts nothing of the window, so a server's CPU is never overstated, and may be
    /// understated by what ended threads ran in it.
    pub(crate) fn close(self) -> (f64, f64) {
        let server = match (self.server, servers_threads(self.servers)) {
            (Some(before), Some(after)) => after
                .iter()
                .map(|(thread, &now)| match before.get(thread) {
                    // A smaller figure is a new thread under a reused id: all of it is new.
                    Some(&then) if then <= now => now - then,
                    _ => now,
                })
                .sum(),
            _ => f64::NAN,
        };
        (cpu_seconds() - self.client, server)
    }
}

/// CPU seconds each thread of some processes ran so far, by process and thread id (thread 0:
/// a whole process, where the kernel keeps no thread's figures).
type ThreadTimes = std::collections::HashMap<(u32, u32), f64>;

/// [`server_threads`] of every one of `servers`; `None` when there are none or one cannot be
/// read.
fn servers_threads(servers: &[u32]) -> Option<ThreadTimes> {
    if servers.is_empty() {
        return None;
    }
    let mut all = ThreadTimes::new();
    for &pid in servers {
        all.extend(server_threads(pid)?);
    }
    Some(all)
}

/// CPU time (user + system) each thread of a server used so far, in seconds: the process
/// `pid` and its children (PostgreSQL's backends, one per connection, live as long as the
/// connection), from `/proc`; `None` when it cannot be read (the process is gone, or not
/// Linux).
///
/// Read in nanoseconds from each thread's `schedstat` where the kernel has it: the clock
/// ticks of `/proc/PID/stat` (10 ms) are too coarse for a server that runs a few hundred
/// milliseconds in a measuring window (a RedLock node).
fn server_threads(pid: u32) -> Option<ThreadTimes> {
    let mut processes = vec![pid];
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let child = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok());
        if let Some((parent, _)) = child.and_then(parent_and_ticks) {
            if parent == pid {
                processes.extend(child);
            }
        }
    }
    let mut times = ThreadTimes::new();
    if processes.iter().all(|&p| run_ns(p, &mut times).is_some()) {
        return Some(times);
    }
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if per_second <= 0 {
        return None;
    }
    Some(
        processes
            .iter()
            .filter_map(|&p| parent_and_ticks(p).map(|(_, t)| ((p, 0), t / per_second as f64)))
            .collect(),
    )
}

/// Adds to `times` the seconds each thread of process `pid` ran, from its
/// `/proc/PID/task/TID/schedstat` (the first field, in nanoseconds); `None` when the kernel
/// does not keep them. A thread that ends while it is read is left out.
fn run_ns(pid: u32, times: &mut ThreadTimes) -> Option<()> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue; // ended since the listing
        };
        let ns = stat.split_whitespace().next()?.parse::<u64>().ok()?;
        times.insert((pid, tid), ns as f64 / 1e9);
    }
    Some(())
}

/// The parent of the process `pid` and the clock ticks it ran (user + system), from
/// `/proc/PID/stat`.
fn parent_and_ticks(pid: u32) -> Option<(u32, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: the fields after it are counted from its
    // closing parenthesis. The parent is field 4; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let parent = fields.get(1)?.parse().ok()?;
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some((parent, ticks))
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

#[cfg(test)]
mod tests {
    use super::CpuWindow;

    /// A server thread that ran before a window and ended inside it takes its time out of
    /// `/proc`: the window must not count that as negative CPU (a smoke run once reported
    /// ZooKeeper's CPU per cycle below zero).
    #[test]
    fn a_thread_that_ends_in_the_window_is_not_negative_cpu() {
        let me = [std::process::id()];
        let (started, ran) = std::sync::mpsc::channel();
        let (end, ending) = std::sync::mpsc::channel::<()>();
        let busy = std::thread::spawn(move || {
            // About 200 ms of CPU, all of it before the window opens.
            let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
            let mut x = 0u64;
            while std::time::Instant::now() < until {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            started.send(x).unwrap();
            ending.recv().unwrap();
        });
        ran.recv().unwrap();
        let window = CpuWindow::open(&me);
        end.send(()).unwrap();
        busy.join().unwrap();
        let (_, server) = window.close();
        assert!(server >= 0.0, "a window counted {server} s of CPU");
    }
}
