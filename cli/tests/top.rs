//! `leasehold top` against real servers, with locks held, one of them waited for, by lockers
//! in the test: its plain tables (standard output a pipe), and its screen in tmux, read with
//! `tmux capture-pane` on Redis and PostgreSQL: the rows, the top line, a sort key, quitting
//! with the terminal given back. Every wait is bounded.

mod support;

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use leasehold::{Deployment, LockGuard, Locker};
use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer, ZkServer};
use support::{command, without_leasehold_env, Output, BIN};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The bound on one run of the binary, and on each wait for something to show.
const RUN_LIMIT: Duration = Duration::from_secs(20);
/// The bound on a whole test.
const TEST_LIMIT: Duration = Duration::from_secs(90);
/// The columns of `top`, in order.
const HEADER: [&str; 9] = [
    "KEY", "AGE", "LEASE", "FENCE", "WAITING", "ACQ/S", "CONT/S", "LABEL", "HOLDER",
];

async fn within<F: Future>(test: F) -> F::Output {
    support::within(TEST_LIMIT, test).await
}

/// Runs `leasehold ARGS` to the end, with standard output a pipe (so plain tables).
async fn run(args: &[&str]) -> Output {
    let mut cmd = command(args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("run the leasehold binary");
    let out = tokio::time::timeout(
        RUN_LIMIT,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .expect("leasehold exits within its run limit")
    .unwrap()
    .unwrap();
    let out = Output {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    };
    assert!(
        !out.stderr.contains("panicked"),
        "the tool panicked: {out:#?}"
    );
    out
}

/// A row of a table as its cells: the columns before HOLDER have no spaces, HOLDER has.
fn cells(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let last = HEADER.len() - 1;
    assert!(words.len() > last, "not a row of top: {line:?}");
    let mut cells: Vec<String> = words[..last].iter().map(|w| (*w).to_owned()).collect();
    cells.push(words[last..].join(" "));
    cells
}

/// The engine's URL and a locker on it that describes itself as `service`.
async fn locker(url: &str, service: &str) -> Locker {
    Locker::builder()
        .deployment(Deployment::parse(url).unwrap())
        .service_name(service)
        .build()
        .await
        .unwrap()
}

/// Two locks, in an order that every sort tells apart: `zz:old`, held first, nobody waiting;
/// `aa:busy`, held since later by `checkout` with a label, and waited for by `billing`.
struct Held {
    old: LockGuard,
    busy: LockGuard,
    waiting: JoinHandle<()>,
    /// `checkout@host pid N`, as top names the holder.
    holder: String,
    /// Whether the engine keeps a lease per lock and shows the holder's own fence (Redis,
    /// PostgreSQL), or holds live as long as the session and fences come in blocks
    /// (ZooKeeper, etcd).
    per_lock: bool,
}

async fn hold_two_locks(url: &str) -> Held {
    let app = locker(url, "checkout").await;
    let other = locker(url, "billing").await;
    let lease = Duration::from_secs(20);
    let old = app.lock("zz:old").lease(lease).acquire().await.unwrap();
    // Held since a later time on this clock, by a margin the age column shows (tenths).
    let since = app.inspect("zz:old").await.unwrap().holders[0]
        .since
        .unwrap();
    while SystemTime::now() < since + Duration::from_millis(300) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = app
        .lock("aa:busy")
        .label("req-7f3a")
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let _ = other
            .lock("aa:busy")
            .wait(Duration::from_secs(60))
            .acquire()
            .await;
    });
    let deadline = Instant::now() + RUN_LIMIT;
    while app.inspect("aa:busy").await.unwrap().waiting_processes != 1 {
        assert!(
            Instant::now() < deadline,
            "billing never queued for aa:busy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let d = app.description();
    Held {
        old,
        busy,
        waiting,
        holder: format!("checkout@{} pid {}", d.host, d.pid),
        per_lock: !url.starts_with("zookeeper:") && !url.starts_with("etcd:"),
    }
}

impl Held {
    /// Checks the rows of `aa:busy` and `zz:old` in a table or on the screen.
    fn assert_rows(&self, busy: &[String], old: &[String]) {
        assert_eq!(busy[0], "aa:busy");
        // Redis and PostgreSQL show the holder's fence; ZooKeeper and etcd the top of its
        // block of fences, at or above it.
        let fence = |row: &[String]| row[3].parse::<u64>().unwrap();
        if self.per_lock {
            assert_eq!(fence(busy), self.busy.fence(), "FENCE: {busy:?}");
            assert_eq!(fence(old), self.old.fence(), "FENCE: {old:?}");
        } else {
            assert!(fence(busy) >= self.busy.fence(), "FENCE: {busy:?}");
            assert!(fence(old) >= self.old.fence(), "FENCE: {old:?}");
        }
        assert_eq!(busy[4], "1", "WAITING: {busy:?}");
        assert_eq!(busy[7], "req-7f3a", "LABEL: {busy:?}");
        assert_eq!(busy[8], self.holder, "HOLDER: {busy:?}");
        assert_eq!(old[0], "zz:old");
        assert_eq!(old[4], "0", "WAITING: {old:?}");
        assert_eq!(old[7], "-", "LABEL: {old:?}");
        assert_eq!(old[8], self.holder, "HOLDER: {old:?}");
        for row in [busy, old] {
            if self.per_lock {
                let lease: f64 = row[2].strip_suffix('s').unwrap().parse().unwrap();
                assert!((0.1..=20.0).contains(&lease), "LEASE: {row:?}");
            } else {
                assert_eq!(row[2], "session", "LEASE: {row:?}");
            }
            assert!(row[1].ends_with('s'), "AGE: {row:?}");
        }
    }

    async fn release(self) {
        self.waiting.abort();
        self.old.release().await.unwrap();
        self.busy.release().await.unwrap();
    }
}

#[tokio::test]
async fn plain_tables_show_the_held_locks_and_who_holds_and_waits() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let held = hold_two_locks(&url).await;

        let out = run(&["top", "--once", "--url", &url]).await;
        out.assert_code(0);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 4, "a summary, a header and two rows: {out:#?}");
        let summary = lines[0];
        let stamp = summary.split_whitespace().next().unwrap();
        assert!(
            stamp.len() == 24 && stamp.as_bytes()[10] == b'T' && stamp.ends_with('Z'),
            "a UTC timestamp first: {summary:?}"
        );
        for part in [
            &format!("  redis {}  ", srv.addr()),
            "  prefix \"leasehold\"  ",
            "  health connected  ",
            "  2 held  ",
            "  acq/s -  ",
            "  sort age",
        ] {
            assert!(summary.contains(part), "{part:?} in {summary:?}");
        }
        let rtt = summary.split("  rtt ").nth(1).unwrap();
        assert!(
            rtt.split_whitespace().next().unwrap().ends_with("ms"),
            "{summary:?}"
        );
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), HEADER);
        // Held longest first: zz:old, then aa:busy.
        let (old, busy) = (cells(lines[2]), cells(lines[3]));
        held.assert_rows(&busy, &old);
        assert_eq!((old[5].as_str(), old[6].as_str()), ("-", "-"));

        // Most waiters first; by key; only what the pattern matches.
        let first_key = |args: &[&str], out: &Output| {
            assert_eq!(out.code, Some(0), "{args:?}: {out:#?}");
            cells(out.stdout.lines().nth(2).expect("a row"))[0].clone()
        };
        for (sort, first) in [
            ("waiters", "aa:busy"),
            ("key", "aa:busy"),
            ("age", "zz:old"),
        ] {
            let args = ["top", "--once", "--sort", sort, "--url", &url];
            assert_eq!(first_key(&args, &run(&args).await), first, "{sort}");
        }
        let out = run(&["top", "zz:*", "--once", "--url", &url]).await;
        assert_eq!(out.stdout.lines().count(), 3, "{out:#?}");
        assert!(out.stdout.contains("  1 held  "), "{out:#?}");
        assert!(out.stdout.contains("  pattern \"zz:*\"  "), "{out:#?}");
        let out = run(&["top", "none:*", "--once", "--url", &url]).await;
        out.assert_code(0);
        assert!(
            out.stdout
                .contains("\nno held locks match \"none:*\" (prefix \"leasehold\")\n"),
            "{out:#?}"
        );

        // Two readings: the rates are known, and blocks are apart.
        let out = run(&["top", "--count", "2", "--interval", "100ms", "--url", &url]).await;
        out.assert_code(0);
        let blocks: Vec<&str> = out.stdout.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{out:#?}");
        assert!(blocks[1].contains("  acq/s 0.0  cont/s 0.0  "), "{out:#?}");

        held.release().await;
    })
    .await;
}

/// A `top` left running, its standard output read line by line.
struct Following {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Following {
    fn start(args: &[&str]) -> Following {
        let mut cmd = command(args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("run the leasehold binary");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Following { child, lines }
    }

    /// The first line from now on for which `wanted` holds.
    async fn line(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + RUN_LIMIT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) if wanted(&line) => return line,
                Ok(Some(_)) => {}
                Ok(None) => panic!("top ended before {what}"),
                Err(_) => panic!("no {what} within {RUN_LIMIT:?}"),
            }
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_new_hold_between_readings_counts_as_an_acquisition_and_a_hand_over_as_contended() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let app = locker(&url, "checkout").await;
        let other = locker(&url, "billing").await;
        let first = app.lock("order:7").acquire().await.unwrap();
        let waiter = tokio::spawn(async move {
            other
                .lock("order:7")
                .lease(Duration::from_secs(20))
                .wait(Duration::from_secs(30))
                .acquire()
                .await
                .unwrap()
        });
        let deadline = Instant::now() + RUN_LIMIT;
        while app.inspect("order:7").await.unwrap().waiting_processes != 1 {
            assert!(Instant::now() < deadline, "billing never queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut top = Following::start(&["top", "--interval", "200ms", "--url", &url]);
        // Seen held with its waiter...
        top.line("a row of order:7 with its waiter", |l| {
            l.starts_with("order:7 ") && cells(l)[4] == "1"
        })
        .await;
        // ...then handed over: a new fence, after a wait.
        let fence = first.fence();
        first.release().await.unwrap();
        let second = waiter.await.unwrap();
        assert_ne!(second.fence(), fence);
        let row = top
            .line("the new hold", |l| {
                l.starts_with("order:7 ") && cells(l)[3] == second.fence().to_string()
            })
            .await;
        let row = cells(&row);
        let acquisitions: f64 = row[5].parse().unwrap();
        let contended: f64 = row[6].parse().unwrap();
        assert!(acquisitions > 0.0, "{row:?}");
        assert_eq!(contended, acquisitions, "a hand-over to a waiter: {row:?}");
        assert!(row[8].starts_with("billing@"), "{row:?}");
        let summary = top.line("a summary line", |l| l.contains("  acq/s ")).await;
        assert!(!summary.contains("  acq/s 0.0  "), "{summary:?}");
        second.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_engine_shows_in_the_summary_and_bad_arguments_are_usage_errors() {
    within(async {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("redis://127.0.0.1:{port}");
        // Not a crash: a reading that says why, each interval; exit 3 when the last failed.
        let out = run(&["top", "--count", "2", "--interval", "100ms", "--url", &url]).await;
        out.assert_code(3);
        let blocks: Vec<&str> = out.stdout.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{out:#?}");
        assert!(
            blocks[0].contains("  health suspended, reads failing  rtt -  "),
            "{out:#?}"
        );
        assert!(
            blocks[0].contains(&format!(
                "\nerror: cannot reach redis at 127.0.0.1:{port}: refused the connection"
            )),
            "{out:#?}"
        );
        assert!(blocks[1].contains("reads failing"), "{out:#?}");

        for (args, message) in [
            (
                &["top", "--sort", "size"][..],
                "--sort \"size\" is not an order",
            ),
            (&["top", "--once", "--count", "2"], "given twice"),
            (&["top", "--count", "0"], "above zero"),
            (&["top", "a*", "b*"], "`top` takes one pattern, got 2"),
            (&["top", "--force"], "`top` has no option --force"),
            (&["list", "--plain"], "`list` has no option --plain"),
        ] {
            let out = run(args).await;
            assert_eq!(out.code, Some(2), "{args:?}: {out:#?}");
            assert!(out.stderr.contains(message), "{args:?}: {out:#?}");
            assert!(out.stdout.is_empty(), "{args:?}: {out:#?}");
        }
        let out = run(&["top", "--help"]).await;
        out.assert_code(0);
        assert!(out.stdout.contains("lower bound"), "{out:#?}");
    })
    .await;
}

/// A tmux server of the test's own (its own socket), gone when dropped.
struct Tmux {
    socket: PathBuf,
    config: PathBuf,
}

static SOCKETS: AtomicU32 = AtomicU32::new(0);

impl Tmux {
    /// Starts `leasehold top ARGS` in a 160x40 tmux pane that stays when it exits, after
    /// which the pane shows `stty -a` and the exit status.
    fn start(args: &[&str]) -> Tmux {
        let n = SOCKETS.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("leasehold-top-{}-{n}", std::process::id()));
        let (socket, config) = (base.with_extension("sock"), base.with_extension("conf"));
        std::fs::write(&config, "set-option -g remain-on-exit on\n").unwrap();
        let tmux = Tmux { socket, config };
        let quoted: Vec<String> = std::iter::once(BIN)
            .chain(std::iter::once("top"))
            .chain(args.iter().copied())
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect();
        let script = format!(
            "{}; status=$?; stty -a; echo \"top exited with status $status\"",
            quoted.join(" ")
        );
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "160",
            "-y",
            "40",
            &script,
        ]);
        tmux
    }

    /// Runs a tmux command on this server; its output.
    fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).arg("-f").arg(&self.config);
        cmd.args(args);
        without_leasehold_env(&mut cmd);
        let out = cmd
            .output()
            .expect("tmux runs (scripts/ensure-tmux installs it)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    /// Polls the pane until `wanted` holds of it; the screen then.
    async fn screen_until(&self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + RUN_LIMIT;
        loop {
            let screen = self.screen();
            if wanted(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen did not show {what} within {RUN_LIMIT:?}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", "top", keys]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.config);
    }
}

/// The line of the screen that starts with `key`, as cells.
fn row_of(screen: &str, key: &str) -> Option<(usize, Vec<String>)> {
    screen
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with(&format!("{key} ")))
        .map(|(i, l)| (i, cells(l)))
}

/// Runs the screen against the engine at `url` (named `engine` in the top line) with two
/// locks held: the rows and the top line, `w` sorting by waiters, `q` quitting and giving the
/// terminal back.
async fn the_screen_shows_the_locks_sorts_and_quits(url: &str, engine: &str) {
    let held = hold_two_locks(url).await;
    let tmux = Tmux::start(&["--url", url]);
    let both = |s: &str| row_of(s, "aa:busy").is_some() && row_of(s, "zz:old").is_some();
    let screen = tmux
        .screen_until("both locks, read twice", |s| {
            both(s) && !s.contains("acq/s -")
        })
        .await;
    let top = screen.lines().next().unwrap();
    for part in [
        "leasehold top",
        &format!("  {engine}  "),
        "  health connected  ",
        "  2 held  ",
        "  acq/s 0.0  cont/s 0.0  ",
        "  sort age",
    ] {
        assert!(top.contains(part), "{part:?} in the top line:\n{screen}");
    }
    let header = screen
        .lines()
        .find(|l| l.starts_with("KEY "))
        .unwrap_or_else(|| panic!("a header:\n{screen}"));
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), HEADER);
    let (busy_at, busy) = row_of(&screen, "aa:busy").unwrap();
    let (old_at, old) = row_of(&screen, "zz:old").unwrap();
    held.assert_rows(&busy, &old);
    assert!(old_at < busy_at, "held longest first:\n{screen}");
    assert!(
        screen.contains("sort: age  [a]ge [w]aiters [k]ey  [q]uit"),
        "{screen}"
    );

    tmux.keys("w");
    let screen = tmux
        .screen_until("the rows sorted by waiters", |s| {
            s.contains("sort: waiters")
                && both(s)
                && row_of(s, "aa:busy").unwrap().0 < row_of(s, "zz:old").unwrap().0
        })
        .await;
    assert!(
        screen.lines().next().unwrap().contains("  sort waiters"),
        "{screen}"
    );

    tmux.keys("q");
    let screen = tmux
        .screen_until("top gone", |s| s.contains("top exited with status"))
        .await;
    assert!(screen.contains("top exited with status 0"), "{screen}");
    // Off the alternate screen, out of raw mode: the shell's own settings are back.
    assert!(!screen.contains("WAITING"), "the table is gone:\n{screen}");
    assert_eq!(
        tmux.run(&["display-message", "-p", "-t", "top", "#{alternate_on}"])
            .trim(),
        "0"
    );
    let stty: Vec<&str> = screen.split_whitespace().collect();
    for setting in ["icanon", "echo", "isig"] {
        assert!(
            stty.contains(&setting) && !stty.contains(&format!("-{setting}").as_str()),
            "{setting} is on again:\n{screen}"
        );
    }
    held.release().await;
}

#[tokio::test]
async fn the_screen_on_redis() {
    within(async {
        let srv = RedisServer::start().await;
        the_screen_shows_the_locks_sorts_and_quits(&srv.url(), &format!("redis {}", srv.addr()))
            .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_on_postgres() {
    within(async {
        let pg = PgServer::start().await;
        the_screen_shows_the_locks_sorts_and_quits(&pg.url(), &format!("postgres {}", pg.addr()))
            .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_on_etcd() {
    within(async {
        let etcd = EtcdServer::start().await;
        let url = format!("etcd://{}", etcd.addr());
        the_screen_shows_the_locks_sorts_and_quits(&url, &format!("etcd {}", etcd.addr())).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_on_zookeeper() {
    within(async {
        let zk = ZkServer::start().await;
        let url = format!("zookeeper://{}", zk.addr());
        the_screen_shows_the_locks_sorts_and_quits(&url, &format!("zookeeper {}", zk.addr())).await;
    })
    .await;
}
