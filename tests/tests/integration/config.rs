//! `LockConfig` (feature `serde`): from TOML files and the environment, into a `Locker` that
//! talks to a real Redis and a `RouteLocks` that applies the rules; bad config is an error
//! naming the field and the value. Every test is bounded by a timeout.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use leasehold::{LockConfig, LockError, Locker, RouteLocks};
use leasehold_tests::harness::{MysqlServer, RedisServer};

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test did not finish within 30s")
}

/// A file in a fresh temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "leasehold-config-test-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("leasehold.toml");
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn config_error<T: std::fmt::Debug>(result: Result<T, LockError>) -> String {
    match result {
        Err(e @ LockError::Config { .. }) => e.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_config_file_builds_a_locker_on_redis_with_its_settings() {
    bounded(async {
        let redis = RedisServer::start().await;
        let file = TempFile::new(
            "full",
            &format!(
                r#"
                url = "{}"
                prefix = "cfgtest"
                lease = "20s"
                wait = "150ms"
                op_timeout = "500ms"
                connect_timeout = "1s"

                [[rules]]
                method = "POST"
                path = "/orders/{{sku}}"
                key = "stock:<sku>"
                lease = "10s"
                "#,
                redis.url()
            ),
        );
        let config = LockConfig::from_toml_file(&file.0).unwrap();
        let locker = Locker::from_config(&config).await.unwrap();
        assert_eq!(locker.prefix(), "cfgtest");
        assert_eq!(locker.default_lease(), Duration::from_secs(20));
        assert_eq!(locker.default_wait(), Duration::from_millis(150));

        let guard = locker.lock("stock:1").acquire().await.unwrap();
        let keys = redis.keys("cfgtest:*").await;
        assert!(
            keys.iter().any(|k| k.starts_with("cfgtest:lock:")),
            "keys: {keys:?}"
        );
        // The default wait of the file applies: busy after ~150 ms.
        let started = std::time::Instant::now();
        let err = locker.lock("stock:1").acquire().await.unwrap_err();
        assert!(err.is_busy());
        assert!(started.elapsed() < Duration::from_secs(2));
        guard.release().await.unwrap();

        let locks = RouteLocks::from_config(locker, &config);
        let (rule, params) = locks.find("POST", "/orders/9").unwrap();
        assert_eq!(rule.lease_setting(), Some(Duration::from_secs(10)));
        assert_eq!(params.get("sku"), Some("9"));
        assert!(locks.find("GET", "/orders/9").is_none());
    })
    .await;
}

#[tokio::test]
async fn the_environment_overrides_the_file() {
    bounded(async {
        let redis = RedisServer::start().await;
        let file = TempFile::new(
            "env",
            "url = \"redis://127.0.0.1:1\"\nprefix = \"from-file\"\nwait = \"1s\"\n",
        );
        let vars = [
            ("LEASEHOLD_URL", redis.url()),
            ("LEASEHOLD_PREFIX", "from-env".to_owned()),
            ("LEASEHOLD_LEASE", "45s".to_owned()),
            ("UNRELATED", "x".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v));
        let config = LockConfig::from_toml_file(&file.0)
            .unwrap()
            .with_vars(vars)
            .unwrap();
        let locker = Locker::from_config(&config).await.unwrap();
        assert_eq!(locker.prefix(), "from-env");
        assert_eq!(locker.default_lease(), Duration::from_secs(45));
        assert_eq!(locker.default_wait(), Duration::from_secs(1));
    })
    .await;
}

#[test]
fn from_env_reads_the_process_environment() {
    // Reads only; whatever LEASEHOLD_* the test runner has set must parse.
    let config = LockConfig::from_env().unwrap();
    assert!(config.rules.is_empty());
}

#[tokio::test]
async fn bad_config_names_the_field_and_the_value() {
    let cases: &[(&str, &str)] = &[
        (
            r#"lease = "ten seconds""#,
            r#"lease: "ten seconds" is not a duration"#,
        ),
        (r#"wait = "-1s""#, r#"wait: "-1s" is not a duration"#),
        (r#"lease = "1ms""#, r#"lease: "1ms" is too short"#),
        (
            r#"connect_timeout = "0ms""#,
            r#"connect_timeout: "0ms" is zero"#,
        ),
        (r#"prefix = """#, r#"prefix: "" is refused"#),
        (
            r#"url = "localhost:6379""#,
            r#"url: "localhost:6379" is not a Redis URL"#,
        ),
        (r#"urls = ["redis://a"]"#, "unknown field `urls`"),
        (r#"watchdog = "yes""#, "watchdog"),
        (
            r#"rules = [{ path = "/orders/{sku}", key = "stock:<id>" }]"#,
            "rules[0].key: key template \"stock:<id>\": no path parameter `id`",
        ),
        (
            r#"rules = [{ path = "/orders/{sku", key = "k" }]"#,
            "rules[0].path: path pattern \"/orders/{sku\"",
        ),
        (
            r#"rules = [{ path = "/", key = "k", wait = "2 fortnights!" }]"#,
            r#"wait: "2 fortnights!" is not a duration"#,
        ),
        ("lease = ", "invalid leasehold config"),
    ];
    for (text, expected) in cases {
        let e = config_error(LockConfig::from_toml_str(text));
        assert!(e.contains(expected), "for {text:?}: {e}");
        assert!(e.starts_with("invalid leasehold config"), "{e}");
    }
    // A file error names the file.
    let file = TempFile::new("bad", "lease = \"30x\"\n");
    let e = config_error(LockConfig::from_toml_file(&file.0));
    assert!(
        e.contains("leasehold.toml") && e.contains(r#"lease: "30x""#),
        "{e}"
    );
    let e = config_error(LockConfig::from_toml_file("/nonexistent/leasehold.toml"));
    assert!(
        e.contains("cannot read") && e.contains("/nonexistent/leasehold.toml"),
        "{e}"
    );
    // A config that names no deployment cannot build a locker, and says what to set.
    let e = config_error(Locker::from_config(&LockConfig::default()).await);
    assert!(
        e.contains("no deployment named")
            && e.contains("LEASEHOLD_URL")
            && e.contains("LEASEHOLD_POSTGRES"),
        "{e}"
    );
    // Passwords are never echoed.
    let e = config_error(LockConfig::from_toml_str(
        r#"url = "tcp://admin:hunter2@cache:6379""#,
    ));
    assert!(!e.contains("hunter2"), "{e}");
}

#[tokio::test]
async fn a_config_file_switches_the_deployment_to_redlock() {
    let nodes = leasehold_tests::harness::RedisServer::start_many(3).await;
    let urls: Vec<String> = nodes.iter().map(|n| format!("{:?}", n.url())).collect();
    let config = LockConfig::from_toml_str(&format!(
        "redlock = [{}]\nop_timeout = \"100ms\"\nprefix = \"cfg\"\n",
        urls.join(", ")
    ))
    .unwrap();
    let locker = Locker::from_config(&config).await.unwrap();
    assert!(format!("{locker:?}").contains("redlock over"));
    let guard = locker.lock("k").acquire().await.unwrap();
    // The lock is on every node, under the configured prefix.
    for node in &nodes {
        assert_eq!(node.keys("cfg:lock:*").await.len(), 1);
    }
    guard.release().await.unwrap();
    // Two deployments at once is an error that names them.
    let both = LockConfig::from_toml_str(&format!(
        "url = {}\nredlock = [{}]\n",
        urls[0],
        urls.join(", ")
    ))
    .unwrap();
    let e = config_error(Locker::from_config(&both).await);
    assert!(e.contains("url, redlock are all set"), "{e}");
}

/// A MySQL database named by the config's `mysql` key, or by `LEASEHOLD_MYSQL`, is where the
/// locker's locks live: a lock taken through one is held for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mysql_key_and_variable_name_a_mysql_database() {
    let db = MysqlServer::start().await;
    let from_file =
        LockConfig::from_toml_str(&format!("mysql = \"{}\"\n", db.url())).expect("a mysql config");
    let a = Locker::from_config(&from_file)
        .await
        .expect("a locker on MySQL");
    let from_env = LockConfig::default()
        .with_vars([("LEASEHOLD_MYSQL".to_owned(), db.url())])
        .expect("LEASEHOLD_MYSQL");
    let b = Locker::from_config(&from_env)
        .await
        .expect("a locker on MySQL");
    let guard = a.lock("cfg").acquire().await.expect("acquire");
    assert!(
        matches!(b.lock("cfg").try_acquire().await, Ok(None)),
        "one database"
    );
    guard.release().await.expect("release");
    assert!(b.lock("cfg").try_acquire().await.unwrap().is_some());
    // A URL there that is no MySQL URL is a configuration error, without its password.
    let bad = LockConfig::default()
        .with_vars([(
            "LEASEHOLD_MYSQL".to_owned(),
            "redis://u:s3cret@h:1".to_owned(),
        )])
        .expect("read as given; checked when a locker is built");
    let e = Locker::from_config(&bad).await.map(|_| ()).unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(!e.to_string().contains("s3cret"), "{e}");
}
