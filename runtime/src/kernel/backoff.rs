//! The spread of pauses: what retries after an outage (releases, give-backs, waits) waits, so
//! that the many calls one outage stopped do not all come back at once, and the few
//! milliseconds that keep waiters sleeping on the same hint from all retrying at one instant.

use std::time::Duration;

/// A random pause between half of `pause` and all of it, so that the releases of many
/// guards dropped in the same outage do not all come back at once.
pub(crate) fn jitter(pause: Duration) -> Duration {
    pause / 2 + random_up_to(pause / 2)
}

/// A random pause from zero up to `most` (all of it when no randomness is to be had).
pub(crate) fn random_up_to(most: Duration) -> Duration {
    let random = f64::from(getrandom::u32().unwrap_or(u32::MAX)) / f64::from(u32::MAX);
    most.mul_f64(random)
}
