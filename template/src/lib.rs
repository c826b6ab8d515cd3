//! The key-template grammar of [`leasehold`](https://docs.rs/leasehold): the one parser behind
//! both `#[distributed_lock(key = "order:<id>")]` and the web middleware's route rules
//! (`RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")`).
//!
//! **This crate is an implementation detail of leasehold.** Depend on `leasehold`; the API
//! here changes whenever leasehold needs it to, whatever its version number says.
//!
//! # The grammar
//!
//! ```text
//! template    = 1*( literal / placeholder )          ; "" is refused
//! literal     = "<<"                                 ; a literal `<`
//!             / ">>"                                 ; a literal `>`
//!             / any character but "<" and ">"
//! placeholder = "<" root *( "." field ) ">"
//! root        = identifier
//! field       = index / identifier / token           ; tried in this order
//! identifier  = [ "r#" ] ( "_" / letter ) *( "_" / letter / digit )
//!               ; letters and digits in Unicode's sense (`char::is_alphabetic`, a little
//!               ; wider than Rust's XID rules); not `_`, `r#self`, `r#Self`, `r#super` or
//!               ; `r#crate`; as a field not `self` either (that is a token)
//! index       = "0" / %x31-39 *DIGIT                 ; a tuple field that fits in a u32
//! token       = 1*( tchar except "." )              ; RFC 9110 tchar, as in header names
//! ```
//!
//! Pairs are read left to right, so `<<<id>>>` is a literal `<`, the placeholder `<id>`, and
//! a literal `>`. What a placeholder *means* is up to each front end: the attribute resolves
//! the root against the function's bindings and refuses [`Field::Token`]s (they are not Rust
//! field accesses); the route rules resolve the root against the path pattern's parameters,
//! or read `<header.X-Tenant>` (the fields after a `header` root, joined by `.`) as a header.
//!
//! ```
//! use leasehold_template::{parse, Field, Segment};
//!
//! let segments = parse("order:<order.customer_id>").unwrap();
//! assert_eq!(segments[0], Segment::Literal("order:".into()));
//! let Segment::Placeholder(p) = &segments[1] else { unreachable!() };
//! assert_eq!(p.root, "order");
//! assert_eq!(p.fields, [Field::Named("customer_id".into())]);
//! assert_eq!(p.span, 6..25);
//!
//! let errors = parse("a<b").unwrap_err();
//! assert_eq!(errors[0].span, 1..3);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod parse;
mod segment;

pub use error::{ErrorKind, TemplateError};
pub use parse::{parse, parse_recovering};
pub use segment::{Field, Placeholder, Segment};
