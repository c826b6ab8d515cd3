//! Tests of the MariaDB harness against real servers: that a server answers as itself with its
//! database and least-privilege user, that committed rows survive a crash and an orderly
//! restart, that a pause freezes it, that a dump restored brings the older rows back, that
//! nothing is left behind, and a server with TLS only.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use leasehold_tests::harness::{
    MysqlOptions, MysqlServer, MYSQL_DATABASE, MYSQL_PASSWORD, MYSQL_USER,
};
use mysql_async::prelude::Queryable;
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

/// Whether `pid` runs (or is stopped): it exists and is no zombie.
fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
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

#[tokio::test]
async fn start_answers_as_itself_with_a_least_privilege_user() {
    bounded(async {
        let began = Instant::now();
        let db = MysqlServer::start().await;
        eprintln!("mariadb started in {:?}", began.elapsed());
        assert_eq!(db.execute("SELECT 1").await.unwrap(), one("1"));
        assert_eq!(db.addr().port(), db.port());
        assert_eq!(
            db.url(),
            format!(
                "mysql://{MYSQL_USER}:{MYSQL_PASSWORD}@127.0.0.1:{}/{MYSQL_DATABASE}",
                db.port()
            )
        );
        let data_dir = db.execute("SELECT @@datadir").await.unwrap();
        let expected = format!("{}/", db.dir().join("data").display());
        assert_eq!(data_dir, one(&expected));
        assert_eq!(
            db.execute("SELECT @@port, @@bind_address").await.unwrap(),
            vec![vec![
                Some(db.port().to_string()),
                Some("127.0.0.1".to_owned())
            ]]
        );
        assert!(db.socket_path().exists());
        assert!(
            db.log_tail().contains("ready for connections"),
            "{}",
            db.log_tail()
        );

        // The user reaches its database over TCP and may make tables there, nothing more.
        let mut conn = db.connect_as_user().await.unwrap();
        conn.query_drop("CREATE TABLE leases (name VARCHAR(64) PRIMARY KEY)")
            .await
            .unwrap();
        conn.query_drop("INSERT INTO leases VALUES ('shop')")
            .await
            .unwrap();
        let user: Option<String> = conn.query_first("SELECT CURRENT_USER()").await.unwrap();
        assert_eq!(user.as_deref(), Some("leasehold@127.0.0.1"));
        for refused in [
            "CREATE DATABASE other",
            "SELECT * FROM mysql.user",
            "SET GLOBAL max_connections = 10",
        ] {
            let e = conn.query_drop(refused).await.expect_err(refused);
            assert!(format!("{e}").contains("denied"), "{refused}: {e}");
        }
        assert_eq!(
            db.execute("SELECT name FROM leases").await.unwrap(),
            one("shop")
        );
    })
    .await;
}

#[tokio::test]
async fn committed_rows_survive_kill9_and_a_normal_restart() {
    bounded(async {
        let db = MysqlServer::start().await;
        db.execute("CREATE TABLE leases (name VARCHAR(64) PRIMARY KEY, fence BIGINT)")
            .await
            .unwrap();
        db.execute("INSERT INTO leases VALUES ('shop', 7)")
            .await
            .unwrap();
        let mut session = db.connect().await.unwrap();
        session.query_drop("SELECT 1").await.unwrap();
        let old = db.pid().unwrap();

        db.kill9();
        assert_eq!(db.pid(), None);
        assert!(!alive(old));
        assert!(
            db.execute("SELECT 1").await.is_err(),
            "a killed server answered"
        );

        db.restart().await;
        assert_ne!(db.pid(), Some(old));
        assert_eq!(
            db.execute("SELECT fence FROM leases WHERE name = 'shop'")
                .await
                .unwrap(),
            one("7")
        );
        assert!(session.query_drop("SELECT 1").await.is_err());

        db.execute("UPDATE leases SET fence = 8").await.unwrap();
        db.restart_fast().await;
        assert_eq!(
            db.execute("SELECT fence FROM leases").await.unwrap(),
            one("8")
        );
        let log = std::fs::read_to_string(db.log_path()).unwrap();
        assert!(log.contains("Normal shutdown"), "{log}");

        db.stop_fast();
        assert_eq!(db.pid(), None);
        db.start_again();
        db.wait_until_ready().await;
        assert_eq!(
            db.execute("SELECT fence FROM leases").await.unwrap(),
            one("8")
        );
    })
    .await;
}

#[tokio::test]
async fn pause_freezes_the_server_and_resume_thaws_it() {
    bounded(async {
        let db = MysqlServer::start().await;
        let mut session = db.connect_as_user().await.unwrap();
        session.query_drop("SELECT 1").await.unwrap();

        db.pause();
        assert_eq!(state(db.pid().unwrap()), Some('T'));
        let bound = Duration::from_millis(500);
        assert!(
            timeout(bound, session.query_drop("SELECT 1"))
                .await
                .is_err(),
            "an open session answered while paused"
        );
        drop(session);
        assert!(
            timeout(bound, db.execute("SELECT 1")).await.is_err(),
            "a new connection answered while paused"
        );

        db.resume();
        assert_ne!(state(db.pid().unwrap()), Some('T'));
        let answer = timeout(Duration::from_secs(5), db.execute("SELECT 2"))
            .await
            .expect("no answer within 5s of resume");
        assert_eq!(answer.unwrap(), one("2"));

        // A paused server can be killed and restarted.
        db.pause();
        db.restart().await;
        assert_eq!(db.execute("SELECT 3").await.unwrap(), one("3"));
    })
    .await;
}

/// A dump restored brings back the rows and stored functions it held, and nothing committed
/// after it: what the fence-never-goes-back test restores.
#[tokio::test]
async fn restoring_an_older_dump_rolls_the_database_back() {
    bounded(async {
        let db = MysqlServer::start().await;
        db.execute(
            "CREATE TABLE fences (name VARCHAR(64) PRIMARY KEY, fence BIGINT); \
             INSERT INTO fences VALUES ('shop', 1); \
             CREATE FUNCTION twice(x BIGINT) RETURNS BIGINT DETERMINISTIC RETURN x * 2",
        )
        .await
        .unwrap();
        let dump = db.dump("older").await;
        db.execute("UPDATE fences SET fence = 5; CREATE TABLE later (v INT)")
            .await
            .unwrap();

        db.restore_dump(&dump).await;
        assert_eq!(
            db.execute("SELECT fence FROM fences").await.unwrap(),
            one("1")
        );
        assert_eq!(db.execute("SELECT twice(21)").await.unwrap(), one("42"));
        assert!(db.execute("SELECT * FROM later").await.is_err());
        // The user's grants on the database outlive its drop and restore.
        let mut conn = db.connect_as_user().await.unwrap();
        let fence: Option<i64> = conn.query_first("SELECT fence FROM fences").await.unwrap();
        assert_eq!(fence, Some(1));
    })
    .await;
}

#[tokio::test]
async fn two_servers_run_apart_and_drop_leaves_nothing() {
    bounded(async {
        let (a, b) = tokio::join!(MysqlServer::start(), MysqlServer::start());
        assert_ne!(a.port(), b.port());
        a.execute("CREATE TABLE only_in_a (v INT)").await.unwrap();
        assert!(b.execute("SELECT * FROM only_in_a").await.is_err());
        a.kill9();
        assert_eq!(b.execute("SELECT 1").await.unwrap(), one("1"));

        let (dir, pid) = (b.dir().to_owned(), b.pid().unwrap());
        drop(b);
        assert!(!Path::new(&dir).exists(), "{} is left", dir.display());
        assert!(!alive(pid));
        let dir = a.dir().to_owned();
        drop(a);
        assert!(!Path::new(&dir).exists(), "{} is left", dir.display());
    })
    .await;
}

/// A server started with TLS only refuses plain TCP, serves TLS with the test's certificate,
/// keeps its TLS setup across a crash restart, and is still reachable by the harness.
#[tokio::test]
async fn a_tls_only_server_refuses_plain_tcp_across_restarts() {
    bounded(async {
        let dir = std::env::temp_dir().join(format!("leasehold-mytls-h-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let options = MysqlOptions::default()
            .tls(&cert_path, &key_path)
            .tls_only();
        let db = MysqlServer::start_with(options).await;
        for round in 0..2 {
            assert_eq!(db.execute("SELECT @@have_ssl").await.unwrap(), one("YES"));
            let e = db
                .connect_as_user()
                .await
                .expect_err("plain TCP is refused");
            // MariaDB answers a plain client of a TLS-only server as a bad login (1045); the
            // same user over TLS gets in below.
            let e = format!("{e}");
            assert!(
                e.contains("insecure transport") || e.contains("1045"),
                "{round}: {e}"
            );

            let _ = rustls::crypto::ring::default_provider().install_default();
            let ssl = mysql_async::SslOpts::default()
                .with_root_certs(vec![cert_path.clone().into()])
                .with_danger_tls_hostname_override(Some("localhost"));
            let opts = mysql_async::OptsBuilder::from_opts(
                mysql_async::Opts::from_url(&db.url()).unwrap(),
            )
            .prefer_socket(false)
            .ssl_opts(Some(ssl));
            let mut conn = mysql_async::Conn::new(opts).await.unwrap();
            let cipher: Option<(String, String)> = conn
                .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                .await
                .unwrap();
            assert!(!cipher.unwrap().1.is_empty(), "{round}: no TLS");
            drop(conn);
            db.restart().await;
        }
        std::fs::remove_dir_all(&dir).unwrap();
    })
    .await;
}
