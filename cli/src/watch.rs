//! `leasehold watch KEY`: reads one lock at a fixed interval and prints a timestamped line per
//! change. Telling a release from an expiry needs no server help: a key that vanished before
//! its last seen lease could have run out was deleted.

use std::time::{Duration, Instant};

use leasehold::{LockInfo, Locker};
use tokio::time::MissedTickBehavior;

use crate::connect::Target;
use crate::display;
use crate::exit::{self, Failure};

/// Leeway for rounding: the engines report the remaining lease in whole milliseconds.
const SLACK: Duration = Duration::from_millis(5);

/// Watches `key` until `stop_after` (counted from the first reading) or Ctrl-C.
///
/// # Errors
/// A [`Failure`] when the first reading fails (bad key, engine down); later failures are
/// reported on stderr and watching goes on.
pub(crate) async fn run(
    locker: &Locker,
    target: &Target,
    key: &str,
    interval: Duration,
    stop_after: Option<Duration>,
) -> Result<u8, Failure> {
    let mut last = read(locker, key).await.map_err(|e| target.failure(e))?;
    println!(
        "{}  watching {} (prefix {:?}, {}): {}",
        display::now(),
        display::key(key),
        target.prefix,
        target.endpoint(),
        state(&last)
    );
    let watching = async {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await;
        let mut failing = false;
        loop {
            ticks.tick().await;
            match read(locker, key).await {
                Ok(next) => {
                    if failing {
                        eprintln!("{}  reading the lock again", display::now());
                        failing = false;
                    }
                    let stamp = display::now();
                    for change in changes(&last, &next) {
                        println!("{stamp}  {change}");
                    }
                    last = next;
                }
                Err(e) => {
                    if !failing {
                        eprintln!(
                            "{}  cannot read the lock: {}; still trying",
                            display::now(),
                            target.failure(e).message
                        );
                        failing = true;
                    }
                }
            }
        }
    };
    let stop = async {
        match stop_after {
            Some(limit) => tokio::time::sleep(limit).await,
            None => {
                if tokio::signal::ctrl_c().await.is_err() {
                    // No signal handling here: run until killed.
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    tokio::select! {
        () = watching => unreachable!("watching ends only when stopped"),
        () = stop => {}
    }
    Ok(exit::OK)
}

/// One reading of the lock, with when it was asked for and when it came back.
#[derive(Clone, Debug)]
struct Reading {
    info: Seen,
    sent: Instant,
    received: Instant,
}

/// The fields of [`LockInfo`] that changes are made of.
#[derive(Clone, Debug)]
struct Seen {
    /// Whether the engine's locks expire (see [`display::no_lease`]).
    leases_expire: bool,
    held: bool,
    remaining: Option<Duration>,
    waiters: bool,
    last_fence: Option<u64>,
}

impl Seen {
    fn new(info: LockInfo, leases_expire: bool) -> Self {
        Seen {
            leases_expire,
            held: info.held,
            remaining: info.remaining,
            waiters: info.waiters,
            last_fence: info.last_fence,
        }
    }
}

/// Reads the lock once, noting when the question left and the answer came.
async fn read(locker: &Locker, key: &str) -> Result<Reading, leasehold::LockError> {
    let sent = Instant::now();
    let info = Seen::new(
        locker.inspect(key).await?,
        locker.capabilities().leases_expire,
    );
    Ok(Reading {
        info,
        sent,
        received: Instant::now(),
    })
}

/// `held (fence 42, 8.1s left)` or `free`.
fn state(r: &Reading) -> String {
    let info = &r.info;
    if !info.held {
        return format!("free (last fence {})", display::fence(info.last_fence));
    }
    let waiters = if info.waiters { ", with waiters" } else { "" };
    format!(
        "held (fence {}, {} left{waiters})",
        display::fence(info.last_fence),
        display::remaining(true, info.remaining, info.leases_expire)
    )
}

/// A change between two readings.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// A new hold began (the fence counter moved, or the lock went from free to held).
    Acquired {
        fence: Option<u64>,
        lease: Option<Duration>,
        /// Whether the engine's locks expire: what a hold without a lease shows.
        leases_expire: bool,
    },
    /// The hold ended before its lease could have run out.
    Released,
    /// The hold ended at about the end of its lease: expired, or released just in time.
    ExpiredOrReleased,
    /// Someone began waiting for the current hold.
    WaitersAppeared,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Acquired {
                fence,
                lease,
                leases_expire,
            } => {
                let lease = match lease {
                    Some(d) => format!("lease {}", display::lease(*d)),
                    None => display::no_lease(*leases_expire).to_owned(),
                };
                write!(f, "acquired (fence {}, {lease})", display::fence(*fence))
            }
            Change::Released => f.write_str("released"),
            Change::ExpiredOrReleased => f.write_str("expired or released"),
            Change::WaitersAppeared => f.write_str("waiters appeared"),
        }
    }
}

/// What changed from `prev` to `next`, in order.
fn changes(prev: &Reading, next: &Reading) -> Vec<Change> {
    let (was, now) = (&prev.info, &next.info);
    // Every acquisition moves the fence counter; a renewal does not.
    let new_hold = now.held && (!was.held || now.last_fence != was.last_fence);
    let mut out = Vec::new();
    if was.held && (!now.held || new_hold) {
        out.push(end_of_hold(prev, next.received));
    }
    if new_hold {
        out.push(Change::Acquired {
            fence: now.last_fence,
            lease: now.remaining,
            leases_expire: now.leases_expire,
        });
    }
    if now.held && now.waiters && (new_hold || !was.waiters) {
        out.push(Change::WaitersAppeared);
    }
    out
}

/// Why the hold seen in `prev` was gone by `gone_by`. The engine read its remaining lease no
/// earlier than `prev.sent`, so it cannot have expired before `prev.sent + remaining`; gone
/// sooner means deleted. Gone later may be either.
fn end_of_hold(prev: &Reading, gone_by: Instant) -> Change {
    match prev.info.remaining {
        None => Change::Released,
        Some(remaining) if prev.sent + remaining > gone_by + SLACK => Change::Released,
        Some(_) => Change::ExpiredOrReleased,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading of a lock with `held`, `fence` and `remaining` ms, taken `at` ms after `t0`
    /// and answered 1 ms later.
    fn reading(
        t0: Instant,
        at: u64,
        held: bool,
        fence: u64,
        remaining: u64,
        waiters: bool,
    ) -> Reading {
        let sent = t0 + Duration::from_millis(at);
        Reading {
            info: Seen {
                leases_expire: true,
                held,
                remaining: held.then(|| Duration::from_millis(remaining)),
                waiters,
                last_fence: Some(fence),
            },
            sent,
            received: sent + Duration::from_millis(1),
        }
    }

    #[test]
    fn acquisitions_releases_expiries_and_waiters() {
        let t0 = Instant::now();
        let free = reading(t0, 0, false, 1, 0, false);
        let held = reading(t0, 100, true, 2, 10_000, false);
        assert_eq!(
            changes(&free, &held),
            [Change::Acquired {
                fence: Some(2),
                lease: Some(Duration::from_secs(10)),
                leases_expire: true,
            }]
        );
        assert_eq!(
            changes(&free, &held)[0].to_string(),
            "acquired (fence 2, lease 10.0s)"
        );
        // Renewed: nothing to say.
        let renewed = reading(t0, 200, true, 2, 10_000, false);
        assert!(changes(&held, &renewed).is_empty());
        // Gone long before its lease could end: released.
        let gone = reading(t0, 300, false, 2, 0, false);
        assert_eq!(changes(&renewed, &gone), [Change::Released]);
        // Gone once its lease had run out: cannot tell.
        let short = reading(t0, 200, true, 2, 90, false);
        assert_eq!(changes(&short, &gone), [Change::ExpiredOrReleased]);
        // Taken by someone else between two readings.
        let other = reading(t0, 300, true, 3, 5_000, true);
        assert_eq!(
            changes(&renewed, &other),
            [
                Change::Released,
                Change::Acquired {
                    fence: Some(3),
                    lease: Some(Duration::from_secs(5)),
                    leases_expire: true,
                },
                Change::WaitersAppeared
            ]
        );
        let waited = reading(t0, 300, true, 2, 9_900, true);
        assert_eq!(changes(&renewed, &waited), [Change::WaitersAppeared]);
        assert!(changes(&waited, &waited).is_empty());
    }

    #[test]
    fn a_hold_without_a_lease_says_why() {
        let acquired = |leases_expire| Change::Acquired {
            fence: Some(7),
            lease: None,
            leases_expire,
        };
        assert_eq!(acquired(false).to_string(), "acquired (fence 7, session)");
        assert_eq!(acquired(true).to_string(), "acquired (fence 7, no expiry)");
    }
}
