//! Tests of the PostgreSQL harness against real servers: that a server answers as itself, that
//! committed rows survive a crash and an orderly restart, that a pause freezes every backend, and
//! that nothing is left behind (processes, directory, shared memory), and a server with TLS only.
//!
//! Run `scripts/ensure-postgres` first (it installs Debian's `postgresql` when missing).

use std::future::Future;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use leasehold_tests::harness::{PgOptions, PgServer};
use tokio::time::timeout;

/// Every test body runs under this bound, so a harness bug fails the test instead of hanging CI.
async fn bounded<F: Future<Output = ()>>(test: F) {
    timeout(Duration::from_secs(120), test)
        .await
        .expect("the test did not finish within 120s");
}

/// `[[Some(value)]]`: what `execute` gives for one row of one column.
fn one(value: &str) -> Vec<Vec<Option<String>>> {
    vec![vec![Some(value.to_owned())]]
}

/// The state letter of `pid` in `/proc/<pid>/stat`; `None` once it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Whether `pid` runs (or is stopped): it exists and is no zombie.
fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// The real uid of `pid`.
fn uid_of(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The System V shared memory segment ids that exist now.
fn shm_ids() -> Vec<String> {
    std::fs::read_to_string("/proc/sysvipc/shm")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

/// The shared memory segment id the running postmaster wrote into its lock file.
fn shm_id_of(pg: &PgServer) -> String {
    let lock = std::fs::read_to_string(pg.dir().join("data/postmaster.pid")).unwrap();
    lock.lines()
        .nth(6)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn start_answers_select_1_as_itself() {
    bounded(async {
        let pg = PgServer::start().await;
        assert_eq!(pg.execute("SELECT 1").await.unwrap(), one("1"));

        let config = tokio_postgres::Config::from_str(&pg.url()).unwrap();
        assert_eq!(config.get_ports(), [pg.port()]);
        assert_eq!(config.get_user(), Some("postgres"));
        assert_eq!(pg.addr().port(), pg.port());

        // The server is the one in our directory, answering on TCP and our own socket only.
        let data_dir = pg.execute("SHOW data_directory").await.unwrap();
        assert_eq!(data_dir, one(pg.dir().join("data").to_str().unwrap()));
        let sockets = pg.execute("SHOW unix_socket_directories").await.unwrap();
        assert_eq!(sockets, one(pg.dir().to_str().unwrap()));
        assert!(pg.dir().join(format!(".s.PGSQL.{}", pg.port())).exists());
        assert_eq!(pg.execute("SHOW fsync").await.unwrap(), one("off"));
        assert_eq!(
            pg.execute("SHOW max_connections").await.unwrap(),
            one("200")
        );

        // PostgreSQL refuses root, so a root test binary runs it as somebody else.
        let postmaster = pg.pid().expect("it runs");
        assert_ne!(uid_of(postmaster), 0, "postgres runs as root");
        // SAFETY: a plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            // SAFETY: a plain syscall.
            assert_eq!(uid_of(postmaster), unsafe { libc::getuid() });
        }
        assert!(
            !pg.child_pids().is_empty(),
            "no checkpointer, WAL writer, ..."
        );
        assert!(pg.log_path().starts_with(pg.dir()));
        assert!(pg.log_tail().contains("ready to accept connections"));
    })
    .await;
}

#[tokio::test]
async fn committed_rows_survive_kill9_and_restart() {
    bounded(async {
        let pg = PgServer::start().await;
        pg.execute("CREATE TABLE leases (name text PRIMARY KEY, fence bigint)")
            .await
            .unwrap();
        pg.execute("INSERT INTO leases VALUES ('shop', 7)")
            .await
            .unwrap();
        // A session open across the crash: its backend must die with the postmaster.
        let session = pg.connect().await.unwrap();
        session.simple_query("SELECT 1").await.unwrap();
        let old_postmaster = pg.pid().unwrap();
        let old_children = pg.child_pids();
        assert!(old_children.len() >= 2, "{old_children:?}");

        pg.kill9();
        assert_eq!(pg.pid(), None);
        assert!(!alive(old_postmaster));
        for pid in &old_children {
            assert!(!alive(*pid), "backend {pid} outlived kill9");
        }
        assert!(
            pg.execute("SELECT 1").await.is_err(),
            "a killed server answered"
        );

        pg.restart().await;
        assert_ne!(pg.pid(), Some(old_postmaster));
        assert_eq!(
            pg.execute("SELECT fence FROM leases WHERE name = 'shop'")
                .await
                .unwrap(),
            one("7")
        );
        assert!(
            pg.log_tail().contains("automatic recovery in progress"),
            "no crash recovery after kill9:\n{}",
            pg.log_tail()
        );
        assert!(session.simple_query("SELECT 1").await.is_err());

        // restart() kills a running server too.
        pg.execute("UPDATE leases SET fence = 8").await.unwrap();
        pg.restart().await;
        assert_eq!(
            pg.execute("SELECT fence FROM leases").await.unwrap(),
            one("8")
        );
    })
    .await;
}

#[tokio::test]
async fn committed_rows_survive_a_fast_restart_without_recovery() {
    bounded(async {
        let pg = PgServer::start().await;
        pg.execute("CREATE TABLE leases (name text); INSERT INTO leases VALUES ('shop')")
            .await
            .unwrap();
        let old_postmaster = pg.pid().unwrap();

        pg.restart_fast().await;
        assert_ne!(pg.pid(), Some(old_postmaster));
        assert!(!alive(old_postmaster));
        assert_eq!(
            pg.execute("SELECT name FROM leases").await.unwrap(),
            one("shop")
        );
        let log = std::fs::read_to_string(pg.log_path()).unwrap();
        assert!(log.contains("received fast shutdown request"), "{log}");
        assert!(!log.contains("automatic recovery"), "{log}");
    })
    .await;
}

#[tokio::test]
async fn stop_fast_then_start_again() {
    bounded(async {
        let pg = PgServer::start().await;
        pg.execute("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        pg.stop_fast();
        assert_eq!(pg.pid(), None);
        assert!(
            pg.execute("SELECT 1").await.is_err(),
            "a stopped server answered"
        );
        pg.stop_fast(); // stopping a stopped server does nothing

        pg.start_again();
        assert!(pg.pid().is_some());
        pg.wait_until_ready().await;
        assert_eq!(pg.execute("SELECT v FROM t").await.unwrap(), one("1"));
    })
    .await;
}

#[tokio::test]
async fn pause_freezes_every_backend_and_resume_thaws_them() {
    bounded(async {
        let pg = PgServer::start().await;
        let session = pg.connect().await.unwrap();
        session.simple_query("SELECT 1").await.unwrap();

        pg.pause();
        let frozen = pg.child_pids();
        assert!(!frozen.is_empty());
        for pid in frozen.iter().chain(pg.pid().iter()) {
            assert_eq!(state(*pid), Some('T'), "process {pid} is not stopped");
        }
        let bound = Duration::from_millis(500);
        assert!(
            timeout(bound, session.simple_query("SELECT 1"))
                .await
                .is_err(),
            "an open session answered while paused"
        );
        assert!(
            timeout(bound, pg.execute("SELECT 1")).await.is_err(),
            "a new connection answered while paused"
        );

        pg.resume();
        for pid in frozen.iter().chain(pg.pid().iter()) {
            assert_ne!(state(*pid), Some('T'), "process {pid} is still stopped");
        }
        let answer = timeout(Duration::from_secs(5), pg.execute("SELECT 2"))
            .await
            .expect("no answer within 5s of resume");
        assert_eq!(answer.unwrap(), one("2"));
        // The session lived through the pause.
        let rows = session.simple_query("SELECT 3").await.unwrap();
        let values: Vec<Option<&str>> = rows
            .iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(row.get(0)),
                _ => None,
            })
            .collect();
        assert_eq!(values, [Some("3")]);
    })
    .await;
}

#[tokio::test]
async fn two_servers_run_at_once_apart() {
    bounded(async {
        let (a, b) = tokio::join!(PgServer::start(), PgServer::start());
        assert_ne!(a.port(), b.port());
        assert_ne!(a.dir(), b.dir());
        a.execute("CREATE TABLE only_in_a ()").await.unwrap();
        assert_eq!(
            a.execute("SELECT to_regclass('only_in_a') IS NOT NULL")
                .await
                .unwrap(),
            one("t")
        );
        assert_eq!(
            b.execute("SELECT to_regclass('only_in_a') IS NOT NULL")
                .await
                .unwrap(),
            one("f")
        );
        // Killing one leaves the other serving.
        a.kill9();
        assert_eq!(b.execute("SELECT 1").await.unwrap(), one("1"));
    })
    .await;
}

#[tokio::test]
async fn drop_removes_the_directory_processes_and_shared_memory() {
    bounded(async {
        let pg = PgServer::start().await;
        let dir = pg.dir().to_owned();
        let postmaster = pg.pid().unwrap();
        let children = pg.child_pids();
        let segment = shm_id_of(&pg);
        assert!(shm_ids().contains(&segment));
        drop(pg);
        assert!(!Path::new(&dir).exists(), "{} is left", dir.display());
        assert!(!alive(postmaster));
        for pid in children {
            assert!(!alive(pid), "backend {pid} outlived the drop");
        }
        assert!(!shm_ids().contains(&segment), "segment {segment} leaked");

        // Likewise for a server that was killed first, whose crash leaves the segment behind.
        let pg = PgServer::start().await;
        let dir = pg.dir().to_owned();
        let segment = shm_id_of(&pg);
        pg.kill9();
        drop(pg);
        assert!(!Path::new(&dir).exists(), "{} is left", dir.display());
        assert!(!shm_ids().contains(&segment), "segment {segment} leaked");
    })
    .await;
}

#[tokio::test]
async fn a_paused_server_can_be_killed_or_stopped() {
    bounded(async {
        let pg = PgServer::start().await;
        pg.execute("CREATE TABLE t (v int); INSERT INTO t VALUES (5)")
            .await
            .unwrap();
        let _session = pg.connect().await.unwrap();
        pg.pause();
        let frozen = pg.child_pids();
        pg.kill9();
        for pid in frozen {
            assert!(!alive(pid), "paused backend {pid} outlived kill9");
        }
        pg.restart().await;
        assert_eq!(pg.execute("SELECT v FROM t").await.unwrap(), one("5"));

        // A fast shutdown needs the frozen backends thawed to end their sessions.
        let _session = pg.connect().await.unwrap();
        pg.pause();
        pg.stop_fast();
        assert_eq!(pg.pid(), None);
        let log = std::fs::read_to_string(pg.log_path()).unwrap();
        assert!(log.contains("database system is shut down"), "{log}");
    })
    .await;
}

/// A server started with TLS only refuses plain TCP, keeps its TLS setup across a crash
/// restart, and is still reachable by the harness (over its Unix socket).
#[tokio::test]
async fn a_tls_only_server_refuses_plain_tcp_across_restarts() {
    bounded(async {
        let dir = std::env::temp_dir().join(format!("leasehold-pgtls-h-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let pg =
            PgServer::start_with(PgOptions::default().tls(&cert_path, &key_path).tls_only()).await;
        std::fs::remove_dir_all(&dir).unwrap();
        for round in 0..2 {
            assert_eq!(pg.execute("SHOW ssl").await.unwrap(), one("on"), "{round}");
            let plain = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await;
            let e = plain.err().expect("plain TCP is refused");
            assert!(format!("{e:?}").contains("no encryption"), "{e:?}");
            pg.restart().await;
        }
    })
    .await;
}
