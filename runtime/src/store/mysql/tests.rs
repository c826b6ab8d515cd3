//! The engine against a real MariaDB that these tests start (one server for the test binary,
//! in a fresh directory on a free port, a database of its own for each test; it ends with the
//! test process). The conformance suite of the test crate covers every property of every
//! primitive; these check the engine's own parts: the schema, fences, the guard row of fenced
//! transactions, the wake log, settlements, renewals, and the parts that need no server.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::schema::{statements, SCHEMA};
use super::text::{check_prefix, hex, public_of, user_key_of};
use super::url::validate;
use crate::store::keys::LockKeys;
use crate::Locker;

/// One MariaDB for the test binary: its port and the root password.
struct Server {
    port: u16,
}

/// The server, started on first use. It runs under a shell that ends it when the test process
/// ends (the shell's standard input, a pipe this process holds, then reaches its end).
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("leasehold-mysql-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data");
        let install = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("mariadb-install-db (Debian's mariadb-server) must be installed");
        assert!(install.success(), "mariadb-install-db failed");
        let port = free_port();
        let root = if std::env::var("USER").as_deref() == Ok("root") || is_root() {
            "--user=root"
        } else {
            ""
        };
        let script = format!(
            "mariadbd --no-defaults {root} --datadir={data} --port={port} \
             --bind-address=127.0.0.1 --socket={dir}/s.sock --skip-networking=0 \
             --log-bin={dir}/bin --server-id=1 --innodb-buffer-pool-size=32M \
             >{dir}/log.txt 2>&1 & pid=$!; read _; kill -9 $pid; rm -rf {dir}",
            data = data.display(),
            dir = dir.display(),
        );
        let mut shell = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        // Held until the process ends: its end closes the pipe, which ends the server.
        let stdin = shell.stdin.take().expect("piped");
        std::mem::forget(stdin);
        std::mem::forget(shell);
        let started = std::time::Instant::now();
        loop {
            let up = Command::new("mariadb")
                .args([
                    "--no-defaults",
                    "-uroot",
                    "-h127.0.0.1",
                    &format!("-P{port}"),
                ])
                .args(["-e", "SELECT 1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if up {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "MariaDB did not start: see {}/log.txt",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Server { port }
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// A fresh database and a user of its own that may create the schema in it: its URL.
    fn database(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let db = format!("t{n}");
        self.root(&format!(
            "CREATE DATABASE {db}; CREATE USER u{n}@'%' IDENTIFIED BY 'pw{n}'; \
             GRANT ALL ON {db}.* TO u{n}@'%';"
        ));
        format!("mysql://u{n}:pw{n}@127.0.0.1:{}/{db}", self.port)
    }

    fn root(&self, sql: &str) {
        let mut child = Command::new("mariadb")
            .args([
                "--no-defaults",
                "-uroot",
                "-h127.0.0.1",
                &format!("-P{}", self.port),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "{sql}");
    }
}

fn builder(url: &str) -> crate::LockerBuilder {
    Locker::builder()
        .mysql(url)
        .prefix("myt")
        .op_timeout(Duration::from_secs(2))
}

async fn locker(url: &str) -> Locker {
    builder(url).build().await.expect("locker on MariaDB")
}

/// A connection of the test's own, as the user's application would have.
async fn client(url: &str) -> mysql_async::Conn {
    mysql_async::Conn::from_url(url).await.expect("connect")
}

#[test]
fn the_schema_splits_as_the_client_splits_it() {
    let all = statements(SCHEMA);
    let procedures = all
        .iter()
        .filter(|s| s.trim_start().starts_with("CREATE PROCEDURE"))
        .count();
    assert_eq!(procedures, SCHEMA.matches("\nCREATE PROCEDURE ").count());
    assert!(procedures > 20, "{procedures}");
    assert!(all.iter().all(|s| !s.contains("DELIMITER")));
    assert!(all.iter().all(|s| !s.trim_end().ends_with(";;")));
}

#[test]
fn the_schema_bounds_fenced_transactions_by_the_documented_margin() {
    let margin = super::sql::FENCED_IDLE_MARGIN.as_millis();
    assert!(SCHEMA.contains(&format!("+ {margin} * 1000")));
}

#[test]
fn keys_and_owners_round_trip() {
    let keys = LockKeys::new("p", "a\0b%00{c} ");
    assert_eq!(
        user_key_of(keys.lock().as_bytes(), "p:lock:{").as_deref(),
        Some("a\0b%00{c} ")
    );
    assert_eq!(hex(b"\0\xff a"), "00ff2061");
    let token = format!("h1.x.1.l.{}", "0".repeat(32));
    assert_eq!(public_of(token.as_bytes()), "h1.x.1.l.");
    assert_eq!(public_of(b"R"), "");
    // Bytes are stored as given: every prefix is its own.
    assert!(check_prefix("a\0b").is_ok());
}

#[test]
fn urls_are_checked_without_showing_passwords() {
    for bad in ["redis://localhost", "mysql://u:s3cret@h:notaport/db"] {
        let e = validate(bad).unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
    assert!(validate("mysql://u:pw@127.0.0.1:3306/db").is_ok());
    assert!(validate("mariadb://u:pw@127.0.0.1/db").is_ok());
}

/// Lockers starting together on an empty database: one creates the schema, the others wait
/// for it under the named lock, and all of them work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockers_starting_together_create_the_schema_once() {
    let url = server().database();
    let lockers = futures_join(4, || locker(&url)).await;
    let guard = lockers[0].lock("k").acquire().await.unwrap();
    assert!(lockers[1].lock("k").try_acquire().await.unwrap().is_none());
    guard.release().await.unwrap();
    assert!(lockers[2].lock("k").try_acquire().await.unwrap().is_some());
}

async fn futures_join<F, Fut, T>(n: usize, f: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    crate::store::join_all((0..n).map(|_| f())).await
}

/// A lock is exclusive, its fences increase, and a released lock is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_exclusive_and_its_fences_increase() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let mut last = 0;
    for _ in 0..5 {
        let guard = a.lock("x").acquire().await.unwrap();
        assert!(guard.fence() > last, "{} after {last}", guard.fence());
        last = guard.fence();
        assert!(b.lock("x").try_acquire().await.unwrap().is_none());
        guard.release().await.unwrap();
    }
    let other = b.lock("x").try_acquire().await.unwrap().expect("free");
    assert!(other.fence() > last);
}

/// A waiter in another locker is woken by the wake log when the holder releases, and gets
/// the lock: judged by what the store saw (the waiter's guard comes after the release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_in_another_process_is_woken_by_a_release() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let held = a.lock("w").acquire().await.unwrap();
    let fence = held.fence();
    let waiter = tokio::spawn(async move {
        b.lock("w")
            .wait(Duration::from_secs(30))
            .lease(Duration::from_secs(60))
            .acquire()
            .await
            .map(|g| g.fence())
    });
    // The waiter is in line once the store shows it.
    loop {
        let state = a.inspect("w").await.unwrap();
        if state.waiting_processes > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.release().await.unwrap();
    let got = waiter.await.unwrap().expect("the waiter got the lock");
    assert!(got > fence);
}

/// Leases are renewed by the watchdog: a lock held far past its lease is still its holder's,
/// and nobody else gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_leases() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let guard = a
        .lock("r")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    let read = a
        .read_lock("rr")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(guard.is_held() && read.is_held());
    assert!(b.lock("r").try_acquire().await.unwrap().is_none());
    assert!(b.write_lock("rr").try_acquire().await.unwrap().is_none());
}

/// Readers share, a writer waits for them; a semaphore admits its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_semaphores_count() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let r1 = a.read_lock("rw").acquire().await.unwrap();
    let r2 = b.read_lock("rw").acquire().await.unwrap();
    let last = r2.fence();
    assert!(r1.fence() < last);
    assert!(b.write_lock("rw").try_acquire().await.unwrap().is_none());
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let w = b
        .write_lock("rw")
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    assert!(w.fence() > last);
    let p1 = a
        .semaphore("s", 2)
        .try_acquire()
        .await
        .unwrap()
        .expect("first");
    let _p2 = b
        .semaphore("s", 2)
        .try_acquire()
        .await
        .unwrap()
        .expect("second");
    assert!(a.semaphore("s", 2).try_acquire().await.unwrap().is_none());
    let state = a.inspect_semaphore("s").await.unwrap();
    assert_eq!(state.holders.len(), 2);
    p1.release().await.unwrap();
    assert!(a.semaphore("s", 2).try_acquire().await.unwrap().is_some());
}

/// A transaction that checked the holder's fence keeps everybody else out, even past the
/// lease, until it ends; renewals and releases are not held up by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_transaction_keeps_the_lock_from_others_until_it_ends() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let guard = a
        .lock("f")
        .lease(Duration::from_millis(500))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let key = LockKeys::new("myt", "f").lock().to_owned();
    let mut conn = client(&url).await;
    conn.query_drop("START TRANSACTION").await.unwrap();
    let holds: Option<i64> = conn
        .exec_first(super::sql::CHECK_FENCE, (key.clone(), guard.fence() as i64))
        .await
        .unwrap();
    assert_eq!(holds, Some(1));
    let stale: Option<i64> = conn
        .exec_first(
            super::sql::CHECK_FENCE,
            (key.clone(), guard.fence() as i64 - 1),
        )
        .await
        .unwrap();
    assert_eq!(stale, Some(0), "an earlier fence passed");
    // The lease ends; while the transaction is open nobody takes the lock over.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(b.lock("f").try_acquire().await.unwrap().is_none());
    conn.query_drop("COMMIT").await.unwrap();
    let next = b.lock("f").try_acquire().await.unwrap().expect("free");
    assert!(next.fence() > guard.fence());
    // The old holder's fence no longer passes.
    let holds: Option<i64> = conn
        .exec_first(super::sql::CHECK_FENCE, (key, guard.fence() as i64))
        .await
        .unwrap();
    assert_eq!(holds, Some(0));
}

/// Renewals and releases never wait for a checked transaction (they leave the guard row
/// alone): a holder inside a long transaction keeps its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_transaction_never_blocks_renewals() {
    let url = server().database();
    let a = locker(&url).await;
    let guard = a
        .lock("g")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    let key = LockKeys::new("myt", "g").lock().to_owned();
    let mut conn = client(&url).await;
    conn.query_drop("START TRANSACTION").await.unwrap();
    let holds: Option<i64> = conn
        .exec_first(super::sql::CHECK_FENCE, (key, guard.fence() as i64))
        .await
        .unwrap();
    assert_eq!(holds, Some(1));
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(
        guard.is_held(),
        "the lease was lost while a checked transaction was open"
    );
    conn.query_drop("COMMIT").await.unwrap();
    guard.release().await.unwrap();
}

/// After the tables went back (a restore from an older backup: every guard row, the floor and
/// the lock rows gone), fences still increase: they follow the server's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_increasing_after_the_tables_went_back() {
    let url = server().database();
    let a = locker(&url).await;
    let mut last = 0;
    for _ in 0..40 {
        let guard = a.lock("h").acquire().await.unwrap();
        last = guard.fence();
        guard.release().await.unwrap();
    }
    let mut conn = client(&url).await;
    conn.query_drop(
        "DELETE FROM leasehold_guards; UPDATE leasehold_floor SET slot = 0; \
         DELETE FROM leasehold_locks",
    )
    .await
    .unwrap();
    let guard = a.lock("h").acquire().await.unwrap();
    assert!(guard.fence() > last, "{} after {last}", guard.fence());
}

/// A session whose call's outcome is unknown is ended from another connection and confirmed
/// gone, and a transaction it had open is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_ends_the_session_and_rolls_back_its_transaction() {
    let url = server().database();
    let store = super::MysqlStore::connect(&url, &settings()).await.unwrap();
    let mut stalled = client(&url).await;
    stalled
        .query_drop("START TRANSACTION; INSERT INTO leasehold_lockers VALUES ('x', 'y', 0)")
        .await
        .unwrap();
    let id = stalled.id();
    store.pool.settle(id).wait().await;
    let mut conn = client(&url).await;
    let there: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"
        ))
        .await
        .unwrap();
    assert_eq!(there, Some(0));
    let rows: Option<i64> = conn
        .query_first("SELECT COUNT(*) FROM leasehold_lockers WHERE locker = 'x'")
        .await
        .unwrap();
    assert_eq!(rows, Some(0));
    assert!(stalled.query_drop("SELECT 1").await.is_err());
}

/// Operators see holders and waiters, list the locks of a prefix, and force a release that
/// wakes a waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_inspect_list_and_force_release() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let guard = a.lock("o 1").acquire().await.unwrap();
    let _other = a.lock("o\0 2").acquire().await.unwrap();
    let state = b.inspect("o 1").await.unwrap();
    assert!(state.held);
    assert_eq!(state.last_fence, Some(guard.fence()));
    let held = b.list_held("*").await.unwrap();
    let mut keys: Vec<&str> = held.iter().map(|l| l.key.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["o\0 2", "o 1"]);
    assert!(b.force_release("o 1").await.unwrap());
    assert!(!b.inspect("o 1").await.unwrap().held);
    assert!(b.lock("o 1").try_acquire().await.unwrap().is_some());
}

/// A leader is elected with its term as fence, observers see it, and it resigns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_is_elected_and_observed() {
    let url = server().database();
    let (a, b) = (locker(&url).await, locker(&url).await);
    let leader = a.leader("e").campaign().await.unwrap();
    let mut observer = b.observe_leader("e").unwrap();
    let seen = observer.next().await.unwrap().expect("a leader");
    assert_eq!(seen.term(), leader.term());
    leader.resign().await.unwrap();
}

/// MySQL's names of an owner: the rows it keys, by table (`leasehold_waiters` is shared by
/// locks and semaphores; each row is found by the SHA-256 of these bytes), and its wake key in
/// the wake log. A lock's guard row is keyed as its row.
fn mysql_names(owner: &crate::store::apart::Owner) -> Vec<String> {
    use crate::store::apart::Owner;
    let row = |table: &str, key: &str| format!("{table} {key}");
    let Some(keys) = owner.keys() else {
        let Owner::Locker { id, .. } = owner else {
            unreachable!("a primitive has keys")
        };
        return vec![format!("leasehold_lockers {id}")];
    };
    let mut rows = match owner {
        Owner::Semaphore { .. } => vec![
            row("leasehold_semaphores", keys.lock()),
            row("leasehold_permits", keys.lock()),
        ],
        _ => vec![
            row("leasehold_locks", keys.lock()),
            row("leasehold_guards", keys.lock()),
            row("leasehold_readers", keys.lock()),
        ],
    };
    rows.push(row("leasehold_waiters", keys.lock()));
    rows.push(row("leasehold_wakes", keys.wake()));
    rows.extend(owner.record().map(|r| row("leasehold_leaders", &r)));
    rows
}

proptest::proptest! {
    /// Every stored name of every primitive is its own on MySQL: bytes are stored as given,
    /// so every accepted prefix is apart (no escape makes two prefixes meet).
    #[test]
    fn mysql_names_are_apart(owners in crate::store::apart::owners()) {
        use crate::store::apart::{check_apart, Clash};
        check_apart(&owners, mysql_names, Clash::Equal, |o| o.accepted())?;
    }
}

/// Found by the conformance suite's transfers: an acquire that found no row locked nothing, and
/// took the guard only after another acquire had inserted the row and committed; it then took
/// the row over from the live holder. Acquires of a free key (whose guard row is there from an
/// earlier hold) race here on every pooled connection at once, many rounds, and only one may
/// win each round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_acquires_of_a_free_key_grant_it_once() {
    use crate::store::token::OwnerToken;
    use crate::store::{AcquireRequest, Attempt, Store};
    let url = server().database();
    let store = super::MysqlStore::connect(&url, &settings()).await.unwrap();
    let keys = LockKeys::new("myt", "race");
    let tokens: Vec<OwnerToken> = (0..super::pool::POOL)
        .map(|_| OwnerToken::generate())
        .collect();
    let request = |token| AcquireRequest {
        keys: &keys,
        token,
        lease: Duration::from_secs(30),
        validity: Duration::from_secs(30),
        sent: tokio::time::Instant::now(),
        fence_ttl: Duration::from_secs(60),
        fences: 1,
        interest: Duration::ZERO,
        queued: false,
        contender: None,
        fenced: true,
        kind: crate::store::kind::LeaseKind::Exclusive,
        waiter: None,
    };
    let requests: Vec<AcquireRequest<'_>> = tokens.iter().map(request).collect();
    for round in 0..200 {
        let store: &dyn Store = &store;
        let answers = crate::store::join_all(requests.iter().map(|r| store.acquire_one(r))).await;
        let won: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a, Ok(Attempt::Granted { .. })))
            .map(|(i, _)| i)
            .collect();
        assert!(
            won.len() <= 1,
            "round {round}: {won:?} hold the lock at once"
        );
        for i in won {
            let until = tokio::time::Instant::now() + Duration::from_secs(10);
            let kind = crate::store::kind::LeaseKind::Exclusive;
            let ending = crate::store::Ending::Release {
                kind,
                valid_until: until,
            };
            let ended = store.release(&keys, &tokens[i], ending).await.unwrap();
            assert_eq!(ended, crate::store::Ended::Released(true));
        }
    }
}

fn settings() -> crate::store::Settings {
    crate::store::Settings {
        op_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(5),
        locker_id: "test".into(),
    }
}

/// The sweep deletes what nobody holds (leases that ended, guard rows of keys unused for ten
/// minutes, raising the floor to their slots), keeps what is held, and trims the wake log in
/// rounds until it is done (more rows than one round deletes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_deletes_what_nobody_holds() {
    let url = server().database();
    let a = locker(&url).await;
    let held = a.lock("kept").acquire().await.unwrap();
    let mut conn = client(&url).await;
    let now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    conn.query_drop(format!(
        "INSERT INTO leasehold_locks VALUES \
         (UNHEX(SHA2('gone1', 256)), 'gone1', 'o', 32, {now} - 10000000), \
         (UNHEX(SHA2('gone2', 256)), 'gone2', 'o', 32, {now} - 10000000); \
         INSERT INTO leasehold_guards VALUES (UNHEX(SHA2('old', 256)), 1000000000000000, 0); \
         UPDATE leasehold_guards SET used = 0 WHERE id = UNHEX(SHA2('myt:lock:{{kept}}', 256)); \
         INSERT INTO leasehold_wakes (wake, to_name, at) SELECT 'w', NULL, 0 \
         FROM information_schema.COLUMNS AS a, information_schema.COLUMNS AS b LIMIT 25000"
    ))
    .await
    .unwrap();
    conn.exec_drop(super::sql::SWEEP, (60_000i64,))
        .await
        .unwrap();
    let counts: (i64, i64, i64, i64, i64) = conn
        .query_first(
            "SELECT (SELECT COUNT(*) FROM leasehold_locks), \
             (SELECT COUNT(*) FROM leasehold_wakes), \
             (SELECT COUNT(*) FROM leasehold_guards WHERE slot = 1000000000000000), \
             (SELECT COUNT(*) FROM leasehold_guards), \
             (SELECT slot FROM leasehold_floor)",
        )
        .await
        .unwrap()
        .unwrap();
    let (locks, wakes, old_guards, guards, floor) = counts;
    assert_eq!((locks, wakes, old_guards), (1, 0, 0));
    assert_eq!(guards, 1, "the held key's guard");
    assert!(floor >= 1_000_000_000_000_000, "{floor}");
    assert!(held.is_held());
    // Fences drawn from now on are above the deleted guard's slot.
    let other = a.lock("old-key").acquire().await.unwrap();
    assert!(other.fence() > 1_000_000_000_000_000 * 32);
}

/// A call whose caller stopped polling it while its statement ran (a dropped `inspect`, say)
/// leaves its connection in the middle of a reply: the pool never hands that connection to
/// another call, which would read the first one's answer as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_mid_statement_leaves_no_connection_mid_reply() {
    use mysql_async::prelude::Queryable;
    let url = server().database();
    let store = super::MysqlStore::connect(&url, &settings()).await.unwrap();
    let slow = store.pool.call("a slow call", |conn| {
        Box::pin(async move {
            conn.exec_first::<i64, _, _>("SELECT ? + SLEEP(2)", (99,))
                .await
        })
    });
    // Dropped once the statement is on its way (the pool's connections are open already).
    assert!(tokio::time::timeout(Duration::from_millis(300), slow)
        .await
        .is_err());
    // Every slot in turn: each answers its own statement.
    for n in 0..2 * super::pool::POOL as i64 {
        let got = store
            .pool
            .call("a quick call", move |conn| {
                Box::pin(async move { conn.exec_first::<i64, _, _>("SELECT ?", (n,)).await })
            })
            .await;
        assert_eq!(
            got.ok().flatten(),
            Some(n),
            "call {n} read another call's answer"
        );
    }
}
