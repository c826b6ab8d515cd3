//! The spread of retry pauses: what retries after an outage (releases, give-backs, waits)
//! waits, so that the many calls one outage stopped do not all come back at once.

use std::time::Duration;

/// A random pause between half of `pause` and all of it, so that the releases of many
/// guards dropped in the same outage do not all come back at once.
pub(crate) fn jitter(pause: Duration) -> Duration {
    let random = f64::from(getrandom::u32().unwrap_or(u32::MAX)) / f64::from(u32::MAX);
    pause / 2 + (pause / 2).mul_f64(random)
}
