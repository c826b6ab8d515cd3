//! One run of a scenario: the worker processes it starts, pauses and kills, their logs and the
//! fault log in a directory of its own, and the history read back from them.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::log::{monotonic_ns, EventLog};
use super::parse::{History, FIFO_SLACK_NS};
use super::report::{Report, Rule};
use super::resource::read_records;
use super::worker::WorkerSpec;

/// One worker process. Dropping it kills it (SIGCONT first, in case it is stopped).
#[derive(Debug)]
pub struct WorkerProc {
    /// The worker's id (its hold ids start with it).
    pub id: usize,
    /// Its event log.
    pub log: PathBuf,
    child: Option<Child>,
    exited: Option<std::process::ExitStatus>,
}

impl WorkerProc {
    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&mut self, sig: libc::c_int) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                // SAFETY: a plain syscall on our own unreaped child, whose pid cannot be reused.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, sig);
                }
            }
        }
    }

    fn reap(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let Some(child) = self.child.as_mut() else {
            return true;
        };
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.exited = Some(status);
                    self.child = None;
                    return true;
                }
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => return false,
                Err(_) => {
                    self.child = None;
                    return true;
                }
            }
        }
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        self.signal(libc::SIGCONT);
        self.reap(Duration::from_secs(5));
    }
}

/// One run of a scenario: a directory with the workers' logs and the fault log, the worker
/// processes, and the resource they write to, whose records the history reads. The directory
/// is removed on drop unless the run was marked to keep it (as a failed check does).
#[derive(Debug)]
pub struct Run {
    name: String,
    dir: PathBuf,
    faults: EventLog,
    workers: Vec<WorkerProc>,
    keep: bool,
    expect_fifo: bool,
    fifo_slack_ns: u64,
    /// Where the resource's records are read: the first worker's resource URL, or the one
    /// [`read_resource_at`](Self::read_resource_at) named.
    resource: Option<String>,
    resource_named: bool,
}

impl Run {
    /// A new run in a fresh directory under the system's temporary directory.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "leasehold-history-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let faults = EventLog::create(&dir.join("faults.log"))
            .unwrap_or_else(|e| panic!("cannot create the fault log: {e}"));
        Run {
            name: name.to_owned(),
            dir,
            faults,
            workers: Vec::new(),
            keep: false,
            expect_fifo: false,
            fifo_slack_ns: FIFO_SLACK_NS,
            resource: None,
            resource_named: false,
        }
    }

    /// Reads the resource's records from `url` (the store itself) rather than from the URL the
    /// workers were given: for workers that reach one store by different ways (some through
    /// a proxy of their own).
    pub fn read_resource_at(&mut self, url: &str) {
        self.resource = Some(url.to_owned());
        self.resource_named = true;
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Judges the order of fair grants: strict first come, first served across the tasks of
    /// all processes ([`History::expect_fifo`]).
    pub fn expect_fifo(&mut self) {
        self.expect_fifo = true;
    }

    /// [`expect_fifo`](Self::expect_fifo) for an engine whose first attempt takes longer than
    /// [`FIFO_SLACK_NS`] to reach the store and queue the request.
    pub fn expect_fifo_with_slack(&mut self, slack: Duration) {
        self.expect_fifo = true;
        self.fifo_slack_ns = u64::try_from(slack.as_nanos()).unwrap_or(u64::MAX);
    }

    /// Keeps the directory after the run (for a post-mortem).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// The workers started so far.
    pub fn workers(&self) -> &[WorkerProc] {
        &self.workers
    }

    /// Starts a worker; returns its index (also its id).
    ///
    /// # Panics
    /// When the worker binary cannot be run.
    /// Every worker of a run writes to one resource: one whose URL differs from the first
    /// worker's panics, unless [`read_resource_at`](Self::read_resource_at) named the store.
    pub fn spawn(&mut self, spec: &WorkerSpec) -> usize {
        match &self.resource {
            None => self.resource = Some(spec.resource_url.clone()),
            Some(url) if *url != spec.resource_url && !self.resource_named => panic!(
                "run {}: workers write to {url} and {}; name the store the records are read \
                 from with Run::read_resource_at",
                self.name, spec.resource_url
            ),
            Some(_) => {}
        }
        let id = self.workers.len();
        let log = self.dir.join(format!("worker-{id}.log"));
        let out = File::create(self.dir.join(format!("worker-{id}.out")))
            .unwrap_or_else(|e| panic!("cannot create the worker's output file: {e}"));
        let mut cmd = Command::new(worker_binary());
        cmd.args(spec.to_args(id, &log))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup the output file"))
            .stderr(out);
        die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start history_worker: {e}"));
        self.workers.push(WorkerProc {
            id,
            log,
            child: Some(child),
            exited: None,
        });
        id
    }

    /// Logs the start of a fault on `target` (`w3`, `redis`, ...); returns its time.
    pub fn fault(&self, kind: &str, target: &str) -> u64 {
        self.faults.now("fault", &[&kind, &target])
    }

    /// Logs the end of a fault started with [`fault`](Self::fault); returns its time.
    pub fn heal(&self, kind: &str, target: &str) -> u64 {
        self.faults.now("heal", &[&kind, &target])
    }

    /// Freezes worker `i` with SIGSTOP (logged as fault `pause`).
    pub fn pause(&mut self, i: usize) {
        self.fault("pause", &format!("w{i}"));
        self.workers[i].signal(libc::SIGSTOP);
    }

    /// Thaws worker `i` with SIGCONT; the time of the pause's end.
    pub fn resume(&mut self, i: usize) -> u64 {
        self.workers[i].signal(libc::SIGCONT);
        self.heal("pause", &format!("w{i}"))
    }

    /// Kills worker `i` with SIGKILL (logged as fault `kill`, which never heals).
    pub fn kill9(&mut self, i: usize) -> u64 {
        let t = self.fault("kill", &format!("w{i}"));
        self.workers[i].signal(libc::SIGKILL);
        self.workers[i].reap(Duration::from_secs(5));
        t
    }

    /// Whether worker `i` is still running.
    pub fn is_running(&mut self, i: usize) -> bool {
        !self.workers[i].reap(Duration::ZERO)
    }

    /// The holds that are open right now (acquired, not yet released nor reported lost), by
    /// worker index, read from the tail of each log.
    pub fn open_holds(&mut self) -> Vec<(usize, String)> {
        self.open_holds_since()
            .into_iter()
            .map(|(w, hold, _)| (w, hold))
            .collect()
    }

    /// A hold opened within the last 50 ms, waiting up to 3 s for one: its worker and id.
    /// A fault injected into it lands inside the hold, not after its release.
    pub async fn young_hold(&mut self) -> Option<(usize, String)> {
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while tokio::time::Instant::now() < until {
            let now = monotonic_ns();
            if let Some((w, id, _)) = self
                .open_holds_since()
                .into_iter()
                .find(|(_, _, since)| now.saturating_sub(*since) < 50_000_000)
            {
                return Some((w, id));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        None
    }

    /// As [`open_holds`](Self::open_holds), with the time each was acquired.
    pub fn open_holds_since(&mut self) -> Vec<(usize, String, u64)> {
        let mut open = Vec::new();
        for i in 0..self.workers.len() {
            if !self.is_running(i) {
                continue;
            }
            let tail = read_tail(&self.workers[i].log, 64 * 1024);
            let mut holds: Vec<(String, u64)> = Vec::new();
            for line in tail.lines() {
                let mut parts = line.split(' ');
                let (Some(t), Some(event), Some(hold)) = (parts.next(), parts.next(), parts.next())
                else {
                    continue;
                };
                match event {
                    "ok" => holds.push((hold.to_owned(), t.parse().unwrap_or(0))),
                    "rel" | "lost" => holds.retain(|(h, _)| h != hold),
                    _ => {}
                }
            }
            open.extend(holds.into_iter().map(|(h, t)| (i, h, t)));
        }
        open
    }

    /// Waits until `enough` says the history holds what the test needs, or `within` passed;
    /// whether it was met. The workers go on either way: a point in the run chosen by what
    /// the workers did (say, the first ten holds before a fault), not by the clock.
    pub async fn wait_for(&self, within: Duration, enough: impl Fn(&History) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if enough(&self.history()) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Lets the workers run until `enough` says the history holds what the test needs, or
    /// `within` passed, then kills every worker still running (SIGKILL, logged as fault
    /// `kill`): a run judged by what it did, not by a window of the clock, so that a loaded
    /// machine makes it slower rather than thin. Whether `enough` was met; spawn the workers
    /// with a duration longer than `within`.
    pub async fn run_until(&mut self, within: Duration, enough: impl Fn(&History) -> bool) -> bool {
        let met = self.wait_for(within, enough).await;
        for i in 0..self.workers.len() {
            if self.is_running(i) {
                self.kill9(i);
            }
        }
        met
    }

    /// [`run_until`](Self::run_until) every worker was granted a lock after `at` (a fault's
    /// end, say), for `within` at most, then [`wait_all`](Self::wait_all) for the kills: the
    /// recovery after a fault judged by what the workers did, not by a window of the clock
    /// (with workers of a fixed duration, a worker slowed by a loaded machine broke the
    /// checker's liveness rule, which gives it only the time left to the end of its run).
    /// Spawn the workers with a duration longer than `within`. The grants after `at`, by
    /// worker, when one of them had none.
    pub async fn run_until_each_granted_after(
        &mut self,
        at: u64,
        within: Duration,
    ) -> Result<(), Vec<usize>> {
        let workers = self.workers.len();
        let granted = move |history: &History| -> Vec<usize> {
            (0..workers)
                .map(|w| {
                    history
                        .holds_of(w)
                        .filter(|h| h.ok.is_some_and(|(t, _)| t > at))
                        .count()
                })
                .collect()
        };
        let met = self
            .run_until(within, |history| granted(history).iter().all(|&n| n > 0))
            .await;
        self.wait_all(Duration::from_secs(10)).await;
        match met {
            true => Ok(()),
            false => Err(granted(&self.history())),
        }
    }

    /// Waits up to `within` for every worker to exit by itself; the ones still running then
    /// are killed and logged as fault `hung` (a violation).
    pub async fn wait_all(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let running: Vec<usize> = (0..self.workers.len())
                .filter(|&i| self.is_running(i))
                .collect();
            if running.is_empty() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                for i in running {
                    self.fault("hung", &format!("w{i}"));
                    self.workers[i].signal(libc::SIGKILL);
                    self.workers[i].signal(libc::SIGCONT);
                    self.workers[i].reap(Duration::from_secs(5));
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Reads all logs of the run: cheap enough to poll while the run goes on. The resource's
    /// records are not read ([`History::resource`] is `None`): judge a
    /// [`full_history`](Self::full_history).
    pub fn history(&self) -> History {
        let mut logs = Vec::new();
        for w in &self.workers {
            logs.push((w.id, fs::read_to_string(&w.log).unwrap_or_default()));
        }
        let faults = fs::read_to_string(self.dir.join("faults.log")).unwrap_or_default();
        let mut history = History::parse(&logs, &faults);
        history.expect_fifo = self.expect_fifo;
        history.fifo_slack_ns = self.fifo_slack_ns;
        history
    }

    /// The [`history`](Self::history) and the records of the resource the workers wrote to
    /// ([`History::resource`]: what the store accepted, which the lost-update rule judges).
    pub fn full_history(&self) -> History {
        let mut history = self.history();
        history.resource = self.resource.as_deref().map(read_records);
        history
    }

    /// Checks the run's history, records the figures (see [`Report::record`]) and panics
    /// with every violation found, keeping the run's directory for a post-mortem.
    pub fn check_and_record(&mut self, scenario: &str) -> (History, Report) {
        self.check_and_record_allowing(scenario, &[])
    }

    /// As [`check_and_record`](Self::check_and_record), but violations of the `known` rules
    /// (a finding not fixed yet) are printed, not fatal.
    pub fn check_and_record_allowing(
        &mut self,
        scenario: &str,
        known: &[Rule],
    ) -> (History, Report) {
        let history = self.full_history();
        let report = history.check();
        report.record(scenario);
        let fatal = report.violations_except(known);
        if !fatal.is_empty() {
            self.keep();
            panic!(
                "{scenario} ({}): {} violation(s); logs kept in {}\n{report}",
                self.name,
                fatal.len(),
                self.dir.display()
            );
        }
        (history, report)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.workers.clear();
        if !self.keep && !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!(
                "history of run `{}` kept in {}",
                self.name,
                self.dir.display()
            );
        }
    }
}

/// The `history_worker` binary, built with the test's profile.
fn worker_binary() -> PathBuf {
    crate::harness::cargo_bin("history_worker")
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only makes an async-signal-safe call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

fn read_tail(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // Drop the partial first line.
        text.split_once('\n')
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default()
    } else {
        text
    }
}

/// The resident set size of process `pid` in KiB, from `/proc`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
