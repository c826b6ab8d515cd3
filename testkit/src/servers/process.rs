//! Spawning, signalling and reaping of the child processes the harness owns, alone or with what
//! they fork.
//!
//! Children are forked from one thread that lives as long as the test binary, with
//! `PR_SET_PDEATHSIG`, so the kernel kills them if the binary dies, even by SIGKILL; a registry
//! of live children is killed at `exit` for the ones a test leaked (a server in a `static`).

use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, Mutex, OnceLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// A child that is alive (or not yet reaped), with the directory to remove after it.
struct Live {
    pid: u32,
    dir: PathBuf,
}

static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());

/// Spawns `cmd` from the harness's long-lived spawner thread and registers it for cleanup at exit.
///
/// The death signal fires when the *thread* that forked the child exits, so forking from a test
/// thread or a tokio worker would kill a server shared between tests when its first test ends.
///
/// `cmd` may carry a `uid`, `gid` or `process_group` of its own: the standard library applies them
/// in the child before the death signal is set here, so a change of user (which clears that
/// signal) cannot undo it.
pub(crate) fn spawn(mut cmd: Command, dir: PathBuf) -> io::Result<Child> {
    die_with_parent(&mut cmd);
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner()
        .send((cmd, reply_tx))
        .expect("the harness spawner thread is gone");
    let child = reply_rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| io::Error::other("the harness spawner thread did not fork within 10s"))??;
    lock_live().push(Live {
        pid: child.id(),
        dir,
    });
    Ok(child)
}

fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("leasehold-harness-spawner".into())
            .spawn(move || {
                // Never ends: the sender lives in a static.
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the harness spawner thread");
        // SAFETY: `kill_leftovers` is a plain `extern "C" fn` that neither unwinds nor blocks
        // on a lock another thread may hold.
        unsafe {
            libc::atexit(kill_leftovers);
        }
        tx
    })
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The test binary may have died between fork and prctl.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::other("the test binary exited while spawning"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

extern "C" fn kill_leftovers() {
    let live = match LIVE.try_lock() {
        Ok(live) => live,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        // Another thread is mid-update; PR_SET_PDEATHSIG still kills the children.
        Err(TryLockError::WouldBlock) => return,
    };
    for child in live.iter() {
        // SAFETY: plain syscalls on a pid that is our own unreaped child, so it cannot be reused.
        unsafe {
            libc::kill(child.pid as libc::pid_t, libc::SIGKILL);
            libc::waitpid(child.pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(&child.dir);
    }
}

fn lock_live() -> std::sync::MutexGuard<'static, Vec<Live>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sends `signal` to `child` unless it has exited: once reaped, its pid may belong to anyone.
pub(crate) fn signal(child: &mut Child, signal: libc::c_int) {
    if wait_exit(child, Duration::ZERO).is_some() {
        return;
    }
    // SAFETY: a plain syscall; an unreaped child's pid stays ours even if it exits meanwhile.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
}

/// Waits up to `within` for `child` to exit and reaps it; `None` if it is still running.
pub(crate) fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                forget(child.id());
                return Some(status);
            }
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(2)),
            Ok(None) => return None,
            // ECHILD: someone else reaped it; it is gone either way.
            Err(_) => {
                forget(child.id());
                return Some(ExitStatus::default());
            }
        }
    }
}

/// SIGKILLs `child` and reaps it; `false` if it did not die within 10 s (a process stuck in the
/// kernel).
pub(crate) fn kill_and_reap(child: &mut Child) -> bool {
    signal(child, libc::SIGKILL);
    wait_exit(child, Duration::from_secs(10)).is_some()
}

/// Waits up to `within` for a one-off command (`initdb`, `redis-cli --cluster create`) to exit,
/// without blocking the runtime; SIGKILLs it and gives `None` if it does not.
pub(crate) async fn finish(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = wait_exit(child, Duration::ZERO) {
            return Some(status);
        }
        if Instant::now() >= deadline {
            kill_and_reap(child);
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGSTOPs `root`, waits until it is stopped, then stops what it forked, top down, until a pass
/// finds nothing new: the processes it stopped besides `root`. Frozen first, `root` forks nothing
/// that a later pass would miss.
pub(crate) fn freeze_tree(root: &mut Child, within: Duration) -> Result<Vec<Proc>, String> {
    let pid = root.id();
    signal(root, libc::SIGSTOP);
    // A root that exited meanwhile (a zombie, or reaped) counts as stopped.
    let stopped = |p: &Proc| matches!(p.state(), None | Some('T' | 't' | 'Z' | 'X'));
    if !poll_until(within, || Proc::of(pid).is_none_or(|p| stopped(&p))) {
        return Err(format!(
            "pid {pid} was not stopped within {within:?} of SIGSTOP"
        ));
    }
    let deadline = Instant::now() + within;
    let mut frozen: Vec<Proc> = Vec::new();
    loop {
        let new: Vec<Proc> = descendants(pid)
            .into_iter()
            .filter(|p| !frozen.contains(p))
            .collect();
        if new.is_empty() {
            return Ok(frozen);
        }
        for p in &new {
            p.signal(libc::SIGSTOP);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !poll_until(left, || new.iter().all(stopped)) {
            let running: Vec<u32> = new.iter().filter(|p| !stopped(p)).map(|p| p.pid).collect();
            return Err(format!(
                "children {running:?} of pid {pid} were not stopped within {within:?} of SIGSTOP"
            ));
        }
        frozen.extend(new);
    }
}

/// SIGCONTs what `root` forked, then `root`, and waits up to `within` until none of them is
/// stopped.
pub(crate) fn thaw_tree(root: &mut Child, within: Duration) -> Result<(), String> {
    let pid = root.id();
    let mut tree = descendants(pid);
    for p in &tree {
        p.signal(libc::SIGCONT);
    }
    signal(root, libc::SIGCONT);
    tree.extend(Proc::of(pid));
    if poll_until(within, || {
        tree.iter().all(|p| !matches!(p.state(), Some('T' | 't')))
    }) {
        Ok(())
    } else {
        Err(format!(
            "pid {pid} and its children did not run again within {within:?} of SIGCONT"
        ))
    }
}

/// SIGKILLs `root` and every process it forked (frozen first, within `within`, so none escapes),
/// reaps `root`, and waits until all are gone.
pub(crate) fn kill_tree(root: &mut Child, within: Duration) -> Result<(), String> {
    let pid = root.id();
    // Killed first, the root would leave its children to init, where they cannot be told from
    // anyone else's.
    let tree = freeze_tree(root, within).unwrap_or_else(|_| descendants(pid));
    for p in &tree {
        p.signal(libc::SIGKILL);
    }
    if !kill_and_reap(root) {
        return Err(format!("pid {pid} did not exit within 10s of SIGKILL"));
    }
    // A child still running may hold what the next start needs (a port, shared memory).
    if !poll_until(Duration::from_secs(10), || {
        tree.iter().all(|p| !p.is_alive())
    }) {
        let left: Vec<u32> = tree
            .iter()
            .filter(|p| p.is_alive())
            .map(|p| p.pid)
            .collect();
        return Err(format!(
            "children {left:?} of pid {pid} did not exit within 10s of SIGKILL"
        ));
    }
    Ok(())
}

/// Polls `done` every millisecond for up to `within`; whether it came true.
fn poll_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn forget(pid: u32) {
    lock_live().retain(|live| live.pid != pid);
}

/// Waits up to `within` until `pid` is stopped by a signal (`stopped`) or runs again
/// (`!stopped`); `false` if it did not get there in time.
pub(crate) fn wait_stopped(pid: u32, stopped: bool, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while is_stopped(pid).is_some_and(|now| now != stopped) {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}

/// State `T` in `/proc/<pid>/stat`; `None` where that cannot be read.
#[cfg(target_os = "linux")]
fn is_stopped(pid: u32) -> Option<bool> {
    read_stat(pid).map(|(state, _)| state == 'T')
}

/// Signals are delivered at once in practice; without `/proc` there is nothing to check.
#[cfg(not(target_os = "linux"))]
fn is_stopped(_pid: u32) -> Option<bool> {
    None
}

/// A process named by its pid and start time, so that a pid reused after it exits is never taken
/// for it: for processes the harness did not fork itself (a server's own children), which it
/// cannot reap and whose pids are therefore not reserved for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    /// The process id.
    pub(crate) pid: u32,
    /// Clock ticks after boot when it started (field 22 of `/proc/<pid>/stat`).
    start: u64,
}

impl Proc {
    /// The process `pid` now; `None` if there is none (or only a zombie).
    pub(crate) fn of(pid: u32) -> Option<Proc> {
        let (state, stat) = read_stat(pid)?;
        (!matches!(state, 'Z' | 'X')).then_some(Proc {
            pid,
            start: stat.start,
        })
    }

    /// Its state letter in `/proc/<pid>/stat` (`R`, `S`, `T` when stopped, `Z` when dead but not
    /// yet reaped, ...); `None` once it is gone or its pid belongs to another process.
    pub(crate) fn state(&self) -> Option<char> {
        let (state, stat) = read_stat(self.pid)?;
        (stat.start == self.start).then_some(state)
    }

    /// Whether it still runs (or is stopped): not gone, not a zombie.
    pub(crate) fn is_alive(&self) -> bool {
        self.state()
            .is_some_and(|state| !matches!(state, 'Z' | 'X'))
    }

    /// Sends `signal` unless it is gone (a pid reused in between would be a race of microseconds
    /// against a full turn of the pid space).
    pub(crate) fn signal(&self, signal: libc::c_int) {
        if self.is_alive() {
            // SAFETY: a plain syscall.
            unsafe {
                libc::kill(self.pid as libc::pid_t, signal);
            }
        }
    }
}

/// What the harness reads of `/proc/<pid>/stat` besides the state.
struct Stat {
    ppid: u32,
    start: u64,
}

/// Every live (not zombie) descendant of `root`: its children, their children, and so on, found
/// through `/proc`, so also those that left its process group (PostgreSQL's backends call
/// `setsid`). A child of a process that exits meanwhile is reparented and escapes: freeze the
/// tree from the top down (SIGSTOP) before relying on the list.
#[cfg(target_os = "linux")]
pub(crate) fn descendants(root: u32) -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<(Proc, u32)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let (state, stat) = read_stat(pid)?;
            (!matches!(state, 'Z' | 'X')).then_some((
                Proc {
                    pid,
                    start: stat.start,
                },
                stat.ppid,
            ))
        })
        .collect();
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for (proc, ppid) in &procs {
            if *ppid == parent && !found.contains(proc) {
                found.push(*proc);
                parents.push(proc.pid);
            }
        }
    }
    found
}

/// Without `/proc` no descendant can be found; only the root is signalled.
#[cfg(not(target_os = "linux"))]
pub(crate) fn descendants(_root: u32) -> Vec<Proc> {
    Vec::new()
}

/// The state letter and the fields the harness uses of `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
fn read_stat(pid: u32) -> Option<(char, Stat)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let ppid = fields.get(1)?.parse().ok()?;
    // Fields 3 (state) to 22 (starttime) of proc(5), counted from the state.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, Stat { ppid, start }))
}

#[cfg(not(target_os = "linux"))]
fn read_stat(_pid: u32) -> Option<(char, Stat)> {
    None
}
