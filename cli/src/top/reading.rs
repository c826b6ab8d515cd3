//! One refresh of `top`: the held locks under the pattern, the engine's health, and the round
//! trip of one cheap call, each reading made whole even when the engine fails.

use std::time::{Duration, Instant, SystemTime};

use leasehold::{EngineState, LockInfo, Locker};

use crate::exit::Failure;

/// The lock read to time a round trip: a free key's inspection is the cheapest call every
/// engine answers, and reads nothing else.
const PROBE_KEY: &str = "leasehold-top:round-trip";

/// What one refresh saw.
#[derive(Debug)]
pub(crate) struct Reading {
    /// When it was taken, on this machine's clock (shown, and the base of each hold's age).
    pub(crate) taken: SystemTime,
    /// When it was taken, for rates.
    pub(crate) at: Instant,
    /// How long the probe took; `None` when it failed.
    pub(crate) round_trip: Option<Duration>,
    /// The engine's health as the locker saw it after the calls.
    pub(crate) state: EngineState,
    /// The held locks, in key order; or why they could not be read (the message says what to
    /// do, as the other commands' errors do).
    pub(crate) held: Result<Vec<LockInfo>, String>,
}

impl Reading {
    /// A reading that failed before it began (connecting), for `why`.
    pub(crate) fn failed(why: String, state: EngineState) -> Reading {
        Reading {
            taken: SystemTime::now(),
            at: Instant::now(),
            round_trip: None,
            state,
            held: Err(why),
        }
    }
}

/// Times the probe, then lists the held locks whose keys match `pattern`; never fails.
pub(crate) async fn read(locker: &Locker, pattern: &str) -> Reading {
    let taken = SystemTime::now();
    let at = Instant::now();
    let probe = locker.inspect(PROBE_KEY).await;
    let round_trip = probe.is_ok().then(|| at.elapsed());
    let held = match probe {
        Ok(_) => locker.list_held(pattern).await,
        Err(e) => Err(e),
    }
    .map_err(|e| Failure::lock(e).message);
    Reading {
        taken,
        at,
        round_trip,
        state: locker.state(),
        held,
    }
}
