//! The PostgreSQL engine over TLS (`sslmode`, the `tls` feature) against a real server with
//! a certificate the test made (a CA, and a server certificate for `localhost` only, so that
//! `127.0.0.1` is a host name it does not hold), which lets TCP clients in only over TLS
//! (`hostssl`, `hostnossl ... reject`): every connection of a locker encrypted, what each
//! `sslmode` checks, which failures are configuration errors, client certificates, and
//! `check_fence` on a client of the application's own over TLS.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold::postgres::tokio_postgres as pg;
use leasehold::{LockError, Locker};
use leasehold_tests::harness::{PgOptions, PgServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::time::Instant;

/// A CA that signs server and client certificates, as PEM files in a directory of its own.
struct TestCa {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate (the `sslrootcert` that trusts it).
    cert: PathBuf,
}

impl TestCa {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "leasehold-pgtls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("leasehold test CA {name}"));
        let cert = params.self_signed(&key).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, cert.pem()).unwrap();
        Self {
            dir,
            issuer: Issuer::new(params, key),
            cert: path,
        }
    }

    /// A certificate this CA signed: for the DNS names `names` (a server's), or with the
    /// common name `user` (a client's); returns the paths of the certificate and its key.
    fn sign(&self, file: &str, names: &[&str], user: Option<&str>) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if let Some(user) = user {
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, user);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_path, key_path) = (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server with `ca`'s certificate for `localhost` (only), letting TCP clients in only over
/// TLS.
async fn tls_only_server(ca: &TestCa) -> PgServer {
    let (cert, key) = ca.sign("server", &["localhost"], None);
    PgServer::start_with(PgOptions::default().tls(cert, key).tls_only()).await
}

/// `postgres://postgres:s3cret@HOST:PORT/postgres?PARAMS` (the server trusts the user; the
/// password is there to show it never appears in errors).
fn url(pg: &PgServer, host: &str, params: &str) -> String {
    format!(
        "postgres://postgres:s3cret@{host}:{}/postgres?application_name=lh-tls&{params}",
        pg.port()
    )
}

fn rootcert(path: &Path) -> String {
    format!("sslrootcert={}", path.display())
}

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .postgres(url)
        .prefix("pgtls")
        .op_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(5))
}

/// Builds a locker that must fail, quickly, with a configuration error; returns its text.
async fn refused(url: &str) -> String {
    let started = Instant::now();
    let e = builder(url).build().await.expect_err(url);
    let text = e.to_string();
    assert!(
        matches!(e, LockError::Config { .. }),
        "{url}: not a configuration error: {e:?}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    assert!(!format!("{e:?}").contains("s3cret"), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{url}: refused only after {:?}",
        started.elapsed()
    );
    text
}

/// How many of the server's sessions named `lh-tls` are encrypted, and how many are not.
async fn sessions(pg: &PgServer) -> (usize, usize) {
    let rows = pg
        .execute(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'lh-tls'",
        )
        .await
        .unwrap();
    let encrypted = rows.iter().filter(|r| r[0].as_deref() == Some("t")).count();
    (encrypted, rows.len() - encrypted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_verify_full_on_every_connection() {
    let ca = TestCa::new("trusted");
    let pg = tls_only_server(&ca).await;
    let url = url(
        &pg,
        "localhost",
        &format!("sslmode=verify-full&{}", rootcert(&ca.cert)),
    );
    let a = builder(&url)
        .build()
        .await
        .expect("locker over verify-full");
    let b = builder(&url)
        .build()
        .await
        .expect("locker over verify-full");
    assert!(!format!("{a:?}").contains("s3cret"), "{a:?}");

    // Lock, release, fence, and a waiter in another locker woken by NOTIFY over TLS (its
    // holder's 30 s lease would otherwise keep it waiting).
    let held = a
        .lock("tls-key")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("acquire over TLS");
    let waiter = tokio::spawn(async move {
        let g = b
            .lock("tls-key")
            .wait(Duration::from_secs(20))
            .acquire()
            .await
            .expect("the waiter's acquire");
        let at = Instant::now();
        let fence = g.fence();
        g.release().await.unwrap();
        (at, fence, b)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    let fence = held.fence();
    held.release().await.expect("release over TLS");
    let (woke, next, _b) = waiter.await.unwrap();
    assert!(next > fence, "fences go up: {fence} then {next}");
    assert!(
        woke - released < Duration::from_secs(3),
        "the waiter woke {:?} after the release",
        woke - released
    );

    // Every session of both lockers (their pools and listeners) is encrypted; the server
    // would have refused any that was not.
    let (encrypted, plain) = sessions(&pg).await;
    assert_eq!(plain, 0);
    assert!(
        encrypted >= 10,
        "{encrypted} encrypted sessions (two lockers of four pooled connections and a \
         listening one each)"
    );

    // check_fence in the application's own transaction, on its own client over TLS.
    let mut db = leasehold::postgres::connect(&url)
        .await
        .expect("a client of our own over TLS");
    let ssl: bool = db
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "the application's client is encrypted");
    db.batch_execute("CREATE TABLE stock (sku int PRIMARY KEY, left_ int)")
        .await
        .unwrap();
    db.execute("INSERT INTO stock VALUES (42, 10)", &[])
        .await
        .unwrap();
    let guard = a.lock("stock:42").acquire().await.unwrap();
    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &guard)
        .await
        .expect("the holder's fence checks out over TLS");
    tx.execute("UPDATE stock SET left_ = left_ - 1 WHERE sku = 42", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    guard.release().await.unwrap();
    let left: i32 = db
        .query_one("SELECT left_ FROM stock WHERE sku = 42", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 9);

    // The same client function keeps the rules: a wrong host name is refused.
    let wrong = url.replace("@localhost:", "@127.0.0.1:");
    let e = leasehold::postgres::connect(&wrong).await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sslmode_checks_what_it_says() {
    let ca = TestCa::new("trusted");
    let stranger = TestCa::new("stranger");
    let pg = tls_only_server(&ca).await;
    let trusted = rootcert(&ca.cert);
    let untrusted = rootcert(&stranger.cert);

    // verify-full: the certificate holds `localhost`, not `127.0.0.1`.
    let e = refused(&url(
        &pg,
        "127.0.0.1",
        &format!("sslmode=verify-full&{trusted}"),
    ))
    .await;
    assert!(e.contains("another host name"), "{e}");
    assert!(e.contains("verify-ca"), "says what else would do: {e}");

    // verify-ca checks the chain only: the same URL is fine.
    let locker = builder(&url(
        &pg,
        "127.0.0.1",
        &format!("sslmode=verify-ca&{trusted}"),
    ))
    .build()
    .await
    .expect("verify-ca ignores the host name");
    locker
        .lock("k")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    // A CA the client does not trust: refused by verify-full, verify-ca, and by require
    // given that sslrootcert (libpq's rule: require then checks as verify-ca does).
    for mode in ["verify-full", "verify-ca", "require"] {
        let e = refused(&url(
            &pg,
            "localhost",
            &format!("sslmode={mode}&{untrusted}"),
        ))
        .await;
        assert!(e.contains("does not accept"), "{mode}: {e}");
        assert!(
            e.contains("UnknownIssuer"),
            "{mode}: the cause is shown: {e}"
        );
    }

    // Without sslrootcert, verify-full checks against the operating system's roots, which do
    // not hold this test's CA.
    let e = refused(&url(&pg, "localhost", "sslmode=verify-full")).await;
    assert!(
        e.contains("does not accept") || e.contains("no trusted root"),
        "{e}"
    );

    // require without sslrootcert encrypts and checks nothing (libpq's rule), so any
    // certificate and host name will do; so does prefer (the default) when the server offers
    // TLS.
    let mut lockers = vec![locker];
    for params in ["sslmode=require", "sslmode=prefer", ""] {
        let locker = builder(&url(&pg, "127.0.0.1", params))
            .build()
            .await
            .unwrap_or_else(|e| panic!("{params:?}: {e}"));
        locker
            .lock("k")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        lockers.push(locker);
    }
    let (encrypted, plain) = sessions(&pg).await;
    assert_eq!(
        plain, 0,
        "every session of every mode but disable is encrypted"
    );
    assert!(encrypted >= 4 * 5, "{encrypted}");

    // disable: the server refuses a connection that is not encrypted, and the error says so.
    let e = refused(&url(&pg, "127.0.0.1", "sslmode=disable")).await;
    assert!(e.contains("accepts only encrypted connections"), "{e}");
    assert!(e.contains("no encryption"), "the server's words: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls_is_refused_only_when_tls_is_required() {
    let pg = PgServer::start().await;
    for mode in ["require", "verify-ca", "verify-full"] {
        let e = refused(&url(&pg, "localhost", &format!("sslmode={mode}"))).await;
        assert!(e.contains("does not offer TLS"), "{mode}: {e}");
    }
    // prefer (the default) falls back to plain text, as libpq does.
    let mut lockers = Vec::new();
    for params in ["sslmode=prefer", ""] {
        let locker = builder(&url(&pg, "127.0.0.1", params))
            .build()
            .await
            .unwrap_or_else(|e| panic!("{params:?}: {e}"));
        locker
            .lock("k")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        lockers.push(locker);
    }
    let (encrypted, plain) = sessions(&pg).await;
    assert_eq!(encrypted, 0);
    assert!(plain >= 2 * 5, "{plain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_given_when_the_server_asks() {
    let ca = TestCa::new("trusted");
    let clients = TestCa::new("clients");
    let (cert, key) = ca.sign("server", &["localhost"], None);
    let pg = PgServer::start_with(
        PgOptions::default()
            .tls(cert, key)
            .client_certificates(&clients.cert),
    )
    .await;
    let base = format!("sslmode=verify-full&{}", rootcert(&ca.cert));

    let e = refused(&url(&pg, "localhost", &base)).await;
    assert!(e.contains("client certificate"), "{e}");

    // A certificate for another user: the server refuses it, for its name.
    let (cert, key) = clients.sign("someone", &[], Some("someone"));
    let with = |cert: &Path, key: &Path| {
        format!("{base}&sslcert={}&sslkey={}", cert.display(), key.display())
    };
    let e = refused(&url(&pg, "localhost", &with(&cert, &key))).await;
    assert!(e.contains("client certificate"), "{e}");

    let (cert, key) = clients.sign("postgres", &[], Some("postgres"));
    let locker = builder(&url(&pg, "localhost", &with(&cert, &key)))
        .build()
        .await
        .expect("locker with a client certificate");
    locker
        .lock("k")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    // Files that are not there are configuration errors, before any connection.
    let e = refused(&url(
        &pg,
        "localhost",
        &with(Path::new("/nonexistent/c.pem"), &key),
    ))
    .await;
    assert!(e.contains("sslcert /nonexistent/c.pem"), "{e}");
    let e = refused(&url(
        &pg,
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .await;
    assert!(e.contains("sslrootcert /nonexistent/ca.pem"), "{e}");
}

/// The least privileges of `docs/security-postgres.md`, over TLS: an operator applies the
/// schema; the lockers' role, which may create nothing, gets DML on the tables and USAGE,
/// UPDATE on the sequence, and every primitive works; the application's role, which only
/// checks fences, gets SELECT on two tables (and UPDATE on them for snapshot isolation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedicated_role_with_the_documented_privileges_is_enough() {
    let ca = TestCa::new("trusted");
    let pg = tls_only_server(&ca).await;
    pg.execute(leasehold::postgres::SCHEMA).await.unwrap();
    pg.execute(
        "CREATE ROLE lh_locks LOGIN; CREATE ROLE lh_app LOGIN; \
         REVOKE CREATE ON SCHEMA public FROM PUBLIC; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON leasehold_locks, leasehold_waiters, \
             leasehold_readers, leasehold_semaphores, leasehold_permits, leasehold_leaders \
             TO lh_locks; \
         GRANT USAGE, UPDATE ON SEQUENCE leasehold_fences TO lh_locks; \
         GRANT SELECT ON leasehold_locks, leasehold_readers TO lh_app",
    )
    .await
    .unwrap();
    let tls = format!("sslmode=verify-full&{}", rootcert(&ca.cert));
    let as_role = |role: &str| {
        format!(
            "postgres://{role}@localhost:{}/postgres?application_name=lh-tls&{tls}",
            pg.port()
        )
    };
    let locker = builder(&as_role("lh_locks"))
        .build()
        .await
        .expect("a locker under the dedicated role");
    let write = locker.lock("k").acquire().await.unwrap();
    write.release().await.unwrap();
    let read = locker.read_lock("k").acquire().await.unwrap();
    let permit = locker.semaphore("s", 2).acquire().await.unwrap();
    let leadership = locker.leader("l").identity("me").campaign().await.unwrap();
    assert!(leadership.is_leader());
    leadership.resign().await.unwrap();
    permit.release().await.unwrap();

    // The application's role checks a reader's and a writer's fence.
    let mut app = leasehold::postgres::connect(&as_role("lh_app"))
        .await
        .expect("the application's client");
    let tx = app.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &read).await.unwrap();
    tx.commit().await.unwrap();
    read.release().await.unwrap();
    let write = locker.lock("k").acquire().await.unwrap();
    let tx = app.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &write).await.unwrap();
    tx.commit().await.unwrap();
    // Under REPEATABLE READ the check also key-share locks the row, which needs UPDATE.
    fn snapshot(app: &mut pg::Client) -> pg::TransactionBuilder<'_> {
        app.build_transaction()
            .isolation_level(pg::IsolationLevel::RepeatableRead)
    }
    let tx = snapshot(&mut app).start().await.unwrap();
    let e = leasehold::postgres::check_fence(&tx, &write)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("permission denied"), "{e}");
    drop(tx);
    pg.execute("GRANT UPDATE ON leasehold_locks, leasehold_readers TO lh_app")
        .await
        .unwrap();
    let tx = snapshot(&mut app).start().await.unwrap();
    leasehold::postgres::check_fence(&tx, &write).await.unwrap();
    tx.commit().await.unwrap();
    write.release().await.unwrap();

    // Neither role can create anything, and neither owns the tables (no DROP, no ALTER).
    let e = app
        .batch_execute("DROP TABLE leasehold_locks")
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("owner") || format!("{e:?}").contains("owner"),
        "{e:?}"
    );
}
