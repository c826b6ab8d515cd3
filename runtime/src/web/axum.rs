//! axum: [`LockError`] as a response (`IntoResponse`), and [`RouteLocks`] as a tower `Layer`
//! (`Router::layer`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{HeaderLookup, LockErrorResponse, Plan, RouteLocks};
use crate::error::LockError;

/// With the `axum` feature, a `LockError` is an axum response: handlers can return
/// `Result<_, LockError>`, or convert it inside their own error's `IntoResponse`. See
/// [`LockErrorResponse`] for the mapping; the body never contains the key.
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
        let mapping = LockErrorResponse::from(&self);
        let status =
            StatusCode::from_u16(mapping.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, mapping.body()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = mapping.retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// `Router::new().layer(route_locks)`: see [`RouteLocks`].
///
/// ```
/// use axum::{routing::post, Router};
/// use leasehold::{Locker, RouteLocks, RouteRule};
/// use std::time::Duration;
///
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?.lease(Duration::from_secs(10)))
///     .rule(RouteRule::with_key_fn("DELETE", "/accounts/{id}", |req| {
///         Some(format!("account:{}", req.param("id")?))
///     })?);
/// let _app: Router = Router::new()
///     .route("/orders/{sku}", post(|| async { "created" }))
///     .layer(locks);
/// # Ok::<(), leasehold::LockError>(())
/// ```
impl<S> tower_layer::Layer<S> for RouteLocks {
    type Service = LockService<S>;

    fn layer(&self, inner: S) -> Self::Service {
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

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let plan = self
            .locks
            .plan(req.method().as_str(), req.uri().path(), req.headers());
        // The service that poll_ready readied is the one to call; keep a fresh clone here.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        match plan {
            Plan::Pass => {
                let response = inner.call(req);
                Box::pin(async move { Ok(response.await?.into_response()) })
            }
            Plan::Refuse(err) => Box::pin(async move { Ok(err.into_response()) }),
            Plan::Lock(held) => Box::pin(async move {
                let guard = match held.acquire().await {
                    Ok(guard) => guard,
                    Err(err) => return Ok(err.into_response()),
                };
                match held.hold(guard, inner.call(req)).await {
                    Ok(response) => Ok(response?.into_response()),
                    Err(err) => Ok(err.into_response()),
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
