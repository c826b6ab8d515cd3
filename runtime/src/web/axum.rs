//! axum: [`LockError`] and [`LockErrorResponse`] as responses (`IntoResponse`), [`RouteLocks`]
//! as a tower `Layer` (`Router::layer`), and [`HeldLock`] as an extractor.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{HeaderLookup, HeldLock, LockErrorResponse, MissingRouteLock, Plan, RouteLocks};
use crate::error::LockError;

/// With the `axum` feature, a `LockError` is an axum response: handlers can return
/// `Result<_, LockError>`, or convert it inside their own error's `IntoResponse`. See
/// [`LockErrorResponse`] for the mapping; the body never contains the key. Inside
/// [`RouteLocks`], the layer's status codes and hook apply to it.
///
/// ```
/// use axum::extract::Path;
/// use leasehold::{distributed_lock, LockError};
///
/// #[distributed_lock(key = "stock:<sku>", lease = "10s", wait = "2s")]
/// async fn buy(Path(sku): Path<String>) -> Result<String, LockError> {
///     Ok(sku)
/// }
/// let _app: axum::Router = axum::Router::new().route("/orders/{sku}", axum::routing::post(buy));
/// ```
impl IntoResponse for LockError {
    fn into_response(self) -> Response {
        let mut response = LockErrorResponse::from(&self).into_response();
        // For the layer, which may answer it differently (`RouteLocks::status_codes`).
        response
            .extensions_mut()
            .insert(AnsweredLockError(Arc::new(self)));
        response
    }
}

/// The error a response was built from, until a `RouteLocks` layer reshapes it.
#[derive(Clone)]
struct AnsweredLockError(Arc<LockError>);

/// With the `axum` feature, a [`LockErrorResponse`] is an axum response: status,
/// `Content-Type`, `Retry-After` and body. A status outside 100..=999 is answered 500, a
/// content type that is not a header value is left out.
///
/// ```
/// use axum::response::IntoResponse;
/// use leasehold::{LockError, StatusCodes};
///
/// // In your own error type's `IntoResponse`, with the shop's status codes:
/// let err = LockError::Busy { retry_after: None };
/// let response = StatusCodes::default().busy(423).response(&err).into_response();
/// assert_eq!(response.status(), 423);
/// assert_eq!(response.headers()["retry-after"], "1");
/// ```
impl IntoResponse for LockErrorResponse {
    fn into_response(self) -> Response {
        answer_with(Response::default(), self)
    }
}

/// `response` with the head and body of `answer` (its other headers and extensions kept).
fn answer_with(mut response: Response, answer: LockErrorResponse) -> Response {
    *response.status_mut() =
        StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
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
    *response.body_mut() = Body::from(answer.body);
    response
}

/// A handler's `LockError` response answered as `locks` says; other responses untouched.
fn reshape(locks: &RouteLocks, mut response: Response) -> Response {
    if !locks.reshapes() {
        return response;
    }
    // Removed: an outer layer leaves it as the innermost one shaped it.
    match response.extensions_mut().remove::<AnsweredLockError>() {
        Some(AnsweredLockError(err)) => answer_with(response, locks.response(&err)),
        None => response,
    }
}

/// `Router::new().layer(route_locks)`: see [`RouteLocks`].
///
/// ```
/// use axum::{routing::post, Router};
/// use leasehold::{Locker, RouteLocks, RouteRule, StatusCodes};
/// use std::time::Duration;
///
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?.lease(Duration::from_secs(10)))
///     .rule(RouteRule::with_key_fn("DELETE", "/accounts/{id}", |req| {
///         Some(format!("account:{}", req.param("id")?))
///     })?)
///     .status_codes(StatusCodes::default().busy(423));
/// let _app: Router = Router::new()
///     .route("/orders/{sku}", post(|| async { "created" }))
///     .layer(locks);
/// # Ok::<(), leasehold::LockError>(())
/// ```
impl<S> tower_layer::Layer<S> for RouteLocks {
    type Service = LockService<S>;

    /// # Panics
    /// When a rule asks for what the locker cannot give ([`RouteLocks::check`]), as axum
    /// panics for other routing mistakes while the router is built.
    fn layer(&self, inner: S) -> Self::Service {
        if let Err(e) = self.check() {
            panic!("leasehold::RouteLocks cannot be mounted: {e}");
        }
        LockService {
            inner,
            locks: self.clone(),
        }
    }
}

/// The tower service that [`RouteLocks`] wraps around an axum router's routes.
#[derive(Clone, Debug)]
pub struct LockService<S> {
    inner: S,
    locks: RouteLocks,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<Request<B>> for LockService<S>
where
    S: tower_service::Service<Request<B>> + Clone + Send + 'static,
    S::Response: IntoResponse + Send,
    S::Error: Send,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let plan = self
            .locks
            .plan(req.method().as_str(), req.uri().path(), req.headers());
        // The service that poll_ready readied is the one to call; keep a fresh clone here.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        match plan {
            Plan::Pass => {
                let locks = self.locks.clone();
                let response = inner.call(req);
                Box::pin(async move { Ok(reshape(&locks, response.await?.into_response())) })
            }
            Plan::Refuse(refusal) => Box::pin(async move { Ok(refusal.response.into_response()) }),
            Plan::Lock(lock) => Box::pin(async move {
                let guard = match lock.acquire().await {
                    Ok(guard) => guard,
                    Err(refusal) => return Ok(refusal.response.into_response()),
                };
                req.extensions_mut().insert(HeldLock::of(&guard));
                match lock.hold(guard, inner.call(req)).await {
                    Ok(response) => Ok(reshape(lock.locks(), response?.into_response())),
                    Err(refusal) => Ok(refusal.response.into_response()),
                }
            }),
        }
    }
}

impl HeaderLookup for axum::http::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}

/// With the `axum` feature, the lock [`RouteLocks`] holds for the request; rejected with
/// 500 `lock_missing` ([`MissingRouteLock`]) when no rule locked it.
///
/// ```
/// use axum::{routing::post, Router};
/// use leasehold::{HeldLock, Locker, RouteLocks, RouteRule};
///
/// async fn buy(lock: HeldLock) -> String {
///     format!("fence {}", lock.fence())
/// }
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?);
/// let _app: Router = Router::new().route("/orders/{sku}", post(buy)).layer(locks);
/// # Ok::<(), leasehold::LockError>(())
/// ```
impl<S: Send + Sync> FromRequestParts<S> for HeldLock {
    type Rejection = MissingRouteLock;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<HeldLock>()
            .cloned()
            .ok_or(MissingRouteLock)
    }
}

/// With the `axum` feature, `Option<HeldLock>`: the lock [`RouteLocks`] holds for the request,
/// `None` when no rule locked it.
///
/// ```
/// use leasehold::HeldLock;
///
/// async fn report(lock: Option<HeldLock>) -> String {
///     match lock {
///         Some(lock) => format!("under fence {}", lock.fence()),
///         None => "unlocked".to_owned(),
///     }
/// }
/// let _app: axum::Router = axum::Router::new().route("/report", axum::routing::get(report));
/// ```
impl<S: Send + Sync> OptionalFromRequestParts<S> for HeldLock {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<HeldLock>().cloned())
    }
}

/// With the `axum` feature: 500 with a JSON body that says what to fix, and an `ERROR` log.
impl IntoResponse for MissingRouteLock {
    fn into_response(self) -> Response {
        self.report();
        let json = [(CONTENT_TYPE, HeaderValue::from_static("application/json"))];
        (StatusCode::INTERNAL_SERVER_ERROR, json, self.body()).into_response()
    }
}
