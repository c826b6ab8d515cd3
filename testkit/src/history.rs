//! The history checker over the user's own resource: a test records what its holders did (the
//! locks they took and gave back, their reads and writes of the resource with the fence they
//! carried, and whether the resource accepted each write), in the order the resource saw it,
//! and [`History::check`] reports every overlap of holders, stale write accepted and lost
//! update, naming the holders.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A record of holders' steps, in the order they were recorded: the order the resource and
/// the locker saw them, never a stopwatch. Cheap to clone; clones record into the same
/// history, so each holder's task can carry one.
///
/// ```
/// use leasehold_testkit::{History, Violation};
///
/// let history = History::new();
/// history.read("a", "stock:42", 10); // holder a read quantity 10
/// history.read("b", "stock:42", 10); // b read the same quantity
/// history.write("b", "stock:42", 6, true);
/// history.write("a", "stock:42", 5, true); // accepted: a stale write, and b's sale is lost
/// let report = history.check();
/// assert_eq!(report.violations().len(), 2);
/// assert!(matches!(report.violations()[0], Violation::StaleWrite { .. }));
/// assert!(matches!(report.violations()[1], Violation::LostUpdate { .. }));
/// ```
#[derive(Clone, Debug, Default)]
pub struct History {
    steps: Arc<Mutex<Vec<Step>>>,
}

/// One recorded step.
#[derive(Clone, Debug)]
enum Step {
    Acquired {
        holder: String,
        key: String,
        fence: u64,
    },
    Released {
        holder: String,
        key: String,
    },
    Read {
        holder: String,
        resource: String,
        value: u64,
    },
    Write {
        holder: String,
        resource: String,
        fence: u64,
        accepted: bool,
    },
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    fn push(&self, step: Step) {
        self.steps.lock().unwrap().push(step);
    }

    /// `holder` acquired `key` with `fence`.
    pub fn acquired(&self, holder: &str, key: &str, fence: u64) {
        self.push(Step::Acquired {
            holder: holder.into(),
            key: key.into(),
            fence,
        });
    }

    /// `holder` stopped holding `key`: it released it, or learned that its lease was lost.
    /// A holder that never records it holds `key` to the end of the history.
    pub fn released(&self, holder: &str, key: &str) {
        self.push(Step::Released {
            holder: holder.into(),
            key: key.into(),
        });
    }

    /// `holder` read `value` from `resource` (a version, a quantity: what its next write is
    /// computed from; only messages show it).
    pub fn read(&self, holder: &str, resource: &str, value: u64) {
        self.push(Step::Read {
            holder: holder.into(),
            resource: resource.into(),
            value,
        });
    }

    /// `holder`, carrying `fence`, wrote to `resource`, and the resource accepted the write
    /// (`true`) or refused it (`false`, e.g. for a stale fence). Record it when the resource
    /// answered, so that the order of writes is the resource's.
    pub fn write(&self, holder: &str, resource: &str, fence: u64, accepted: bool) {
        self.push(Step::Write {
            holder: holder.into(),
            resource: resource.into(),
            fence,
            accepted,
        });
    }

    /// How many steps were recorded.
    pub fn len(&self) -> usize {
        self.steps.lock().unwrap().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Judges the history by three rules, reporting each break in the order of the steps:
    /// - **overlap**: a holder acquired a key while another holder that acquired it had not
    ///   released it;
    /// - **stale write accepted**: the resource accepted a write whose fence is below the
    ///   fence of a write it accepted before;
    /// - **lost update**: the resource accepted a write of a holder that had read the resource
    ///   before another holder's accepted write, which it thus overwrote unseen.
    pub fn check(&self) -> Report {
        let steps = self.steps.lock().unwrap().clone();
        let mut violations = Vec::new();
        // Per key: its current holders with their fences.
        let mut holding: HashMap<&str, Vec<(&str, u64)>> = HashMap::new();
        // Per resource: the accepted write with the highest fence so far.
        let mut newest: HashMap<&str, (&str, u64)> = HashMap::new();
        // Per resource: its accepted writes, by step index.
        let mut accepted: HashMap<&str, Vec<(usize, &str, u64)>> = HashMap::new();
        // Per (holder, resource): the step index and value of its last read.
        let mut last_read: HashMap<(&str, &str), (usize, u64)> = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Acquired { holder, key, fence } => {
                    let holders = holding.entry(key).or_default();
                    if let Some(&(other, other_fence)) = holders.iter().find(|(h, _)| h != holder) {
                        violations.push(Violation::Overlap {
                            key: key.clone(),
                            holder: holder.clone(),
                            fence: *fence,
                            other: other.into(),
                            other_fence,
                        });
                    }
                    holders.push((holder, *fence));
                }
                Step::Released { holder, key } => {
                    if let Some(holders) = holding.get_mut(key.as_str()) {
                        holders.retain(|(h, _)| h != holder);
                    }
                }
                Step::Read {
                    holder,
                    resource,
                    value,
                    ..
                } => {
                    last_read.insert((holder, resource), (i, *value));
                }
                Step::Write {
                    holder,
                    resource,
                    fence,
                    accepted: true,
                } => {
                    if let Some(&(newer, newer_fence)) = newest.get(resource.as_str()) {
                        if newer_fence > *fence {
                            violations.push(Violation::StaleWrite {
                                resource: resource.clone(),
                                holder: holder.clone(),
                                fence: *fence,
                                newer: newer.into(),
                                newer_fence,
                            });
                        }
                    }
                    if let Some(&(read_at, value)) =
                        last_read.get(&(holder.as_str(), resource.as_str()))
                    {
                        let unseen = accepted
                            .get(resource.as_str())
                            .into_iter()
                            .flatten()
                            .find(|&&(at, by, _)| at > read_at && by != holder);
                        if let Some(&(_, by, by_fence)) = unseen {
                            violations.push(Violation::LostUpdate {
                                resource: resource.clone(),
                                read: value,
                                holder: holder.clone(),
                                fence: *fence,
                                overwritten: by.into(),
                                overwritten_fence: by_fence,
                            });
                        }
                    }
                    let top = newest.entry(resource).or_insert((holder, *fence));
                    if *fence >= top.1 {
                        *top = (holder, *fence);
                    }
                    accepted
                        .entry(resource)
                        .or_default()
                        .push((i, holder, *fence));
                }
                Step::Write { .. } => {}
            }
        }
        Report { violations }
    }
}

/// What [`History::check`] found: every violation, in the order of the steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    violations: Vec<Violation>,
}

impl Report {
    /// Every violation found, in the order of the steps.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Whether no rule was broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// Whether some violation is a lost update.
    pub fn has_lost_update(&self) -> bool {
        self.violations
            .iter()
            .any(|v| matches!(v, Violation::LostUpdate { .. }))
    }

    /// Whether some violation is a stale write accepted.
    pub fn has_stale_write(&self) -> bool {
        self.violations
            .iter()
            .any(|v| matches!(v, Violation::StaleWrite { .. }))
    }

    /// Whether some violation is an overlap of holders.
    pub fn has_overlap(&self) -> bool {
        self.violations
            .iter()
            .any(|v| matches!(v, Violation::Overlap { .. }))
    }

    /// Panics, listing every violation, unless the history broke no rule.
    ///
    /// # Panics
    /// When a rule was broken; the message names the holders.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(self.is_clean(), "{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.violations.is_empty() {
            return f.write_str("the history broke no rule");
        }
        writeln!(f, "the history broke {} rule(s):", self.violations.len())?;
        for v in &self.violations {
            writeln!(f, "- {v}")?;
        }
        Ok(())
    }
}

/// One rule a history broke, naming the holders.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// `holder` acquired `key` while `other` still held it.
    Overlap {
        /// The key both held.
        key: String,
        /// The holder that acquired it last.
        holder: String,
        /// Its fence.
        fence: u64,
        /// The holder that had not released it.
        other: String,
        /// That holder's fence.
        other_fence: u64,
    },
    /// The resource accepted `holder`'s write with `fence` after it had accepted `newer`'s
    /// with the higher `newer_fence`: the resource does not check fences, or checks them too
    /// late.
    StaleWrite {
        /// The resource written.
        resource: String,
        /// The holder of the stale write.
        holder: String,
        /// The stale write's fence.
        fence: u64,
        /// The holder of the newer write accepted before.
        newer: String,
        /// Its fence.
        newer_fence: u64,
    },
    /// The resource accepted `holder`'s write, computed from what it read (`read`), after
    /// `overwritten`'s accepted write that came after that read: that write is lost.
    LostUpdate {
        /// The resource written.
        resource: String,
        /// What `holder` had read.
        read: u64,
        /// The holder whose write overwrote the other unseen.
        holder: String,
        /// Its fence.
        fence: u64,
        /// The holder whose write was lost.
        overwritten: String,
        /// Its fence.
        overwritten_fence: u64,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap {
                key,
                holder,
                fence,
                other,
                other_fence,
            } => write!(
                f,
                "overlap on `{key}`: `{holder}` (fence {fence}) acquired it while `{other}` \
                 (fence {other_fence}) still held it"
            ),
            Violation::StaleWrite {
                resource,
                holder,
                fence,
                newer,
                newer_fence,
            } => write!(
                f,
                "stale write accepted by `{resource}`: `{holder}`'s write with fence {fence} \
                 after `{newer}`'s with fence {newer_fence}"
            ),
            Violation::LostUpdate {
                resource,
                read,
                holder,
                fence,
                overwritten,
                overwritten_fence,
            } => write!(
                f,
                "lost update of `{resource}`: `{holder}` (fence {fence}) wrote what it computed \
                 from {read}, overwriting `{overwritten}`'s write (fence {overwritten_fence}) \
                 that it never read"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serial_history_is_clean() {
        let h = History::new();
        h.acquired("a", "k", 1);
        h.read("a", "r", 10);
        h.write("a", "r", 1, true);
        h.released("a", "k");
        h.acquired("b", "k", 2);
        h.read("b", "r", 9);
        h.write("b", "r", 2, true);
        h.released("b", "k");
        h.check().assert_clean();
    }

    #[test]
    fn overlaps_name_both_holders() {
        let h = History::new();
        h.acquired("a", "k", 1);
        h.acquired("b", "k", 2);
        let report = h.check();
        assert_eq!(
            report.violations(),
            [Violation::Overlap {
                key: "k".into(),
                holder: "b".into(),
                fence: 2,
                other: "a".into(),
                other_fence: 1,
            }]
        );
        assert!(report
            .to_string()
            .contains("`b` (fence 2) acquired it while `a`"));
    }

    #[test]
    fn a_refused_stale_write_breaks_no_rule() {
        let h = History::new();
        h.read("a", "r", 10);
        h.read("b", "r", 10);
        h.write("b", "r", 2, true);
        h.write("a", "r", 1, false);
        h.check().assert_clean();
    }

    #[test]
    fn a_blind_write_loses_no_update() {
        let h = History::new();
        h.write("a", "r", 1, true);
        h.write("b", "r", 2, true);
        h.check().assert_clean();
    }

    #[test]
    fn a_write_computed_from_an_old_read_is_a_lost_update_even_with_rising_fences() {
        let h = History::new();
        h.read("a", "r", 10);
        h.read("b", "r", 10);
        h.write("a", "r", 1, true);
        h.write("b", "r", 2, true);
        let report = h.check();
        assert!(
            report.has_lost_update() && !report.has_stale_write(),
            "{report}"
        );
    }

    #[test]
    #[should_panic(expected = "lost update of `r`")]
    fn assert_clean_lists_the_violations() {
        let h = History::new();
        h.read("a", "r", 10);
        h.read("b", "r", 10);
        h.write("a", "r", 1, true);
        h.write("b", "r", 2, true);
        h.check().assert_clean();
    }
}
