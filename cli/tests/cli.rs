//! The `leasehold` binary against a real redis-server, with locks held by a `Locker` in the
//! test: what operators see (list, show, watch), what `release --force` does to the holder,
//! and the exit statuses of mistakes and of an unreachable server; then the same commands on
//! ZooKeeper, etcd and PostgreSQL. Every run is bounded.

mod support;

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer, ZkServer};
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

#[tokio::test]
async fn list_shows_held_locks_as_a_table() {
    within(async {
        let (srv, url, app) = app().await;
        let a = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let b = hold(&app, "stock:sku-8", Duration::from_secs(20)).await;
        let c = app.lock("order:1").acquire().await.unwrap();
        c.release().await.unwrap();
        // Someone waits for sku-8.
        let waiter = Locker::connect(&url).await.unwrap();
        let waiting = tokio::spawn(async move {
            let _ = waiter
                .lock("stock:sku-8")
                .wait(Duration::from_secs(5))
                .acquire()
                .await;
        });
        tokio::time::sleep(Duration::from_millis(200)).await;

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 3, "a header and two rows: {out:#?}");
        assert_eq!(
            rows[0],
            ["KEY", "REMAINING", "FENCE", "WAITERS", "LABEL", "HOLDER"]
        );
        assert_eq!(rows[1][0], "stock:sku-7");
        assert_eq!(rows[2][0], "stock:sku-8");
        let remaining: f64 = rows[1][1].strip_suffix('s').unwrap().parse().unwrap();
        assert!((8.0..=10.0).contains(&remaining), "{out:#?}");
        let remaining: f64 = rows[2][1].strip_suffix('s').unwrap().parse().unwrap();
        assert!((18.0..=20.0).contains(&remaining), "{out:#?}");
        assert_eq!(rows[1][2], a.fence().to_string());
        assert_eq!(rows[2][2], b.fence().to_string());
        assert_eq!((rows[1][3], rows[2][3]), ("no", "yes"));
        for key in ["stock:sku-7", "stock:sku-8"] {
            let token = owner_token(&srv, key).await;
            let token = token.trim_end_matches('+');
            assert!(
                !out.stdout.contains(token) && !out.stderr.contains(token),
                "an owner token was printed: {out:#?}"
            );
        }

        // A pattern; and no match is an answer, with stdout left empty.
        let out = run(&["list", "stock:*-7", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(out.stdout.lines().count(), 2, "{out:#?}");
        let out = run(&["--url", &url, "list", "order:*"], None).await;
        out.assert_code(0);
        assert_eq!(out.stdout, "", "{out:#?}");
        assert!(
            out.stderr.contains(&format!(
                "no held locks match \"order:*\" (prefix \"leasehold\", redis {})",
                srv.addr()
            )),
            "{out:#?}"
        );

        waiting.abort();
        a.release().await.unwrap();
        b.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn show_and_list_tell_who_holds_and_who_waits() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let named = |service: &'static str| {
            let url = url.clone();
            async move {
                Locker::builder()
                    .url(url)
                    .service_name(service)
                    .build()
                    .await
                    .unwrap()
            }
        };
        let app = named("checkout").await;
        let other = named("billing").await;
        let guard = app
            .lock("order:42")
            .label("req-7f3a")
            .lease(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let waiting = tokio::spawn(async move {
            let _ = other
                .lock("order:42")
                .wait(Duration::from_secs(5))
                .acquire()
                .await;
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let d = app.description();
        let who = format!("checkout@{} pid {}", d.host, d.pid);

        let out = run(&["show", "order:42", "--url", &url], None).await;
        out.assert_code(0);
        let line = |name: &str| -> String {
            out.stdout
                .lines()
                .find(|l| l.starts_with(&format!("{name}:")))
                .unwrap_or_else(|| panic!("no {name} line: {out:#?}"))[name.len() + 1..]
                .trim()
                .to_owned()
        };
        assert_eq!(line("holder"), who, "{out:#?}");
        assert!(line("  locker").starts_with(&format!("locker {}, leasehold ", d.locker)));
        assert!(line("  since").ends_with(" ago)"), "{out:#?}");
        assert_eq!(line("  label"), "req-7f3a");
        let waiter = line("waiter");
        assert!(
            waiter.starts_with(&format!("billing@{} pid {}, waiting ", d.host, d.pid)),
            "{out:#?}"
        );
        let token = owner_token(&srv, "order:42").await;
        let secret = &token.trim_end_matches('+')[token.trim_end_matches('+').len() - 32..];
        assert!(
            !out.stdout.contains(secret),
            "a token was printed: {out:#?}"
        );

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let row = out.stdout.lines().nth(1).expect("a row");
        assert!(row.contains("req-7f3a"), "{out:#?}");
        assert!(row.ends_with(&who), "{out:#?}");
        assert!(
            !out.stdout.contains(secret),
            "a token was printed: {out:#?}"
        );

        guard.release().await.unwrap();
        waiting.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn semaphore_lists_its_holders_without_tokens() {
    within(async {
        let (srv, url, app) = app().await;
        let one = app
            .semaphore("partner-api", 8)
            .lease(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let three = app
            .semaphore("partner-api", 8)
            .lease(Duration::from_secs(20))
            .acquire_many(3)
            .await
            .unwrap();
        let out = run(&["semaphore", "partner-api", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("limit:    8"), "{out:#?}");
        assert!(out.stdout.contains("in use:   4"), "{out:#?}");
        let rows: Vec<&str> = out
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("HOLDER"))
            .skip(1)
            .collect();
        assert_eq!(rows.len(), 2, "{out:#?}");
        // The soonest lease first: the single permit's.
        assert!(rows[0].split_whitespace().nth(1) == Some("1"), "{out:#?}");
        assert!(rows[1].split_whitespace().nth(1) == Some("3"), "{out:#?}");
        let mut conn = srv.conn().await;
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg("leasehold:sem:{partner-api}")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(members.len(), 4);
        for member in members {
            let token = member.split(':').next().unwrap();
            assert!(!out.stdout.contains(token), "a token was printed: {out:#?}");
        }
        drop((one, three));

        let out = run(&["semaphore", "never:used", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("no permit held"), "{out:#?}");
    })
    .await;
}

#[tokio::test]
async fn show_tells_held_from_free() {
    within(async {
        let (srv, url, app) = app().await;
        let held = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let freed = app.lock("order:1").acquire().await.unwrap();
        let freed_fence = freed.fence();
        freed.release().await.unwrap();

        let out = run(&["show", "stock:sku-7", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "key"), "stock:sku-7");
        assert_eq!(field(&out, "state"), "held");
        let remaining: f64 = field(&out, "remaining")
            .strip_suffix('s')
            .unwrap()
            .parse()
            .unwrap();
        assert!((8.0..=10.0).contains(&remaining), "{out:#?}");
        assert_eq!(field(&out, "last fence"), held.fence().to_string());
        assert_eq!(field(&out, "waiters"), "no");
        let token = owner_token(&srv, "stock:sku-7").await;
        assert!(!out.stdout.contains(&token), "{out:#?}");

        // A free lock is an answer: exit 0.
        let out = run(&["show", "order:1", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "state"), "free");
        assert_eq!(field(&out, "remaining"), "-");
        assert_eq!(field(&out, "last fence"), freed_fence.to_string());
        let out = run(&["show", "never:used", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "last fence"), "none");

        // Another prefix is another set of locks.
        let shop = Locker::builder()
            .url(&url)
            .prefix("shop")
            .build()
            .await
            .unwrap();
        let other = shop.lock("cart:9").acquire().await.unwrap();
        let out = run(&["show", "cart:9", "--url", &url], None).await;
        assert_eq!(field(out.assert_code(0), "state"), "free");
        let out = run(&["show", "cart:9", "--url", &url, "--prefix", "shop"], None).await;
        assert_eq!(field(out.assert_code(0), "state"), "held");

        // A key the library refuses is a usage error.
        let out = run(&["show", "", "--url", &url], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("invalid lock key"), "{out:#?}");

        other.release().await.unwrap();
        held.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn release_force_yes_frees_the_lock_and_the_holder_finds_out() {
    within(async {
        let (_srv, url, app) = app().await;
        let holder = hold(&app, "stock:sku-7", Duration::from_millis(600)).await;

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(
            out.stdout.contains("deleted the lock on stock:sku-7"),
            "{out:#?}"
        );
        assert!(out.stderr.contains(WARNING), "{out:#?}");
        assert!(!out.stderr.contains("type the key"), "--yes asks nothing");
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(2), holder.lost())
            .await
            .expect("the holder's guard reports the lock lost at its next renewal");
        assert!(matches!(
            holder.release().await,
            Err(LockError::Lost { .. })
        ));

        // Nothing left to delete: exit 1.
        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(1);
        assert!(
            out.stdout.contains("is not held; nothing deleted"),
            "{out:#?}"
        );
    })
    .await;
}

#[tokio::test]
async fn release_without_force_is_refused() {
    within(async {
        let (_srv, url, app) = app().await;
        let holder = app.lock("stock:sku-7").acquire().await.unwrap();

        for args in [
            &["release", "stock:sku-7", "--url", &url][..],
            &["release", "stock:sku-7", "--yes", "--url", &url][..],
        ] {
            let out = run(args, Some("stock:sku-7\n")).await;
            out.assert_code(2);
            assert!(out.stderr.contains("add --force"), "{out:#?}");
            assert!(out.stderr.contains("Usage: leasehold release"), "{out:#?}");
            assert_eq!(out.stdout, "");
        }
        assert!(holder.is_held());
        assert!(app.inspect("stock:sku-7").await.unwrap().held);
        holder.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn release_asks_for_the_key_and_does_nothing_on_a_wrong_answer() {
    within(async {
        let (_srv, url, app) = app().await;
        // A short lease, renewed by the watchdog, so that the holder finds out soon.
        let holder = hold(&app, "stock:sku-7", Duration::from_millis(600)).await;
        let args = ["release", "stock:sku-7", "--force", "--url", &url];

        for input in [
            Some("stock:sku-8\n"),
            Some("stock:sku-7 \n"),
            Some(""),
            None,
        ] {
            let out = run(&args, input).await;
            out.assert_code(1);
            assert!(out.stderr.contains("nothing deleted"), "{out:#?}");
            assert!(!out.stdout.contains("deleted the lock"), "{out:#?}");
            assert!(holder.is_held());
            assert!(app.inspect("stock:sku-7").await.unwrap().held);
        }

        let out = run(&args, Some("stock:sku-7\n")).await;
        out.assert_code(0);
        let warned = out.stderr.find(WARNING).expect("the warning is printed");
        let asked = out
            .stderr
            .find("type the key to confirm:")
            .expect("the prompt is printed");
        assert!(
            warned < asked,
            "the warning comes before the question: {out:#?}"
        );
        assert!(out.stdout.contains("deleted the lock on stock:sku-7"));
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(2), holder.lost())
            .await
            .expect("the holder finds out");
    })
    .await;
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

#[tokio::test]
async fn watch_prints_acquisitions_and_releases() {
    within(async {
        let (srv, url, app) = app().await;
        let mut watch = spawn(
            command(&["watch", "stock:sku-7", "--for", "1500ms", "--url", &url]),
            None,
        );
        let first = watch.line_containing("watching stock:sku-7").await;
        assert_eq!(
            event(&first),
            format!(
                "watching stock:sku-7 (prefix \"leasehold\", redis {}): free (last fence none)",
                srv.addr()
            ),
            "{first}"
        );

        let guard = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let fence = guard.fence();
        watch.line_containing("acquired").await;
        guard.release().await.unwrap();
        let out = watch.finish().await;
        out.assert_code(0);

        let events: Vec<&str> = out.stdout.lines().skip(1).map(event).collect();
        assert_eq!(events.len(), 2, "{out:#?}");
        let lease: f64 = events[0]
            .strip_prefix(&format!("acquired (fence {fence}, lease "))
            .and_then(|rest| rest.strip_suffix("s)"))
            .unwrap_or_else(|| panic!("{out:#?}"))
            .parse()
            .unwrap();
        assert!((9.0..=10.0).contains(&lease), "{out:#?}");
        // Released long before its 10 s lease could run out.
        assert_eq!(events[1], "released", "{out:#?}");
    })
    .await;
}

#[tokio::test]
async fn watch_tells_an_expiry_and_sees_waiters() {
    within(async {
        let (_srv, url, app) = app().await;
        let mut watch = spawn(
            command(&[
                "--url",
                &url,
                "watch",
                "stock:sku-7",
                "--for",
                "2500ms",
                "--interval",
                "50ms",
            ]),
            None,
        );
        watch.line_containing("watching stock:sku-7").await;

        // A lease that is not renewed, and someone who waits for it in vain.
        let guard = app
            .lock("stock:sku-7")
            .lease(Duration::from_millis(800))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        let waiter = Locker::connect(&url).await.unwrap();
        let refused = waiter
            .lock("stock:sku-7")
            .wait(Duration::from_millis(100))
            .acquire()
            .await;
        assert!(matches!(refused, Err(LockError::Busy { .. })));
        watch.line_containing("expired or released").await;
        let out = watch.finish().await;
        out.assert_code(0);
        drop(guard);

        let events: Vec<&str> = out.stdout.lines().skip(1).map(event).collect();
        assert_eq!(events.len(), 3, "{out:#?}");
        assert!(events[0].starts_with("acquired (fence "), "{out:#?}");
        assert_eq!(events[1..], ["waiters appeared", "expired or released"]);
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_server_or_a_bad_url_exits_3_with_a_clear_message() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        srv.stop();
        let endpoint = format!("127.0.0.1:{}", srv.port());
        for args in [
            &["list", "--url", &url][..],
            &["show", "k", "--url", &url][..],
            &["release", "k", "--force", "--yes", "--url", &url][..],
            &["watch", "k", "--for", "1s", "--url", &url][..],
        ] {
            let out = run(args, None).await;
            out.assert_code(3);
            assert!(
                out.stderr
                    .starts_with(&format!("error: cannot reach redis at {endpoint}: ")),
                "{out:#?}"
            );
            assert_eq!(out.stdout, "");
        }

        let out = run(&["list", "--url", "redis://127.0.0.1:1"], None).await;
        out.assert_code(3);
        assert!(
            out.stderr
                .starts_with("error: cannot reach redis at 127.0.0.1:1: refused the connection"),
            "{out:#?}"
        );
        // From the environment too, and never with the password.
        let mut cmd = command(&["show", "k"]);
        cmd.env("LEASEHOLD_URL", "redis://ops:hunter2@127.0.0.1:1");
        let out = spawn(cmd, None).finish().await;
        out.assert_code(3);
        assert!(
            out.stderr.contains("cannot reach redis at 127.0.0.1:1"),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("hunter2"), "{out:#?}");

        for bad in ["http://ops:hunter2@cache:6379", "not a url"] {
            let out = run(&["list", "--url", bad], None).await;
            out.assert_code(3);
            assert!(
                out.stderr.starts_with("error: cannot use the URL"),
                "{out:#?}"
            );
            assert!(out.stderr.contains("redis://host:port"), "{out:#?}");
            assert!(!out.stderr.contains("hunter2"), "{out:#?}");
        }
    })
    .await;
}

#[tokio::test]
async fn usage_errors_exit_2_and_help_documents_the_exit_statuses() {
    within(async {
        let out = run(&["frob"], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("unknown command \"frob\""), "{out:#?}");
        assert!(out.stderr.contains("Usage: leasehold"), "{out:#?}");
        assert_eq!(out.stdout, "");
        for args in [
            &[][..],
            &["list", "--bogus"][..],
            &["show"][..],
            &["show", "a", "b"][..],
            &["watch", "k", "--for", "soon"][..],
            &["list", "--yes"][..],
            &["list", "--timeout", "0s"][..],
        ] {
            let out = run(args, None).await;
            out.assert_code(2);
            assert!(out.stderr.starts_with("error: "), "{args:?}: {out:#?}");
            assert!(
                out.stderr.contains("Usage: leasehold"),
                "{args:?}: {out:#?}"
            );
        }

        let out = run(&["--help"], None).await;
        out.assert_code(0);
        for needle in [
            "Exit status:",
            "0  done",
            "1  `release` deleted nothing",
            "2  usage",
            "3  the engine unreachable",
            "LEASEHOLD_URL",
            "LEASEHOLD_PREFIX",
        ] {
            assert!(out.stdout.contains(needle), "{needle:?} in {out:#?}");
        }
        for (command, needle) in [
            ("list", "SCAN"),
            ("show", "KEY"),
            ("release", "will NOT be told"),
            ("watch", "--interval"),
        ] {
            let out = run(&[command, "--help"], None).await;
            out.assert_code(0);
            assert!(out.stdout.contains(needle), "{command}: {out:#?}");
        }
        let out = run(&["--version"], None).await;
        out.assert_code(0);
        assert!(out.stdout.starts_with("leasehold "), "{out:#?}");
    })
    .await;
}

#[tokio::test]
async fn the_config_file_the_environment_and_options_in_that_order() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let cfg = Locker::builder()
            .url(&url)
            .prefix("cfg")
            .build()
            .await
            .unwrap();
        let guard = cfg.lock("k").acquire().await.unwrap();
        let file = srv.dir().join("leasehold.toml");
        std::fs::write(
            &file,
            format!("url = \"{url}\"\nprefix = \"cfg\"\nop_timeout = \"1s\"\n"),
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let state = |out: &Output| {
            out.assert_code(0);
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix("state:"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|| panic!("{out:#?}"))
        };

        let out = run(&["show", "k", "--config", file], None).await;
        assert_eq!(state(&out), "held");
        // The environment overrides the file, and options override both.
        let mut cmd = command(&["show", "k", "--config", file]);
        cmd.env("LEASEHOLD_PREFIX", "other");
        assert_eq!(state(&spawn(cmd, None).finish().await), "free");
        let mut cmd = command(&["show", "k", "--config", file, "--prefix", "cfg"]);
        cmd.env("LEASEHOLD_PREFIX", "other");
        assert_eq!(state(&spawn(cmd, None).finish().await), "held");
        // The environment alone.
        let mut cmd = command(&["show", "k"]);
        cmd.env("LEASEHOLD_URL", &url)
            .env("LEASEHOLD_PREFIX", "cfg");
        assert_eq!(state(&spawn(cmd, None).finish().await), "held");

        // A bad file or variable is a configuration error.
        let bad = srv.dir().join("bad.toml");
        std::fs::write(&bad, "leese = \"30s\"\n").unwrap();
        let out = run(&["show", "k", "--config", bad.to_str().unwrap()], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("unknown field `leese`"), "{out:#?}");
        let out = run(
            &["show", "k", "--config", "/nonexistent/leasehold.toml"],
            None,
        )
        .await;
        out.assert_code(2);
        assert!(out.stderr.contains("cannot read"), "{out:#?}");
        let mut cmd = command(&["show", "k", "--url", &url]);
        cmd.env("LEASEHOLD_OP_TIMEOUT", "soon");
        let out = spawn(cmd, None).finish().await;
        out.assert_code(2);
        assert!(out.stderr.contains("LEASEHOLD_OP_TIMEOUT"), "{out:#?}");
        let out = run(&["show", "k", "--url", &url, "--prefix", "a{b}"], None).await;
        out.assert_code(2);

        guard.release().await.unwrap();
    })
    .await;
}

/// The ACL that cli/README.md documents for prefix `leasehold`.
const ACL: &[&str] = &[
    "resetkeys",
    "resetchannels",
    "-@all",
    "~leasehold:*",
    "&leasehold:wake:*",
    "+scan",
    "+evalsha",
    "+script|load",
    "+get",
    "+pttl",
    "+zcard",
    "+zrange",
    "+zrangebyscore",
    "+time",
    "+del",
    "+publish",
    "+info|memory",
];

#[tokio::test]
async fn the_documented_acl_is_enough() {
    within(async {
        let srv = RedisServer::start().await;
        let app = Locker::connect(&srv.url()).await.unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();
        let mut admin = srv.conn().await;
        let mut setuser = redis::cmd("ACL");
        setuser.arg("SETUSER").arg("ops").arg("on").arg(">ops-pw");
        for rule in ACL {
            setuser.arg(*rule);
        }
        let () = setuser.query_async(&mut admin).await.unwrap();
        let () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query_async(&mut admin)
            .await
            .unwrap();
        let url = format!("redis://ops:ops-pw@{}", srv.addr());

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        run(&["show", "stock:sku-7", "--url", &url], None)
            .await
            .assert_code(0);
        run(
            &["watch", "stock:sku-7", "--for", "300ms", "--url", &url],
            None,
        )
        .await
        .assert_code(0);
        run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await
        .assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);

        let log: Vec<redis::Value> = redis::cmd("ACL")
            .arg("LOG")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(log.is_empty(), "ACL denials: {log:?}");
        // And the user cannot touch other data.
        let out = run(&["show", "k", "--url", &url, "--prefix", "other"], None).await;
        out.assert_code(3);
        assert!(out.stderr.contains("lacks a permission"), "{out:#?}");
        drop(held);
    })
    .await;
}

/// The same operations on a ZooKeeper ensemble, named as `zookeeper://host:port,...`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_zookeeper() {
    within(async {
        let zk = ZkServer::start().await;
        let url = format!("zookeeper://{}", zk.connect_string());
        let app = Locker::builder()
            .zookeeper(zk.connect_string())
            .session_timeout(Duration::from_secs(4))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");
        // The hold lasts as long as the session: one word, the table splits on spaces.
        assert_eq!(rows[1][1], "session", "{out:#?}");

        let out = run(&["show", "stock:sku-7", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        assert_eq!(field(&out, "remaining"), "session", "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(6), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr.contains(&format!(
                "(prefix \"leasehold\", zookeeper {})",
                zk.connect_string()
            )),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}

/// The same operations on an etcd cluster, named as `etcd://host:port,...` or, for `show`, by
/// `etcd = [...]` in the config file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_etcd() {
    within(async {
        let etcd = EtcdServer::start().await;
        let url = format!("etcd://{}", etcd.addr());
        let app = Locker::builder()
            .etcd([etcd.endpoint()])
            .session_timeout(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");
        // The hold lasts as long as the session: one word, the table splits on spaces.
        assert_eq!(rows[1][1], "session", "{out:#?}");

        let config = etcd.dir().join("leasehold-cli.toml");
        std::fs::write(&config, format!("etcd = [\"{}\"]\n", etcd.endpoint())).unwrap();
        let config = config.to_str().unwrap();
        let out = run(&["show", "stock:sku-7", "--config", config], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        assert_eq!(field(&out, "remaining"), "session", "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr
                .contains(&format!("(prefix \"leasehold\", etcd {})", etcd.addr())),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}

/// The same operations on PostgreSQL, named by its URL or, for `show`, by `postgres = "..."`
/// in the config file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_postgres() {
    within(async {
        let pg = PgServer::start().await;
        let url = pg.url();
        let app = Locker::builder()
            .postgres(url.as_str())
            .default_lease(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");

        let config = pg.dir().join("leasehold-cli.toml");
        std::fs::write(&config, format!("postgres = \"{url}\"\n")).unwrap();
        let config = config.to_str().unwrap();
        let out = run(&["show", "stock:sku-7", "--config", config], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr
                .contains(&format!("(prefix \"leasehold\", postgres {})", pg.addr())),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");

        // An unreachable database: exit 3, a message naming it, no password.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let gone = format!("postgres://postgres:s3cret@127.0.0.1:{port}/postgres");
        let out = run(&["list", "--url", &gone], None).await;
        out.assert_code(3);
        assert!(!out.stderr.contains("s3cret"), "{out:#?}");
        assert!(
            out.stderr.contains(&format!("127.0.0.1:{port}")),
            "{out:#?}"
        );
        assert!(
            out.stderr.starts_with("error: cannot reach PostgreSQL at ")
                && out.stderr.contains(": could not be reached"),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}
