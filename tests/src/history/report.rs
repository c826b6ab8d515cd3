//! What a check found: the figures of one run, and each broken [`Rule`] with its evidence, printed
//! for a failed test and appended to the reliability report.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write as _;

/// The rule a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// Two holders' validity windows overlapped.
    Overlap,
    /// A fence was handed out twice, or out of the real-time order of acquisitions (by any
    /// primitive: writer, reader, permit, leader term, multi-key hold).
    FenceOrder,
    /// The fenced resource accepted a write after one with a higher fence.
    StaleWrite,
    /// The resource's store accepted two writes of a key computed from the same value (the
    /// later writer's read missed the earlier write: an update was lost), or its records do
    /// not add up (a counter that does not match the writes accepted, a write acknowledged to
    /// its client that the store does not have, or one refused to its client that it has).
    LostUpdate,
    /// A call took longer than its bound, or never returned.
    Bound,
    /// A worker did not finish in time.
    Hang,
    /// A lease reported lost was held again.
    Resurrection,
    /// A worker made no progress after the faults healed.
    Liveness,
    /// A reader's fence was not between the fences of the writers before and after it (or,
    /// with exact reader fences, not the last writer's).
    ReaderFence,
    /// A fair lock was granted out of the order of arrival.
    Fifo,
    /// The logs could not be read.
    Log,
    /// A semaphore had more holders than permits.
    Permits,
}

/// One broken rule, and the evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// What happened, with hold ids and times.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.rule, self.what)
    }
}

/// The figures of one checked run, and its violations.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Worker processes.
    pub workers: usize,
    /// Acquires invoked.
    pub acquires: usize,
    /// Acquires that returned a guard.
    pub holds: usize,
    /// Failed acquires by error code.
    pub acquire_errors: BTreeMap<String, usize>,
    /// Holds whose loss was reported to the holder.
    pub losses: usize,
    /// Writes the fenced resource accepted.
    pub writes_accepted: usize,
    /// Writes it refused as stale.
    pub writes_refused: usize,
    /// Writes that failed or never returned.
    pub writes_failed: usize,
    /// Blind writes (made after the holder noticed its loss, to test the fence).
    pub blind_writes: usize,
    /// Blind writes the resource refused.
    pub blind_refused: usize,
    /// Stale writes the resource accepted (must be 0).
    pub stale_accepted: usize,
    /// Whether the resource's store was read after the run (the lost-update rule judged).
    pub store_read: bool,
    /// Writes the store accepted, by its own records (whatever their clients were told); a
    /// transfer counts on each of its two keys.
    pub store_writes: usize,
    /// Accepted writes computed from a value an earlier accepted write had already replaced
    /// (must be 0).
    pub lost_updates: usize,
    /// Faults injected.
    pub faults: usize,
    /// The slowest acquire, in ns.
    pub max_acquire_ns: u64,
    /// Holds of the read side of a read-write lock.
    pub read_holds: usize,
    /// Holds of several keys at once.
    pub multi_holds: usize,
    /// Grants of fair locks checked for their order.
    pub fifo_grants: usize,
    /// Pairs of fair acquires granted out of arrival order (see
    /// [`FIFO_SLACK_NS`](super::FIFO_SLACK_NS)).
    pub fifo_pairs: usize,
    /// Grants of fair locks that overtook at least one earlier waiter.
    pub fifo_overtaking: usize,
    /// The most holders of one semaphore's permits seen at one instant.
    pub most_permit_holders: usize,
    /// Everything that broke a rule.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Records a broken rule.
    pub(super) fn violation(&mut self, rule: Rule, what: String) {
        self.violations.push(Violation { rule, what });
    }

    /// The violations of one rule.
    pub fn violations_of(&self, rule: Rule) -> Vec<&Violation> {
        self.violations.iter().filter(|v| v.rule == rule).collect()
    }

    /// The violations of every rule but `rules`.
    pub fn violations_except(&self, rules: &[Rule]) -> Vec<&Violation> {
        self.violations
            .iter()
            .filter(|v| !rules.contains(&v.rule))
            .collect()
    }

    /// Operations: acquires, releases and writes.
    pub fn operations(&self) -> usize {
        self.acquires + self.holds + self.writes_accepted + self.writes_refused + self.writes_failed
    }

    /// Prints the figures to stderr (visible with `--nocapture`) and appends them as one
    /// tab-separated line to the file named by `LEASEHOLD_RELIABILITY_REPORT`, if set.
    pub fn record(&self, scenario: &str) {
        eprintln!("{scenario}: {self}");
        if let Some(path) = std::env::var_os("LEASEHOLD_RELIABILITY_REPORT") {
            let line = format!(
                "{scenario}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                self.workers,
                self.holds,
                self.operations(),
                self.faults,
                self.losses,
                self.writes_refused,
                self.stale_accepted,
                self.violations.len(),
                self.lost_updates
            );
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workers, {} acquires ({} held, errors {:?}), {} operations, {} faults, {} losses \
             reported, writes {} accepted / {} refused / {} failed ({} blind, {} refused), \
             slowest acquire {:.0} ms, stale writes accepted {}, violations {}",
            self.workers,
            self.acquires,
            self.holds,
            self.acquire_errors,
            self.operations(),
            self.faults,
            self.losses,
            self.writes_accepted,
            self.writes_refused,
            self.writes_failed,
            self.blind_writes,
            self.blind_refused,
            self.max_acquire_ns as f64 / 1e6,
            self.stale_accepted,
            self.violations.len()
        )?;
        if self.read_holds + self.multi_holds > 0 {
            write!(
                f,
                ", read holds {}, multi-key holds {}",
                self.read_holds, self.multi_holds
            )?;
        }
        if self.store_read {
            write!(
                f,
                ", store kept {} writes ({} lost updates)",
                self.store_writes, self.lost_updates
            )?;
        } else {
            write!(f, ", store not read")?;
        }
        if self.fifo_grants > 0 {
            write!(
                f,
                ", fair grants {} ({} out of arrival order, {} pairs)",
                self.fifo_grants, self.fifo_overtaking, self.fifo_pairs
            )?;
        }
        for v in self.violations.iter().take(50) {
            write!(f, "\n  - {v}")?;
        }
        if self.violations.len() > 50 {
            write!(f, "\n  ... and {} more", self.violations.len() - 50)?;
        }
        Ok(())
    }
}
