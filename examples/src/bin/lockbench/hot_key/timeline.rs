//! What a hot-key run records (when each acquisition was asked for, got and released) and what
//! it makes of the merged timeline: throughput, wait percentiles, handover latencies.

use crate::measure::percentile;

/// One acquisition of the hot key, in monotonic nanoseconds (comparable across processes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub(crate) asked: u64,
    pub(crate) got: u64,
    pub(crate) released: u64,
}

impl Sample {
    /// The worker's output line.
    pub(crate) fn line(&self) -> String {
        format!("{} {} {}", self.asked, self.got, self.released)
    }

    pub(crate) fn parse(line: &str) -> Sample {
        let v: Vec<u64> = line
            .split(' ')
            .map(|x| x.parse().expect("number"))
            .collect();
        Sample {
            asked: v[0],
            got: v[1],
            released: v[2],
        }
    }
}

/// Throughput, wait percentiles and handover latencies of a merged timeline.
pub(crate) struct HotStats {
    pub(crate) per_sec: f64,
    pub(crate) wait_p50_ms: f64,
    pub(crate) wait_p99_ms: f64,
    pub(crate) wait_max_ms: f64,
    pub(crate) handoff_p50_us: f64,
    pub(crate) handoff_p99_us: f64,
}

pub(crate) fn hot_stats(mut samples: Vec<Sample>) -> HotStats {
    samples.sort_by_key(|s| s.got);
    let first = samples.iter().map(|s| s.asked).min().unwrap_or(0);
    let last = samples.iter().map(|s| s.released).max().unwrap_or(0);
    let mut waits: Vec<f64> = samples
        .iter()
        .map(|s| (s.got - s.asked) as f64 / 1e6)
        .collect();
    waits.sort_by(f64::total_cmp);
    let mut handoffs: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1].asked < w[0].released) // someone was already waiting
        .map(|w| w[1].got.saturating_sub(w[0].released) as f64 / 1e3)
        .collect();
    handoffs.sort_by(f64::total_cmp);
    HotStats {
        per_sec: samples.len() as f64 / ((last - first) as f64 / 1e9),
        wait_p50_ms: percentile(&waits, 0.5),
        wait_p99_ms: percentile(&waits, 0.99),
        wait_max_ms: waits.last().copied().unwrap_or(f64::NAN),
        handoff_p50_us: percentile(&handoffs, 0.5),
        handoff_p99_us: percentile(&handoffs, 0.99),
    }
}

/// No two holds of the hot key overlapped (the clock is the machine's monotonic one, shared by
/// the worker processes): a lock, or a baseline, that did not exclude would measure nothing.
pub(crate) fn assert_exclusive(contender: &str, samples: &[Sample]) {
    let mut holds: Vec<(u64, u64)> = samples.iter().map(|s| (s.got, s.released)).collect();
    holds.sort_unstable();
    for pair in holds.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "{contender}: two holders of the hot key at once"
        );
    }
}
