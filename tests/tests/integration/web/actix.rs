//! actix-web integration (feature `actix`): `LockError` as a response (status, `Retry-After`,
//! JSON body, nothing leaked), `RouteLocks` as middleware (rules, keys from paths and headers,
//! busy, lost, unavailable, config, configured status codes, the error hook, logs), and the
//! `HeldLock` extractor. Every test is bounded by a timeout.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::{test, web, App, HttpResponse};
use leasehold::{
    distributed_lock, HeldLock, LockConfig, LockError, Locker, OnLost, RouteLocks, RouteRule,
    StatusCodes, TraceKeys,
};
use leasehold_tests::errors::lock_error;
use leasehold_tests::harness::RedisServer;

use super::log_capture::Logs;

const LIMIT: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("the test did not finish within 30s")
}

async fn body_of<B: MessageBody>(res: ServiceResponse<B>) -> (StatusCode, Option<String>, String) {
    let status = res.status();
    let retry_after = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        status.is_success()
            || res.headers().get("content-type").map(|v| v.as_bytes()) == Some(b"application/json"),
        "error responses are JSON"
    );
    let body = test::read_body(res).await;
    (
        status,
        retry_after,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

async fn fails(kind: web::Path<String>) -> Result<HttpResponse, LockError> {
    Err(lock_error(kind.as_str(), Duration::from_millis(2500)))
}

#[actix_web::test]
async fn lock_errors_are_responses_without_details() {
    bounded(async {
        let app = test::init_service(App::new().route("/fail/{kind}", web::get().to(fails))).await;
        let cases = [
            ("busy", 409, Some("3"), "lock_busy"),
            ("busy-unknown", 409, Some("1"), "lock_busy"),
            ("unavailable", 503, Some("1"), "lock_unavailable"),
            ("lost", 503, None, "lock_lost"),
            ("invalid", 400, None, "lock_invalid_key"),
            ("config", 500, None, "lock_config"),
        ];
        for (kind, status, retry_after, code) in cases {
            let req = test::TestRequest::get()
                .uri(&format!("/fail/{kind}"))
                .to_request();
            let (got, got_retry, body) = body_of(test::call_service(&app, req).await).await;
            assert_eq!(got.as_u16(), status, "{kind}");
            assert_eq!(got_retry.as_deref(), retry_after, "{kind}");
            assert_eq!(body, format!(r#"{{"error":"{code}"}}"#), "{kind}");
        }
    })
    .await;
}

#[distributed_lock(key = "stock:<sku>", wait = "50ms", locker = locker.get_ref())]
async fn buy(sku: web::Path<String>, locker: web::Data<Locker>) -> Result<HttpResponse, LockError> {
    Ok(HttpResponse::Created().body(sku.into_inner()))
}

#[actix_web::test]
async fn a_busy_attribute_handler_is_409_with_the_holders_remaining_lease() {
    bounded(async {
        // The holder is another process (another locker): within one locker, waiters queue
        // locally and do not learn the holder's lease.
        let redis = RedisServer::start().await;
        let locker = Locker::connect(&redis.url()).await.unwrap();
        let other = Locker::connect(&redis.url()).await.unwrap();
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(buy)),
        )
        .await;
        let holder = other
            .lock("stock:a")
            .lease(Duration::from_millis(2900))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        let req = test::TestRequest::post().uri("/orders/a").to_request();
        let (status, retry_after, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::CONFLICT);
        // The holder's remaining lease (2.9 s less the 50 ms wait and the test's own time),
        // rounded up to whole seconds.
        assert!(
            matches!(retry_after.as_deref(), Some("3" | "2")),
            "{retry_after:?}"
        );
        assert_eq!(body, r#"{"error":"lock_busy"}"#);
        assert!(!body.contains("stock"), "the key never shows");
        holder.release().await.unwrap();
        let req = test::TestRequest::post().uri("/orders/a").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::CREATED, "a"));
    })
    .await;
}

/// Answers whether `stock:<sku>` is held by someone other than this request (it should be:
/// by the middleware, for this request), and whether this request can re-enter it.
async fn probe(sku: web::Path<String>, locker: web::Data<Locker>) -> HttpResponse {
    let key = format!("stock:{sku}");
    let reentered = match locker.lock(key.as_str()).try_acquire().await {
        Ok(Some(guard)) => {
            let reentered = guard.is_reentrant();
            guard.release().await.unwrap();
            reentered
        }
        _ => false,
    };
    let other = locker.get_ref().clone();
    let held_elsewhere =
        tokio::spawn(async move { matches!(other.lock(key).try_acquire().await, Ok(None)) })
            .await
            .unwrap();
    HttpResponse::Ok().body(format!("reentered={reentered} held={held_elsewhere}"))
}

fn orders_rule() -> RouteRule {
    RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")
        .unwrap()
        .wait(Duration::from_millis(50))
}

#[actix_web::test]
async fn the_middleware_holds_the_lock_of_matching_requests() {
    bounded(async {
        let locker = Locker::in_memory();
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::new(locker.clone()).rule(orders_rule()))
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(probe))
                .route("/orders/{sku}", web::get().to(probe)),
        )
        .await;
        let req = test::TestRequest::post().uri("/orders/a").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "reentered=true held=true");
        // Released after the response.
        let after = locker.lock("stock:a").try_acquire().await.unwrap();
        after
            .expect("released after the response")
            .release()
            .await
            .unwrap();
        // GET matches no rule: no lock.
        let req = test::TestRequest::get().uri("/orders/a").to_request();
        let (_, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(body, "reentered=false held=false");
    })
    .await;
}

#[actix_web::test]
async fn the_middleware_answers_busy_and_keys_it_cannot_build() {
    bounded(async {
        let locker = Locker::in_memory();
        let tenant_rule = RouteRule::new("POST", "/carts/{id}", "cart:<header.X-Tenant>:<id>")
            .unwrap()
            .wait(Duration::ZERO);
        let app = test::init_service(
            App::new()
                .wrap(
                    RouteLocks::new(locker.clone())
                        .rule(orders_rule())
                        .rule(tenant_rule),
                )
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(probe))
                .route("/carts/{sku}", web::post().to(probe)),
        )
        .await;
        let holder = locker
            .lock("stock:b")
            .lease(Duration::from_secs(4))
            .acquire()
            .await
            .unwrap();
        let req = test::TestRequest::post().uri("/orders/b").to_request();
        let (status, retry_after, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::CONFLICT);
        let secs: u64 = retry_after.unwrap().parse().unwrap();
        assert!((1..=4).contains(&secs), "Retry-After {secs}");
        assert_eq!(body, r#"{"error":"lock_busy"}"#);
        drop(holder);

        let req = test::TestRequest::post().uri("/carts/7").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body, r#"{"error":"lock_invalid_key"}"#);

        let tenant = locker.lock("cart:acme:7").acquire().await.unwrap();
        let req = test::TestRequest::post()
            .uri("/carts/7")
            .insert_header(("x-tenant", "acme"))
            .to_request();
        let (status, _, _) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::CONFLICT, "the key came from the header");
        drop(tenant);
    })
    .await;
}

async fn slow() -> HttpResponse {
    tokio::time::sleep(Duration::from_millis(400)).await;
    HttpResponse::Ok().body("finished")
}

#[actix_web::test]
async fn a_lost_lease_cancels_the_request_unless_told_to_continue() {
    bounded(async {
        let short = |path: &str, on_lost| {
            RouteRule::new("POST", path, "job")
                .unwrap()
                .lease(Duration::from_millis(60))
                .watchdog(false)
                .on_lost(on_lost)
        };
        let app = test::init_service(
            App::new()
                .wrap(
                    RouteLocks::new(Locker::in_memory())
                        .rule(short("/cancel", OnLost::Cancel))
                        .rule(short("/continue", OnLost::Continue)),
                )
                .route("/cancel", web::post().to(slow))
                .route("/continue", web::post().to(slow)),
        )
        .await;
        // The handler was cancelled: the middleware answers through actix's error path,
        // which the server turns into this response.
        let req = test::TestRequest::post().uri("/cancel").to_request();
        let err = test::try_call_service(&app, req).await.unwrap_err();
        assert!(err.to_string().contains("lease"), "{err}");
        let res = ServiceResponse::new(
            test::TestRequest::default().to_http_request(),
            err.error_response(),
        );
        let (status, retry_after, body) = body_of(res).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after, None);
        assert_eq!(body, r#"{"error":"lock_lost"}"#);
        let req = test::TestRequest::post().uri("/continue").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "finished"));
    })
    .await;
}

#[actix_web::test]
async fn rules_from_a_config_file_and_an_unreachable_redis() {
    bounded(async {
        let redis = RedisServer::start().await;
        let config = LockConfig::from_toml_str(&format!(
            r#"
            url = "{}"
            prefix = "webtest"
            op_timeout = "300ms"
            rules = [{{ method = "POST", path = "/orders/{{sku}}", key = "stock:<sku>", wait = "50ms" }}]
            "#,
            redis.url()
        ))
        .unwrap();
        let locker = Locker::from_config(&config).await.unwrap();
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::from_config(locker.clone(), &config))
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(probe)),
        )
        .await;
        let req = test::TestRequest::post().uri("/orders/c").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "reentered=true held=true"));

        redis.kill9();
        let req = test::TestRequest::post().uri("/orders/c").to_request();
        let (status, retry_after, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(retry_after.as_deref(), Some("1"));
        assert_eq!(body, r#"{"error":"lock_unavailable"}"#);
    })
    .await;
}

#[actix_web::test]
async fn without_a_global_default_the_middleware_answers_500() {
    bounded(async {
        // No test in this binary installs a global default.
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::with_global_default().rule(orders_rule()))
                .route("/orders/{sku}", web::post().to(|| async { "ran" })),
        )
        .await;
        let req = test::TestRequest::post().uri("/orders/a").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, r#"{"error":"lock_config"}"#);
    })
    .await;
}

/// The request's lock as the handler sees it through the extractor, next to what the store
/// says of the key, while the request runs. Keeps a copy of the lock for the test.
async fn fenced(
    lock: HeldLock,
    locker: web::Data<Locker>,
    kept: web::Data<Mutex<Option<HeldLock>>>,
) -> HttpResponse {
    let store = locker.inspect(lock.key()).await.unwrap();
    *kept.lock().unwrap() = Some(lock.clone());
    HttpResponse::Ok().body(format!(
        "key={} fence={} held={} store_held={} store_fence={}",
        lock.key(),
        lock.fence(),
        lock.is_held(),
        store.held,
        store.last_fence.unwrap_or(0)
    ))
}

#[actix_web::test]
async fn the_handler_reads_the_key_and_fence_of_the_requests_lock() {
    bounded(async {
        let redis = RedisServer::start().await;
        let locker = Locker::connect(&redis.url()).await.unwrap();
        let kept = web::Data::new(Mutex::new(None::<HeldLock>));
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::new(locker.clone()).rule(orders_rule()))
                .app_data(web::Data::new(locker.clone()))
                .app_data(kept.clone())
                .route("/orders/{sku}", web::post().to(fenced)),
        )
        .await;
        let mut fences = Vec::new();
        for _ in 0..2 {
            let req = test::TestRequest::post().uri("/orders/f").to_request();
            let (status, _, body) = body_of(test::call_service(&app, req).await).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let fields: Vec<&str> = body.split(' ').collect();
            assert_eq!(fields[0], "key=stock:f");
            assert_eq!(fields[2..4], ["held=true", "store_held=true"]);
            let fence: u64 = fields[1].trim_start_matches("fence=").parse().unwrap();
            // The fence the store handed out last is the request's: the handler took no lock.
            assert_eq!(fields[4], format!("store_fence={fence}"));
            fences.push(fence);
        }
        assert!(fences[1] > fences[0], "{fences:?}");
        // The guard stayed with the middleware, which released it after the response.
        let kept = kept.lock().unwrap().clone().unwrap();
        assert_eq!(kept.fence(), fences[1]);
        assert!(!kept.is_held());
        assert!(!locker.inspect("stock:f").await.unwrap().held);
    })
    .await;
}

async fn must_be_locked(lock: HeldLock) -> HttpResponse {
    HttpResponse::Ok().body(format!("fence {}", lock.fence()))
}

async fn may_be_locked(lock: Option<HeldLock>) -> HttpResponse {
    HttpResponse::Ok().body(match lock {
        Some(lock) => format!("locked {}", lock.key()),
        None => "unlocked".to_owned(),
    })
}

#[actix_web::test]
async fn a_route_without_a_rule_rejects_held_lock_and_gives_none() {
    bounded(async {
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::new(Locker::in_memory()).rule(orders_rule()))
                .route("/orders/{sku}", web::post().to(may_be_locked))
                .route("/orders/{sku}", web::get().to(must_be_locked))
                .route("/report", web::get().to(may_be_locked)),
        )
        .await;
        let req = test::TestRequest::post().uri("/orders/g").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "locked stock:g"));
        let req = test::TestRequest::get().uri("/report").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "unlocked"));
        // GET matches no rule: the handler that needs the lock is a server bug, said so.
        let req = test::TestRequest::get().uri("/orders/g").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            body.starts_with(r#"{"error":"lock_missing","message":"#),
            "{body}"
        );
        assert!(
            body.contains("no RouteLocks rule locked this request"),
            "{body}"
        );
    })
    .await;
}

#[actix_web::test]
async fn status_codes_and_the_hook_shape_the_middlewares_and_the_handlers_lock_errors() {
    bounded(async {
        let locker = Locker::in_memory();
        let cancel = RouteRule::new("POST", "/cancel", "job")
            .unwrap()
            .lease(Duration::from_millis(60))
            .watchdog(false);
        let locks = RouteLocks::new(locker.clone())
            .rule(orders_rule())
            .rule(cancel)
            .status_codes(StatusCodes::default().busy(423).lost(500))
            .on_error(|err, mut answer| {
                if err.is_busy() {
                    answer.body = format!(
                        r#"{{"error":"try_again","after":{}}}"#,
                        answer.retry_after.unwrap()
                    );
                }
                answer
            });
        let app = test::init_service(
            App::new()
                .wrap(locks)
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(probe))
                .route("/fail/{kind}", web::get().to(fails))
                .route("/cancel", web::post().to(slow)),
        )
        .await;
        let holder = locker
            .lock("stock:h")
            .lease(Duration::from_secs(4))
            .acquire()
            .await
            .unwrap();
        let req = test::TestRequest::post().uri("/orders/h").to_request();
        let (status, retry_after, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status.as_u16(), 423);
        let secs: u64 = retry_after.unwrap().parse().unwrap();
        assert!((1..=4).contains(&secs), "Retry-After {secs}");
        assert_eq!(body, format!(r#"{{"error":"try_again","after":{secs}}}"#));
        holder.release().await.unwrap();
        let req = test::TestRequest::post().uri("/orders/h").to_request();
        let (status, _, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "reentered=true held=true")
        );

        // A handler's own `LockError` (as a `#[distributed_lock]` handler returns it), on a
        // route no rule matches: the same codes and hook; the error stays on the response.
        let req = test::TestRequest::get().uri("/fail/busy").to_request();
        let res = test::call_service(&app, req).await;
        assert!(res
            .response()
            .error()
            .is_some_and(|e| e.as_error::<LockError>().is_some()));
        let (status, retry_after, body) = body_of(res).await;
        assert_eq!((status.as_u16(), retry_after.as_deref()), (423, Some("3")));
        assert_eq!(body, r#"{"error":"try_again","after":3}"#);
        let req = test::TestRequest::get().uri("/fail/lost").to_request();
        let (status, retry_after, body) = body_of(test::call_service(&app, req).await).await;
        assert_eq!((status.as_u16(), retry_after), (500, None));
        assert_eq!(body, r#"{"error":"lock_lost"}"#);

        // The middleware's own lost lease, answered through actix's error path: configured too.
        let req = test::TestRequest::post().uri("/cancel").to_request();
        let err = test::try_call_service(&app, req).await.unwrap_err();
        let res = ServiceResponse::new(
            test::TestRequest::default().to_http_request(),
            err.error_response(),
        );
        let (status, _, body) = body_of(res).await;
        assert_eq!(
            (status.as_u16(), body.as_str()),
            (500, r#"{"error":"lock_lost"}"#)
        );
    })
    .await;
}

#[actix_web::test]
async fn refused_requests_are_logged_with_code_route_and_the_key_as_configured() {
    bounded(async {
        let (logs, _guard) = Logs::capture();
        let locker = Locker::builder()
            .trace_keys(TraceKeys::Hashed)
            .build_in_memory()
            .unwrap();
        let app = test::init_service(
            App::new()
                .wrap(RouteLocks::new(locker.clone()).rule(orders_rule()))
                .app_data(web::Data::new(locker.clone()))
                .route("/orders/{sku}", web::post().to(probe)),
        )
        .await;
        let holder = locker.lock("stock:secret-sku").acquire().await.unwrap();
        let req = test::TestRequest::post()
            .uri("/orders/secret-sku")
            .to_request();
        let (status, _, _) = body_of(test::call_service(&app, req).await).await;
        assert_eq!(status, StatusCode::CONFLICT);
        drop(holder);

        let logged = logs.with_message("request answered with a lock error");
        assert_eq!(logged.len(), 1, "{logged:?}");
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
        assert!(busy.field("error").contains("busy"), "{busy:?}");
    })
    .await;
}
