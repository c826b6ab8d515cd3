//! What a rule and a key closure see of a request: method, path, the parameters the rule's
//! pattern captured, and headers, looked up the same way for every framework.

use std::fmt;

use super::path::PathParams;

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
    /// from the path ([`RouteRule::matches`](super::RouteRule::matches)), and headers.
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
