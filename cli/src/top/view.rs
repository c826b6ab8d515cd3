//! What `top` shows, whichever way it is drawn: the summary line (engine, health, round trip,
//! rates) and one row per held lock, sorted; the screen and the plain tables both print these.

use std::time::{Duration, Instant, SystemTime};

use leasehold::LockInfo;

use super::rates::{self, Rates, Seen};
use super::reading::Reading;
use super::{Options, Sort};
use crate::connect::Target;
use crate::display;

/// The column titles, in the order of [`Row::cells`]: who holds a lock last, as in `list`,
/// since its cell has spaces.
pub(crate) const HEADER: [&str; 9] = [
    "KEY", "AGE", "LEASE", "FENCE", "WAITING", "ACQ/S", "CONT/S", "LABEL", "HOLDER",
];

/// What the rate columns mean, in a few words, for the screen's last line.
pub(crate) fn rates_note() -> String {
    format!(
        "ACQ/S, CONT/S: lower bounds over the last {}",
        humantime::format_duration(rates::WINDOW)
    )
}

/// One held lock as `top` shows it.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The key as the engine gave it, to sort by (shown escaped).
    pub(crate) key: String,
    /// How long it has been held, exact or at least; `None` when nothing tells.
    pub(crate) age: Option<Duration>,
    /// How many processes wait for it.
    pub(crate) waiting: u64,
    /// Whether someone waited for it during the current hold.
    pub(crate) waiters: bool,
    /// The cells under [`HEADER`], every one safe to print.
    pub(crate) cells: [String; HEADER.len()],
}

/// The state of the view: the last reading, the last locks listed, the rates, the order.
#[derive(Debug)]
pub(crate) struct View {
    /// The engine and its servers, without credentials.
    endpoint: String,
    /// Whether the engine's locks expire: what a hold without a lease shows
    /// ([`display::no_lease`]).
    leases_expire: bool,
    /// The applications' key prefix.
    prefix: String,
    /// The glob over keys.
    pattern: String,
    /// The order of the rows.
    pub(crate) sort: Sort,
    /// Acquisitions seen across readings.
    rates: Rates,
    /// The last reading, failed or not.
    last: Option<Reading>,
    /// The locks of the last reading that succeeded, and when it was taken: kept on screen,
    /// marked as old, while the engine fails.
    held: Vec<LockInfo>,
    /// When `held` was read.
    held_at: Option<(SystemTime, Instant)>,
}

impl View {
    /// An empty view of `target`'s locks.
    pub(crate) fn new(target: &Target, options: &Options, leases_expire: bool) -> View {
        View {
            endpoint: target.endpoint(),
            leases_expire,
            prefix: target.prefix.clone(),
            pattern: options.pattern.clone(),
            sort: options.sort,
            rates: Rates::default(),
            last: None,
            held: Vec::new(),
            held_at: None,
        }
    }

    /// Takes in a new reading.
    pub(crate) fn update(&mut self, mut reading: Reading) {
        if let Ok(held) = &mut reading.held {
            self.rates.update(reading.at, held.iter().map(Seen::from));
            self.held = std::mem::take(held);
            self.held_at = Some((reading.taken, reading.at));
        }
        self.last = Some(reading);
    }

    /// Whether the last reading failed (`None` before the first).
    pub(crate) fn failing(&self) -> Option<&str> {
        self.last.as_ref()?.held.as_ref().err().map(String::as_str)
    }

    /// The summary line, what matters most first (a narrow screen cuts the end): `redis
    /// 127.0.0.1:6379  health connected  rtt 0.4ms  2 held  acq/s 0.3  cont/s 0.1  prefix
    /// "leasehold"  sort age`. The prefix and the pattern are escaped like keys.
    pub(crate) fn summary(&self) -> String {
        let mut parts = vec![self.endpoint.clone()];
        let health = match &self.last {
            None => "reading...".to_owned(),
            Some(r) if r.held.is_err() => format!("{}, reads failing", r.state.as_str()),
            Some(r) => r.state.as_str().to_owned(),
        };
        parts.push(format!("health {health}"));
        let rtt = self
            .last
            .as_ref()
            .and_then(|r| r.round_trip)
            .map_or_else(|| "-".to_owned(), round_trip);
        parts.push(format!("rtt {rtt}"));
        parts.push(format!("{} held", self.held.len()));
        let (acquisitions, contended) = rates_cells(self.rates.per_second(None));
        parts.push(format!("acq/s {acquisitions}"));
        parts.push(format!("cont/s {contended}"));
        parts.push(format!("prefix {:?}", display::key(&self.prefix)));
        if self.pattern != "*" {
            parts.push(format!("pattern {:?}", display::key(&self.pattern)));
        }
        parts.push(format!("sort {}", self.sort.as_str()));
        parts.join("  ")
    }

    /// When the last reading was taken.
    pub(crate) fn taken(&self) -> Option<SystemTime> {
        self.last.as_ref().map(|r| r.taken)
    }

    /// When the rows were read: the last reading's time, or the last good one's when reads
    /// fail.
    pub(crate) fn rows_taken(&self) -> Option<SystemTime> {
        self.held_at.map(|(taken, _)| taken)
    }

    /// The rows of the last locks listed, in the view's order.
    pub(crate) fn rows(&self) -> Vec<Row> {
        let Some((taken, at)) = self.held_at else {
            return Vec::new();
        };
        let mut rows: Vec<Row> = self
            .held
            .iter()
            .map(|info| {
                // The holder's own clock says since when; failing that, this tool saw the hold
                // first at some reading, which makes a lower bound.
                let since = info.holder().and_then(|h| h.since);
                let (age, age_cell) = match since {
                    Some(since) => {
                        let age = taken.duration_since(since).unwrap_or_default();
                        (Some(age), display::age(age))
                    }
                    None => match self.rates.first_seen(&info.key) {
                        Some(first) => {
                            let age = at.duration_since(first);
                            (Some(age), format!(">{}", display::age(age)))
                        }
                        None => (None, "-".to_owned()),
                    },
                };
                let (acquisitions, contended) = rates_cells(self.rates.per_second(Some(&info.key)));
                Row {
                    key: info.key.clone(),
                    age,
                    waiting: info.waiting_processes,
                    waiters: info.waiters,
                    cells: [
                        display::key(&info.key),
                        age_cell,
                        display::remaining(info.held, info.remaining, self.leases_expire),
                        display::fence(info.last_fence),
                        info.waiting_processes.to_string(),
                        acquisitions,
                        contended,
                        display::label(info.holder().and_then(|h| h.label.as_deref())),
                        display::holders_cell(&info.holders),
                    ],
                }
            })
            .collect();
        self.sort.apply(&mut rows);
        rows
    }

    /// The line that says no lock is held, when none is.
    pub(crate) fn nothing_held(&self) -> String {
        format!(
            "no held locks match {:?} (prefix {:?})",
            display::key(&self.pattern),
            display::key(&self.prefix)
        )
    }
}

/// A round trip, to a tenth of a millisecond under a second.
fn round_trip(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1}ms", d.as_secs_f64() * 1000.0)
    } else {
        display::lease(d)
    }
}

/// The two rate cells, `-` before two readings.
fn rates_cells(rates: Option<rates::PerSecond>) -> (String, String) {
    match rates {
        Some(r) => (
            format!("{:.1}", r.acquisitions),
            format!("{:.1}", r.contended),
        ),
        None => ("-".to_owned(), "-".to_owned()),
    }
}
