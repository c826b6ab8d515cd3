//! The MySQL engine over TLS (`ssl-mode`, the `tls` feature) against a real MariaDB with a
//! certificate the test made (a CA, and a server certificate for `localhost` only, so that
//! `127.0.0.1` is a host name it does not hold), which lets TCP clients in only over TLS
//! (`require_secure_transport`): what each mode checks, which failures are configuration
//! errors at build time, and `check_fence` on a pool of the application's own built from the
//! same URL (`leasehold::mysql::opts`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold::mysql::mysql_async::{prelude::Queryable, Pool, TxOpts};
use leasehold::{LockError, Locker};
use leasehold_tests::harness::{MysqlOptions, MysqlServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A CA that signs server certificates, as PEM files in a directory of its own.
struct TestCa {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate (the `ssl-ca` that trusts it).
    cert: PathBuf,
}

impl TestCa {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "leasehold-mytls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(
            DnType::CommonName,
            format!("leasehold MySQL test CA {name}"),
        );
        let cert = params.self_signed(&key).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, cert.pem()).unwrap();
        Self {
            dir,
            issuer: Issuer::new(params, key),
            cert: path,
        }
    }

    /// A server certificate this CA signed for the DNS names `names`: the paths of the
    /// certificate and its key.
    fn sign(&self, names: &[&str]) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_path, key_path) = (self.dir.join("server.pem"), self.dir.join("server.key"));
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
async fn tls_server(ca: &TestCa) -> MysqlServer {
    let (cert, key) = ca.sign(&["localhost"]);
    MysqlServer::start_with(MysqlOptions::default().tls(cert, key).tls_only()).await
}

/// The server's URL by `host`, with `params`; the switch to the local socket that mysql_async
/// makes for a `localhost` URL turned off, so that every connection goes over TCP (and TLS).
fn url(db: &MysqlServer, host: &str, params: &str) -> String {
    db.url().replace("127.0.0.1", host) + "?prefer_socket=false&" + params
}

fn ca_param(path: &Path) -> String {
    format!("ssl-ca={}", path.display())
}

async fn build(url: &str) -> Result<Locker, LockError> {
    Locker::builder()
        .mysql(url)
        .prefix("mytls")
        .op_timeout(Duration::from_secs(2))
        .build()
        .await
}

fn config_error(built: Result<Locker, LockError>, says: &[&str]) {
    match built {
        Err(LockError::Config { message, .. }) => {
            for part in says {
                assert!(message.contains(part), "{part:?} not in: {message}");
            }
            assert!(
                !message.contains(":leasehold@"),
                "the password shown: {message}"
            );
        }
        Err(other) => panic!("expected a Config error saying {says:?}, got {other:?}"),
        Ok(_) => panic!("expected a Config error saying {says:?}, and the locker was built"),
    }
}

/// `VERIFY_IDENTITY` with the CA that signed the server's certificate: the locker works, and a
/// pool of the application's own from the same URL is encrypted and checks fences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_identity_with_the_right_ca_encrypts_the_locker_and_the_applications_pool() {
    let ca = TestCa::new("right");
    let db = tls_server(&ca).await;
    let url = url(
        &db,
        "localhost",
        &format!("ssl-mode=VERIFY_IDENTITY&{}", ca_param(&ca.cert)),
    );
    let locker = build(&url).await.expect("the locker over TLS");
    let guard = locker.lock("stock:1").acquire().await.unwrap();

    let pool = Pool::new(leasehold::mysql::opts(&url).unwrap());
    let mut conn = pool.get_conn().await.unwrap();
    let cipher: Option<(String, String)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .await
        .unwrap();
    let cipher = cipher.expect("a status row").1;
    assert!(
        !cipher.is_empty(),
        "the application's connection is not encrypted"
    );
    let mut tx = conn.start_transaction(TxOpts::default()).await.unwrap();
    leasehold::mysql::check_fence(&mut tx, &guard)
        .await
        .expect("the fence check over TLS");
    tx.commit().await.unwrap();
    guard.release().await.unwrap();
}

/// A CA that did not sign the server's certificate, a host name the certificate does not
/// hold (`127.0.0.1`), and plain text to a server that wants TLS: each a `Config` error when
/// the locker is built, naming the fix. `REQUIRED` (encryption, nothing checked) connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_ca_the_wrong_host_or_no_tls_is_a_config_error_at_build() {
    let ca = TestCa::new("signer");
    let other = TestCa::new("other");
    let db = tls_server(&ca).await;

    config_error(
        build(&url(
            &db,
            "localhost",
            &format!("ssl-mode=VERIFY_IDENTITY&{}", ca_param(&other.cert)),
        ))
        .await,
        &["ssl-ca"],
    );
    config_error(
        build(&url(
            &db,
            "127.0.0.1",
            &format!("ssl-mode=VERIFY_IDENTITY&{}", ca_param(&ca.cert)),
        ))
        .await,
        &["host name"],
    );
    // mysql_async 0.37 checks the host name under VERIFY_CA too (docs/security-mysql.md): it
    // fails closed. When the driver learns to skip it, this connects, and the docs change.
    config_error(
        build(&url(
            &db,
            "127.0.0.1",
            &format!("ssl-mode=VERIFY_CA&{}", ca_param(&ca.cert)),
        ))
        .await,
        &["host name"],
    );
    config_error(
        build(&url(&db, "localhost", "ssl-mode=DISABLED")).await,
        &["ssl-mode"],
    );
    let missing = ca.dir.join("missing.pem");
    config_error(
        build(&url(
            &db,
            "localhost",
            &format!("ssl-mode=VERIFY_IDENTITY&{}", ca_param(&missing)),
        ))
        .await,
        &["cannot read ssl-ca", "missing.pem"],
    );

    let unchecked = build(&url(&db, "127.0.0.1", "ssl-mode=REQUIRED"))
        .await
        .expect("REQUIRED encrypts without checking the certificate");
    let guard = unchecked.lock("k").acquire().await.unwrap();
    guard.release().await.unwrap();
}
