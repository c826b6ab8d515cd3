//! [`HeldLock`]: what a handler behind [`RouteLocks`](crate::RouteLocks) learns of the lock its
//! request runs under (key, fence, liveness), taken from the request by an extractor.

use std::fmt;
use std::sync::Arc;

use crate::kernel::lease::Lease;
use crate::primitives::guard::LockGuard;

/// The lock that [`RouteLocks`](crate::RouteLocks) holds for the current request: its key,
/// its fencing token, and whether its lease is still held. The middleware puts it in the
/// request's extensions before the handler runs; handlers take it as an extractor (axum
/// `FromRequestParts`, actix-web `FromRequest`, with the features `axum` and `actix`), so they
/// can pass the fence to storage without locking the key again.
///
/// Taking `HeldLock` on a route no rule locks is answered 500 `lock_missing` (see
/// [`MissingRouteLock`]); take `Option<HeldLock>` where the lock is optional.
///
/// The guard itself stays with the middleware, which releases the lock once the handler has
/// answered, on every path; a `HeldLock` kept past that reports [`is_held`](Self::is_held)
/// false.
///
#[cfg_attr(
    feature = "axum",
    doc = r#"
```
use axum::{routing::post, Router};
use leasehold::{HeldLock, Locker, RouteLocks, RouteRule};

async fn buy(lock: HeldLock) -> String {
    // e.g. UPDATE stock SET n = n - 1, fence = $fence WHERE sku = $1 AND fence < $fence
    format!("{} under fence {}", lock.key(), lock.fence())
}
let locks = RouteLocks::new(Locker::in_memory())
    .rule(RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?);
let _app: Router = Router::new().route("/orders/{sku}", post(buy)).layer(locks);
# Ok::<(), leasehold::LockError>(())
```"#
)]
#[derive(Clone)]
pub struct HeldLock {
    key: Arc<str>,
    fence: u64,
    /// Shared with the guard: reading it costs no round trip.
    lease: Arc<Lease>,
}

impl HeldLock {
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) fn of(guard: &LockGuard) -> HeldLock {
        let held = guard.hold().held_entry();
        HeldLock {
            key: Arc::from(guard.key()),
            fence: held.fence,
            lease: held.lease,
        }
    }

    /// The key the request's rule built, e.g. `stock:sku-7`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token of the request's lock (see [`LockGuard::fence`]): pass it to the
    /// resource the handler writes, so that it refuses writes of an older holder.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Whether the request's lease is still trusted, as [`LockGuard::is_held`] says: false once
    /// it is lost (which also cancels a handler whose rule says
    /// [`OnLost::Cancel`](crate::OnLost::Cancel)) and once the middleware released it. No
    /// round trip: it reads the state the guard and the watchdog keep.
    pub fn is_held(&self) -> bool {
        self.lease.is_held_by(self.fence)
    }

    /// Resolves when the lease is lost or the middleware released it (see
    /// [`LockGuard::lost`]). Cancel-safe; for handlers under
    /// [`OnLost::Continue`](crate::OnLost::Continue) that stop by themselves.
    pub async fn lost(&self) {
        self.lease.lost_for(Some(self.fence)).await
    }
}

impl fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLock")
            .field("key", &self.key)
            .field("fence", &self.fence)
            .field("held", &self.is_held())
            .finish()
    }
}

/// The rejection of the [`HeldLock`] extractor on a request that no
/// [`RouteLocks`](crate::RouteLocks) rule locked: a server bug (a route without its rule, or
/// a handler outside the middleware), answered 500 with
/// `{"error":"lock_missing","message":"..."}` and logged.
///
/// ```
/// use leasehold::MissingRouteLock;
///
/// let body = MissingRouteLock.body();
/// assert!(body.starts_with(r#"{"error":"lock_missing","message":"#));
/// assert!(body.contains("Option<HeldLock>"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MissingRouteLock;

impl MissingRouteLock {
    /// The error code of the JSON body.
    pub const CODE: &'static str = "lock_missing";

    /// The JSON body of the 500 answer; the message names no route and no key.
    pub fn body(&self) -> String {
        format!(r#"{{"error":"{}","message":"{self}"}}"#, Self::CODE)
    }

    /// Logs the rejection once it is answered (an `Option<HeldLock>` extractor is not).
    #[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
    pub(crate) fn report(&self) {
        tracing::error!(target: "leasehold::web", code = Self::CODE, "{self}");
    }
}

impl fmt::Display for MissingRouteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No quotes or backslashes: the text goes into a JSON string as is.
        f.write_str(
            "the handler takes the request's lock (HeldLock) but no RouteLocks rule locked \
             this request; add a rule for its method and path, or take Option<HeldLock>",
        )
    }
}

impl std::error::Error for MissingRouteLock {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locker;

    #[tokio::test]
    async fn a_held_lock_follows_its_guard() {
        let locker = Locker::in_memory();
        let guard = locker.lock("stock:1").acquire().await.unwrap();
        let held = HeldLock::of(&guard);
        assert_eq!((held.key(), held.fence()), ("stock:1", guard.fence()));
        assert!(held.is_held());
        let copy = held.clone();
        guard.release().await.unwrap();
        assert!(!held.is_held() && !copy.is_held(), "released");
        // Resolves at once: the holding ended.
        held.lost().await;
        assert!(format!("{held:?}").contains("held: false"));
    }

    #[test]
    fn the_rejection_says_what_to_do_in_json() {
        let body = MissingRouteLock.body();
        assert!(
            body.starts_with(r#"{"error":"lock_missing","message":""#),
            "{body}"
        );
        assert!(
            body.contains("Option<HeldLock>") && body.ends_with("\"}"),
            "{body}"
        );
    }
}
