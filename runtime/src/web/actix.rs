//! actix-web: [`LockError`] as a response (`ResponseError`), and [`RouteLocks`] as middleware
//! (`App::wrap`).

use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::rc::Rc;

use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use super::{HeaderLookup, LockErrorResponse, Plan, RouteLocks};
use crate::error::LockError;

/// With the `actix` feature, a `LockError` is an actix-web response: handlers can return
/// `Result<_, LockError>`, or `Result<_, actix_web::Error>` and use `?` on lock results.
/// See [`LockErrorResponse`] for the mapping; the body never contains the key.
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
        let status = LockErrorResponse::from(self).status;
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mapping = LockErrorResponse::from(self);
        let mut response = HttpResponse::build(self.status_code());
        response.insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")));
        if let Some(secs) = mapping.retry_after {
            response.insert_header((RETRY_AFTER, HeaderValue::from(secs)));
        }
        response.body(mapping.body())
    }
}

/// `App::new().wrap(route_locks)`: see [`RouteLocks`].
///
/// ```
/// use actix_web::{web, App, HttpResponse};
/// use leasehold::{Locker, RouteLocks, RouteRule};
/// use std::time::Duration;
///
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?.lease(Duration::from_secs(10)))
///     .rule(RouteRule::new("POST", "/carts/{id}/checkout", "cart:<header.X-Tenant>:<id>")?);
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

    fn new_transform(&self, service: S) -> Self::Future {
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
                let response = self.service.call(req);
                Box::pin(async move { Ok(response.await?.map_into_left_body()) })
            }
            Plan::Refuse(err) => {
                let response = req.into_response(err.error_response());
                Box::pin(ready(Ok(response.map_into_right_body())))
            }
            Plan::Lock(held) => {
                let service = self.service.clone();
                Box::pin(async move {
                    let guard = match held.acquire().await {
                        Ok(guard) => guard,
                        Err(err) => {
                            let response = req.into_response(err.error_response());
                            return Ok(response.map_into_right_body());
                        }
                    };
                    match held.hold(guard, service.call(req)).await {
                        Ok(response) => Ok(response?.map_into_left_body()),
                        // The request went to the handler, which was cancelled: answer
                        // through actix's error path (`LockError::error_response`).
                        Err(err) => Err(err.into()),
                    }
                })
            }
        }
    }
}

impl HeaderLookup for actix_web::http::header::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}
