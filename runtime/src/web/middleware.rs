//! [`RouteLocks`]: the request-locking middleware's logic, shared by actix-web and axum: which
//! rule a request matches, holding its lock around the handler, and answering and logging failures.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::response::{LockErrorResponse, StatusCodes};
use super::route::{HeaderLookup, PathParams, RequestInfo, RouteRule};
use crate::error::LockError;
use crate::kernel::observe::{self, TraceKeys};
use crate::locker::Locker;
use crate::primitives::guard::LockGuard;

/// A function that shapes the answer to a lock error: it gets the error and the answer the
/// [`StatusCodes`] gave it, and returns the answer to send (the same one to keep it).
pub type ErrorHook =
    dyn Fn(&LockError, LockErrorResponse) -> LockErrorResponse + Send + Sync + 'static;

/// Middleware that runs each matching request while holding a lock, for actix-web
/// (`App::wrap`, feature `actix`) and axum (`Router::layer`, feature `axum`).
///
/// Each request is checked against the [`RouteRule`]s in the order they were added; the
/// first rule whose method and path match names the key, and the request runs only while
/// this process holds that key, exactly as a `#[distributed_lock]` handler would (same
/// options, same re-entrancy: a handler locking the same key inside re-enters). The handler
/// learns the key and the fence through the [`HeldLock`](crate::HeldLock) extractor. Requests
/// no rule matches pass through untouched.
///
/// Lock errors are answered as [`LockErrorResponse`] says, with the statuses of
/// [`status_codes`](Self::status_codes) and reshaped by [`on_error`](Self::on_error); a
/// request whose key cannot be built (a header the template names is missing) is answered
/// 400 `lock_invalid_key`. Each such answer is logged (target `leasehold::web`, message
/// "request answered with a lock error"): at `INFO` for busy locks and unbuildable
/// keys, which are the clients' lot, at `WARN` for unavailable stores, lost leases and
/// configuration errors, which are the operators'. The fields are `code`, `status`, `method`,
/// `route` (the rule's pattern, not the path: paths may carry user data), `key` (as the
/// locker's [`TraceKeys`] allow; empty when the key is unknown) and `error`.
///
/// Configured status codes and hooks also apply to the `LockError` responses of handlers
/// inside the middleware (`#[distributed_lock]` handlers returning `Err(LockError)`), on
/// every route, matched or not; the innermost `RouteLocks` shapes them.
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
#[derive(Clone)]
#[must_use]
pub struct RouteLocks {
    locker: Option<Locker>,
    rules: Arc<Vec<RouteRule>>,
    codes: StatusCodes,
    on_error: Option<Arc<ErrorHook>>,
}

impl RouteLocks {
    /// Middleware that takes its locks through `locker`, with no rules yet.
    pub fn new(locker: Locker) -> Self {
        RouteLocks::with_locker(Some(locker))
    }

    /// Middleware that takes its locks through the global default locker
    /// ([`set_global_default`](crate::set_global_default)), looked up on each request; if
    /// none is installed, matching requests are answered 500 `lock_config`.
    pub fn with_global_default() -> Self {
        RouteLocks::with_locker(None)
    }

    fn with_locker(locker: Option<Locker>) -> Self {
        RouteLocks {
            locker,
            rules: Arc::new(Vec::new()),
            codes: StatusCodes::default(),
            on_error: None,
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

    /// The status of each lock error this middleware answers, its own and its handlers'.
    /// Defaults to [`StatusCodes::default`] (busy 409, unavailable 503, lost 503, invalid key
    /// 400, config 500).
    ///
    /// ```
    /// use leasehold::{LockError, Locker, RouteLocks, StatusCodes};
    ///
    /// // 409 means "sold out" in this shop: a busy lock is 503 with Retry-After.
    /// let locks = RouteLocks::new(Locker::in_memory()).status_codes(StatusCodes::default().busy(503));
    /// let busy = LockError::Busy { retry_after: None };
    /// assert_eq!(locks.response(&busy).status, 503);
    /// assert_eq!(locks.response(&busy).retry_after, Some(1));
    /// ```
    pub fn status_codes(mut self, codes: StatusCodes) -> Self {
        self.codes = codes;
        self
    }

    /// A hook that shapes each lock error answer of this middleware, its own and its
    /// handlers': it gets the error and the answer the [`status_codes`](Self::status_codes)
    /// gave it, and returns the answer to send (the same one to keep the default). Framework
    /// independent: one hook serves actix-web and axum. It runs on the request's task and
    /// should be quick; a later call replaces an earlier hook. None by default.
    ///
    /// ```
    /// use leasehold::{LockError, Locker, RouteLocks};
    ///
    /// let locks = RouteLocks::new(Locker::in_memory()).on_error(|err, mut answer| {
    ///     if err.is_busy() {
    ///         answer.content_type = "application/problem+json".into();
    ///         answer.body = r#"{"title":"try again shortly","status":409}"#.into();
    ///     }
    ///     answer
    /// });
    /// let answer = locks.response(&LockError::Busy { retry_after: None });
    /// assert_eq!(answer.content_type, "application/problem+json");
    /// assert!(answer.body.contains("try again"));
    /// ```
    pub fn on_error<F>(mut self, hook: F) -> Self
    where
        F: Fn(&LockError, LockErrorResponse) -> LockErrorResponse + Send + Sync + 'static,
    {
        self.on_error = Some(Arc::new(hook));
        self
    }

    /// The answer this middleware gives `err`: its [`StatusCodes`], then its
    /// [`on_error`](Self::on_error) hook.
    pub fn response(&self, err: &LockError) -> LockErrorResponse {
        let answer = self.codes.response(err);
        match &self.on_error {
            Some(hook) => hook(err, answer),
            None => answer,
        }
    }

    /// Whether answers differ from the defaults, so handlers' lock error responses must be
    /// rebuilt.
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) fn reshapes(&self) -> bool {
        self.on_error.is_some() || self.codes != StatusCodes::default()
    }

    /// Checks every rule against the middleware's locker (or the global default, if one is
    /// installed yet), as its requests would resolve their options: a rule that asks for
    /// what the locker cannot give (a profile it does not define, an unrenewed lease above
    /// the engine's bound) would answer every request `500 lock_config`. Mounting runs it:
    /// actix-web fails to start the app's workers (and logs the error), axum's `layer` panics
    /// with it, as axum does for other routing mistakes. Call it yourself to handle the error.
    ///
    /// # Errors
    /// [`LockError::Config`] listing every rule at fault, by method, path pattern and key.
    ///
    /// ```
    /// use leasehold::{Locker, RouteLocks, RouteRule};
    ///
    /// let locks = RouteLocks::new(Locker::in_memory())
    ///     .rule(RouteRule::new("POST", "/payouts/{id}", "payout:<id>")?.profile("payments"));
    /// let err = locks.check().unwrap_err().to_string();
    /// assert!(err.contains("POST /payouts/{id}") && err.contains("profile \"payments\""), "{err}");
    /// # Ok::<(), leasehold::LockError>(())
    /// ```
    pub fn check(&self) -> Result<(), LockError> {
        let locker = match &self.locker {
            Some(locker) => locker,
            None => match crate::locker::global::global_default() {
                Some(locker) => locker,
                // Checked at the first request instead, and logged once per rule.
                None => return Ok(()),
            },
        };
        let problems: Vec<String> = self
            .rules
            .iter()
            .filter_map(|rule| {
                crate::__private::check(locker, &rule.spec())
                    .err()
                    .map(|e| format!("  - {}: {}", rule.shown(), e))
            })
            .collect();
        crate::locker::sites::refuse(locker, "route lock rule", problems)
    }

    /// The first rule matching a request with this method and path, and the path parameters
    /// it captured; `None` when the request runs without a lock.
    pub fn find(&self, method: &str, path: &str) -> Option<(&RouteRule, PathParams)> {
        self.find_index(method, path)
            .map(|(i, params)| (&self.rules[i], params))
    }

    fn find_index(&self, method: &str, path: &str) -> Option<(usize, PathParams)> {
        self.rules
            .iter()
            .enumerate()
            .find_map(|(i, rule)| rule.matches(method, path).map(|params| (i, params)))
    }

    /// Decides what to do with a request, before anything is awaited.
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) fn plan(&self, method: &str, path: &str, headers: &dyn HeaderLookup) -> Plan {
        let Some((index, params)) = self.find_index(method, path) else {
            return Plan::Pass;
        };
        let rule = &self.rules[index];
        let refuse = |err: LockError| Plan::Refuse(self.refuse(err, method, rule, None));
        let Some(key) = rule.key_for(&RequestInfo::new(method, path, params, headers)) else {
            return refuse(LockError::invalid_key(
                "the request lacks a header that the route's lock key is built from",
            ));
        };
        let locker = match &self.locker {
            Some(locker) => locker.clone(),
            // Without a locker, nobody said how keys may be traced: the key stays out.
            None => match crate::locker::global::require_global_default() {
                Ok(locker) => locker.clone(),
                Err(e) => return refuse(e),
            },
        };
        Plan::Lock(Box::new(RequestLock {
            locks: self.clone(),
            rule: index,
            method: method.to_owned(),
            locker,
            key,
        }))
    }

    /// Answers `err` and logs the answer.
    fn refuse(
        &self,
        error: LockError,
        method: &str,
        rule: &RouteRule,
        key: Option<(TraceKeys, &str)>,
    ) -> Refusal {
        let response = self.response(&error);
        // A configuration error is the operators': at `error` once per rule, then quietly.
        let first_config = matches!(error, LockError::Config { .. }) && rule.first_config_error();
        observe::request_refused(
            key,
            method,
            rule.path(),
            &error,
            response.status,
            first_config,
        );
        Refusal { error, response }
    }
}

impl fmt::Debug for RouteLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteLocks")
            .field("locker", &self.locker)
            .field("rules", &self.rules)
            .field("status_codes", &self.codes)
            .field("on_error", &self.on_error.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

/// What the middleware does with one request.
#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
pub(crate) enum Plan {
    /// No rule matched: run it as is.
    Pass,
    /// Answer without running it.
    Refuse(Refusal),
    /// Run it under this lock.
    Lock(Box<RequestLock>),
}

/// A lock error and the answer the middleware gives it (already logged).
#[derive(Debug)]
pub(crate) struct Refusal {
    #[cfg_attr(not(feature = "actix"), allow(dead_code))]
    pub(crate) error: LockError,
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) response: LockErrorResponse,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// A lock to hold around one request.
pub(crate) struct RequestLock {
    locks: RouteLocks,
    /// The index of the matching rule in `locks`.
    rule: usize,
    method: String,
    locker: Locker,
    key: String,
}

#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
impl RequestLock {
    /// The middleware this lock is held for.
    pub(crate) fn locks(&self) -> &RouteLocks {
        &self.locks
    }

    fn refuse(&self, error: LockError) -> Refusal {
        let key = Some((self.locker.inner.trace_keys, self.key.as_str()));
        self.locks
            .refuse(error, &self.method, &self.locks.rules[self.rule], key)
    }

    /// Takes the lock; a failure comes answered and logged.
    pub(crate) async fn acquire(&self) -> Result<LockGuard, Refusal> {
        let spec = self.locks.rules[self.rule].spec();
        crate::__private::acquire::<LockGuard>(Ok(&self.locker), self.key.clone(), &spec)
            .await
            .map_err(|e| self.refuse(e))
    }

    /// Runs `request` in the lock's scope (cancelled if the lease is lost, unless the rule
    /// says otherwise), then releases the lock. `Err` (answered and logged) when the lease
    /// was lost and the request was cancelled.
    pub(crate) async fn hold<F: Future>(
        &self,
        guard: LockGuard,
        request: F,
    ) -> Result<F::Output, Refusal> {
        let spec = self.locks.rules[self.rule].spec();
        let out = crate::__private::hold(&guard, &spec, request).await;
        let fence = guard.fence();
        if let Err(e) = guard.release().await {
            tracing::warn!(fence, error = %e, "releasing the lock of a request failed");
        }
        out.map_err(|e| self.refuse(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_rule_decides() {
        let locks = RouteLocks::new(Locker::in_memory())
            .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap())
            .rule(RouteRule::new("*", "/orders/{sku}", "any:<sku>").unwrap())
            .rule(RouteRule::new("POST", "/tenants/{t}", "<header.X-Tenant>:<t>").unwrap());
        let key = |method, path| match locks.plan(method, path, &()) {
            Plan::Lock(lock) => Some(lock.key),
            Plan::Pass => None,
            Plan::Refuse(r) => Some(r.response.code.to_owned()),
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
        let Plan::Lock(lock) = locks.plan("POST", "/orders/1", &()) else {
            panic!("the rule matches");
        };
        let inner = locker.clone();
        let guard = lock.acquire().await.unwrap();
        let out = lock
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

    #[tokio::test]
    async fn failures_are_answered_with_the_codes_then_the_hook() {
        let locker = Locker::in_memory();
        let locks = RouteLocks::new(locker.clone())
            .rule(
                RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")
                    .unwrap()
                    .wait(std::time::Duration::ZERO),
            )
            .status_codes(StatusCodes::default().busy(423))
            .on_error(|err, mut answer| {
                answer.body = format!("{{\"why\":\"{}\"}}", err.code());
                answer
            });
        assert!(locks.reshapes());
        assert!(!RouteLocks::new(locker.clone()).reshapes());
        let _holder = locker.lock("stock:1").acquire().await.unwrap();
        let Plan::Lock(lock) = locks.plan("POST", "/orders/1", &()) else {
            panic!("the rule matches");
        };
        let refusal = lock.acquire().await.unwrap_err();
        assert!(refusal.error.is_busy());
        assert_eq!(refusal.response.status, 423);
        assert_eq!(refusal.response.retry_after.map(|s| s > 0), Some(true));
        assert_eq!(refusal.response.body, r#"{"why":"lock_busy"}"#);
        assert!(format!("{locks:?}").contains("<hook>"));
    }
}
