//! The worker's view of renewals: a recorder of the library's renewal metrics (count,
//! failures, lag histogram), which the by-hand side fills itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A latency histogram with about 3% resolution, filled from many tasks without a lock:
/// 64 exact microsecond buckets, then 32 per power of two.
pub(super) struct LagHistogram {
    buckets: Vec<AtomicU64>,
    on: AtomicBool,
}

impl LagHistogram {
    const SUB: u32 = 32;

    fn new() -> LagHistogram {
        LagHistogram {
            buckets: (0..64 + 58 * Self::SUB as usize)
                .map(|_| AtomicU64::new(0))
                .collect(),
            on: AtomicBool::new(false),
        }
    }

    fn index(us: u64) -> usize {
        if us < 64 {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros(); // at least 6
        let sub = (us >> (exp - 5)) & u64::from(Self::SUB - 1);
        64 + ((exp - 6) * Self::SUB) as usize + sub as usize
    }

    /// The middle of bucket `i`, in µs.
    fn value(i: usize) -> f64 {
        if i < 64 {
            return i as f64;
        }
        let exp = (i - 64) as u32 / Self::SUB + 6;
        let sub = (i - 64) as u64 % u64::from(Self::SUB);
        let low = (u64::from(Self::SUB) + sub) << (exp - 5);
        low as f64 + (1u64 << (exp - 5)) as f64 / 2.0
    }

    /// Counts `lag` if the window is open.
    pub(super) fn record(&self, lag: Duration) {
        if self.on.load(Ordering::Relaxed) {
            let i = Self::index(lag.as_micros() as u64).min(self.buckets.len() - 1);
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn start(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.on.store(true, Ordering::Relaxed);
    }

    pub(super) fn stop(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// The `q` quantile of the counted lags, in µs; NaN with none counted.
    pub(super) fn quantile(&self, q: f64) -> f64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return f64::NAN;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i);
            }
        }
        f64::NAN
    }
}

impl metrics::HistogramFn for LagHistogram {
    fn record(&self, seconds: f64) {
        LagHistogram::record(self, Duration::from_secs_f64(seconds.max(0.0)));
    }
}

/// The worker's view of renewals: the library's `leasehold_renewals_total` and
/// `leasehold_renew_failures_total` counters and `leasehold_renewal_lag_seconds` histogram
/// (through a `metrics` recorder that keeps only those), or the by-hand tasks' own counts.
#[derive(Clone)]
pub(super) struct Probe {
    pub(super) renewed: Arc<AtomicU64>,
    pub(super) failed: Arc<AtomicU64>,
    pub(super) lag: Arc<LagHistogram>,
}

impl Probe {
    /// A probe, installed as the process's metrics recorder.
    pub(super) fn install() -> Probe {
        let probe = Probe {
            renewed: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            lag: Arc::new(LagHistogram::new()),
        };
        metrics::set_global_recorder(probe.clone()).expect("the only metrics recorder");
        probe
    }

    pub(super) fn renewals(&self) -> u64 {
        self.renewed.load(Ordering::Relaxed)
    }

    pub(super) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

impl metrics::Recorder for Probe {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        match key.name() {
            "leasehold_renewals_total" => metrics::Counter::from_arc(self.renewed.clone()),
            "leasehold_renew_failures_total" => metrics::Counter::from_arc(self.failed.clone()),
            _ => metrics::Counter::noop(),
        }
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        key: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        if key.name() == "leasehold_renewal_lag_seconds" {
            metrics::Histogram::from_arc(self.lag.clone())
        } else {
            metrics::Histogram::noop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_buckets_are_within_three_percent() {
        for us in [0u64, 1, 63, 64, 100, 999, 1_000, 12_345, 300_000, 2_999_999] {
            let v = LagHistogram::value(LagHistogram::index(us));
            assert!(
                (v - us as f64).abs() <= (us as f64 * 0.03).max(0.5),
                "{us} us read as {v}"
            );
        }
    }
}
