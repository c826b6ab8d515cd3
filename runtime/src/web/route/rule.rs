//! A route rule: which requests take a lock (method and path pattern), under which key (a
//! template or a closure), and the lock's options.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::key::KeyTemplate;
use super::path::{PathParams, PathPattern};
use super::request::RequestInfo;
use crate::__private::{LeaseKind, Spec};
use crate::error::LockError;
use crate::primitives::guard::OnLost;

/// A function that builds a lock key from a request; `None` refuses the request with 400
/// `lock_invalid_key` (it lacks what the key needs).
pub type KeyFn = dyn Fn(&RequestInfo<'_>) -> Option<String> + Send + Sync + 'static;

/// One rule of the request-locking middleware ([`RouteLocks`](crate::RouteLocks)): requests
/// whose method and path match run while holding the lock named by the rule's key.
///
/// The path pattern is written as in actix-web and axum: literal segments, `{name}` for one
/// segment, and `{*name}` for the rest of the path (last segment only). The key template is
/// written as in `#[distributed_lock]`: `<name>` is a path parameter, `<header.X-Tenant>` a
/// request header, `<<` and `>>` literal angle brackets.
///
/// ```
/// use leasehold::{RequestInfo, RouteRule};
/// use std::time::Duration;
///
/// let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?
///     .lease(Duration::from_secs(10))
///     .wait(Duration::from_secs(2));
/// let params = rule.matches("POST", "/orders/42").unwrap();
/// let req = RequestInfo::new("POST", "/orders/42", params, &());
/// assert_eq!(rule.key_for(&req).as_deref(), Some("stock:42"));
/// assert!(rule.matches("GET", "/orders/42").is_none());
/// # Ok::<(), leasehold::LockError>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct RouteRule {
    method: Option<String>,
    path: PathPattern,
    key: RouteKey,
    lease: Option<Duration>,
    wait: Option<Duration>,
    watchdog: Option<bool>,
    on_lost: OnLost,
    fair: bool,
    profile: Option<Cow<'static, str>>,
    /// Set once a configuration error of this rule was logged at `error`.
    config_logged: Arc<AtomicBool>,
}

#[derive(Clone)]
enum RouteKey {
    Template(KeyTemplate),
    Fn(Arc<KeyFn>),
}

impl RouteRule {
    /// A rule for requests with this `method` (`"*"` for any) and `path` pattern, locking the
    /// key built from the `key` template.
    ///
    /// # Errors
    /// [`LockError::Config`] naming the bad part: a method that is not an HTTP token, a path
    /// pattern that does not start with `/` or has a malformed `{...}`, or a key template that
    /// does not parse or names a parameter the path does not have.
    pub fn new(method: &str, path: &str, key: &str) -> Result<RouteRule, LockError> {
        let method = parse_method(method)?;
        let path = PathPattern::parse(path)?;
        let key = KeyTemplate::parse(key, &path)?;
        Ok(RouteRule::with_key(method, path, RouteKey::Template(key)))
    }

    /// A rule whose key is built by a closure from the request; the closure returns `None`
    /// when the request lacks what the key needs, and the request is refused with 400.
    ///
    /// ```
    /// use leasehold::{RequestInfo, RouteRule};
    ///
    /// let rule = RouteRule::with_key_fn("POST", "/carts/{id}/checkout", |req| {
    ///     Some(format!("cart:{}:{}", req.header("x-tenant")?, req.param("id")?))
    /// })?;
    /// let params = rule.matches("POST", "/carts/9/checkout").unwrap();
    /// let req = RequestInfo::new("POST", "/carts/9/checkout", params, &[("X-Tenant", "acme")]);
    /// let key = rule.key_for(&req);
    /// assert_eq!(key.as_deref(), Some("cart:acme:9"));
    /// # Ok::<(), leasehold::LockError>(())
    /// ```
    ///
    /// # Errors
    /// [`LockError::Config`] for a bad method or path pattern, as [`new`](Self::new).
    pub fn with_key_fn<F>(method: &str, path: &str, key: F) -> Result<RouteRule, LockError>
    where
        F: Fn(&RequestInfo<'_>) -> Option<String> + Send + Sync + 'static,
    {
        let method = parse_method(method)?;
        let path = PathPattern::parse(path)?;
        Ok(RouteRule::with_key(
            method,
            path,
            RouteKey::Fn(Arc::new(key)),
        ))
    }

    fn with_key(method: Option<String>, path: PathPattern, key: RouteKey) -> Self {
        RouteRule {
            method,
            path,
            key,
            lease: None,
            wait: None,
            watchdog: None,
            on_lost: OnLost::Cancel,
            fair: false,
            profile: None,
            config_logged: Arc::default(),
        }
    }

    /// The lease of locks taken by this rule. Defaults to the locker's default lease; at
    /// least 10 ms (checked when the lock is taken).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long a request waits for the lock before it is answered 409. Defaults to the
    /// locker's default wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Whether the lease is renewed while the request runs. Defaults to the locker's
    /// setting (on).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = Some(on);
        self
    }

    /// First come, first served across processes (see
    /// [`LockRequest::fair`](crate::LockRequest::fair)). Off by default.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self
    }

    /// Takes the lock with the settings of the locker's profile `name` (the config's
    /// `[profiles.NAME]`), which override this rule's lease, wait, watchdog and fairness; see
    /// [`LockRequest::profile`](crate::LockRequest::profile). A profile the locker does not
    /// define is found when the middleware is mounted ([`RouteLocks::check`](crate::RouteLocks::check)).
    pub fn profile(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.profile = Some(name.into());
        self
    }

    /// The profile this rule names, if any.
    pub fn profile_name(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    /// What happens when the lease is lost while the request runs. Defaults to
    /// [`OnLost::Cancel`].
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// The method this rule matches, upper-case; `None` for any.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The path pattern, as written.
    pub fn path(&self) -> &str {
        &self.path.text
    }

    /// The key template, as written; `None` for a rule with a key closure.
    pub fn key_template(&self) -> Option<&str> {
        match &self.key {
            RouteKey::Template(t) => Some(&t.text),
            RouteKey::Fn(_) => None,
        }
    }

    /// The lease this rule sets, if any.
    pub fn lease_setting(&self) -> Option<Duration> {
        self.lease
    }

    /// The wait this rule sets, if any.
    pub fn wait_setting(&self) -> Option<Duration> {
        self.wait
    }

    /// The path parameters if a request with this method and path is one this rule locks.
    /// Methods compare case-insensitively, paths exactly (segment by segment).
    pub fn matches(&self, method: &str, path: &str) -> Option<PathParams> {
        if let Some(m) = &self.method {
            if !m.eq_ignore_ascii_case(method) {
                return None;
            }
        }
        self.path.matches(path)
    }

    /// The lock key for a request this rule matched (`req` holds the parameters
    /// [`matches`](Self::matches) gave); `None` when a header the key needs is missing (or
    /// the key closure said no).
    pub fn key_for(&self, req: &RequestInfo<'_>) -> Option<String> {
        match &self.key {
            RouteKey::Template(t) => t.render(req),
            RouteKey::Fn(f) => f(req),
        }
    }

    /// True the first time a configuration error of this rule is reported.
    pub(crate) fn first_config_error(&self) -> bool {
        !self.config_logged.swap(true, Ordering::Relaxed)
    }

    /// The rule as messages show it: method, path pattern and key.
    pub(crate) fn shown(&self) -> String {
        let key = match &self.key {
            RouteKey::Template(t) => format!("key {:?}", t.text),
            RouteKey::Fn(_) => "a key closure".to_owned(),
        };
        format!(
            "{} {} ({key})",
            self.method.as_deref().unwrap_or("*"),
            self.path.text
        )
    }

    /// The options of the lock, in the form the attribute's runtime takes.
    pub(crate) fn spec(&self) -> Spec {
        Spec {
            kind: LeaseKind::Exclusive,
            fair: self.fair,
            lease: self.lease,
            wait: self.wait,
            watchdog: self.watchdog,
            on_lost: self.on_lost,
            hold_at_least: None,
            profile: self.profile.clone(),
            site: None,
        }
    }
}

impl fmt::Debug for RouteRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = match &self.key {
            RouteKey::Template(t) => t.text.clone(),
            RouteKey::Fn(_) => "<closure>".to_owned(),
        };
        f.debug_struct("RouteRule")
            .field("method", &self.method.as_deref().unwrap_or("*"))
            .field("path", &self.path.text)
            .field("key", &key)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("watchdog", &self.watchdog)
            .field("on_lost", &self.on_lost)
            .field("fair", &self.fair)
            .field("profile", &self.profile)
            .finish()
    }
}

/// `"*"` (or empty) for any method, else an upper-cased HTTP token.
fn parse_method(method: &str) -> Result<Option<String>, LockError> {
    let method = method.trim();
    if method.is_empty() || method == "*" {
        return Ok(None);
    }
    let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !method.chars().all(is_tchar) {
        return Err(LockError::config(format!(
            "method {method:?} is not an HTTP method; write e.g. \"POST\", or \"*\" for any"
        )));
    }
    Ok(Some(method.to_ascii_uppercase()))
}
