//! Route rules for the request-locking middleware: which requests take a lock (method and path
//! pattern) and under which key (a template over path parameters and headers, or a closure).
//! Plain Rust with no web framework in sight, so it is tested without HTTP.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use leasehold_template::{ErrorKind, Placeholder, Segment, TemplateError};

use crate::__private::{LeaseKind, Spec};
use crate::error::LockError;
use crate::primitives::guard::OnLost;

/// The parameters a path pattern captured from a request path, percent-decoded.
///
/// ```
/// use leasehold::RouteRule;
///
/// let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?;
/// let params = rule.matches("POST", "/orders/sku%207").unwrap();
/// assert_eq!(params.get("sku"), Some("sku 7"));
/// # Ok::<(), leasehold::LockError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathParams(Vec<(String, String)>);

impl PathParams {
    /// The value of the parameter `name`, if the pattern has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The parameters in pattern order, as `(name, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// A request's headers, looked up by name, case-insensitively (as HTTP header names are).
///
/// Implemented for the header maps of actix-web and axum (with their features), for lists
/// of `(name, value)` pairs, and for `()` (no headers), so rules can be tested without HTTP.
pub trait HeaderLookup {
    /// The value of the header `name`, if present and valid UTF-8 (the first one, if repeated).
    fn header(&self, name: &str) -> Option<&str>;
}

impl HeaderLookup for () {
    fn header(&self, _name: &str) -> Option<&str> {
        None
    }
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for [(K, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> HeaderLookup for [(K, V); N] {
    fn header(&self, name: &str) -> Option<&str> {
        self[..].header(name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for Vec<(K, V)> {
    fn header(&self, name: &str) -> Option<&str> {
        self[..].header(name)
    }
}

/// What a key closure sees of a request: method, path, the path parameters of the rule's
/// pattern, and headers. The same for actix-web and axum.
///
/// ```
/// use leasehold::{PathParams, RequestInfo};
///
/// let req = RequestInfo::new("GET", "/report", PathParams::default(), &[("X-Tenant", "acme")]);
/// assert_eq!(req.header("x-tenant"), Some("acme"));
/// assert_eq!(req.param("id"), None);
/// ```
pub struct RequestInfo<'a> {
    method: &'a str,
    path: &'a str,
    params: PathParams,
    headers: &'a dyn HeaderLookup,
}

impl<'a> RequestInfo<'a> {
    /// A view of a request with this method, path, the parameters a rule's pattern captured
    /// from the path ([`RouteRule::matches`]), and headers.
    pub fn new(
        method: &'a str,
        path: &'a str,
        params: PathParams,
        headers: &'a dyn HeaderLookup,
    ) -> Self {
        RequestInfo {
            method,
            path,
            params,
            headers,
        }
    }

    /// The request method, e.g. `"POST"`.
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The request path, without the query string.
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The path parameter `name` of the rule's pattern, percent-decoded.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name)
    }

    /// The header `name` (case-insensitive), if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers.header(name)
    }
}

impl fmt::Debug for RequestInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestInfo")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

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

#[derive(Clone, Debug, PartialEq, Eq)]
enum PathSegment {
    Literal(String),
    Param(String),
    /// `{*name}`: the rest of the path, at least one character.
    Rest(String),
}

/// A parsed path pattern: `/orders/{sku}`, `/files/{*path}`.
#[derive(Clone, Debug)]
struct PathPattern {
    text: String,
    segments: Vec<PathSegment>,
}

impl PathPattern {
    fn parse(text: &str) -> Result<PathPattern, LockError> {
        let bad = |why: String| LockError::config(format!("path pattern {text:?}: {why}"));
        let Some(rest) = text.strip_prefix('/') else {
            return Err(bad(
                "a path pattern starts with `/`, e.g. \"/orders/{sku}\"".into(),
            ));
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let mut segments = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let segment = if let Some(inner) =
                part.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
            {
                let (name, rest) = match inner.strip_prefix('*') {
                    Some(name) => (name, true),
                    None => (inner, false),
                };
                if !is_param_name(name) {
                    return Err(bad(format!(
                        "`{{{inner}}}` is not a parameter; write `{{name}}` with a name of \
                         letters, digits and `_`, or `{{*name}}` for the rest of the path"
                    )));
                }
                if segments
                    .iter()
                    .any(|s| matches!(s, PathSegment::Param(n) | PathSegment::Rest(n) if n == name))
                {
                    return Err(bad(format!("the parameter `{name}` appears twice")));
                }
                if rest {
                    if i + 1 != parts.len() {
                        return Err(bad(format!(
                            "`{{*{name}}}` takes the rest of the path, so it must be the last segment"
                        )));
                    }
                    PathSegment::Rest(name.to_owned())
                } else {
                    PathSegment::Param(name.to_owned())
                }
            } else if part.contains(['{', '}']) {
                return Err(bad(format!(
                    "segment {part:?} mixes text and braces; a parameter takes a whole segment, \
                     e.g. \"/files/{{name}}\""
                )));
            } else if let Some((sigil, name)) = part
                .strip_prefix(':')
                .map(|n| (':', n))
                .or_else(|| part.strip_prefix('*').map(|n| ('*', n)))
                .filter(|(_, n)| is_param_name(n))
            {
                // `/events/:id` (axum 0.7, express) would be taken literally, and the route
                // would run unlocked: refuse it, naming the syntax that works.
                let braces = if sigil == '*' {
                    format!("{{*{name}}}")
                } else {
                    format!("{{{name}}}")
                };
                return Err(bad(format!(
                    "segment `{part}` is not a parameter here: parameters are written in braces, \
                     `{braces}` (the `{sigil}{name}` syntax of axum 0.7 and older would match \
                     the text `{part}` literally, and the route would run unlocked)"
                )));
            } else {
                PathSegment::Literal((*part).to_owned())
            };
            segments.push(segment);
        }
        Ok(PathPattern {
            text: text.to_owned(),
            segments,
        })
    }

    fn param_names(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            PathSegment::Param(n) | PathSegment::Rest(n) => Some(n.as_str()),
            PathSegment::Literal(_) => None,
        })
    }

    fn matches(&self, path: &str) -> Option<PathParams> {
        let mut rest = path.strip_prefix('/')?;
        let mut params = Vec::new();
        for (i, segment) in self.segments.iter().enumerate() {
            let last = i + 1 == self.segments.len();
            if let PathSegment::Rest(name) = segment {
                if rest.is_empty() {
                    return None;
                }
                params.push((name.clone(), percent_decode(rest)));
                return Some(PathParams(params));
            }
            let (part, tail) = match rest.split_once('/') {
                Some((part, tail)) if !last => (part, Some(tail)),
                Some(_) => return None,
                None if last => (rest, None),
                None => return None,
            };
            match segment {
                PathSegment::Literal(lit) => {
                    if part != lit {
                        return None;
                    }
                }
                PathSegment::Param(name) => {
                    if part.is_empty() {
                        return None;
                    }
                    params.push((name.clone(), percent_decode(part)));
                }
                PathSegment::Rest(_) => unreachable!("handled above"),
            }
            rest = tail.unwrap_or("");
        }
        Some(PathParams(params))
    }
}

fn is_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// Decodes `%XX` escapes; gives the text unchanged if the result would not be UTF-8, as the
/// frameworks' own path extractors refuse such paths anyway.
fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyPart {
    Literal(String),
    Param(String),
    Header(String),
}

/// A parsed key template, checked against a path pattern.
#[derive(Clone, Debug)]
struct KeyTemplate {
    text: String,
    parts: Vec<KeyPart>,
}

impl KeyTemplate {
    /// Parses with the grammar the attribute uses (`leasehold-template`), then resolves each
    /// placeholder against `path`. Reports the first error, worded for route rules.
    fn parse(text: &str, path: &PathPattern) -> Result<KeyTemplate, LockError> {
        let bad = |why: String| LockError::config(format!("key template {text:?}: {why}"));
        let segments = leasehold_template::parse(text).map_err(|errors| bad(why(&errors[0])))?;
        let parts = segments
            .into_iter()
            .map(|segment| match segment {
                Segment::Literal(text) => Ok(KeyPart::Literal(text)),
                Segment::Placeholder(p) => placeholder(&p, path).map_err(bad),
            })
            .collect::<Result<_, _>>()?;
        Ok(KeyTemplate {
            text: text.to_owned(),
            parts,
        })
    }

    fn render(&self, req: &RequestInfo<'_>) -> Option<String> {
        let mut key = String::new();
        for part in &self.parts {
            match part {
                KeyPart::Literal(text) => key.push_str(text),
                KeyPart::Param(name) => key.push_str(req.param(name)?),
                KeyPart::Header(name) => {
                    let value = req.header(name).filter(|v| !v.is_empty())?;
                    key.push_str(value);
                }
            }
        }
        Some(key)
    }
}

/// What is wrong with a template the grammar refused, for a `LockError::Config`.
fn why(error: &TemplateError) -> String {
    let not_a_placeholder = |text: &str| {
        format!(
            "`{text}` is not a placeholder; write a path parameter such as `<sku>` or a \
             header such as `<header.X-Tenant>`"
        )
    };
    match &error.kind {
        ErrorKind::EmptyKey => {
            "the key is empty; name the resource the route changes, e.g. \"stock:<sku>\"".into()
        }
        ErrorKind::Unterminated => "a `<` has no closing `>`; close the placeholder, or write \
                                    `<<` for a literal `<`"
            .into(),
        ErrorKind::StrayClose => "unmatched `>`; write `>>` for a literal `>`".into(),
        ErrorKind::NestedOpen => format!(
            "the `<` at byte {} is inside a placeholder; close the placeholder with `>` first \
             (placeholders do not nest), or write `<<` for a literal `<`",
            error.span.start
        ),
        ErrorKind::EmptyPlaceholder => not_a_placeholder("<>"),
        ErrorKind::InvalidPlaceholder(inner) if inner.starts_with("header.") => {
            format!("`<{inner}>` does not name a header; write e.g. `<header.X-Tenant>`")
        }
        ErrorKind::InvalidPlaceholder(inner) => not_a_placeholder(&format!("<{inner}>")),
    }
}

/// `<header.Name>` (the fields after `header`, joined by `.` as written), or `<name>` with
/// `name` a parameter of `path`.
fn placeholder(p: &Placeholder, path: &PathPattern) -> Result<KeyPart, String> {
    let inner = p.path();
    if let Some(header) = inner.strip_prefix("header.") {
        // Identifier fields may hold letters beyond ASCII, which no header name has.
        if is_header_name(header) {
            return Ok(KeyPart::Header(header.to_owned()));
        }
        return Err(format!(
            "`<{inner}>` does not name a header; write e.g. `<header.X-Tenant>`"
        ));
    }
    if p.fields.is_empty() && path.param_names().any(|n| n == p.root) {
        return Ok(KeyPart::Param(p.root.clone()));
    }
    let names: Vec<String> = path.param_names().map(|n| format!("`{n}`")).collect();
    let known = if names.is_empty() {
        format!("{:?} has no parameters", path.text)
    } else {
        format!("its parameters are: {}", names.join(", "))
    };
    Err(format!(
        "no path parameter `{inner}` in {:?}; {known} (or use `<header.Name>`)",
        path.text
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rule: &RouteRule, method: &str, path: &str) -> Option<String> {
        let params = rule.matches(method, path)?;
        rule.key_for(&RequestInfo::new(method, path, params, &()))
    }

    #[test]
    fn matches_method_and_path_and_builds_the_key() {
        let rule = RouteRule::new("post", "/orders/{sku}", "stock:<sku>").unwrap();
        assert_eq!(rule.method(), Some("POST"));
        assert_eq!(
            key(&rule, "POST", "/orders/a1").as_deref(),
            Some("stock:a1")
        );
        assert_eq!(
            key(&rule, "post", "/orders/a1").as_deref(),
            Some("stock:a1")
        );
        assert!(rule.matches("GET", "/orders/a1").is_none());
        assert!(rule.matches("POST", "/orders").is_none());
        assert!(rule.matches("POST", "/orders/").is_none());
        assert!(rule.matches("POST", "/orders/a1/x").is_none());
        assert!(rule.matches("POST", "/orders/a1/").is_none());
        assert!(rule.matches("POST", "orders/a1").is_none());
        assert!(rule.matches("POST", "/order/a1").is_none());
    }

    /// Issue 18: `/events/:id` (axum 0.7 syntax) was taken literally, and the route ran
    /// unlocked. It is refused now, with the `{id}` syntax named.
    #[test]
    fn colon_and_star_parameters_are_refused_with_the_brace_syntax() {
        let err = RouteRule::new("POST", "/events/:id", "event:<id>").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`{id}`") && text.contains("axum 0.7"),
            "{text}"
        );
        let err = RouteRule::new("GET", "/files/*path", "file").unwrap_err();
        assert!(err.to_string().contains("`{*path}`"), "{err}");
        // Text that merely contains a colon stays literal (Google-style custom methods).
        let rule = RouteRule::new("POST", "/v1/things:batch", "batch").unwrap();
        assert!(rule.matches("POST", "/v1/things:batch").is_some());
    }

    #[test]
    fn any_method_several_params_and_the_rest_of_the_path() {
        let rule = RouteRule::new("*", "/shops/{shop}/items/{item}", "item:<shop>/<item>").unwrap();
        assert_eq!(
            key(&rule, "DELETE", "/shops/s/items/7").as_deref(),
            Some("item:s/7")
        );
        let rest = RouteRule::new("PUT", "/files/{*path}", "file:<path>").unwrap();
        assert_eq!(
            key(&rest, "PUT", "/files/a/b/c.txt").as_deref(),
            Some("file:a/b/c.txt")
        );
        assert!(rest.matches("PUT", "/files/").is_none());
        assert!(rest.matches("PUT", "/files").is_none());
        let root = RouteRule::new("GET", "/", "root").unwrap();
        assert_eq!(key(&root, "GET", "/").as_deref(), Some("root"));
        assert!(root.matches("GET", "/x").is_none());
    }

    #[test]
    fn params_are_percent_decoded() {
        let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap();
        assert_eq!(
            key(&rule, "POST", "/orders/a%20b").as_deref(),
            Some("stock:a b")
        );
        assert_eq!(
            key(&rule, "POST", "/orders/%E2%82%AC").as_deref(),
            Some("stock:€")
        );
        // Not UTF-8 once decoded, or not an escape: kept as written.
        assert_eq!(
            key(&rule, "POST", "/orders/%FF").as_deref(),
            Some("stock:%FF")
        );
        assert_eq!(
            key(&rule, "POST", "/orders/100%").as_deref(),
            Some("stock:100%")
        );
        assert_eq!(
            key(&rule, "POST", "/orders/%zz1").as_deref(),
            Some("stock:%zz1")
        );
    }

    #[test]
    fn headers_and_escapes_in_key_templates() {
        let rule =
            RouteRule::new("POST", "/orders/{sku}", "<<t>>:<header.X-Tenant>:<sku>").unwrap();
        let params = rule.matches("POST", "/orders/9").unwrap();
        let with = |headers: &dyn HeaderLookup| {
            rule.key_for(&RequestInfo::new(
                "POST",
                "/orders/9",
                params.clone(),
                headers,
            ))
        };
        assert_eq!(with(&[("x-tenant", "acme")]).as_deref(), Some("<t>:acme:9"));
        // A missing or empty header: no key, the request is refused.
        assert_eq!(with(&()), None);
        assert_eq!(with(&[("X-Tenant", "")]), None);
    }

    #[test]
    fn key_closures_see_the_request() {
        let rule = RouteRule::with_key_fn("*", "/carts/{id}", |req| {
            Some(format!(
                "{}:{}:{}",
                req.method(),
                req.path(),
                req.param("id")?
            ))
        })
        .unwrap();
        assert_eq!(
            key(&rule, "PATCH", "/carts/5").as_deref(),
            Some("PATCH:/carts/5:5")
        );
        assert!(rule.key_template().is_none());
        assert!(format!("{rule:?}").contains("<closure>"));
    }

    fn config_error(result: Result<RouteRule, LockError>) -> String {
        match result {
            Err(e @ LockError::Config { .. }) => e.to_string(),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn bad_rules_are_config_errors_that_say_what_is_wrong() {
        let e = config_error(RouteRule::new("POST", "/orders/{sku}", "stock:<skux>"));
        assert!(e.contains("no path parameter `skux`"), "{e}");
        assert!(e.contains("`sku`"), "{e}");
        let e = config_error(RouteRule::new("POST", "/orders", "stock:<sku>"));
        assert!(e.contains("has no parameters"), "{e}");
        let e = config_error(RouteRule::new("POST", "orders/{sku}", "k"));
        assert!(e.contains("starts with `/`"), "{e}");
        let e = config_error(RouteRule::new("POST", "/orders/{s-k}", "k"));
        assert!(e.contains("`{s-k}` is not a parameter"), "{e}");
        let e = config_error(RouteRule::new("POST", "/orders/id{sku}", "k"));
        assert!(e.contains("mixes text and braces"), "{e}");
        let e = config_error(RouteRule::new("POST", "/{a}/{a}", "k"));
        assert!(e.contains("appears twice"), "{e}");
        let e = config_error(RouteRule::new("POST", "/{*a}/b", "k"));
        assert!(e.contains("last segment"), "{e}");
        let e = config_error(RouteRule::new("PO ST", "/", "k"));
        assert!(e.contains("not an HTTP method"), "{e}");
        let e = config_error(RouteRule::new("POST", "/", ""));
        assert!(e.contains("empty"), "{e}");
        let e = config_error(RouteRule::new("POST", "/", "a<b"));
        assert!(e.contains("no closing `>`"), "{e}");
        let e = config_error(RouteRule::new("POST", "/", "a>b"));
        assert!(e.contains("unmatched `>`"), "{e}");
        let e = config_error(RouteRule::new("POST", "/", "a<>"));
        assert!(e.contains("not a placeholder"), "{e}");
        let e = config_error(RouteRule::new("POST", "/", "<header.>"));
        assert!(e.contains("does not name a header"), "{e}");
    }

    #[test]
    fn key_templates_follow_the_attribute_grammar() {
        let rule = RouteRule::new("POST", "/t/{t}", "<header.X.Trace_1>:<<<t>>>").unwrap();
        let params = rule.matches("POST", "/t/9").unwrap();
        let headers = [("x.trace_1", "abc")];
        let req = RequestInfo::new("POST", "/t/9", params, &headers);
        assert_eq!(rule.key_for(&req).as_deref(), Some("abc:<9>"));
        // Refused by the shared grammar, which the attribute refuses too.
        for (key, says) in [
            ("<_>", "`<_>` is not a placeholder"),
            ("< t>", "`< t>` is not a placeholder"),
            ("<header..>", "`<header..>` does not name a header"),
            ("<header.a..b>", "`<header.a..b>` does not name a header"),
            ("<header.größe>", "`<header.größe>` does not name a header"),
            ("<t<t>", "the `<` at byte 2 is inside a placeholder"),
            ("<t.x>", "no path parameter `t.x`"),
            ("<r#t>", "no path parameter `r#t`"),
        ] {
            let e = config_error(RouteRule::new("POST", "/t/{t}/{_}", key));
            assert!(e.contains(says), "{key}: {e}");
        }
    }

    #[test]
    fn rules_carry_the_attribute_options() {
        let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")
            .unwrap()
            .lease(Duration::from_secs(10))
            .wait(Duration::from_secs(2))
            .watchdog(false)
            .on_lost(OnLost::Continue);
        let spec = rule.spec();
        assert_eq!(spec.lease, Some(Duration::from_secs(10)));
        assert_eq!(spec.wait, Some(Duration::from_secs(2)));
        assert_eq!(spec.watchdog, Some(false));
        assert_eq!(spec.on_lost, OnLost::Continue);
        assert_eq!(rule.path(), "/orders/{sku}");
        assert_eq!(rule.key_template(), Some("stock:<sku>"));
    }
}
