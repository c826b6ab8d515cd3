//! Acquisitions and contention per second, from what successive readings show: no engine
//! counts acquisitions, so a new hold is one whose fence differs from the last reading's (or
//! that was not held then), and every count is a lower bound.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use leasehold::LockInfo;

/// How far back rates look. Defaults to 10 s: long enough to smooth a 1 s refresh, short
/// enough to follow a change.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// The holds seen so far and the acquisitions seen in the last [`WINDOW`].
#[derive(Debug, Default)]
pub(crate) struct Rates {
    /// Each lock held at the last reading.
    holds: HashMap<String, Hold>,
    /// Locks held at an earlier reading and not since, with when that hold was last seen and
    /// whether it had waiters: a hand-over may leave a lock free at a reading.
    ended: HashMap<String, (Instant, bool)>,
    /// The new holds seen, oldest first, within the window of the last reading.
    acquisitions: VecDeque<Acquisition>,
    /// When the first and the last readings were taken.
    span: Option<(Instant, Instant)>,
}

/// A hold as the last reading saw it.
#[derive(Debug)]
struct Hold {
    fence: Option<u64>,
    /// Someone waited for the lock during this hold.
    waiters: bool,
    /// The first reading that saw this hold.
    first_seen: Instant,
}

/// A new hold, seen at a reading.
#[derive(Debug)]
struct Acquisition {
    at: Instant,
    key: String,
    /// The lock's previous hold (seen within the window) had waiters: someone had to wait
    /// for this one.
    contended: bool,
}

/// What rates need of one held lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen<'a> {
    /// The lock's key.
    pub(crate) key: &'a str,
    /// Its fence counter: a new value is a new hold.
    pub(crate) fence: Option<u64>,
    /// Someone waits for it, or waited during the current hold.
    pub(crate) waiters: bool,
}

impl<'a> From<&'a LockInfo> for Seen<'a> {
    fn from(info: &'a LockInfo) -> Self {
        Seen {
            key: &info.key,
            fence: info.last_fence,
            waiters: info.waiters || info.waiting_processes > 0,
        }
    }
}

/// Acquisitions and contended acquisitions per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PerSecond {
    /// New holds seen per second.
    pub(crate) acquisitions: f64,
    /// New holds per second of a lock that had waiters when last seen: hand-overs to a
    /// process that waited.
    pub(crate) contended: f64,
}

impl Rates {
    /// Takes in the locks held at a reading taken `at`. The first reading only records what is
    /// held: holds that began before it are not counted.
    pub(crate) fn update<'a>(&mut self, at: Instant, held: impl IntoIterator<Item = Seen<'a>>) {
        let first = self.span.is_none();
        let mut holds = HashMap::new();
        for seen in held {
            let previous = self.holds.remove(seen.key);
            let first_seen = match &previous {
                Some(p) if p.fence == seen.fence => p.first_seen,
                _ => at,
            };
            if !first && first_seen == at {
                self.acquisitions.push_back(Acquisition {
                    at,
                    key: seen.key.to_owned(),
                    contended: match previous {
                        Some(p) => p.waiters,
                        None => self.ended.remove(seen.key).is_some_and(|(_, w)| w),
                    },
                });
            }
            let hold = Hold {
                fence: seen.fence,
                waiters: seen.waiters,
                first_seen,
            };
            holds.insert(seen.key.to_owned(), hold);
        }
        for (key, hold) in std::mem::replace(&mut self.holds, holds) {
            self.ended.insert(key, (at, hold.waiters));
        }
        self.ended
            .retain(|_, (seen, _)| at.duration_since(*seen) < WINDOW);
        self.span = Some(self.span.map_or((at, at), |(start, _)| (start, at)));
        while self
            .acquisitions
            .front()
            .is_some_and(|a| at.duration_since(a.at) >= WINDOW)
        {
            self.acquisitions.pop_front();
        }
    }

    /// The rates over the window, for one key or (`None`) all of them; `None` before two
    /// readings.
    pub(crate) fn per_second(&self, key: Option<&str>) -> Option<PerSecond> {
        let (start, last) = self.span?;
        let secs = last.duration_since(start).min(WINDOW).as_secs_f64();
        if secs == 0.0 {
            return None;
        }
        let (mut acquisitions, mut contended) = (0u32, 0u32);
        for a in &self.acquisitions {
            if key.is_none_or(|k| k == a.key) {
                acquisitions += 1;
                contended += u32::from(a.contended);
            }
        }
        Some(PerSecond {
            acquisitions: f64::from(acquisitions) / secs,
            contended: f64::from(contended) / secs,
        })
    }

    /// The first reading that saw the current hold of `key`.
    pub(crate) fn first_seen(&self, key: &str) -> Option<Instant> {
        self.holds.get(key).map(|h| h.first_seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(key: &str, fence: u64, waiters: bool) -> Seen<'_> {
        Seen {
            key,
            fence: Some(fence),
            waiters,
        }
    }

    #[test]
    fn new_fences_count_as_acquisitions_and_hand_overs_after_a_wait_as_contended() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut rates = Rates::default();
        rates.update(s(0), [held("a", 1, false), held("b", 5, true)]);
        // One reading tells nothing about rates; what it saw is not counted.
        assert_eq!(rates.per_second(None), None);
        assert_eq!(rates.first_seen("a"), Some(s(0)));
        // `a` renewed (same fence), `b` handed over to its waiter, `c` newly taken.
        rates.update(
            s(1),
            [
                held("a", 1, false),
                held("b", 6, false),
                held("c", 9, false),
            ],
        );
        let all = rates.per_second(None).unwrap();
        assert_eq!((all.acquisitions, all.contended), (2.0, 1.0));
        let b = rates.per_second(Some("b")).unwrap();
        assert_eq!((b.acquisitions, b.contended), (1.0, 1.0));
        assert_eq!(rates.per_second(Some("a")).unwrap().acquisitions, 0.0);
        assert_eq!(rates.first_seen("a"), Some(s(0)));
        assert_eq!(rates.first_seen("b"), Some(s(1)));
        // `c` handed over to a waiter with a reading in between that found it free.
        rates.update(
            s(2),
            [held("a", 1, false), held("b", 6, false), held("c", 9, true)],
        );
        rates.update(s(3), [held("a", 1, false), held("b", 6, false)]);
        rates.update(
            s(4),
            [
                held("a", 1, false),
                held("b", 6, false),
                held("c", 10, false),
            ],
        );
        let c = rates.per_second(Some("c")).unwrap();
        assert_eq!((c.acquisitions, c.contended), (2.0 / 4.0, 1.0 / 4.0));
        // `a` released, then taken again while nobody looked: a new hold, not contended.
        rates.update(s(5), [held("b", 6, false), held("c", 10, false)]);
        rates.update(
            s(6),
            [
                held("a", 2, false),
                held("b", 6, false),
                held("c", 10, false),
            ],
        );
        let all = rates.per_second(None).unwrap();
        assert_eq!((all.acquisitions, all.contended), (4.0 / 6.0, 2.0 / 6.0));
        assert_eq!(rates.first_seen("gone"), None);
        // Counts leave the window; the divisor stops growing at its length.
        rates.update(s(12), []);
        let late = rates.per_second(None).unwrap();
        assert_eq!(late.acquisitions, 2.0 / 10.0);
        rates.update(s(30), []);
        assert_eq!(rates.per_second(None).unwrap().acquisitions, 0.0);
    }
}
