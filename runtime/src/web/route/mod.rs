//! Route rules for the request-locking middleware: which requests take a lock (method and path
//! pattern) and under which key (a template over path parameters and headers, or a closure).
//! Plain Rust with no web framework in sight, so it is tested without HTTP.
//!
//! By job: [`rule`] (a rule, its options and what it matches), [`path`] (path patterns and
//! the parameters they capture), [`key`] (key templates, parsed with the attribute's grammar),
//! [`request`] (what a rule sees of a request).

mod key;
mod path;
mod request;
mod rule;
#[cfg(test)]
mod tests;

pub use self::path::PathParams;
pub use self::request::{HeaderLookup, RequestInfo};
pub use self::rule::{KeyFn, RouteRule};
