//! Unit tests of the configuration: documents, the environment, and what each error says.

use std::time::Duration;

use super::checks::redact;
use super::LockConfig;
use crate::error::LockError;
use crate::locker::Locker;
use crate::web::RouteLocks;

fn err(text: &str) -> String {
    match LockConfig::from_toml_str(text) {
        Err(e @ LockError::Config { .. }) => e.to_string(),
        other => panic!("expected a config error for {text:?}, got {other:?}"),
    }
}

#[test]
fn a_full_config_parses() {
    let config = LockConfig::from_toml_str(
        r#"
        url = "redis://127.0.0.1:6379/2"
        prefix = "shop"
        service = "checkout"
        lease = "30s"
        wait = "1500ms"
        op_timeout = "500ms"
        connect_timeout = "2s"
        watchdog = false

        [[rules]]
        method = "POST"
        path = "/orders/{sku}"
        key = "stock:<sku>"
        lease = "10s"
        wait = "2s"
        watchdog = true
        on_lost = "continue"

        [[rules]]
        path = "/carts/{id}"
        key = "cart:<header.X-Tenant>:<id>"
        "#,
    )
    .unwrap();
    assert_eq!(config.url.as_deref(), Some("redis://127.0.0.1:6379/2"));
    assert_eq!(config.prefix.as_deref(), Some("shop"));
    assert_eq!(config.service.as_deref(), Some("checkout"));
    assert_eq!(config.lease, Some(Duration::from_secs(30)));
    assert_eq!(config.wait, Some(Duration::from_millis(1500)));
    assert_eq!(config.op_timeout, Some(Duration::from_millis(500)));
    assert_eq!(config.connect_timeout, Some(Duration::from_secs(2)));
    assert_eq!(config.watchdog, Some(false));
    assert_eq!(config.rules.len(), 2);
    let spec = config.rules[0].spec();
    assert_eq!(spec.lease, Some(Duration::from_secs(10)));
    assert_eq!(spec.wait, Some(Duration::from_secs(2)));
    assert_eq!(spec.watchdog, Some(true));
    assert_eq!(config.rules[1].method(), None);
}

#[test]
fn etcd_endpoints_parse_from_toml_and_env_and_never_show_passwords() {
    let config = LockConfig::from_toml_str(
        r#"
        etcd = ["http://root:s3cret@e1:2379", "http://e2:2379"]
        session_timeout = "4s"
        "#,
    )
    .unwrap();
    assert_eq!(config.etcd.len(), 2);
    assert_eq!(config.session_timeout, Some(Duration::from_secs(4)));
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("s3cret") && shown.contains("e2:2379"),
        "{shown}"
    );
    let env = LockConfig::default()
        .with_vars([("LEASEHOLD_ETCD".to_owned(), "e1:2379, e2:2379".to_owned())])
        .unwrap();
    assert_eq!(env.etcd, ["e1:2379", "e2:2379"]);
    let both = LockConfig {
        url: Some("redis://a:6379".into()),
        ..env
    };
    let e = both.deployment().unwrap_err().to_string();
    assert!(e.contains("url, etcd are all set"), "{e}");
}

#[test]
fn deployments_beyond_one_server_parse() {
    let config = LockConfig::from_toml_str(
        r#"
        redlock = ["redis://a:6379", "redis://b:6379", "redis://c:6379"]
        clock_drift = 0.02
        "#,
    )
    .unwrap();
    assert_eq!(config.redlock.len(), 3);
    assert_eq!(config.clock_drift, Some(0.02));
    let config = LockConfig::from_toml_str(
        r#"
        [sentinel]
        urls = ["redis://s1:26379"]
        master = "mymaster"
        min_replicas = 1
        "#,
    )
    .unwrap();
    let sentinel = config.sentinel.unwrap();
    assert_eq!(
        (sentinel.master.as_str(), sentinel.min_replicas),
        ("mymaster", 1)
    );
    let env = LockConfig::default()
        .with_vars([
            (
                "LEASEHOLD_CLUSTER".to_owned(),
                "redis://n1:7000, redis://n2:7000".to_owned(),
            ),
            ("LEASEHOLD_CLOCK_DRIFT".to_owned(), "0.05".to_owned()),
        ])
        .unwrap();
    assert_eq!(env.cluster, ["redis://n1:7000", "redis://n2:7000"]);
    assert!(err(r#"clock_drift = 0.7"#).contains("clock_drift"));
    assert!(err(r#"redlock = ["ftp://a"]"#).contains("not a Redis URL"));
    let both = LockConfig::from_toml_str(
        r#"
        url = "redis://a:6379"
        cluster = ["redis://b:7000"]
        "#,
    )
    .unwrap();
    let e = both.deployment().unwrap_err().to_string();
    assert!(e.contains("url, cluster are all set"), "{e}");
}

#[tokio::test]
async fn status_codes_come_from_the_config_and_bad_ones_are_named() {
    let config =
        LockConfig::from_toml_str("[status_codes]\nbusy = 423\nunavailable = 500").unwrap();
    let locks = RouteLocks::from_config(Locker::in_memory(), &config);
    let busy = LockError::Busy { retry_after: None };
    assert_eq!(locks.response(&busy).status, 423);
    let down = LockError::unavailable("down", None);
    assert_eq!(locks.response(&down).status, 500);
    let defaults = RouteLocks::from_config(Locker::in_memory(), &LockConfig::default());
    assert_eq!(defaults.response(&busy).status, 409);

    let e = err("[status_codes]\nbusy = 204");
    assert!(e.contains("busy = 204") && e.contains("400 to 599"), "{e}");
    let e = err("[status_codes]\nbussy = 423");
    assert!(e.contains("bussy"), "{e}");
}

#[test]
fn an_empty_config_is_all_defaults() {
    let config = LockConfig::from_toml_str("").unwrap();
    assert!(config.url.is_none() && config.lease.is_none() && config.rules.is_empty());
}

#[test]
fn errors_name_the_field_and_the_value() {
    let e = err(r#"lease = "30x""#);
    assert!(e.contains(r#"lease: "30x" is not a duration"#), "{e}");
    let e = err(r#"lease = "5ms""#);
    assert!(e.contains(r#"lease: "5ms" is too short"#), "{e}");
    let e = err(r#"op_timeout = "0s""#);
    assert!(e.contains(r#"op_timeout: "0s" is zero"#), "{e}");
    let e = err(r#"wait = 30"#);
    assert!(e.contains("wait") && e.contains("30"), "{e}");
    let e = err(r#"leese = "30s""#);
    assert!(e.contains("unknown field `leese`"), "{e}");
    let e = err(r#"prefix = "a{b}""#);
    assert!(e.contains(r#"prefix: "a{b}" is refused"#), "{e}");
    let e = err(r#"service = "a\nb""#);
    assert!(e.contains(r#"service: "a\nb" is refused"#), "{e}");
    let e = err(r#"service = """#);
    assert!(e.contains("service") && e.contains("is refused"), "{e}");
    let e = err(r#"url = "ftp://user:hunter2@cache:6379""#);
    assert!(
        e.contains("url: \"ftp://***@cache:6379\" is not a Redis URL"),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
    let e = err(r#"url = "http://user:hunter2@cache:6379""#);
    assert!(
        e.contains("url: \"http://***@cache:6379\" is an etcd endpoint")
            && e.contains("etcd = [\"...\"]"),
        "{e}"
    );
    assert!(!e.contains("hunter2"), "{e}");
    let e = err(r#"rules = [{ path = "/orders/{sku}", key = "stock:<skux>" }]"#);
    assert!(e.contains("rules[0].key:") && e.contains("`skux`"), "{e}");
    let e = err(r#"rules = [{ path = "orders", key = "k" }]"#);
    assert!(e.contains(r#"rules[0].path: path pattern "orders""#), "{e}");
    let e = err(r#"rules = [{ method = "PO ST", path = "/", key = "k" }]"#);
    assert!(e.contains(r#"rules[0].method: method "PO ST""#), "{e}");
    let e = err(r#"rules = [{ path = "/", key = "k" }, { path = "/", key = "k", lease = "1h!" }]"#);
    assert!(
        e.contains(r#"lease: "1h!" is not a duration"#) && e.contains("line 1, column 70"),
        "{e}"
    );
    let e = err(r#"rules = [{ path = "/", key = "k", on_lost = "panic" }]"#);
    assert!(e.contains(r#"on_lost: "panic" is not an option"#), "{e}");
    let e = err(r#"rules = [{ path = "/", key = "k", lock = "x" }]"#);
    assert!(e.contains("unknown field `lock`"), "{e}");
    let e = err(r#"rules = [{ path = "/" }]"#);
    assert!(e.contains("missing field `key`"), "{e}");
}

#[test]
fn the_environment_overrides_and_names_the_variable() {
    let vars = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let config = LockConfig::from_toml_str(
        r#"url = "redis://a:1"
        lease = "30s""#,
    )
    .unwrap()
    .with_vars(vars(&[
        ("LEASEHOLD_URL", "redis://b:2"),
        ("LEASEHOLD_WAIT", "2s"),
        ("LEASEHOLD_OP_TIMEOUT", "250ms"),
        ("LEASEHOLD_CONNECT_TIMEOUT", "3s"),
        ("LEASEHOLD_WATCHDOG", "off"),
        ("LEASEHOLD_PREFIX", "p"),
        ("LEASEHOLD_SERVICE", "billing"),
        ("LEASEHOLD_REDIS_SERVER", "/usr/bin/redis-server"),
        ("PATH", "/bin"),
    ]))
    .unwrap();
    assert_eq!(config.url.as_deref(), Some("redis://b:2"));
    assert_eq!(config.lease, Some(Duration::from_secs(30)));
    assert_eq!(config.wait, Some(Duration::from_secs(2)));
    assert_eq!(config.op_timeout, Some(Duration::from_millis(250)));
    assert_eq!(config.connect_timeout, Some(Duration::from_secs(3)));
    assert_eq!(config.watchdog, Some(false));
    assert_eq!(config.prefix.as_deref(), Some("p"));
    assert_eq!(config.service.as_deref(), Some("billing"));
    let e = LockConfig::default()
        .with_vars(vars(&[("LEASEHOLD_LEASE", "soon")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"LEASEHOLD_LEASE: "soon" is not a duration"#),
        "{e}"
    );
    let e = LockConfig::default()
        .with_vars(vars(&[("LEASEHOLD_URL", "localhost:6379")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"LEASEHOLD_URL: "localhost:6379" is not a Redis URL"#),
        "{e}"
    );
}

#[test]
fn passwords_are_redacted() {
    assert_eq!(redact("redis://u:pw@h:1"), "redis://***@h:1");
    assert_eq!(redact("u:pw@h:1"), "***@h:1");
    assert_eq!(redact("redis://h:1"), "redis://h:1");
}

#[test]
fn a_url_of_another_engine_names_the_key_that_takes_it() {
    let e = err(r#"url = "postgres://app:s3cret@db:5432/app""#);
    assert!(
        e.contains(r#"url: "postgres://***@db:5432/app" is a PostgreSQL URL"#)
            && e.contains(r#"write it as postgres = "...""#),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
    let e = LockConfig::default()
        .with_vars([("LEASEHOLD_URL".to_owned(), "postgresql://db/app".to_owned())])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("LEASEHOLD_URL") && e.contains("LEASEHOLD_POSTGRES"),
        "{e}"
    );
}

/// The config as a table of the application's own settings: an error points at the bad key's
/// line, not at the table's.
#[test]
fn errors_in_a_nested_table_point_at_the_bad_key() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Settings {
        port: u16,
        locks: LockConfig,
    }
    let text = "port = 8080\n\n[locks]\npostgres = \"postgres://db/app\"\nlease = \"30s\"\nwait = \"3 fortnights!\"\n";
    let e = toml::from_str::<Settings>(text).unwrap_err().to_string();
    assert!(e.contains("line 6"), "{e}");
    assert!(
        e.contains(r#"wait: "3 fortnights!" is not a duration"#),
        "{e}"
    );
    let text = "port = 8080\n[locks]\nurl = \"redis://a\"\n\n[[locks.rules]]\npath = \"/\"\nkey = \"k\"\n\n[[locks.rules]]\npath = \"/b\"\nkey = \"k\"\nlease = \"1ms\"\n";
    let e = toml::from_str::<Settings>(text).unwrap_err().to_string();
    assert!(e.contains("line 12"), "{e}");
    assert!(e.contains(r#"lease: "1ms" is too short"#), "{e}");
}

/// A variable naming an engine replaces the file's engine; two named by variables are still
/// an error.
#[test]
fn the_environment_replaces_the_files_deployment() {
    let file = LockConfig::from_toml_str(
        r#"
        postgres = "postgres://db/app"
        lease = "20s"
        "#,
    )
    .unwrap();
    let moved = file
        .clone()
        .with_vars([("LEASEHOLD_URL".to_owned(), "redis://cache:6379".to_owned())])
        .unwrap();
    assert_eq!(moved.url.as_deref(), Some("redis://cache:6379"));
    assert_eq!(moved.postgres, None);
    assert_eq!(moved.lease, Some(Duration::from_secs(20)));
    assert!(moved.deployment().is_ok());
    let moved = file
        .clone()
        .with_vars([(
            "LEASEHOLD_ETCD".to_owned(),
            "http://e1:2379,http://e2:2379".to_owned(),
        )])
        .unwrap();
    assert_eq!(moved.etcd, ["http://e1:2379", "http://e2:2379"]);
    assert!(moved.postgres.is_none() && moved.url.is_none());
    // Only the master's name from the environment: the file's sentinels stay.
    let sentinel = LockConfig::from_toml_str(
        r#"
        [sentinel]
        urls = ["redis://s1:26379"]
        master = "old"
        "#,
    )
    .unwrap()
    .with_vars([("LEASEHOLD_SENTINEL_MASTER".to_owned(), "new".to_owned())])
    .unwrap();
    let s = sentinel.sentinel.as_ref().unwrap();
    assert_eq!((s.urls.len(), s.master.as_str()), (1, "new"));
    let two = file
        .with_vars([
            ("LEASEHOLD_URL".to_owned(), "redis://cache:6379".to_owned()),
            (
                "LEASEHOLD_POSTGRES".to_owned(),
                "postgres://db/app".to_owned(),
            ),
        ])
        .unwrap()
        .deployment()
        .unwrap_err()
        .to_string();
    assert!(two.contains("url, postgres are all set"), "{two}");
}

#[test]
fn quoted_lines_hide_credentials() {
    use super::checks::redact_text;
    assert_eq!(
        redact_text(r#"1 | url = "redis://u:hunter2@h:6379" x@y"#),
        r#"1 | url = "redis://***@h:6379" x@y"#
    );
    assert_eq!(
        redact_text(r#"etcd = ["app:pw@e1:2379", "http://a:b@e2"]"#),
        r#"etcd = ["***@e1:2379", "http://***@e2"]"#
    );
    // A syntax error on a line with a password: the message quotes the line, masked.
    let e = err("postgres = \"postgres://app:s3cret@db/app\"\nlease = ");
    assert!(!e.contains("s3cret"), "{e}");
}

/// A top-level key written after a `[profiles.NAME]` header lands in that table (TOML's
/// rule): the error names the table and says to move the key up.
#[test]
fn a_top_level_key_after_a_profile_table_is_reported_with_the_table_and_the_fix() {
    let e = err(r#"
url = "redis://127.0.0.1:6379"

[profiles.expiry-worker]
lease = "10s"

op_timeout = "2s"
"#);
    assert!(
        e.contains("`op_timeout` is in the table [profiles.expiry-worker]")
            && e.contains("move `op_timeout = ...` above the first [table] header"),
        "{e}"
    );
    let e = err("[profiles.fast]\nleese = \"1s\"\n");
    assert!(
        e.contains("unknown setting `leese` in the table [profiles.fast]")
            && e.contains("did you mean `lease`?"),
        "{e}"
    );
    // The profile's own values are still checked at the value.
    let e = err("[profiles.fast]\nlease = \"1x\"\n");
    assert!(e.contains(r#"lease: "1x" is not a duration"#), "{e}");
    let e = err("[profiles.fast]\nlimit = 0\n");
    assert!(e.contains("limit"), "{e}");
    let config = LockConfig::from_toml_str(
        "[profiles.fast]\nlease = \"1s\"\nwait = \"0s\"\nwatchdog = false\nfair = true\n\
         [profiles.api]\nlimit = 3\n",
    )
    .unwrap();
    let fast = &config.profiles["fast"];
    assert_eq!(
        (fast.lease, fast.wait, fast.watchdog, fast.fair, fast.limit),
        (
            Some(Duration::from_secs(1)),
            Some(Duration::ZERO),
            Some(false),
            Some(true),
            None
        )
    );
    assert_eq!(config.profiles["api"].limit, Some(3));
}

/// The list of top-level settings the profile error knows is the config's own.
#[test]
fn the_top_level_settings_the_profile_error_names_are_the_configs() {
    for name in super::document::TOP_LEVEL_SETTINGS {
        // A value of a wrong type: an error about the value, never an unknown field.
        let e = match LockConfig::from_toml_str(&format!("{name} = -1.5")) {
            Err(e) => e.to_string(),
            Ok(_) => continue,
        };
        assert!(!e.contains("unknown field"), "{name}: {e}");
    }
    let e = err("nonsense = -1.5");
    assert!(e.contains("unknown field"), "{e}");
}
