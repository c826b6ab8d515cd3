//! axum integration (feature `axum`): `LockError` as a response (status, `Retry-After`, JSON
//! body, nothing leaked), `RouteLocks` as a tower `Layer` (rules, keys from paths and
//! headers, closures, busy, lost, unavailable, config, mutual exclusion under concurrency,
//! configured status codes, the error hook, logs), and the `HeldLock` extractor. Every test is
//! bounded by a timeout.

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use leasehold::{
    distributed_lock, HeldLock, LockConfig, LockError, Locker, OnLost, RouteLocks, RouteRule,
    StatusCodes, TraceKeys,
};
use leasehold_tests::errors::lock_error;
use leasehold_tests::harness::RedisServer;
use tower::ServiceExt;

use super::log_capture::Logs;

const LIMIT: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("the test did not finish within 30s")
}

/// Sends one request through a clone of the router.
async fn call(app: &Router, method: &str, uri: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    Answer::read(res).await
}

#[derive(Debug)]
struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: String,
}

impl Answer {
    async fn read(res: Response) -> Answer {
        let status = res.status();
        if !status.is_success() {
            assert_eq!(
                res.headers().get("content-type").map(|v| v.as_bytes()),
                Some(&b"application/json"[..]),
                "error responses are JSON"
            );
        }
        let retry_after = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        Answer {
            status,
            retry_after,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }
}

async fn fails(Path(kind): Path<String>) -> Result<&'static str, LockError> {
    Err(lock_error(&kind, Duration::from_millis(4001)))
}

#[tokio::test]
async fn lock_errors_are_responses_without_details() {
    bounded(async {
        let app = Router::new().route("/fail/{kind}", get(fails));
        let cases = [
            ("busy", 409, Some("5"), "lock_busy"),
            ("busy-unknown", 409, Some("1"), "lock_busy"),
            ("unavailable", 503, Some("1"), "lock_unavailable"),
            ("lost", 503, None, "lock_lost"),
            ("invalid", 400, None, "lock_invalid_key"),
            ("config", 500, None, "lock_config"),
        ];
        for (kind, status, retry_after, code) in cases {
            let a = call(&app, "GET", &format!("/fail/{kind}"), &[]).await;
            assert_eq!(a.status.as_u16(), status, "{kind}");
            assert_eq!(a.retry_after.as_deref(), retry_after, "{kind}");
            assert_eq!(a.body, format!(r#"{{"error":"{code}"}}"#), "{kind}");
        }
    })
    .await;
}

#[distributed_lock(key = "stock:<sku>", wait = "50ms", locker = locker)]
async fn buy(State(locker): State<Locker>, Path(sku): Path<String>) -> Result<String, LockError> {
    Ok(sku)
}

#[tokio::test]
async fn a_busy_attribute_handler_is_409_with_the_holders_remaining_lease() {
    bounded(async {
        // The holder is another process (another locker): within one locker, waiters queue
        // locally and do not learn the holder's lease.
        let redis = RedisServer::start().await;
        let locker = Locker::connect(&redis.url()).await.unwrap();
        let other = Locker::connect(&redis.url()).await.unwrap();
        let app = Router::new()
            .route("/orders/{sku}", post(buy))
            .with_state(locker.clone());
        let holder = other
            .lock("stock:a")
            .lease(Duration::from_millis(2900))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        let a = call(&app, "POST", "/orders/a", &[]).await;
        assert_eq!(a.status, StatusCode::CONFLICT);
        // The holder's remaining lease (2.9 s less the 50 ms wait and the test's own time),
        // rounded up to whole seconds.
        let retry_after = a.retry_after.as_deref();
        assert!(matches!(retry_after, Some("3" | "2")), "{retry_after:?}");
        assert_eq!(a.body, r#"{"error":"lock_busy"}"#);
        holder.release().await.unwrap();
        let a = call(&app, "POST", "/orders/a", &[]).await;
        assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "a"));
    })
    .await;
}

/// Whether `stock:<sku>` is held by someone other than this request (it should be: by the
/// layer, for this request), and whether this request can re-enter it.
async fn probe(State(locker): State<Locker>, Path(sku): Path<String>) -> String {
    let key = format!("stock:{sku}");
    let reentered = match locker.lock(key.as_str()).try_acquire().await {
        Ok(Some(guard)) => {
            let reentered = guard.is_reentrant();
            guard.release().await.unwrap();
            reentered
        }
        _ => false,
    };
    let held_elsewhere =
        tokio::spawn(async move { matches!(locker.lock(key).try_acquire().await, Ok(None)) })
            .await
            .unwrap();
    format!("reentered={reentered} held={held_elsewhere}")
}

fn orders_rule() -> RouteRule {
    RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")
        .unwrap()
        .wait(Duration::from_millis(50))
}

#[tokio::test]
async fn the_layer_holds_the_lock_of_matching_requests() {
    bounded(async {
        let locker = Locker::in_memory();
        let app = Router::new()
            .route("/orders/{sku}", post(probe).get(probe))
            .layer(RouteLocks::new(locker.clone()).rule(orders_rule()))
            .with_state(locker.clone());
        let a = call(&app, "POST", "/orders/a", &[]).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::OK, "reentered=true held=true")
        );
        let after = locker.lock("stock:a").try_acquire().await.unwrap();
        after
            .expect("released after the response")
            .release()
            .await
            .unwrap();
        let a = call(&app, "GET", "/orders/a", &[]).await;
        assert_eq!(a.body, "reentered=false held=false");
    })
    .await;
}

#[tokio::test]
async fn the_layer_answers_busy_and_keys_it_cannot_build() {
    bounded(async {
        let locker = Locker::in_memory();
        let tenant_rule = RouteRule::with_key_fn("POST", "/carts/{id}", |req| {
            Some(format!(
                "cart:{}:{}",
                req.header("x-tenant")?,
                req.param("id")?
            ))
        })
        .unwrap()
        .wait(Duration::ZERO);
        let app = Router::new()
            .route("/orders/{sku}", post(probe))
            .route("/carts/{sku}", post(probe))
            .layer(
                RouteLocks::new(locker.clone())
                    .rule(orders_rule())
                    .rule(tenant_rule),
            )
            .with_state(locker.clone());
        let holder = locker
            .lock("stock:b")
            .lease(Duration::from_secs(4))
            .acquire()
            .await
            .unwrap();
        let a = call(&app, "POST", "/orders/b", &[]).await;
        assert_eq!(a.status, StatusCode::CONFLICT);
        let secs: u64 = a.retry_after.unwrap().parse().unwrap();
        assert!((1..=4).contains(&secs), "Retry-After {secs}");
        assert_eq!(a.body, r#"{"error":"lock_busy"}"#);
        drop(holder);

        let a = call(&app, "POST", "/carts/7", &[]).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert_eq!(a.body, r#"{"error":"lock_invalid_key"}"#);

        let tenant = locker.lock("cart:acme:7").acquire().await.unwrap();
        let a = call(&app, "POST", "/carts/7", &[("X-Tenant", "acme")]).await;
        assert_eq!(
            a.status,
            StatusCode::CONFLICT,
            "the key came from the header"
        );
        drop(tenant);
        let a = call(&app, "POST", "/carts/7", &[("X-Tenant", "other")]).await;
        assert_eq!(a.status, StatusCode::OK);
    })
    .await;
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_millis(400)).await;
    "finished"
}

#[tokio::test]
async fn a_lost_lease_cancels_the_request_unless_told_to_continue() {
    bounded(async {
        let short = |path: &str, on_lost| {
            RouteRule::new("POST", path, "job")
                .unwrap()
                .lease(Duration::from_millis(60))
                .watchdog(false)
                .on_lost(on_lost)
        };
        let app = Router::new()
            .route("/cancel", post(slow))
            .route("/continue", post(slow))
            .layer(
                RouteLocks::new(Locker::in_memory())
                    .rule(short("/cancel", OnLost::Cancel))
                    .rule(short("/continue", OnLost::Continue)),
            );
        let a = call(&app, "POST", "/cancel", &[]).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.retry_after, None);
        assert_eq!(a.body, r#"{"error":"lock_lost"}"#);
        let a = call(&app, "POST", "/continue", &[]).await;
        assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "finished"));
    })
    .await;
}

/// The read-check-write the lock must protect: a stock of `STOCK`, sold by overlapping
/// requests with an await between the read and the write.
const STOCK: i64 = 20;

async fn sell(State(stock): State<Arc<AtomicI64>>) -> Response {
    let left = stock.load(Ordering::SeqCst);
    if left <= 0 {
        let json = [("content-type", "application/json")];
        return (StatusCode::CONFLICT, json, r#"{"error":"sold_out"}"#).into_response();
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    stock.store(left - 1, Ordering::SeqCst);
    StatusCode::CREATED.into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_serializes_concurrent_requests_across_lockers_of_one_redis() {
    bounded(async {
        let redis = RedisServer::start().await;
        let stock = Arc::new(AtomicI64::new(STOCK));
        // Two "processes": two lockers, two routers, one Redis.
        let mut apps = Vec::new();
        for _ in 0..2 {
            let locker = Locker::builder()
                .url(redis.url())
                .default_wait(Duration::from_secs(20))
                .build()
                .await
                .unwrap();
            let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap();
            apps.push(
                Router::new()
                    .route("/orders/{sku}", post(sell))
                    .layer(RouteLocks::new(locker).rule(rule))
                    .with_state(stock.clone()),
            );
        }
        let mut tasks = Vec::new();
        for i in 0..60 {
            let app = apps[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                call(&app, "POST", "/orders/x", &[]).await.status
            }));
        }
        let mut sold = 0;
        for task in tasks {
            match task.await.unwrap() {
                StatusCode::CREATED => sold += 1,
                StatusCode::CONFLICT => {}
                other => panic!("unexpected status {other}"),
            }
        }
        assert_eq!(sold, STOCK);
        assert_eq!(stock.load(Ordering::SeqCst), 0);
    })
    .await;
}

#[tokio::test]
async fn rules_from_a_config_file_and_an_unreachable_redis() {
    bounded(async {
        let redis = RedisServer::start().await;
        let config = LockConfig::from_toml_str(&format!(
            r#"
            url = "{}"
            prefix = "webtest"
            op_timeout = "300ms"

            [[rules]]
            method = "POST"
            path = "/orders/{{sku}}"
            key = "stock:<sku>"
            wait = "50ms"
            "#,
            redis.url()
        ))
        .unwrap();
        let locker = Locker::from_config(&config).await.unwrap();
        let app = Router::new()
            .route("/orders/{sku}", post(probe))
            .layer(RouteLocks::from_config(locker.clone(), &config))
            .with_state(locker.clone());
        let a = call(&app, "POST", "/orders/c", &[]).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::OK, "reentered=true held=true")
        );

        redis.kill9();
        let a = call(&app, "POST", "/orders/c", &[]).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.retry_after.as_deref(), Some("1"));
        assert_eq!(a.body, r#"{"error":"lock_unavailable"}"#);
    })
    .await;
}

#[tokio::test]
async fn without_a_global_default_the_layer_answers_500() {
    bounded(async {
        // No test in this binary installs a global default.
        let app = Router::new()
            .route("/orders/{sku}", post(|| async { "ran" }))
            .layer(RouteLocks::with_global_default().rule(orders_rule()));
        let a = call(&app, "POST", "/orders/a", &[]).await;
        assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(a.body, r#"{"error":"lock_config"}"#);
    })
    .await;
}

/// The request's lock as the handler sees it through the extractor, next to what the store
/// says of the key, while the request runs. Keeps a copy of the lock for the test.
async fn fenced(
    State((locker, kept)): State<(Locker, Arc<Mutex<Option<HeldLock>>>)>,
    lock: HeldLock,
) -> String {
    let store = locker.inspect(lock.key()).await.unwrap();
    *kept.lock().unwrap() = Some(lock.clone());
    format!(
        "key={} fence={} held={} store_held={} store_fence={}",
        lock.key(),
        lock.fence(),
        lock.is_held(),
        store.held,
        store.last_fence.unwrap_or(0)
    )
}

#[tokio::test]
async fn the_handler_reads_the_key_and_fence_of_the_requests_lock() {
    bounded(async {
        let redis = RedisServer::start().await;
        let locker = Locker::connect(&redis.url()).await.unwrap();
        let kept = Arc::new(Mutex::new(None));
        let app = Router::new()
            .route("/orders/{sku}", post(fenced))
            .layer(RouteLocks::new(locker.clone()).rule(orders_rule()))
            .with_state((locker.clone(), kept.clone()));
        let mut fences = Vec::new();
        for _ in 0..2 {
            let a = call(&app, "POST", "/orders/f", &[]).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.body);
            let fields: Vec<&str> = a.body.split(' ').collect();
            assert_eq!(fields[0], "key=stock:f");
            assert_eq!(fields[2..4], ["held=true", "store_held=true"]);
            let fence: u64 = fields[1].trim_start_matches("fence=").parse().unwrap();
            // The fence the store handed out last is the request's: the handler took no lock.
            assert_eq!(fields[4], format!("store_fence={fence}"));
            fences.push(fence);
        }
        assert!(fences[1] > fences[0], "{fences:?}");
        // The guard stayed with the layer, which released it after the response.
        let kept = kept.lock().unwrap().clone().unwrap();
        assert_eq!(kept.fence(), fences[1]);
        assert!(!kept.is_held());
        assert!(!locker.inspect("stock:f").await.unwrap().held);
    })
    .await;
}

async fn must_be_locked(lock: HeldLock) -> String {
    format!("fence {}", lock.fence())
}

async fn may_be_locked(lock: Option<HeldLock>) -> String {
    match lock {
        Some(lock) => format!("locked {}", lock.key()),
        None => "unlocked".to_owned(),
    }
}

#[tokio::test]
async fn a_route_without_a_rule_rejects_held_lock_and_gives_none() {
    bounded(async {
        let app = Router::new()
            .route("/orders/{sku}", post(may_be_locked).get(must_be_locked))
            .route("/report", get(may_be_locked))
            .layer(RouteLocks::new(Locker::in_memory()).rule(orders_rule()));
        let a = call(&app, "POST", "/orders/g", &[]).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::OK, "locked stock:g")
        );
        let a = call(&app, "GET", "/report", &[]).await;
        assert_eq!((a.status, a.body.as_str()), (StatusCode::OK, "unlocked"));
        // GET matches no rule: the handler that needs the lock is a server bug, said so.
        let a = call(&app, "GET", "/orders/g", &[]).await;
        assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            a.body.starts_with(r#"{"error":"lock_missing","message":"#),
            "{}",
            a.body
        );
        assert!(
            a.body.contains("no RouteLocks rule locked this request"),
            "{}",
            a.body
        );
    })
    .await;
}

#[tokio::test]
async fn status_codes_and_the_hook_shape_the_layers_and_the_handlers_lock_errors() {
    bounded(async {
        let locker = Locker::in_memory();
        let locks = RouteLocks::new(locker.clone())
            .rule(orders_rule())
            .status_codes(StatusCodes::default().busy(423))
            .on_error(|err, mut answer| {
                if err.is_busy() {
                    answer.body = format!(
                        r#"{{"error":"try_again","after":{}}}"#,
                        answer.retry_after.unwrap()
                    );
                }
                answer
            });
        let app = Router::new()
            .route("/orders/{sku}", post(probe))
            .route("/fail/{kind}", get(fails))
            .layer(locks)
            .with_state(locker.clone());
        let holder = locker
            .lock("stock:h")
            .lease(Duration::from_secs(4))
            .acquire()
            .await
            .unwrap();
        let a = call(&app, "POST", "/orders/h", &[]).await;
        assert_eq!(a.status.as_u16(), 423);
        let secs: u64 = a.retry_after.unwrap().parse().unwrap();
        assert!((1..=4).contains(&secs), "Retry-After {secs}");
        assert_eq!(a.body, format!(r#"{{"error":"try_again","after":{secs}}}"#));
        holder.release().await.unwrap();
        let a = call(&app, "POST", "/orders/h", &[]).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::OK, "reentered=true held=true")
        );

        // A handler's own `LockError` (as a `#[distributed_lock]` handler returns it), on a
        // route no rule matches: the same codes and hook.
        let a = call(&app, "GET", "/fail/busy", &[]).await;
        assert_eq!(a.status.as_u16(), 423);
        assert_eq!(a.retry_after.as_deref(), Some("5"));
        assert_eq!(a.body, r#"{"error":"try_again","after":5}"#);
        let a = call(&app, "GET", "/fail/lost", &[]).await;
        assert_eq!((a.status.as_u16(), a.retry_after), (503, None));
        assert_eq!(a.body, r#"{"error":"lock_lost"}"#);
        // Without the layer, the defaults.
        let plain = Router::new().route("/fail/{kind}", get(fails));
        let a = call(&plain, "GET", "/fail/busy", &[]).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (StatusCode::CONFLICT, r#"{"error":"lock_busy"}"#)
        );
    })
    .await;
}

#[tokio::test]
async fn refused_requests_are_logged_with_code_route_and_the_key_as_configured() {
    bounded(async {
        let (logs, _guard) = Logs::capture();
        let locker = Locker::builder()
            .trace_keys(TraceKeys::Hashed)
            .build_in_memory()
            .unwrap();
        let lost = RouteRule::new("POST", "/jobs/{id}", "job:<id>")
            .unwrap()
            .lease(Duration::from_millis(60))
            .watchdog(false);
        let app = Router::new()
            .route("/orders/{sku}", post(probe))
            .route("/jobs/{id}", post(slow))
            .layer(
                RouteLocks::new(locker.clone())
                    .rule(orders_rule())
                    .rule(lost),
            )
            .with_state(locker.clone());
        let holder = locker.lock("stock:secret-sku").acquire().await.unwrap();
        let a = call(&app, "POST", "/orders/secret-sku", &[]).await;
        assert_eq!(a.status, StatusCode::CONFLICT);
        drop(holder);
        let a = call(&app, "POST", "/jobs/1", &[]).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);

        let logged = logs.with_message("request answered with a lock error");
        assert_eq!(logged.len(), 2, "{logged:?}");
        let busy = &logged[0];
        assert_eq!(busy.level, tracing::Level::INFO);
        assert_eq!(busy.target, "leasehold::web");
        assert_eq!(
            (
                busy.field("code"),
                busy.field("status"),
                busy.field("method")
            ),
            ("lock_busy", "409", "POST")
        );
        assert_eq!(busy.field("route"), "/orders/{sku}");
        // Hashed as the locker says: 16 hex digits, the key nowhere.
        let key = busy.field("key");
        assert!(
            key.len() == 16 && key.chars().all(|c| c.is_ascii_hexdigit()),
            "{key}"
        );
        assert!(
            busy.fields.values().all(|v| !v.contains("secret")),
            "{busy:?}"
        );
        let lost = &logged[1];
        assert_eq!(lost.level, tracing::Level::WARN);
        assert_eq!(
            (
                lost.field("code"),
                lost.field("status"),
                lost.field("route")
            ),
            ("lock_lost", "503", "/jobs/{id}")
        );
        assert!(lost.field("error").contains("lease"), "{lost:?}");
    })
    .await;
}
