//! What one round of purchases did, and the table that compares the rounds.

use std::collections::BTreeMap;
use std::time::Duration;

/// The answer to one purchase, as the table counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// 201: sold.
    Sold,
    /// 409 `sold_out`.
    SoldOut,
    /// 409 `lock_busy`: the lock stayed taken for the whole wait.
    Busy,
    /// 503: the lock or the store was unavailable, or the lease was lost.
    Unavailable,
    /// Anything else, including no answer at all.
    Other,
}

impl Outcome {
    /// Classifies a status and the body's `error` code.
    pub fn of(status: u16, code: Option<&str>) -> Outcome {
        match (status, code) {
            (201, _) => Outcome::Sold,
            (409, Some("sold_out")) => Outcome::SoldOut,
            (409, Some("lock_busy")) => Outcome::Busy,
            (503, _) => Outcome::Unavailable,
            _ => Outcome::Other,
        }
    }
}

/// One round: how each purchase ended and how long it took, and what the stock says.
pub struct Round {
    /// "no lock" or "leasehold".
    pub name: &'static str,
    /// The stock it started with.
    pub stock: i64,
    /// Items sold, as the stock record counts them.
    pub sold: i64,
    /// Each purchase's outcome and latency.
    pub results: Vec<(Outcome, Duration)>,
    /// From the first purchase sent to the last answer.
    pub elapsed: Duration,
}

impl Round {
    /// Items sold beyond the stock.
    pub fn oversold(&self) -> i64 {
        (self.sold - self.stock).max(0)
    }

    fn count(&self) -> BTreeMap<Outcome, usize> {
        let mut counts = BTreeMap::new();
        for (outcome, _) in &self.results {
            *counts.entry(*outcome).or_insert(0) += 1;
        }
        counts
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut latencies: Vec<Duration> = self.results.iter().map(|(_, d)| *d).collect();
        latencies.sort();
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
        latencies[rank.clamp(1, latencies.len()) - 1]
    }

    fn throughput(&self) -> f64 {
        self.results.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{ms:.0}ms")
    }
}

/// The comparison table, one row per round.
pub fn table(rounds: &[Round]) -> String {
    let header = [
        "run",
        "sold",
        "oversold",
        "201",
        "409 sold_out",
        "409 busy",
        "503",
        "other",
        "p50",
        "p99",
        "req/s",
    ];
    let mut rows = vec![header.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>()];
    for round in rounds {
        let counts = round.count();
        let n = |o| counts.get(&o).copied().unwrap_or(0).to_string();
        rows.push(vec![
            round.name.to_owned(),
            round.sold.to_string(),
            round.oversold().to_string(),
            n(Outcome::Sold),
            n(Outcome::SoldOut),
            n(Outcome::Busy),
            n(Outcome::Unavailable),
            n(Outcome::Other),
            millis(round.percentile(50.0)),
            millis(round.percentile(99.0)),
            format!("{:.0}", round.throughput()),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_percentiles_and_the_table() {
        assert_eq!(Outcome::of(201, None), Outcome::Sold);
        assert_eq!(Outcome::of(409, Some("sold_out")), Outcome::SoldOut);
        assert_eq!(Outcome::of(409, Some("lock_busy")), Outcome::Busy);
        assert_eq!(Outcome::of(503, Some("lock_lost")), Outcome::Unavailable);
        assert_eq!(Outcome::of(500, None), Outcome::Other);
        let round = Round {
            name: "leasehold",
            stock: 2,
            sold: 3,
            results: (1..=100)
                .map(|ms| (Outcome::Sold, Duration::from_millis(ms)))
                .collect(),
            elapsed: Duration::from_secs(2),
        };
        assert_eq!(round.oversold(), 1);
        assert_eq!(round.percentile(50.0), Duration::from_millis(50));
        assert_eq!(round.percentile(99.0), Duration::from_millis(99));
        let table = table(&[round]);
        let row = table.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[..4], ["leasehold", "3", "1", "100"]);
        assert_eq!(cells.last(), Some(&"50"));
    }
}
