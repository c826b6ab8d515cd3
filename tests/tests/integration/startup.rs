//! What attributes and route rules ask for, checked before the first request (issue 31, "fail
//! loudly, and early"): every call site at once, by function name and key template, when a
//! locker is checked, the global default installed or the middleware mounted; and a call
//! site's configuration error met at run time, logged at `error` once, not silently answered
//! `500` on every call. Profiles (`[profiles.NAME]`) are the settings these checks resolve.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::{distributed_lock, LockConfig, LockError, Locker, Profile, RouteLocks, RouteRule};
use leasehold_tests::harness::{EtcdServer, RedisServer};
use tracing::field::{Field, Visit};

#[distributed_lock(key = "partner:<id>", permits = 3, locker = locker)]
async fn call_partner(locker: &Locker, id: u32) -> Result<u32, LockError> {
    Ok(id)
}

#[distributed_lock(key = "payout:<id>", profile = "payments", locker = locker, guard = g)]
async fn payout(locker: &Locker, id: u64) -> Result<u64, LockError> {
    let _ = id;
    Ok(g.fence())
}

#[distributed_lock(key = "startup:report", hold_at_most = "10m", locker = locker)]
async fn nightly_report(locker: &Locker) -> Result<(), LockError> {
    let _ = locker;
    Ok(())
}

/// Uses the global default, with a profile no locker of this binary defines: installing a
/// default must fail for it (and so none is ever installed in this binary, as the other
/// tests need).
#[distributed_lock(key = "startup:default", profile = "defined-by-nobody")]
async fn uses_the_default_with_an_unknown_profile() -> Result<(), LockError> {
    Ok(())
}

/// The lines of a check's error that name the call site `function`.
fn lines_about(err: &LockError, function: &str) -> Vec<String> {
    err.to_string()
        .lines()
        .filter(|line| line.contains(&format!("startup::{function}`")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_profile_the_locker_lacks_is_found_at_start_up_by_function_file_line_and_key() {
    let bare = Locker::in_memory();
    let err = bare.check_call_sites().unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    let lines = lines_about(&err, "payout");
    assert_eq!(lines.len(), 1, "{err}");
    let line = &lines[0];
    for part in [
        "integration::startup::payout`",
        "tests/tests/integration/startup.rs:",
        "key \"payout:<id>\"",
        "locker = locker",
        "profile \"payments\" is not defined for this locker (it has none)",
        "[profiles.payments]",
    ] {
        assert!(line.contains(part), "{part:?} not in {line:?}");
    }
    // In memory, semaphores and unrenewed long leases are fine.
    assert!(lines_about(&err, "call_partner").is_empty(), "{err}");
    assert!(lines_about(&err, "nightly_report").is_empty(), "{err}");

    // With the profile defined, the call site passes, and runs with it.
    let with = Locker::builder()
        .profile("payments", Profile::new().wait(Duration::ZERO))
        .build_in_memory()
        .unwrap();
    if let Err(err) = with.check_call_sites() {
        assert!(lines_about(&err, "payout").is_empty(), "{err}");
    }
    assert!(payout(&with, 1).await.is_ok());
}

#[tokio::test]
async fn setting_a_global_default_that_an_attribute_cannot_use_fails_and_installs_nothing() {
    let err = leasehold::set_global_default(Locker::in_memory()).unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    let lines = lines_about(&err, "uses_the_default_with_an_unknown_profile");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("\"startup:default\""), "{err}");
    assert!(lines[0].contains("defined-by-nobody"), "{err}");
    // Only the call sites that use the default are its business.
    assert!(lines_about(&err, "payout").is_empty(), "{err}");
    assert!(leasehold::global_default().is_none());
    let err = uses_the_default_with_an_unknown_profile()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("set_global_default"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_on_redlock_are_found_at_start_up() {
    let servers = RedisServer::start_many(3).await;
    let locker = Locker::builder()
        .redlock(servers.iter().map(|s| s.url()))
        .build()
        .await
        .unwrap();
    let err = locker.check_call_sites().unwrap_err();
    let lines = lines_about(&err, "call_partner");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("key \"partner:<id>\""), "{err}");
    assert!(lines[0].contains("semaphores"), "{err}");
    // The same resolution at run time: the call fails the same way.
    let called = call_partner(&locker, 7).await.unwrap_err();
    assert!(matches!(called, LockError::Config { .. }), "{called:?}");
    assert!(
        lines[0].contains(&message(&called)),
        "{lines:?} vs {called}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lease_above_the_session_is_found_at_start_up_and_refused_at_run_time() {
    let etcd = EtcdServer::start().await;
    let locker = Locker::builder()
        .etcd([etcd.endpoint()])
        .session_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    let err = locker.check_call_sites().unwrap_err();
    let lines = lines_about(&err, "nightly_report");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("600s without the watchdog"), "{err}");
    assert!(lines[0].contains("session_timeout"), "{err}");
    let run = nightly_report(&locker).await.unwrap_err();
    assert!(matches!(run, LockError::Config { .. }), "{run:?}");
    // Renewed, a lease above the session is as good as the session: still taken.
    let renewed = locker
        .lock("startup:renewed")
        .lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    renewed.release().await.unwrap();
}

/// A `Config` error's message.
fn message(e: &LockError) -> String {
    match e {
        LockError::Config { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[derive(Default)]
struct Fields {
    function: Option<String>,
    message: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "function" {
            self.function = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = Some(format!("{value:?}")),
            "function" => self.function = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_call_sites_configuration_error_is_logged_at_error_once() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let _tap = crate::support::tap(move |event| {
        let meta = event.metadata();
        if meta.target() != "leasehold::config" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields
            .function
            .as_deref()
            .is_some_and(|f| f.ends_with("startup::payout"))
        {
            into.lock()
                .unwrap()
                .push((*meta.level(), fields.message.unwrap_or_default()));
        }
    });
    let locker = Locker::in_memory();
    for id in 0..5 {
        let err = payout(&locker, id).await.unwrap_err();
        assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, tracing::Level::ERROR);
    assert!(seen[0].1.contains("logged once per call site"), "{seen:?}");
}

#[tokio::test]
async fn route_rules_are_checked_when_the_middleware_is_mounted() {
    let rule = || {
        RouteRule::new("POST", "/payouts/{id}", "payout:<id>")
            .unwrap()
            .profile("payments")
    };
    let locks = RouteLocks::new(Locker::in_memory()).rule(rule());
    let err = locks.check().unwrap_err().to_string();
    assert!(
        err.contains("POST /payouts/{id} (key \"payout:<id>\")") && err.contains("\"payments\""),
        "{err}"
    );

    // actix-web: the app's service does not start.
    {
        use actix_service::IntoServiceFactory;
        use actix_web::dev::{AppConfig, ServiceFactory};
        use actix_web::{web, App, HttpResponse};
        let app = App::new()
            .wrap(locks.clone())
            .route("/payouts/{id}", web::post().to(HttpResponse::Ok));
        let started = app.into_factory().new_service(AppConfig::default()).await;
        assert!(
            started.is_err(),
            "the app started with a rule its locker cannot serve"
        );
    }

    // axum: building the router stops with the message, as axum's own routing mistakes do.
    let mounted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        axum::Router::<()>::new()
            .route("/payouts/{id}", axum::routing::post(|| async { "ok" }))
            .layer(locks.clone())
    }));
    let panic = mounted.expect_err("the router was built");
    let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.contains("payout:<id>"), "{text}");

    // With the profile defined, both mount.
    let fine = RouteLocks::new(
        Locker::builder()
            .profile("payments", Profile::new().lease(Duration::from_secs(5)))
            .build_in_memory()
            .unwrap(),
    )
    .rule(rule());
    fine.check().unwrap();
    let _router = axum::Router::<()>::new()
        .route("/payouts/{id}", axum::routing::post(|| async { "ok" }))
        .layer(fine);
}

/// Profiles come from the config file: an attribute's literals are the defaults a profile
/// overrides, a semaphore's limit comes from it, and a route rule names one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_from_the_config_file_override_the_attributes_literals() {
    let redis = RedisServer::start().await;
    let config = LockConfig::from_toml_str(&format!(
        r#"
        url = "{}"
        wait = "5s"

        [profiles.payments]
        wait = "0s"
        lease = "45s"

        [profiles.partner]
        limit = 1

        [[rules]]
        method = "POST"
        path = "/payouts/{{id}}"
        key = "payout:<id>"
        profile = "payments"
        "#,
        redis.url()
    ))
    .unwrap();
    assert_eq!(
        config.profiles["payments"].wait,
        Some(Duration::ZERO),
        "{config:?}"
    );
    let locker = Locker::from_config(&config).await.unwrap();
    RouteLocks::from_config(locker.clone(), &config)
        .check()
        .unwrap();
    if let Err(err) = locker.check_call_sites() {
        assert!(lines_about(&err, "payout").is_empty(), "{err}");
        assert!(lines_about(&err, "call_partner").is_empty(), "{err}");
    }

    // The profile's wait of 0 s, not the locker's 5 s: a busy payout fails at once.
    let held = locker.lock("payout:1").acquire().await.unwrap();
    let started = Instant::now();
    let busy = payout(&locker, 1).await.unwrap_err();
    assert!(busy.is_busy(), "{busy:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    held.release().await.unwrap();
    assert!(payout(&locker, 1).await.is_ok());

    // The profile's limit of 1, not the attribute's 3: the second caller finds none free.
    let permit = locker
        .semaphore("partner:9", 3)
        .profile("partner")
        .acquire()
        .await
        .unwrap();
    assert_eq!(permit.limit(), 1);
    let none = locker
        .semaphore("partner:9", 3)
        .profile("partner")
        .try_acquire()
        .await
        .unwrap();
    assert!(none.is_none());
    permit.release().await.unwrap();

    // A profile that is not one is refused where it is written, naming the table.
    let err = LockConfig::from_toml_str("url = \"redis://h:6379\"\n[profiles.bad]\nlimit = 0\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("limit: a semaphore of 0 permits"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    let err = LockConfig::from_toml_str("[profiles.p]\nwiat = \"1s\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("wiat"), "{err}");
}

/// Issue 51: a profile named by a plain request (a campaign's, here) is checked at start-up on
/// the locker the config built, naming the close match; and a `lead_forever` that can never
/// lead says so at `error`, not only in an `Err` nobody awaits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profiles_plain_requests_name_are_checked_at_start_up() {
    #[derive(Default)]
    struct Logged {
        message: String,
        election: String,
    }
    impl Visit for Logged {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            match field.name() {
                "message" => self.message = format!("{value:?}"),
                "election" => self.election = format!("{value:?}"),
                _ => {}
            }
        }
    }
    let etcd = EtcdServer::start().await;
    let config = LockConfig::from_toml_str(&format!(
        "etcd = [\"{}\"]\n\n[profiles.expiry-worker]\nlease = \"10s\"\n",
        etcd.endpoint()
    ))
    .unwrap();
    let locker = Locker::from_config(&config).await.unwrap();
    locker.check_profiles(["expiry-worker"]).unwrap();
    let names: Vec<&str> = locker.profiles().map(|(name, _)| name).collect();
    assert_eq!(names, ["expiry-worker"]);
    let err = locker
        .check_profiles(["expiry-worker", "expiry_worker"])
        .unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("1 profile the program names is not defined for this locker (etcd")
            && text.contains("profile \"expiry_worker\" is not defined")
            && text.contains("did you mean \"expiry-worker\"?"),
        "{text}"
    );

    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let _tap = crate::support::tap(move |event| {
        let meta = event.metadata();
        if meta.target() != "leasehold::config" {
            return;
        }
        let mut logged = Logged::default();
        event.record(&mut logged);
        if logged.election == "startup-expiry" {
            into.lock().unwrap().push((*meta.level(), logged.message));
        }
    });
    let err = locker
        .leader("startup-expiry")
        .profile("expiry_worker")
        .lead_forever(|_leader| async {})
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("did you mean \"expiry-worker\"?"),
        "{err}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, tracing::Level::ERROR);
    assert!(seen[0].1.contains("can never lead"), "{seen:?}");
    let _ = locker.close().await;
}
