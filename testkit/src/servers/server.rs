//! One server process the harness owns, with its directory and log: how every server harness
//! (Redis, ZooKeeper, etcd, PostgreSQL) launches, signals, restarts and drops its server.
//!
//! A harness keeps what is its own (the command line, the readiness probe, what "ours" means on
//! a port, the start on fresh ports) and hands the rest to one [`ServerProcess`], described by a
//! [`ServerKind`].

use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::process;

/// How many fresh ports a start tries before it gives up: each may be taken by someone else
/// between the harness finding it free and the server binding it.
pub(crate) const PORT_ATTEMPTS: usize = 5;
/// How long a restart waits before it tries again a port someone else holds.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// How many lines of its log a panic message shows.
const LOG_TAIL_LINES: usize = 40;

/// What the harness knows of one kind of server, the same for every server of that kind.
#[derive(Debug)]
pub(crate) struct ServerKind {
    /// The file in the server's directory that gets every run's stdout and stderr.
    pub(crate) log_file: &'static str,
    /// While a test panics, a dropped server's directory keeps its log for the post-mortem and
    /// loses only this subdirectory (the data); `None` removes it all, log included.
    pub(crate) data_dir: Option<&'static str>,
    /// What the server logs when it cannot bind its port: `Address already in use`.
    pub(crate) port_taken: &'static str,
    /// Whether the server forks processes of its own (PostgreSQL's backends) that signals must
    /// reach too: then the whole tree is frozen, thawed and killed, top down.
    pub(crate) forks: bool,
    /// How long a signal may take to take effect (a process stopped, or running again).
    pub(crate) signal_timeout: Duration,
    /// How often a launch asks whether the server serves yet.
    pub(crate) poll: Duration,
    /// Clears what a killed server leaves in its directory that would trip up its next start,
    /// given the directory (PostgreSQL's lock file and shared memory segment); called after every
    /// kill, and on drop.
    pub(crate) leftovers: Option<fn(&Path)>,
}

/// Why one launch did not give a serving server.
pub(crate) enum LaunchError {
    /// A port was taken by someone else; another port, or a later try, may work.
    PortTaken,
    /// Anything else; retrying would fail again.
    Failed(String),
}

/// Who answers on a server's port while it starts, as the harness's probe of that server sees it.
pub(crate) enum Answer {
    /// The process just launched serves.
    Ours,
    /// Another server holds the port; the one launched cannot bind it.
    Theirs,
    /// Nothing serves yet, and why not (for the message if it never does).
    NotYet(String),
}

/// A server's child process, its directory (removed on drop) and its log, with the signals every
/// fault injection sends it.
///
/// All methods take `&self`, so the harness type built on it can be shared (`Arc`) with a task
/// that injects faults. Dropping it kills and reaps the process (its tree for a server that
/// forks) and removes the directory, as [`ServerKind::data_dir`] says.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    kind: &'static ServerKind,
    /// What messages call the server: `redis-server on port 6379`, `etcd member lh-1-0 at ...`.
    label: String,
    dir: PathBuf,
    /// `None` once killed or stopped; only this handle reaps, so a pid here is never reused.
    child: Mutex<Option<Child>>,
}

impl ServerProcess {
    /// A server of `kind` in `dir`, not running yet.
    pub(crate) fn new(kind: &'static ServerKind, label: impl Into<String>, dir: PathBuf) -> Self {
        Self {
            kind,
            label: label.into(),
            dir,
            child: Mutex::new(None),
        }
    }

    /// Renames the server in messages, for a start that moves to another port.
    pub(crate) fn set_label(&mut self, label: impl Into<String>) {
        self.label = label.into();
    }

    /// What messages call the server.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The server's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's log: all it wrote since it was first started.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.join(self.kind.log_file)
    }

    /// The log's length now: where what the next launch writes begins.
    pub(crate) fn log_len(&self) -> u64 {
        fs::metadata(self.log_path()).map(|m| m.len()).unwrap_or(0)
    }

    /// What the log holds from `offset` on.
    pub(crate) fn log_since(&self, offset: u64) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            if file.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = file.read_to_string(&mut text);
            }
        }
        text
    }

    /// The last lines of the log, framed for a panic message; named by its path where a
    /// panicking test keeps it, by its file name where it goes with the directory.
    pub(crate) fn log_tail(&self) -> String {
        let log = self.log_since(0);
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        let name = match self.kind.data_dir {
            Some(_) => self.log_path().display().to_string(),
            None => self.kind.log_file.to_owned(),
        };
        format!("--- {name}, last {LOG_TAIL_LINES} lines ---\n{tail}\n---")
    }

    /// Sends `cmd`'s stdout and stderr to the end of the log, which is kept across restarts.
    ///
    /// # Errors
    ///
    /// When the log cannot be opened, saying so.
    pub(crate) fn log_to(&self, cmd: &mut Command) -> Result<(), String> {
        let path = self.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let second = log
            .try_clone()
            .map_err(|e| format!("cannot clone the handle of {}: {e}", path.display()))?;
        cmd.stdout(second).stderr(log);
        Ok(())
    }

    /// Runs `cmd` as the server (from the harness's spawner, registered to be killed at exit),
    /// without waiting for it to serve; returns its pid. A server still running from a
    /// concurrent restart is killed: one server is kept.
    ///
    /// # Errors
    ///
    /// When `cmd` cannot be run.
    pub(crate) fn spawn(&self, cmd: Command) -> io::Result<u32> {
        let child = process::spawn(cmd, self.dir.clone())?;
        let pid = child.id();
        let raced = self.lock_child().replace(child);
        if let Some(mut raced) = raced {
            // Leftovers stay: they are the new server's now (PostgreSQL's lock file).
            if let Err(why) = self.kill_child(&mut raced, false) {
                eprintln!("leasehold harness: {}: {why}", self.label);
            }
        }
        Ok(pid)
    }

    /// The process id while the server runs (also while paused); `None` once killed or stopped.
    pub(crate) fn pid(&self) -> Option<u32> {
        running(&mut self.lock_child()).map(|child| child.id())
    }

    /// Kills the server with SIGKILL (its whole tree, frozen first, for a server that forks), as
    /// a crash would, waits until it has exited, and clears its leftovers. Does nothing if it is
    /// not running.
    ///
    /// # Panics
    ///
    /// If a process does not exit within 10 s.
    pub(crate) fn kill9(&self) {
        let Some(mut child) = self.lock_child().take() else {
            return;
        };
        if let Err(why) = self.kill_child(&mut child, true) {
            panic!("cannot kill {}: {why}\n{}", self.label, self.log_tail());
        }
    }

    /// Stops the server with `signal` (SIGTERM, or PostgreSQL's SIGINT for a fast shutdown) and
    /// waits up to `within` for it to exit before it is killed as by [`kill9`](Self::kill9). A
    /// paused server is thawed first. Does nothing if it is not running.
    ///
    /// # Panics
    ///
    /// If a process does not exit even after SIGKILL.
    pub(crate) fn stop(&self, signal: libc::c_int, within: Duration) {
        let Some(mut child) = self.lock_child().take() else {
            return;
        };
        process::signal(&mut child, signal);
        // A paused server would hold the signal pending forever, and a server that forks waits
        // for its children to finish.
        if self.kind.forks {
            for p in process::descendants(child.id()) {
                p.signal(libc::SIGCONT);
            }
        }
        process::signal(&mut child, libc::SIGCONT);
        if process::wait_exit(&mut child, within).is_some() {
            return;
        }
        eprintln!(
            "leasehold harness: {} did not exit within {within:?} of signal {signal}; killing it",
            self.label
        );
        if let Err(why) = self.kill_child(&mut child, true) {
            panic!("cannot stop {}: {why}\n{}", self.label, self.log_tail());
        }
    }

    /// Freezes the server with SIGSTOP (its whole tree, top down, for a server that forks) and
    /// returns once it is stopped.
    ///
    /// # Panics
    ///
    /// If the server is not running, or not stopped within its kind's signal timeout.
    pub(crate) fn pause(&self) {
        let within = self.kind.signal_timeout;
        self.signal_running("pause", |child| {
            if self.kind.forks {
                return process::freeze_tree(child, within).map(drop);
            }
            process::signal(child, libc::SIGSTOP);
            if process::wait_stopped(child.id(), true, within) {
                Ok(())
            } else {
                Err(format!(
                    "pid {} was not stopped within {within:?}",
                    child.id()
                ))
            }
        });
    }

    /// Thaws a server frozen by [`pause`](Self::pause) with SIGCONT and returns once it runs
    /// again.
    ///
    /// # Panics
    ///
    /// If the server is not running, or still stopped after its kind's signal timeout.
    pub(crate) fn resume(&self) {
        let within = self.kind.signal_timeout;
        self.signal_running("resume", |child| {
            if self.kind.forks {
                return process::thaw_tree(child, within);
            }
            process::signal(child, libc::SIGCONT);
            if process::wait_stopped(child.id(), false, within) {
                Ok(())
            } else {
                Err(format!(
                    "pid {} was still stopped after {within:?}",
                    child.id()
                ))
            }
        });
    }

    /// Waits up to `within` until the process just launched serves, asking `answer` who answers
    /// on its port; the log from `log_start` on tells a port taken from another failure when it
    /// exits. A process that will not serve is killed.
    ///
    /// # Errors
    ///
    /// [`LaunchError::PortTaken`] when another process holds the port, [`LaunchError::Failed`]
    /// when the server exited or did not serve in time.
    pub(crate) async fn wait_launched<F, Fut>(
        &self,
        log_start: u64,
        within: Duration,
        mut answer: F,
    ) -> Result<(), LaunchError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Answer>,
    {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return Err(
                    if self.log_since(log_start).contains(self.kind.port_taken) {
                        LaunchError::PortTaken
                    } else {
                        LaunchError::Failed(format!("it exited with {status} while starting"))
                    },
                );
            }
            let last = match answer().await {
                Answer::Ours => return Ok(()),
                Answer::Theirs => {
                    self.kill9();
                    return Err(LaunchError::PortTaken);
                }
                Answer::NotYet(why) => why,
            };
            if Instant::now() >= deadline {
                self.kill9();
                return Err(LaunchError::Failed(format!(
                    "it did not serve within {within:?} (last: {last})"
                )));
            }
            tokio::time::sleep(self.kind.poll).await;
        }
    }

    /// Launches the server again on its ports with `launch` (spawn, then
    /// [`wait_launched`](Self::wait_launched)) until it serves, trying again while someone else
    /// holds a port, for at most `within`.
    ///
    /// # Panics
    ///
    /// If a launch fails otherwise, or a port stays taken for `within`; the message includes the
    /// tail of the log.
    pub(crate) async fn relaunch<F, Fut>(&self, within: Duration, mut launch: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), LaunchError>>,
    {
        let deadline = Instant::now() + within;
        loop {
            match launch().await {
                Ok(()) => return,
                Err(LaunchError::PortTaken) if Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_AFTER).await;
                }
                Err(LaunchError::PortTaken) => panic!(
                    "cannot restart {}: a port stayed taken by another process\n{}",
                    self.label,
                    self.log_tail()
                ),
                Err(LaunchError::Failed(why)) => {
                    panic!("{} did not restart: {why}\n{}", self.label, self.log_tail())
                }
            }
        }
    }

    /// Polls `probe` until it says the running server serves (after a resume, or a member's loss
    /// of quorum), for at most `within`; returns what it found.
    ///
    /// # Panics
    ///
    /// If the server is not running, or does not serve within `within`.
    pub(crate) async fn wait_until_serving<T, F, Fut>(&self, within: Duration, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + within;
        loop {
            if self.pid().is_none() {
                panic!(
                    "{} is not running, so it will not serve\n{}",
                    self.label,
                    self.log_tail()
                );
            }
            let last = match probe().await {
                Ok(found) => return found,
                Err(why) => why,
            };
            if Instant::now() >= deadline {
                panic!(
                    "{} did not serve within {within:?} (last: {last})\n{}",
                    self.label,
                    self.log_tail()
                );
            }
            tokio::time::sleep(self.kind.poll).await;
        }
    }

    /// Runs `signal` on the running child, with the child's slot locked so no restart races it.
    ///
    /// # Panics
    ///
    /// If the server is not running, or `signal` fails.
    fn signal_running(&self, what: &str, signal: impl FnOnce(&mut Child) -> Result<(), String>) {
        let mut child = self.lock_child();
        let Some(running) = running(&mut child) else {
            panic!("cannot {what} {}: it is not running", self.label);
        };
        if let Err(why) = signal(running) {
            panic!("cannot {what} {}: {why}", self.label);
        }
    }

    /// SIGKILLs `child` (with its tree, for a server that forks) and reaps it; then, with
    /// `clear`, clears the leftovers of the kill.
    fn kill_child(&self, child: &mut Child, clear: bool) -> Result<(), String> {
        if self.kind.forks {
            process::kill_tree(child, self.kind.signal_timeout)?;
        } else if !process::kill_and_reap(child) {
            return Err(format!(
                "pid {} did not exit within 10s of SIGKILL",
                child.id()
            ));
        }
        if let Some(leftovers) = self.kind.leftovers.filter(|_| clear) {
            leftovers(&self.dir);
        }
        Ok(())
    }

    /// The exit status if the process has exited (it is then reaped and forgotten).
    fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.lock_child();
        let status = process::wait_exit(child.as_mut()?, Duration::ZERO)?;
        *child = None;
        Some(status)
    }

    fn lock_child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let child = self.lock_child().take();
        match child {
            Some(mut child) => {
                if let Err(why) = self.kill_child(&mut child, true) {
                    // Never panic in drop: it may run while a test is already panicking.
                    eprintln!("leasehold harness: cannot kill {}: {why}", self.label);
                }
            }
            // Killed earlier (its leftovers were cleared then), or exited on its own.
            None => {
                if let Some(leftovers) = self.kind.leftovers {
                    leftovers(&self.dir);
                }
            }
        }
        match self.kind.data_dir {
            Some(data) if thread::panicking() => {
                let _ = fs::remove_dir_all(self.dir.join(data));
                eprintln!(
                    "leasehold harness: the log of {} is kept in {}",
                    self.label,
                    self.log_path().display()
                );
            }
            _ => {
                let _ = fs::remove_dir_all(&self.dir);
            }
        }
    }
}

/// A new, empty directory for one server under `base`, named after its `kind` (`redis`, `zk`,
/// ...), the test binary's pid and a counter.
///
/// # Panics
///
/// If it cannot be made.
pub(crate) fn fresh_dir(base: &Path, kind: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = base.join(format!(
        "leasehold-{kind}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    // Left over by an earlier binary that had the same pid and was SIGKILLed.
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The child if it has not exited (a paused one has not).
fn running(child: &mut Option<Child>) -> Option<&mut Child> {
    child
        .as_mut()
        .and_then(|c| process::wait_exit(c, Duration::ZERO).is_none().then_some(c))
}
