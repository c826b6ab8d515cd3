//! What the library tells operators: tracing spans and events (always on, nearly free without
//! a subscriber) and, with the `metrics` feature, metrics through the `metrics` facade. Owner
//! tokens never appear; keys appear as configured ([`TraceKeys`]).
//!
//! | name | kind | what |
//! | --- | --- | --- |
//! | `leasehold.acquire` | span | one acquisition: `key`, `lease_ms`, `wait_ms`; then `outcome`, `fence`, `waited_ms` |
//! | `leasehold.hold` | span | from acquisition to release: `key`, `fence` (a `#[distributed_lock]` body runs in it) |
//! | `leasehold.release` | span | one release: `key`, `fence`; then `outcome` (`held` when the lock stays taken for `hold_at_least`) |
//! | "skipped: the lock is held elsewhere, ..." | event (target `leasehold`) | a `#[distributed_lock(on_busy = "skip")]` call that did not run its body: `key` |
//! | "request answered with a lock error" | event (target `leasehold::web`) | the web middleware's failures: `code`, `status`, `method`, `route`, `key`, `error` |
//! | `leasehold_acquire_seconds` | histogram | time to acquire (label `outcome`) |
//! | `leasehold_wait_seconds` | histogram | time waited for a busy lock that was then acquired |
//! | `leasehold_hold_seconds` | histogram | time a lock was held |
//! | `leasehold_acquired_total`, `leasehold_busy_total`, `leasehold_unavailable_total` | counters | acquisition outcomes |
//! | `leasehold_lost_total` | counter | leases lost while held |
//! | `leasehold_renewals_total`, `leasehold_renew_failures_total` | counters | watchdog renewals |
//! | `leasehold_renewal_lag_seconds` | histogram | how late the watchdog sent each renewal against its schedule (a third of the lease after the last acquire or renewal was sent); grows when the runtime or the watchdog is overloaded |
//! | `leasehold_locks_held` | gauge | locks held by this process now |
//! | "the lock engine ..." | event (target `leasehold::engine`) | each change of a locker's [`EngineState`]: `engine` (its `describe()`), `state`, `previous`, `reason`; `INFO` for connected, reconnected and closed, `WARN` for suspended, `ERROR` for lost |
//! | `leasehold_engine_state` | gauge | the lockers of this process in each state (labels `engine`, `state`): with one locker, 1 for its state and 0 for the others |
//! | `leasehold_engine_state_changes_total` | counter | changes of state (labels `engine`, `to`) |

use std::time::Duration;

use tracing::field::Empty;
use tracing::Span;

use crate::error::LockError;
use crate::kernel::health::EngineState;

/// How lock keys appear in traces. Keys name resources and may carry user data (an e-mail
/// address, an account number), so they can be hashed or left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceKeys {
    /// The key as given. The default: an operator can search for `stock:sku-7`.
    #[default]
    Plain,
    /// A stable 64-bit hash of the key (FNV-1a, hex): the same key always gives the same
    /// value, so events still correlate, but the key is not written. Low-entropy keys can be
    /// guessed back from it; it hides keys from casual reading, it is not a secret.
    Hashed,
    /// No key at all.
    Hidden,
}

impl TraceKeys {
    pub(crate) fn show(self, key: &str) -> String {
        match self {
            TraceKeys::Plain => key.to_owned(),
            TraceKeys::Hashed => {
                let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
                for byte in key.as_bytes() {
                    hash ^= u64::from(*byte);
                    hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
                }
                format!("{hash:016x}")
            }
            TraceKeys::Hidden => String::new(),
        }
    }
}

/// Records the key on a span, in the configured form, only when someone listens: building
/// the shown form costs an allocation on every lock otherwise.
fn record_key(span: &Span, how: TraceKeys, key: &str) {
    if !span.is_disabled() {
        span.record("key", how.show(key).as_str());
    }
}

pub(crate) fn acquire_span(how: TraceKeys, key: &str, lease: Duration, wait: Duration) -> Span {
    let span = tracing::info_span!(
        "leasehold.acquire",
        key = Empty,
        lease_ms = lease.as_millis() as u64,
        wait_ms = wait.as_millis() as u64,
        outcome = Empty,
        fence = Empty,
        waited_ms = Empty,
    );
    record_key(&span, how, key);
    span
}

/// Records how an acquisition ended.
pub(crate) fn acquire_ended(
    span: &Span,
    result: Result<Option<u64>, &LockError>,
    took: Duration,
    waited: bool,
) {
    span.record("waited_ms", took.as_millis() as u64);
    match result {
        Ok(fence) => {
            span.record("outcome", "acquired");
            if let Some(fence) = fence {
                span.record("fence", fence);
            }
        }
        Err(e) => {
            span.record("outcome", e.code());
        }
    }
    #[cfg(feature = "metrics")]
    {
        let outcome = match result {
            Ok(_) => "acquired",
            Err(e) => e.code(),
        };
        metrics::histogram!("leasehold_acquire_seconds", "outcome" => outcome)
            .record(took.as_secs_f64());
        match result {
            Ok(_) => {
                metrics::counter!("leasehold_acquired_total").increment(1);
                if waited {
                    metrics::histogram!("leasehold_wait_seconds").record(took.as_secs_f64());
                }
            }
            Err(LockError::Busy { .. }) => metrics::counter!("leasehold_busy_total").increment(1),
            Err(LockError::Unavailable { .. }) => {
                metrics::counter!("leasehold_unavailable_total").increment(1)
            }
            Err(_) => {}
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = waited;
}

pub(crate) fn hold_span(how: TraceKeys, key: &str, fence: Option<u64>) -> Span {
    let span = tracing::info_span!("leasehold.hold", key = Empty, fence = Empty);
    if let Some(fence) = fence {
        span.record("fence", fence);
    }
    record_key(&span, how, key);
    span
}

/// A lock is held by this process from now on.
pub(crate) fn hold_started() {
    #[cfg(feature = "metrics")]
    metrics::gauge!("leasehold_locks_held").increment(1.0);
}

/// A lock held for `held` is not held by this process any more.
pub(crate) fn hold_ended(held: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("leasehold_locks_held").decrement(1.0);
        metrics::histogram!("leasehold_hold_seconds").record(held.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = held;
}

pub(crate) fn release_span(how: TraceKeys, key: &str, fence: u64) -> Span {
    let span = tracing::info_span!("leasehold.release", key = Empty, fence, outcome = Empty);
    record_key(&span, how, key);
    span
}

pub(crate) fn release_ended(span: &Span, outcome: &'static str) {
    span.record("outcome", outcome);
}

/// A `#[distributed_lock(on_busy = "skip")]` call found its lock taken and did not run its
/// body. `key` is shown as configured already.
pub(crate) fn skipped(key: &str) {
    tracing::info!(
        target: "leasehold",
        key,
        "skipped: the lock is held elsewhere, so the body did not run"
    );
}

/// The watchdog renewed `n` leases.
pub(crate) fn renewed(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::counter!("leasehold_renewals_total").increment(n as u64);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// The watchdog sent renewals `lags` later than they were due. Lazy: without the `metrics`
/// feature, the lags are never computed.
pub(crate) fn renewals_sent(lags: impl Iterator<Item = Duration>) {
    #[cfg(feature = "metrics")]
    {
        // One handle for the batch: registering per lease would cost a recorder look-up each.
        let histogram = metrics::histogram!("leasehold_renewal_lag_seconds");
        for lag in lags {
            histogram.record(lag.as_secs_f64());
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = lags;
}

/// `n` renewals failed (Redis failed, or no majority answered).
pub(crate) fn renew_failed(n: usize, error: &dyn std::fmt::Display) {
    tracing::warn!(leases = n, error = %error, "lease renewal failed; retrying while the lease is valid");
    #[cfg(feature = "metrics")]
    metrics::counter!("leasehold_renew_failures_total").increment(n as u64);
}

/// A lease was lost while held; `why` says how.
pub(crate) fn lost(fence: u64, why: &'static str) {
    tracing::warn!(fence, why, "lease lost while the lock was held");
    #[cfg(feature = "metrics")]
    metrics::counter!("leasehold_lost_total").increment(1);
}

/// A locker on `engine` (its metric label) starts in `state`: every state's series exists
/// from now on (at 0), so dashboards and alerts see zeros rather than nothing.
pub(crate) fn engine_state_started(engine: &'static str, state: EngineState) {
    #[cfg(feature = "metrics")]
    {
        for s in EngineState::ALL {
            let count = if s == state { 1.0 } else { 0.0 };
            metrics::gauge!("leasehold_engine_state", "engine" => engine, "state" => s.as_str())
                .increment(count);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (engine, state);
}

/// A locker on `engine` (its metric label) is gone, in `state`.
pub(crate) fn engine_state_ended(engine: &'static str, state: EngineState) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("leasehold_engine_state", "engine" => engine, "state" => state.as_str())
        .decrement(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = (engine, state);
}

/// A locker's engine went from `from` to `to`, for `reason`. `label` names the engine in
/// metrics, `engine` is its `describe()` (never credentials).
pub(crate) fn engine_state_changed(
    label: &'static str,
    engine: &str,
    from: EngineState,
    to: EngineState,
    reason: &str,
) {
    let (state, previous) = (to.as_str(), from.as_str());
    match to {
        EngineState::Suspended => tracing::warn!(
            target: "leasehold::engine",
            engine, state, previous, reason,
            "the lock engine is suspended: its calls fail; held leases count as valid until \
             they run out on this process's clock"
        ),
        EngineState::Lost => tracing::error!(
            target: "leasehold::engine",
            engine, state, previous, reason,
            "the lock engine's session is lost: locks held over it count as lost"
        ),
        EngineState::Connected => tracing::info!(
            target: "leasehold::engine",
            engine, state, previous, reason,
            "the lock engine is connected"
        ),
        EngineState::Reconnected => tracing::info!(
            target: "leasehold::engine",
            engine, state, previous, reason,
            "the lock engine is reconnected: it answers again"
        ),
        EngineState::Closed => tracing::info!(
            target: "leasehold::engine",
            engine, state, previous, reason,
            "the lock engine's locker is closed"
        ),
    }
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("leasehold_engine_state", "engine" => label, "state" => previous)
            .decrement(1.0);
        metrics::gauge!("leasehold_engine_state", "engine" => label, "state" => state)
            .increment(1.0);
        metrics::counter!("leasehold_engine_state_changes_total", "engine" => label, "to" => state)
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = label;
}

/// The web middleware answered a request `status` for `err`, instead of running its handler
/// (or after cancelling it). `route` is the rule's pattern, never the path (paths may carry
/// user data); `key` is shown as its locker's setting says, and left empty when there is no
/// key or no setting. Busy locks and unbuildable keys happen to healthy servers: `INFO`;
/// the rest wants an operator: `WARN`.
#[cfg_attr(not(any(feature = "actix", feature = "axum")), allow(dead_code))]
pub(crate) fn request_refused(
    key: Option<(TraceKeys, &str)>,
    method: &str,
    route: &str,
    err: &LockError,
    status: u16,
    first_config_error: bool,
) {
    // Evaluated only when the event is enabled: no allocation for nobody.
    let key = || key.map(|(how, key)| how.show(key)).unwrap_or_default();
    match err {
        LockError::Config { .. } if first_config_error => tracing::error!(
            target: "leasehold::web",
            code = err.code(), status, method, route, key = %key(), error = %err,
            "request answered with a lock configuration error: every request of this route \
             fails the same way (logged at error once per route, then at debug)"
        ),
        LockError::Config { .. } => tracing::debug!(
            target: "leasehold::web",
            code = err.code(), status, method, route, key = %key(), error = %err,
            "request answered with a lock error"
        ),
        LockError::Busy { .. } | LockError::InvalidKey { .. } => tracing::info!(
            target: "leasehold::web",
            code = err.code(), status, method, route, key = %key(), error = %err,
            "request answered with a lock error"
        ),
        _ => tracing::warn!(
            target: "leasehold::web",
            code = err.code(), status, method, route, key = %key(), error = %err,
            "request answered with a lock error"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_can_be_hashed_or_hidden() {
        assert_eq!(TraceKeys::Plain.show("stock:7"), "stock:7");
        let hashed = TraceKeys::Hashed.show("stock:7");
        assert_eq!(hashed.len(), 16);
        assert_eq!(hashed, TraceKeys::Hashed.show("stock:7"), "stable");
        assert_ne!(hashed, TraceKeys::Hashed.show("stock:8"));
        assert!(!hashed.contains("stock"));
        assert_eq!(TraceKeys::Hidden.show("stock:7"), "");
    }
}
