//! The ZooKeeper engine with credentials and TLS against real servers: an authenticated
//! locker's znodes are its identity's alone (no other client, without credentials or with
//! others, can delete a lock, stand in its queue, touch its fence record or read it), wrong
//! credentials fail `build` with `Config`, TLS connects with the CA and not without it, and
//! the password shows nowhere: not in `Debug`, `describe`, errors or logs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{Deployment, LockError, Locker};
use leasehold_tests::harness::{ZkOptions, ZkServer, ZkTls};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use zookeeper_client as zk;

/// Alice's password; the assertions look for it everywhere it must not be.
const PASSWORD: &str = "s3cret-Alice-7f2c";
/// Another password for Alice's name: another identity to ZooKeeper's digest scheme.
const WRONG: &str = "wrong-Alice-91d4";
/// The container of lock `order:1` under the default prefix.
const ORDER_1: &str = "/leasehold/leasehold:lock:{order:1}";

async fn locker(connect: &str) -> Result<Locker, LockError> {
    locker_within(connect, Duration::from_secs(5)).await
}

/// A locker over TLS that must connect: a fresh server's first TLS handshakes (its JVM not yet
/// warm) took over 5 s on a loaded two-core machine. Connections that must be refused keep
/// [`locker`]'s bound, since a refused handshake shows as one that never answers.
async fn tls_locker(connect: &str) -> Result<Locker, LockError> {
    locker_within(connect, Duration::from_secs(20)).await
}

async fn locker_within(connect: &str, connect_timeout: Duration) -> Result<Locker, LockError> {
    Locker::builder()
        .zookeeper(connect)
        .session_timeout(Duration::from_secs(4))
        .op_timeout(Duration::from_millis(1500))
        .connect_timeout(connect_timeout)
        .default_wait(Duration::from_secs(5))
        .build()
        .await
}

fn alice(hosts: &str) -> String {
    format!("alice:{PASSWORD}@{hosts}")
}

/// A client of the ensemble that is no locker: `auth` is its `addauth digest` (`user:pw`).
async fn raw(hosts: &str, auth: Option<&str>) -> zk::Client {
    let mut connector = zk::Client::connector().with_session_timeout(Duration::from_secs(4));
    if let Some(auth) = auth {
        connector = connector.with_auth("digest", auth.as_bytes());
    }
    connector.connect(hosts).await.expect("a raw client")
}

fn no_auth<T: std::fmt::Debug>(answer: Result<T, zk::Error>, what: &str) {
    assert!(
        matches!(answer, Err(zk::Error::NoAuth)),
        "{what}: expected NoAuth, got {answer:?}"
    );
}

/// An error with all its sources, as one string.
fn shown(e: &LockError) -> String {
    let mut out = format!("{e} {e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_locker_locks_fences_and_operates_as_usual() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let a = locker(&alice(&hosts)).await.unwrap();
    let b = locker(&alice(&hosts)).await.unwrap();

    let first = a.lock("order:1").acquire().await.unwrap();
    assert!(b.lock("order:1").try_acquire().await.unwrap().is_none());
    let info = b.inspect("order:1").await.unwrap();
    assert!(info.held, "{info:?}");
    let fence = first.fence();
    first.release().await.unwrap();
    let second = b.lock("order:1").acquire().await.unwrap();
    assert!(second.fence() > fence, "{} after {fence}", second.fence());
    // The operator's force release, by the same identity.
    assert!(a.force_release("order:1").await.unwrap());
    assert!(!a.inspect("order:1").await.unwrap().held);
    drop(second);

    // Readers, permits and an election create znodes the same way.
    let r1 = a.read_lock("doc").acquire().await.unwrap();
    let r2 = b.read_lock("doc").acquire().await.unwrap();
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let permit = a.semaphore("pool", 2).acquire().await.unwrap();
    let other = b.semaphore("pool", 2).acquire().await.unwrap();
    assert!(other.fence() > permit.fence());
    drop((permit, other));
    let leadership = a
        .leader("jobs")
        .identity("node-a")
        .campaign()
        .await
        .unwrap();
    let mut observer = b.observe_leader("jobs").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), observer.next())
        .await
        .expect("an answer")
        .unwrap()
        .expect("a leader");
    assert_eq!(seen.identity(), "node-a");
    leadership.resign().await.unwrap();

    // Every znode the lockers made is Alice's alone: no entry for anyone else.
    let _held = a.lock("order:1").acquire().await.unwrap();
    let owner = raw(&hosts, Some(&format!("alice:{PASSWORD}"))).await;
    let holder = first_child(&owner, ORDER_1).await;
    for path in ["/leasehold", ORDER_1, holder.as_str()] {
        let (acls, _) = owner.get_acl(path).await.unwrap();
        assert_eq!(acls.len(), 1, "{path}: {acls:?}");
        assert_eq!(
            (acls[0].scheme(), acls[0].permission()),
            ("digest", zk::Permission::ALL),
            "{path}: {acls:?}"
        );
        assert!(acls[0].id().starts_with("alice:"), "{path}: {acls:?}");
    }
}

async fn first_child(client: &zk::Client, parent: &str) -> String {
    let mut children = client.list_children(parent).await.unwrap();
    children.sort_by_key(|c| c.rsplit('-').next().unwrap_or("").to_owned());
    format!("{parent}/{}", children.first().expect("a holder"))
}

/// Without the creator-only ACL (`anyone_all`, as before), every one of these succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_can_neither_delete_a_lock_nor_stand_in_its_queue() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let a = locker(&alice(&hosts)).await.unwrap();
    let held = a.lock("order:1").acquire().await.unwrap();
    let owner = raw(&hosts, Some(&format!("alice:{PASSWORD}"))).await;
    let holder = first_child(&owner, ORDER_1).await;

    let strangers = [
        ("no credentials", raw(&hosts, None).await),
        (
            "other credentials",
            raw(&hosts, Some("mallory:mallory")).await,
        ),
        (
            "alice's name with another password",
            raw(&hosts, Some(&format!("alice:{WRONG}"))).await,
        ),
    ];
    let open = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    for (who, stranger) in &strangers {
        no_auth(
            stranger.delete(&holder, None).await,
            &format!("{who}: delete the holder"),
        );
        no_auth(
            stranger
                .create(&format!("{ORDER_1}/n-0000000000000000-"), b"fake", &open)
                .await,
            &format!("{who}: a fake writer"),
        );
        no_auth(
            stranger
                .create(&format!("{ORDER_1}/r-0000000000000000-"), b"fake", &open)
                .await,
            &format!("{who}: a fake reader"),
        );
        no_auth(
            stranger
                .create("/leasehold/leasehold:lock:{order:2}", b"", &container)
                .await,
            &format!("{who}: the container of a lock not taken yet"),
        );
        no_auth(
            stranger.set_data(ORDER_1, b"+999", None).await,
            &format!("{who}: the fence record"),
        );
        no_auth(
            stranger
                .set_acl(ORDER_1, &zk::Acls::anyone_all(), None)
                .await,
            &format!("{who}: the container's ACL"),
        );
        no_auth(
            stranger.delete(ORDER_1, None).await,
            &format!("{who}: the container"),
        );
        no_auth(
            stranger.get_data(&holder).await,
            &format!("{who}: the owner token"),
        );
        no_auth(
            stranger.list_children(ORDER_1).await,
            &format!("{who}: the queue"),
        );
        no_auth(
            stranger.list_children("/leasehold").await,
            &format!("{who}: the keys"),
        );
    }

    // The lock is still held, and released as usual.
    assert!(a.inspect("order:1").await.unwrap().held);
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_credentials_fail_the_build_with_config_naming_no_password() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let a = locker(&alice(&hosts)).await.unwrap();
    a.lock("order:1")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    for connect in [
        format!("alice:{WRONG}@{hosts}"),
        format!("mallory:{WRONG}@{hosts}"),
        // An unauthenticated locker gets the same clear refusal at its first lock.
        hosts.clone(),
    ] {
        let refused = match locker(&connect).await {
            Err(e) => e,
            Ok(l) => l.lock("order:1").acquire().await.map(drop).unwrap_err(),
        };
        let text = shown(&refused);
        assert!(matches!(refused, LockError::Config { .. }), "{text}");
        assert!(text.contains("NoAuth"), "{text}");
        assert!(!text.contains(WRONG) && !text.contains(PASSWORD), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_users_authenticate_and_a_wrong_password_is_refused() {
    let zk = ZkServer::start_with(ZkOptions::default().sasl_user("alice", PASSWORD)).await;
    let hosts = zk.connect_string();
    let a = locker(&format!("alice:{PASSWORD}@{hosts}?auth=sasl"))
        .await
        .unwrap();
    let held = a.lock("order:1").acquire().await.unwrap();
    let owner = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .with_sasl(zk::SaslOptions::digest_md5("alice", PASSWORD))
        .connect(&hosts)
        .await
        .unwrap();
    let (acls, _) = owner.get_acl(ORDER_1).await.unwrap();
    assert_eq!(
        (acls[0].scheme(), acls[0].id()),
        ("sasl", "alice"),
        "{acls:?}"
    );
    let stranger = raw(&hosts, None).await;
    no_auth(
        stranger
            .delete(&format!("{ORDER_1}/x"), None)
            .await
            .map(drop),
        "a stranger's delete",
    );
    no_auth(
        stranger
            .create(
                &format!("{ORDER_1}/n-0000000000000000-"),
                b"fake",
                &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all()),
            )
            .await,
        "a stranger's fake writer",
    );
    held.release().await.unwrap();

    let refused = locker(&format!("alice:{WRONG}@{hosts}?auth=sasl"))
        .await
        .unwrap_err();
    let text = shown(&refused);
    assert!(matches!(refused, LockError::Config { .. }), "{text}");
    assert!(text.contains("credentials"), "{text}");
    assert!(!text.contains(WRONG) && !text.contains(PASSWORD), "{text}");
}

/// A CA, and a certificate it signed for `names` (a server's, or a client's), as PEM files
/// in `dir`: `<name>-ca.pem`, `<name>.pem` (the certificate), `<name>.key`, and
/// `<name>-store.pem` (the key and the certificate, a ZooKeeper PEM key store).
struct Pki {
    ca: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(dir: &Path, name: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("leasehold test CA {name}"),
        );
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let path = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&path, ca_cert.pem()).unwrap();
        Pki {
            ca: path,
            issuer: Issuer::new(ca, ca_key),
        }
    }

    /// Signs a certificate for localhost and 127.0.0.1; returns (certificate, key, key store).
    fn sign(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let paths = (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}.key")),
            dir.join(format!("{name}-store.pem")),
        );
        std::fs::write(&paths.0, cert.pem()).unwrap();
        std::fs::write(&paths.1, key.serialize_pem()).unwrap();
        std::fs::write(&paths.2, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        paths
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasehold-zk-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connects_with_the_ca_and_not_with_another() {
    let dir = temp_dir("tls");
    let pki = Pki::new(&dir, "trusted");
    let (_, _, store) = pki.sign(&dir, "server");
    let untrusted = Pki::new(&dir, "untrusted");
    let zk = ZkServer::start_with(ZkOptions::default().tls(ZkTls {
        key_store: store,
        trust_store: pki.ca.clone(),
        client_auth: false,
    }))
    .await;
    let secure = zk.secure_connect_string();

    let a = tls_locker(&format!("{secure}?ca={}", path(&pki.ca)))
        .await
        .unwrap();
    let guard = a.lock("order:1").acquire().await.unwrap();
    assert!(format!("{a:?}").contains("(TLS)"), "{a:?}");
    guard.release().await.unwrap();

    let started = tokio::time::Instant::now();
    let refused = locker(&format!("{secure}?ca={}", path(&untrusted.ca)))
        .await
        .unwrap_err();
    let text = shown(&refused);
    assert!(matches!(refused, LockError::Unavailable { .. }), "{text}");
    assert!(text.contains("CA"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10), "{text}");
    // A CA file that is not there is a configuration error, not an outage.
    let missing = locker(&format!("{secure}?ca=/nonexistent/ca.pem"))
        .await
        .unwrap_err();
    assert!(matches!(missing, LockError::Config { .. }), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_credentials_takes_the_client_certificate() {
    let dir = temp_dir("mtls");
    let pki = Pki::new(&dir, "ca");
    let (_, _, store) = pki.sign(&dir, "server");
    let (cert, key, _) = pki.sign(&dir, "client");
    let zk = ZkServer::start_with(ZkOptions::default().tls(ZkTls {
        key_store: store,
        trust_store: pki.ca.clone(),
        client_auth: true,
    }))
    .await;
    let secure = zk.secure_connect_string();
    let ca = path(&pki.ca);

    let connect = format!(
        "alice:{PASSWORD}@{secure}?ca={ca}&cert={}&key={}",
        path(&cert),
        path(&key)
    );
    let a = tls_locker(&connect).await.unwrap();
    a.lock("order:1")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let described = format!("{a:?}");
    assert!(!described.contains(PASSWORD), "{described}");

    // Without a client certificate the server hangs up.
    let refused = locker(&format!("alice:{PASSWORD}@{secure}?ca={ca}"))
        .await
        .unwrap_err();
    let text = shown(&refused);
    assert!(matches!(refused, LockError::Unavailable { .. }), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every field of every event while the tap lives, as text.
fn logged() -> (crate::support::Tap, Arc<Mutex<String>>) {
    use tracing::field::{Field, Visit};

    struct Text<'a>(&'a mut String);

    impl Visit for Text<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }

    let text = Arc::new(Mutex::new(String::new()));
    let into = text.clone();
    let tap = crate::support::tap(move |event| {
        let mut line = String::new();
        event.record(&mut Text(&mut line));
        into.lock().unwrap().push_str(&line);
    });
    (tap, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_shows_in_no_debug_describe_error_or_log() {
    let (_tap, logs) = logged();
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let connect = alice(&hosts);

    let url = format!("zookeeper://{connect}");
    let deployment = Deployment::parse(&url).unwrap();
    let builder = Locker::builder().zookeeper(connect.as_str());
    let mut seen = vec![format!("{deployment:?}"), format!("{builder:?}")];
    for bad in [
        format!("{connect}?tsl"),
        format!("zookeeper://{connect}?auth=kerberos"),
    ] {
        let e = Deployment::parse(&bad)
            .or_else(|_| Deployment::parse(&format!("zookeeper://{bad}")))
            .unwrap_err();
        seen.push(shown(&e));
    }
    let lazy = Locker::builder()
        .zookeeper(connect.as_str())
        .lazy_connect(true)
        .build()
        .await
        .unwrap();
    seen.push(format!("{lazy:?}"));

    let a = locker(&connect).await.unwrap();
    seen.push(format!("{a:?}"));
    let held = a.lock("order:1").acquire().await.unwrap();
    seen.push(format!("{held:?}"));
    held.release().await.unwrap();
    // An outage's errors name the servers, not the credentials.
    zk.stop();
    let e = a
        .lock("order:2")
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    seen.push(shown(&e));
    seen.push(shown(
        &locker(&format!("alice:{WRONG}@{hosts}")).await.unwrap_err(),
    ));
    seen.push(logs.lock().unwrap().clone());

    for text in &seen {
        assert!(
            !text.contains(PASSWORD) && !text.contains(WRONG),
            "a password in: {text}"
        );
    }
    assert!(seen[0].contains("127.0.0.1"), "{}", seen[0]);
    assert!(seen[1].contains("127.0.0.1"), "{}", seen[1]);
}

/// A root made by an unauthenticated locker (of an earlier version) stays open to anyone:
/// the authenticated locker says so, and the operator's `setAcl` closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_root_is_warned_about_until_an_operator_sets_its_acl() {
    let (_tap, logs) = logged();
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let old = locker(&hosts).await.unwrap();
    old.lock("order:1")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let stranger = raw(&hosts, None).await;
    let (acls, _) = stranger.get_acl("/leasehold").await.unwrap();
    assert_eq!(acls[0].scheme(), "world", "{acls:?}");

    let a = locker(&alice(&hosts)).await.unwrap();
    let warned = |logs: &Mutex<String>| {
        let logs = logs.lock().unwrap();
        logs.contains(&format!("zookeeper at {hosts}: anyone may create"))
            && logs.contains("setAcl -R /leasehold auth::cdrwa")
    };
    assert!(warned(&logs), "no warning of the open root");
    // Open to anyone: a stranger can still make a lock's container, and so stand first in
    // its queue.
    let open = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    stranger
        .create("/leasehold/leasehold:lock:{planted}", b"", &open)
        .await
        .unwrap();

    // The operator, authenticated as the lockers, closes it (what `setAcl -R /leasehold
    // auth::cdrwa` does in zkCli), and deletes what was planted.
    let operator = raw(&hosts, Some(&format!("alice:{PASSWORD}"))).await;
    operator
        .set_acl("/leasehold", &zk::Acls::creator_all(), None)
        .await
        .unwrap();
    operator
        .delete("/leasehold/leasehold:lock:{planted}", None)
        .await
        .unwrap();
    no_auth(
        stranger
            .create("/leasehold/leasehold:lock:{planted}", b"", &open)
            .await,
        "a container under the closed root",
    );
    a.lock("order:1")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    logs.lock().unwrap().clear();
    let _b = locker(&alice(&hosts)).await.unwrap();
    assert!(!warned(&logs), "warned of a closed root");
}

/// Two services with credentials of their own, each in its chroot, never meet; a chroot that
/// is not there yet is the operator's to create, and said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_with_their_own_credentials_live_apart_in_chroots() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let missing = locker(&format!("alice:{PASSWORD}@{hosts}/shop"))
        .await
        .unwrap_err();
    assert!(matches!(missing, LockError::Config { .. }), "{missing}");
    assert!(missing.to_string().contains("chroot"), "{missing}");

    let operator = raw(&hosts, None).await;
    let plain = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read());
    for chroot in ["/shop", "/billing"] {
        operator.create(chroot, b"", &plain).await.unwrap();
    }
    // The chroot nodes are read-only to all: only their children are the services'.
    let shop = locker(&format!("alice:{PASSWORD}@{hosts}/shop")).await;
    assert!(shop.is_err(), "created /leasehold in a read-only chroot");
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    operator.delete("/shop", None).await.unwrap();
    operator.delete("/billing", None).await.unwrap();
    for chroot in ["/shop", "/billing"] {
        operator.create(chroot, b"", &open).await.unwrap();
    }
    let shop = locker(&format!("alice:{PASSWORD}@{hosts}/shop"))
        .await
        .unwrap();
    let billing = locker(&format!("bob:{WRONG}@{hosts}/billing"))
        .await
        .unwrap();
    let a = shop.lock("order:1").acquire().await.unwrap();
    let b = billing.lock("order:1").acquire().await.unwrap();
    let owner = raw(&hosts, Some(&format!("alice:{PASSWORD}"))).await;
    assert_eq!(
        owner
            .list_children(&format!("/shop{ORDER_1}"))
            .await
            .unwrap()
            .len(),
        1
    );
    no_auth(
        owner.list_children(&format!("/billing{ORDER_1}")).await,
        "alice in bob's chroot",
    );
    a.release().await.unwrap();
    b.release().await.unwrap();
}
