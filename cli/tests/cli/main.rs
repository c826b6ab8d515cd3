//! The `leasehold` binary against a real redis-server, with locks held by a `Locker` in the
//! test: what operators see (list, show, watch), what `release --force` does to the holder,
//! and the exit statuses of mistakes and of an unreachable server; then the same commands on
//! ZooKeeper, etcd and PostgreSQL. Every run is bounded. This file holds what the modules
//! share: running the binary, and an application holding locks.

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod config;
mod engines;
mod exits;
mod list;
mod release;
mod watch;

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;
use support::{command, Output};
use tokio::sync::mpsc;

/// The bound on one run of the binary.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// The bound on a whole test.
const TEST_LIMIT: Duration = Duration::from_secs(60);

const WARNING: &str = "the holder will NOT be told: it keeps running until its next lease \
                       renewal fails, and may write meanwhile; fenced resources reject its writes";

async fn within<F: Future>(test: F) -> F::Output {
    support::within(TEST_LIMIT, test).await
}

/// A running `leasehold`, its stdout read line by line as it comes.
struct Running {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
    stderr: Option<JoinHandle<String>>,
    started: Instant,
}

fn spawn(mut cmd: Command, stdin: Option<&str>) -> Running {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run the leasehold binary");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        // The tool may exit before reading (a usage error): a broken pipe is fine. Dropping
        // the pipe closes stdin, so the tool sees the end of its input.
        let _ = pipe.write_all(input.as_bytes());
    }
    let (tx, lines) = mpsc::unbounded_channel();
    let stdout = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    Running {
        child,
        lines,
        seen: Vec::new(),
        stderr: Some(stderr),
        started: Instant::now(),
    }
}

impl Running {
    /// Waits for a stdout line containing `needle`.
    async fn line_containing(&mut self, needle: &str) -> String {
        loop {
            if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            let left = RUN_LIMIT.saturating_sub(self.started.elapsed());
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(line)) => self.seen.push(line),
                Ok(None) => panic!(
                    "stdout ended without a line containing {needle:?}: {:#?}",
                    self.finish().await
                ),
                Err(_) => panic!(
                    "no line containing {needle:?} within {RUN_LIMIT:?}; so far: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Waits for the process to exit (killing it after the run limit) and collects its output.
    async fn finish(&mut self) -> Output {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("poll the child") {
                break status;
            }
            if self.started.elapsed() > RUN_LIMIT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "leasehold ran for over {RUN_LIMIT:?} and was killed; stdout so far: {:#?}",
                    self.seen
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(5), self.lines.recv()).await
        {
            self.seen.push(line);
        }
        let stderr = self.stderr.take().map_or_else(String::new, |handle| {
            handle.join().expect("the stderr reader does not panic")
        });
        let mut stdout = self.seen.join("\n");
        if !stdout.is_empty() {
            stdout.push('\n');
        }
        Output {
            code: status.code(),
            stdout,
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A failed assertion must not leave the tool running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The value of the `NAME:` line of `show`'s output.
fn field(out: &Output, name: &str) -> String {
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} line: {out:#?}"));
    line[name.len() + 1..].trim().to_owned()
}

/// Runs `leasehold ARGS` to the end, with `stdin` as its input (or none).
async fn run(args: &[&str], stdin: Option<&str>) -> Output {
    spawn(command(args), stdin).finish().await
}

/// A fresh server, its URL, and an application's locker on it.
async fn app() -> (RedisServer, String, Locker) {
    let srv = RedisServer::start().await;
    let url = srv.url();
    let app = Locker::connect(&url).await.unwrap();
    (srv, url, app)
}

/// `key` held by `app` with this lease (renewed by the watchdog).
async fn hold(app: &Locker, key: &str, lease: Duration) -> leasehold::LockGuard {
    app.lock(key).lease(lease).acquire().await.unwrap()
}

/// The raw value of a lock key: the holder's owner token, which must never be printed.
async fn owner_token(srv: &RedisServer, key: &str) -> String {
    let mut conn = srv.conn().await;
    let value: Option<String> = redis::cmd("GET")
        .arg(format!("leasehold:lock:{{{key}}}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    value.expect("the lock is held")
}

/// Splits `2025-01-31T12:34:56.789Z  message` and checks the timestamp's shape.
fn event(line: &str) -> &str {
    let (stamp, message) = line
        .split_once("  ")
        .expect("a timestamp, two spaces, a message");
    assert_eq!(stamp.len(), 24, "{line}");
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
        "{line}"
    );
    message
}
