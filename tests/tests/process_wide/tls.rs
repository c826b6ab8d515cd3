//! Locks over TLS (`rediss://`, the `tls` feature): a local `redis-server` with a TLS port and
//! certificates the test makes itself (a CA and a server certificate for `localhost` and
//! 127.0.0.1). The client trusts the CA through `SSL_CERT_FILE`, which the OS root store that
//! the redis client loads honours. An untrusted server is an error in bounded time, never a
//! plaintext fallback.

use std::path::Path;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{RedisOptions, RedisServer};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use tokio::time::Instant;

/// A CA, and a server certificate it signed, as PEM files in `dir`; returns the CA's path.
fn make_certificates(dir: &Path, name: &str) -> std::path::PathBuf {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("leasehold test CA {name}"),
    );
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let server_cert = server.signed_by(&server_key, &issuer).unwrap();

    let ca_path = dir.join(format!("{name}-ca.pem"));
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}-server.pem")), server_cert.pem()).unwrap();
    std::fs::write(
        dir.join(format!("{name}-server.key")),
        server_key.serialize_pem(),
    )
    .unwrap();
    ca_path
}

/// An error with all its sources, as one string.
fn shown(e: &LockError) -> String {
    let mut out = format!("{e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

/// A server with a plain port (for the harness) and a TLS port (for the client).
async fn tls_server(dir: &Path, name: &str) -> (RedisServer, u16) {
    let file = |suffix: &str| dir.join(format!("{name}-{suffix}"));
    let server = RedisServer::start_with(
        RedisOptions::default()
            // A free port per start attempt, as the plain port is.
            .port_arg("--tls-port")
            .arg("--tls-cert-file")
            .arg(file("server.pem"))
            .arg("--tls-key-file")
            .arg(file("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(file("ca.pem"))
            .args(["--tls-auth-clients", "no"]),
    )
    .await;
    let port = server
        .port_of("--tls-port")
        .expect("the options ask for a TLS port");
    (server, port)
}

fn locker(url: String) -> leasehold::LockerBuilder {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .default_wait(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_tls_and_untrusted_servers_are_refused() {
    let _alone = crate::alone().await;
    let dir = std::env::temp_dir().join(format!("leasehold-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trusted = make_certificates(&dir, "trusted");
    let _other = make_certificates(&dir, "other");
    let (srv, port) = tls_server(&dir, "trusted").await;
    let (stranger, stranger_port) = tls_server(&dir, "other").await;
    // Read by the OS root store loader of the redis client, at each TLS connection. The
    // tests of this binary run one at a time, so no other test runs while it changes.
    std::env::set_var("SSL_CERT_FILE", &trusted);

    // TLS compiled in? Without leasehold's `tls` feature every `rediss://` URL is refused.
    if let Err(e) = locker(format!("rediss://localhost:{port}")).build().await {
        let chain = shown(&e);
        assert!(
            !chain.contains("feature is not enabled"),
            "this test needs leasehold's `tls` feature: run with --all-features (as scripts/test \
             does), or add \"tls\" to the features of the leasehold dev-dependency in \
             tests/Cargo.toml. The error was: {chain}"
        );
        panic!("the trusted TLS server was refused: {chain}");
    }

    // A server whose certificate no trusted CA signed: refused, quickly, for its certificate.
    let start = Instant::now();
    let err = locker(format!("rediss://localhost:{stranger_port}"))
        .build()
        .await
        .unwrap_err();
    let chain = shown(&err);
    assert!(
        chain.to_lowercase().contains("certificate") || chain.contains("UnknownIssuer"),
        "refused, but not for its certificate: {chain}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(stranger.keys("*").await.is_empty());

    // Plain text to the TLS port: refused too, never a silent downgrade.
    let plain = locker(format!("redis://127.0.0.1:{port}")).build().await;
    assert!(plain.is_err(), "a plaintext client got through a TLS port");

    // The trusted server, by name and by IP address.
    for host in ["localhost", "127.0.0.1"] {
        let a = locker(format!("rediss://{host}:{port}"))
            .build()
            .await
            .unwrap();
        let b = locker(format!("rediss://{host}:{port}"))
            .build()
            .await
            .unwrap();
        assert!(format!("{a:?}").contains("TLS"), "{a:?}");
        let held = a.lock("tls-key").acquire().await.unwrap();
        assert_eq!(srv.keys("leasehold:lock:*").await.len(), 1);
        // A waiter in another locker wakes on the release: pub/sub over TLS.
        let waiter = tokio::spawn(async move {
            let g = b.lock("tls-key").acquire().await.unwrap();
            let at = Instant::now();
            let fence = g.fence();
            g.release().await.unwrap();
            (at, fence)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let released = Instant::now();
        let fence = held.fence();
        held.release().await.unwrap();
        let (woke, next) = waiter.await.unwrap();
        assert!(next > fence);
        assert!(
            woke - released < Duration::from_millis(500),
            "the waiter woke {:?} after the release",
            woke - released
        );
    }
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
