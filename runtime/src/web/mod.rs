//! Web integration: how a [`LockError`](crate::LockError) is answered over HTTP, and
//! [`RouteLocks`], the middleware that holds a lock for the duration of a request (actix-web and
//! axum), with [`HeldLock`] to hand its key and fence to the handler.
//!
//! The answers, the route rules and the middleware's logic are framework-independent;
//! `actix.rs` and `axum.rs` only translate them into each framework's types.
//!
//! # Why 409 and `Retry-After`
//!
//! A busy lock is answered **409 Conflict** by default: the request conflicts with the current
//! state of the resource (another request is changing it right now), which is what 409 means
//! (RFC 9110, 15.5.10). The client did nothing wrong and the server is not failing, so the
//! alternatives say the wrong thing: 503 tells load balancers, retry policies and alerting
//! that the service is down; 429 says the *client* sends too much, and clients back off all of
//! their requests; 423 Locked belongs to WebDAV's lock model (a lock the client can discover
//! and hold itself). Some shops answer 409 for their own conflicts ("sold out"), and a client
//! must tell "retry" from "give up": give busy locks another status there with
//! [`StatusCodes`] (e.g. 423 or 503), on [`RouteLocks::status_codes`].
//!
//! **`Retry-After`** comes with every busy answer, whatever its status: the holder's remaining
//! lease, in whole seconds rounded up (the header counts whole seconds, RFC 9110, 10.2.3, and a
//! client that comes back before the lease can have ended finds the lock busy again), or 1 when
//! the store did not say. It turns a client's tight retry loop into one retry when the lock may
//! be free. An unavailable store is answered 503 with `Retry-After: 1` (long enough for a
//! reconnect, short enough for a failover); a lost lease 503 without it, since the handler was
//! cancelled halfway and nothing says when a retry would fare better.
//!
//! [`RouteLocks::on_error`] reshapes any answer (status, `Retry-After`, content type, body),
//! for both frameworks at once.

#[cfg(feature = "actix")]
mod actix;
#[cfg(feature = "axum")]
mod axum;
mod held;
mod middleware;
mod response;
mod route;

#[cfg(feature = "actix")]
pub use self::actix::ActixLockService;
#[cfg(feature = "axum")]
pub use self::axum::LockService;
pub use crate::primitives::guard::OnLost;
pub use held::{HeldLock, MissingRouteLock};
pub use middleware::{ErrorHook, RouteLocks};
pub use response::{LockErrorResponse, StatusCodes};
pub use route::{HeaderLookup, KeyFn, PathParams, RequestInfo, RouteRule};

#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(unused_imports))]
pub(crate) use middleware::Plan;
#[cfg(feature = "actix")]
pub(crate) use middleware::Refusal;
