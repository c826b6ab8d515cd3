//! Web integration: how a [`LockError`] is answered over HTTP, and [`RouteLocks`], the
//! middleware that holds a lock for the duration of a request (actix-web and axum).
//!
//! The HTTP mapping and the route rules are framework-independent; `actix.rs` and `axum.rs`
//! only translate them into each framework's types.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::guard::LockGuard;
use crate::locker::Locker;

#[cfg(feature = "actix")]
mod actix;
#[cfg(feature = "axum")]
mod axum;
mod route;

#[cfg(feature = "actix")]
pub use self::actix::ActixLockService;
#[cfg(feature = "axum")]
pub use self::axum::LockService;
pub use crate::guard::OnLost;
pub use route::{HeaderLookup, KeyFn, PathParams, RequestInfo, RouteRule};

/// How a [`LockError`] is answered over HTTP; actix-web and axum responses (features `actix`
/// and `axum`) are built from it.
///
/// | error | status | `Retry-After` | body |
/// | --- | --- | --- | --- |
/// | `Busy` | 409 | the holder's remaining lease, whole seconds rounded up (1 if unknown) | `{"error":"lock_busy"}` |
/// | `Unavailable` | 503 | 1 | `{"error":"lock_unavailable"}` |
/// | `Lost` | 503 | — | `{"error":"lock_lost"}` |
/// | `InvalidKey` | 400 | — | `{"error":"lock_invalid_key"}` |
/// | `Config` | 500 | — | `{"error":"lock_config"}` |
///
/// The body never contains the key, the message or any Redis detail: keys may carry user
/// data, and messages name servers.
///
/// ```
/// use leasehold::{LockError, LockErrorResponse};
/// use std::time::Duration;
///
/// let busy = LockError::Busy { retry_after: Some(Duration::from_millis(1200)) };
/// let response = LockErrorResponse::from(&busy);
/// assert_eq!(response.status, 409);
/// assert_eq!(response.retry_after, Some(2));
/// assert_eq!(response.body(), r#"{"error":"lock_busy"}"#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockErrorResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The `Retry-After` header in whole seconds, when the client should retry.
    pub retry_after: Option<u64>,
    /// The error code of the JSON body: [`LockError::code`].
    pub code: &'static str,
}

/// The `Retry-After` of an unavailable store: long enough for a reconnect, short enough
/// for a failover.
const UNAVAILABLE_RETRY_AFTER: u64 = 1;

impl From<&LockError> for LockErrorResponse {
    fn from(err: &LockError) -> Self {
        let (status, retry_after) = match err {
            LockError::Busy { retry_after } => (409, Some(whole_seconds_up(*retry_after))),
            LockError::Unavailable { .. } => (503, Some(UNAVAILABLE_RETRY_AFTER)),
            LockError::Lost { .. } => (503, None),
            LockError::InvalidKey { .. } => (400, None),
            LockError::Config { .. } => (500, None),
        };
        LockErrorResponse {
            status,
            retry_after,
            code: err.code(),
        }
    }
}

impl LockErrorResponse {
    /// The JSON body: `{"error":"<code>"}`.
    pub fn body(&self) -> String {
        // Codes are fixed ASCII identifiers: nothing to escape.
        format!(r#"{{"error":"{}"}}"#, self.code)
    }
}

/// Seconds rounded up, at least 1; 1 when unknown.
fn whole_seconds_up(d: Option<Duration>) -> u64 {
    let Some(d) = d else { return 1 };
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

/// Middleware that runs each matching request while holding a lock, for actix-web
/// (`App::wrap`, feature `actix`) and axum (`Router::layer`, feature `axum`).
///
/// Each request is checked against the [`RouteRule`]s in the order they were added; the
/// first rule whose method and path match names the key, and the request runs only while
/// this process holds that key, exactly as a `#[distributed_lock]` handler would (same
/// options, same re-entrancy: a handler locking the same key inside re-enters). Requests no
/// rule matches pass through untouched. Lock errors are answered as
/// [`LockErrorResponse`] says; a request whose key cannot be built (a header the template
/// names is missing) is answered 400 `lock_invalid_key`.
///
/// The lock is held until the handler has produced its response (a streamed body may still
/// be sending after the release). Patterns match the path the middleware sees: inside a
/// nested axum router or an actix scope, that path is the full one for actix and the nested
/// part for axum.
///
/// ```
/// use leasehold::{Locker, RouteLocks, RouteRule};
/// use std::time::Duration;
///
/// let locks = RouteLocks::new(Locker::in_memory())
///     .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?.lease(Duration::from_secs(10)))
///     .rule(RouteRule::with_key_fn("POST", "/carts/{id}/checkout", |req| {
///         Some(format!("cart:{}:{}", req.header("x-tenant")?, req.param("id")?))
///     })?);
/// let (rule, params) = locks.find("POST", "/orders/sku-1").unwrap();
/// assert_eq!(rule.key_template(), Some("stock:<sku>"));
/// assert_eq!(params.get("sku"), Some("sku-1"));
/// // actix-web: App::new().wrap(locks.clone())   axum: Router::new().layer(locks)
/// # Ok::<(), leasehold::LockError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct RouteLocks {
    locker: Option<Locker>,
    rules: Arc<Vec<RouteRule>>,
}

impl RouteLocks {
    /// Middleware that takes its locks through `locker`, with no rules yet.
    pub fn new(locker: Locker) -> Self {
        RouteLocks {
            locker: Some(locker),
            rules: Arc::new(Vec::new()),
        }
    }

    /// Middleware that takes its locks through the global default locker
    /// ([`set_global_default`](crate::set_global_default)), looked up on each request; if
    /// none is installed, matching requests are answered 500 `lock_config`.
    pub fn with_global_default() -> Self {
        RouteLocks {
            locker: None,
            rules: Arc::new(Vec::new()),
        }
    }

    /// Adds a rule after the ones already added.
    pub fn rule(mut self, rule: RouteRule) -> Self {
        Arc::make_mut(&mut self.rules).push(rule);
        self
    }

    /// Adds rules after the ones already added, in order.
    pub fn rules(mut self, rules: impl IntoIterator<Item = RouteRule>) -> Self {
        Arc::make_mut(&mut self.rules).extend(rules);
        self
    }

    /// The first rule matching a request with this method and path, and the path parameters
    /// it captured; `None` when the request runs without a lock.
    pub fn find(&self, method: &str, path: &str) -> Option<(&RouteRule, PathParams)> {
        self.rules
            .iter()
            .find_map(|rule| rule.matches(method, path).map(|params| (rule, params)))
    }

    /// Decides what to do with a request, before anything is awaited.
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) fn plan(&self, method: &str, path: &str, headers: &dyn HeaderLookup) -> Plan {
        let Some((rule, params)) = self.find(method, path) else {
            return Plan::Pass;
        };
        let Some(key) = rule.key_for(&RequestInfo::new(method, path, params, headers)) else {
            return Plan::Refuse(LockError::invalid_key(
                "the request lacks a header that the route's lock key is built from",
            ));
        };
        let locker = match &self.locker {
            Some(locker) => locker.clone(),
            None => match crate::global::require_global_default() {
                Ok(locker) => locker.clone(),
                Err(e) => return Plan::Refuse(e),
            },
        };
        Plan::Lock(Box::new(Held {
            locker,
            key,
            spec: rule.spec(),
        }))
    }
}

/// What the middleware does with one request.
#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
pub(crate) enum Plan {
    /// No rule matched: run it as is.
    Pass,
    /// Answer with this error without running it.
    Refuse(LockError),
    /// Run it under this lock.
    Lock(Box<Held>),
}

/// A lock to hold around one request.
pub(crate) struct Held {
    locker: Locker,
    key: String,
    spec: crate::__private::Spec,
}

#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
impl Held {
    /// Takes the lock.
    pub(crate) async fn acquire(&self) -> Result<LockGuard, LockError> {
        crate::__private::acquire(Ok(&self.locker), self.key.clone(), &self.spec).await
    }

    /// Runs `request` in the lock's scope (cancelled if the lease is lost, unless the rule
    /// says otherwise), then releases the lock. `Err` when the lease was lost and the request
    /// was cancelled.
    pub(crate) async fn hold<F: Future>(
        &self,
        guard: LockGuard,
        request: F,
    ) -> Result<F::Output, LockError> {
        let out = crate::__private::hold(&guard, &self.spec, request).await;
        let fence = guard.fence();
        if let Err(e) = guard.release().await {
            tracing::warn!(fence, error = %e, "releasing the lock of a request failed");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_retry_after_and_bodies() {
        let busy = |ms: Option<u64>| LockError::Busy {
            retry_after: ms.map(Duration::from_millis),
        };
        let r = LockErrorResponse::from(&busy(Some(1200)));
        assert_eq!(
            (r.status, r.retry_after, r.code),
            (409, Some(2), "lock_busy")
        );
        assert_eq!(
            LockErrorResponse::from(&busy(Some(3000))).retry_after,
            Some(3)
        );
        assert_eq!(LockErrorResponse::from(&busy(Some(1))).retry_after, Some(1));
        assert_eq!(LockErrorResponse::from(&busy(Some(0))).retry_after, Some(1));
        assert_eq!(LockErrorResponse::from(&busy(None)).retry_after, Some(1));
        let r = LockErrorResponse::from(&LockError::unavailable("redis at x:1 timed out", None));
        assert_eq!((r.status, r.retry_after), (503, Some(1)));
        assert_eq!(r.body(), r#"{"error":"lock_unavailable"}"#);
        let r = LockErrorResponse::from(&LockError::Lost {
            reason: crate::LostReason::Expired,
        });
        assert_eq!((r.status, r.retry_after), (503, None));
        assert_eq!(r.body(), r#"{"error":"lock_lost"}"#);
        let r = LockErrorResponse::from(&LockError::invalid_key("secret-key too long"));
        assert_eq!((r.status, r.body().contains("secret")), (400, false));
        let r = LockErrorResponse::from(&LockError::config("x"));
        assert_eq!((r.status, r.code), (500, "lock_config"));
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let locks = RouteLocks::new(Locker::in_memory())
            .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap())
            .rule(RouteRule::new("*", "/orders/{sku}", "any:<sku>").unwrap())
            .rule(RouteRule::new("POST", "/tenants/{t}", "<header.X-Tenant>:<t>").unwrap());
        let key = |method, path| match locks.plan(method, path, &()) {
            Plan::Lock(held) => Some(held.key),
            Plan::Pass => None,
            Plan::Refuse(e) => Some(e.code().to_owned()),
        };
        assert_eq!(key("POST", "/orders/1").as_deref(), Some("stock:1"));
        assert_eq!(key("GET", "/orders/1").as_deref(), Some("any:1"));
        assert_eq!(key("GET", "/stock/1"), None);
        assert_eq!(
            key("POST", "/tenants/1").as_deref(),
            Some("lock_invalid_key")
        );
    }

    #[tokio::test]
    async fn a_held_request_runs_in_the_lock_scope_and_releases() {
        let locker = Locker::in_memory();
        let locks = RouteLocks::new(locker.clone())
            .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap());
        let Plan::Lock(held) = locks.plan("POST", "/orders/1", &()) else {
            panic!("the rule matches");
        };
        let inner = locker.clone();
        let guard = held.acquire().await.unwrap();
        let out = held
            .hold(guard, async move {
                // The handler re-enters the request's lock instead of waiting for itself.
                let g = inner.lock("stock:1").acquire().await.unwrap();
                g.is_reentrant()
            })
            .await
            .unwrap();
        assert!(out);
        let again = locker.lock("stock:1").try_acquire().await.unwrap();
        assert!(again.is_some(), "the request's lock was released");
    }
}
