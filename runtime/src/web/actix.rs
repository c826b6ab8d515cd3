//! actix-web: [`LockError`] as a response (`ResponseError`), [`LockErrorResponse`] as an
//! `HttpResponse`, [`RouteLocks`] as middleware (`App::wrap`), and [`HeldLock`] as an extractor.

use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::rc::Rc;

use actix_web::body::EitherBody;
use actix_web::dev::{Payload, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponse, ResponseError};

use super::{
    HeaderLookup, HeldLock, LockErrorResponse, MissingRouteLock, Plan, Refusal, RouteLocks,
};
use crate::error::LockError;

/// With the `actix` feature, a `LockError` is an actix-web response: handlers can return
/// `Result<_, LockError>`, or `Result<_, actix_web::Error>` and use `?` on lock results.
/// See [`LockErrorResponse`] for the mapping; the body never contains the key. Inside
/// [`RouteLocks`], the middleware's status codes and hook apply to it.
///
/// ```
/// use actix_web::{web, App, HttpResponse};
/// use leasehold::{distributed_lock, LockError};
///
/// #[distributed_lock(key = "stock:<sku>", lease = "10s", wait = "2s")]
/// async fn buy(sku: web::Path<String>) -> Result<HttpResponse, actix_web::Error> {
///     Ok(HttpResponse::Created().body(sku.into_inner()))
/// }
/// let _app = App::new().route("/orders/{sku}", web::post().to(buy));
/// ```
impl ResponseError for LockError {
    fn status_code(&self) -> StatusCode {
        status(LockErrorResponse::from(self).status)
    }

    fn error_response(&self) -> HttpResponse {
        LockErrorResponse::from(self).into()
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// With the `actix` feature, a [`LockErrorResponse`] is an `HttpResponse`: status,
/// `Content-Type`, `Retry-After` and body. A status outside 100..=999 is answered 500, a
/// content type that is not a header value is left out.
///
/// ```
/// use actix_web::HttpResponse;
/// use leasehold::{LockError, StatusCodes};
///
/// // In your own error type's `ResponseError::error_response`, with the shop's status codes:
/// let err = LockError::Busy { retry_after: None };
/// let response = HttpResponse::from(StatusCodes::default().busy(423).response(&err));
/// assert_eq!(response.status().as_u16(), 423);
/// assert_eq!(response.headers().get("retry-after").unwrap(), "1");
/// ```
impl From<LockErrorResponse> for HttpResponse {
    fn from(answer: LockErrorResponse) -> HttpResponse {
        answer_with(HttpResponse::new(StatusCode::OK), answer)
    }
}

/// `response` with the head and body of `answer` (its other headers, extensions and error
/// kept).
fn answer_with<B>(response: HttpResponse<B>, answer: LockErrorResponse) -> HttpResponse {
    let (mut response, _) = response.into_parts();
    *response.status_mut() = status(answer.status);
    let headers = response.headers_mut();
    headers.remove(CONTENT_LENGTH);
    match HeaderValue::from_str(&answer.content_type) {
        Ok(value) => headers.insert(CONTENT_TYPE, value),
        Err(_) => headers.remove(CONTENT_TYPE),
    };
    match answer.retry_after {
        Some(secs) => headers.insert(RETRY_AFTER, HeaderValue::from(secs)),
        None => headers.remove(RETRY_AFTER),
    };
    response.set_body(answer.body).map_into_boxed_body()
}

/// Marks a response a `RouteLocks` reshaped: an outer one leaves it as it is.
struct Reshaped;

/// A handler's `LockError` response answered as `locks` says; other responses untouched.
fn reshape<B: 'static>(
    locks: &RouteLocks,
    res: ServiceResponse<B>,
) -> ServiceResponse<EitherBody<B>> {
    if !locks.reshapes() || res.response().extensions().get::<Reshaped>().is_some() {
        return res.map_into_left_body();
    }
    let answer = res
        .response()
        .error()
        .and_then(|e| e.as_error::<LockError>())
        .map(|err| locks.response(err));
    let Some(answer) = answer else {
        return res.map_into_left_body();
    };
    let (req, response) = res.into_parts();
    let mut response = answer_with(response, answer);
    response.extensions_mut().insert(Reshaped);
    ServiceResponse::new(req, response).map_into_right_body()
}

/// `App::new().wrap(route_locks)`: see [`RouteLocks`].
///
/// ```
/// use actix_web::{web, App, HttpResponse};
/// use leasehold::{Locker, RouteLocks, RouteRule, StatusCodes};
/// use std::time::Duration;
///
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?.lease(Duration::from_secs(10)))
///     .rule(RouteRule::new("POST", "/carts/{id}/checkout", "cart:<header.X-Tenant>:<id>")?)
///     .status_codes(StatusCodes::default().busy(423));
/// let _app = App::new()
///     .wrap(locks)
///     .route("/orders/{sku}", web::post().to(|| async { HttpResponse::Created().finish() }));
/// # Ok::<(), leasehold::LockError>(())
/// ```
impl<S, B> Transform<S, ServiceRequest> for RouteLocks
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Transform = ActixLockService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    /// Fails (and logs the error) when a rule asks for what the locker cannot give
    /// ([`RouteLocks::check`]): the app's workers do not start.
    fn new_transform(&self, service: S) -> Self::Future {
        if let Err(e) = self.check() {
            tracing::error!(target: "leasehold::web", error = %e, "RouteLocks cannot be mounted");
            return ready(Err(()));
        }
        ready(Ok(ActixLockService {
            service: Rc::new(service),
            locks: self.clone(),
        }))
    }
}

/// The actix-web service that [`RouteLocks`] wraps around an app's services.
pub struct ActixLockService<S> {
    service: Rc<S>,
    locks: RouteLocks,
}

type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

impl<S, B> Service<ServiceRequest> for ActixLockService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<Result<Self::Response, Self::Error>>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let plan = self
            .locks
            .plan(req.method().as_str(), req.path(), req.headers());
        match plan {
            Plan::Pass => {
                let locks = self.locks.clone();
                let response = self.service.call(req);
                Box::pin(async move { Ok(reshape(&locks, response.await?)) })
            }
            Plan::Refuse(refusal) => {
                let response = req.into_response(HttpResponse::from(refusal.response));
                Box::pin(ready(Ok(response.map_into_right_body())))
            }
            Plan::Lock(lock) => {
                let service = self.service.clone();
                Box::pin(async move {
                    let guard = match lock.acquire().await {
                        Ok(guard) => guard,
                        Err(refusal) => {
                            let response = req.into_response(HttpResponse::from(refusal.response));
                            return Ok(response.map_into_right_body());
                        }
                    };
                    req.extensions_mut().insert(HeldLock::of(&guard));
                    match lock.hold(guard, service.call(req)).await {
                        Ok(response) => Ok(reshape(lock.locks(), response?)),
                        // The request went to the handler, which was cancelled: answer
                        // through actix's error path, with the middleware's answer.
                        Err(refusal) => Err(refusal.into()),
                    }
                })
            }
        }
    }
}

/// The answer of a request whose handler was cancelled (its lease was lost): actix-web
/// answers it with the middleware's answer; it displays as the lock error.
impl ResponseError for Refusal {
    fn status_code(&self) -> StatusCode {
        status(self.response.status)
    }

    fn error_response(&self) -> HttpResponse {
        self.response.clone().into()
    }
}

impl HeaderLookup for actix_web::http::header::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}

/// With the `actix` feature, the lock [`RouteLocks`] holds for the request; refused with
/// 500 `lock_missing` ([`MissingRouteLock`]) when no rule locked it. `Option<HeldLock>` is
/// `None` then.
///
/// ```
/// use actix_web::{web, App, HttpResponse};
/// use leasehold::{HeldLock, Locker, RouteLocks, RouteRule};
///
/// async fn buy(lock: HeldLock) -> HttpResponse {
///     HttpResponse::Created().body(format!("fence {}", lock.fence()))
/// }
/// async fn report(lock: Option<HeldLock>) -> HttpResponse {
///     HttpResponse::Ok().body(if lock.is_some() { "locked" } else { "unlocked" })
/// }
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?);
/// let _app = App::new()
///     .wrap(locks)
///     .route("/orders/{sku}", web::post().to(buy))
///     .route("/report", web::get().to(report));
/// # Ok::<(), leasehold::LockError>(())
/// ```
impl FromRequest for HeldLock {
    type Error = MissingRouteLock;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        ready(
            req.extensions()
                .get::<HeldLock>()
                .cloned()
                .ok_or(MissingRouteLock),
        )
    }
}

/// With the `actix` feature: 500 with a JSON body that says what to fix, and an `ERROR` log.
impl ResponseError for MissingRouteLock {
    fn status_code(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    fn error_response(&self) -> HttpResponse {
        self.report();
        HttpResponse::InternalServerError()
            .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
            .body(self.body())
    }
}
