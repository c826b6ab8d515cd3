//! The checker: the rules a [`History`] must keep (no overlapping holders, fences in real-time
//! order, no stale write accepted, no update lost, calls within their bounds, ...), each broken
//! one reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::parse::{History, Hold};
use super::report::{Report, Rule};
use super::resource::StoredWrite;
use super::worker::DEFAULT_UPDATE_LIMIT;

/// One hold as seen on one of its keys: the hold, and its fence of that key.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    hold: &'a Hold,
    fence: u64,
}

/// What a fence counter belongs to. Each has its own counter in the store, even under one
/// name: a lock's key (its exclusive holds, both sides of a read-write lock, a multi-key
/// hold's keys), a semaphore (its permit holders), a leader election (its terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Counter {
    Lock,
    Semaphore,
    Election,
}

impl Counter {
    /// How violations name the counter of `key`: `` `k` ``, `` semaphore `k` ``,
    /// `` election `k` ``.
    fn name(self, key: &str) -> String {
        match self {
            Counter::Lock => format!("`{key}`"),
            Counter::Semaphore => format!("semaphore `{key}`"),
            Counter::Election => format!("election `{key}`"),
        }
    }
}

impl History {
    /// Whether worker `w` was stopped (paused) or blocked at any time in `[from, to]`.
    fn frozen(&self, w: usize, from: u64, to: u64) -> bool {
        let target = format!("w{w}");
        let paused = self.faults.iter().any(|f| {
            f.kind == "pause"
                && f.target == target
                && f.start <= to
                && f.end.unwrap_or(u64::MAX) >= from
        });
        let blocked = self.holds_of(w).any(|h| {
            h.blocks
                .iter()
                .any(|&(s, e)| s <= to && e.unwrap_or(u64::MAX) >= from)
        });
        paused || blocked
    }

    /// Judges the history; see the [`history`](crate::history) module's documentation for the
    /// rules.
    pub fn check(&self) -> Report {
        let mut r = Report {
            workers: self.workers.len(),
            // Runtime blocks are faults the workers inject on themselves.
            faults: self.faults.iter().filter(|f| f.kind != "hung").count()
                + self.holds.iter().map(|h| h.blocks.len()).sum::<usize>(),
            ..Report::default()
        };
        // A multi-key hold counts as a hold of each of its keys, with that key's fence.
        let mut by_key: BTreeMap<(Counter, &str), Vec<Entry<'_>>> = BTreeMap::new();
        let mut by_semaphore: BTreeMap<(&str, u32), Vec<&Hold>> = BTreeMap::new();
        for h in &self.holds {
            r.acquires += 1;
            let life = self.workers.get(h.worker);
            let permits = life.map_or(0, |w| w.permits);
            if h.ok.is_some() && permits > 0 {
                r.holds += 1;
                by_semaphore
                    .entry((h.key.as_str(), permits))
                    .or_default()
                    .push(h);
                // Permit holders share the semaphore, but not its fence counter.
                if let Some(&fence) = h.key_fences.first() {
                    by_key
                        .entry((Counter::Semaphore, h.key.as_str()))
                        .or_default()
                        .push(Entry { hold: h, fence });
                }
            } else if h.ok.is_some() {
                r.holds += 1;
                let counter = if life.is_some_and(|w| w.leader) {
                    Counter::Election
                } else {
                    Counter::Lock
                };
                for (key, &fence) in h.keys.iter().zip(&h.key_fences) {
                    by_key
                        .entry((counter, key.as_str()))
                        .or_default()
                        .push(Entry { hold: h, fence });
                }
                if h.shared {
                    r.read_holds += 1;
                }
                if h.keys.len() > 1 {
                    r.multi_holds += 1;
                }
            }
            if let Some((_, code)) = &h.err {
                *r.acquire_errors.entry(code.clone()).or_default() += 1;
            }
            if h.lost.is_some()
                || h.first_false
                    .is_some_and(|f| h.rel.is_none_or(|(t, _)| f <= t))
            {
                r.losses += 1;
            }
            for w in &h.writes {
                match w.outcome {
                    Some((_, Some(true))) => r.writes_accepted += 1,
                    Some((_, Some(false))) => r.writes_refused += 1,
                    _ => r.writes_failed += 1,
                }
                if h.ok.is_some() && !w.careful {
                    r.blind_writes += 1;
                    if w.outcome.is_some_and(|(_, a)| a == Some(false)) {
                        r.blind_refused += 1;
                    }
                }
            }
            if h.resurrected {
                r.violation(
                    Rule::Resurrection,
                    format!(
                        "lease of {} was reported lost (is_held() false), then held again",
                        h.id
                    ),
                );
            }
        }
        for (&(counter, key), entries) in &by_key {
            self.check_fences(&counter.name(key), entries, &mut r);
            if counter == Counter::Semaphore {
                // Holders share it: `check_permits` counts them instead.
                continue;
            }
            self.check_overlap(key, entries, &mut r);
            self.check_stale_writes(key, entries, &mut r);
            self.check_reader_fences(key, entries, &mut r);
        }
        self.check_lost_updates(&mut r);
        self.check_fifo(&mut r);
        for ((key, permits), holds) in &by_semaphore {
            self.check_permits(key, *permits, holds, &mut r);
        }
        self.check_bounds(&mut r);
        self.check_liveness(&mut r);
        if self.garbage > 0 {
            r.violation(
                Rule::Log,
                format!("{} log line(s) did not parse", self.garbage),
            );
        }
        r
    }

    /// The one fence rule, for every primitive alike: on each fence counter (a lock's key,
    /// with its exclusive holds, both sides of a read-write lock and each key of a multi-key
    /// hold; a semaphore, with its permit holders; a leader election, with its terms), when
    /// A's acquire returned before B's was invoked, B's fence is above A's, whatever A was,
    /// and at or above it when B is a reader (readers share the counter's current value:
    /// "a reader's fence is at or above the last writer's, below every later writer's").
    /// Fences of holds that exclude, and of permit holders, are also unique. A counter that
    /// went back (a restore from a snapshot or AOF, a failover to a lagging replica, an
    /// expired counter handed out again from scratch) shows here, for whichever kind of hold
    /// came first after it. Readers are judged against the writers' grant order, more
    /// finely, by [`check_reader_fences`](Self::check_reader_fences).
    fn check_fences(&self, counter: &str, entries: &[Entry<'_>], r: &mut Report) {
        // Unfenced holds exclude (see `check_overlap`) but have no fence to judge.
        let fenced: Vec<Entry<'_>> = entries
            .iter()
            .filter(|e| !e.hold.unfenced)
            .copied()
            .collect();
        let entries = &fenced[..];
        let mut seen: HashMap<u64, &str> = HashMap::new();
        for e in entries.iter().filter(|e| !e.hold.shared) {
            if let Some(other) = seen.insert(e.fence, &e.hold.id) {
                r.violation(
                    Rule::FenceOrder,
                    format!(
                        "fence {} of {counter} handed to both {other} and {}",
                        e.fence, e.hold.id
                    ),
                );
            }
        }
        // (granted, fence, hold), by the time the acquire returned.
        let mut by_ok: Vec<(u64, u64, &Hold)> = entries
            .iter()
            .filter_map(|e| e.hold.ok.map(|(t, _)| (t, e.fence, e.hold)))
            .collect();
        by_ok.sort_by_key(|&(t, f, _)| (t, f));
        let mut by_inv: Vec<&Entry<'_>> = entries.iter().collect();
        by_inv.sort_by_key(|e| e.hold.inv);
        let mut i = 0;
        // The highest fence among the acquires that returned before B was invoked.
        let mut max: Option<(u64, &Hold)> = None;
        for b in by_inv {
            while i < by_ok.len() && by_ok[i].0 < b.hold.inv {
                if max.is_none_or(|(f, _)| by_ok[i].1 > f) {
                    max = Some((by_ok[i].1, by_ok[i].2));
                }
                i += 1;
            }
            let Some((mf, a)) = max else { continue };
            let fence = b.fence;
            let broken = if b.hold.shared {
                mf > fence
            } else {
                mf >= fence
            };
            if broken {
                let who = |h: &Hold| if h.shared { "reader " } else { "" };
                r.violation(
                    Rule::FenceOrder,
                    format!(
                        "fence out of order on {counter}: {}{} got {mf} before {}{} asked, which got {fence}",
                        who(a),
                        a.id,
                        who(b.hold),
                        b.hold.id
                    ),
                );
            }
        }
    }

    /// No two holders' validity windows overlap on a key, except two readers'. A window is
    /// the span between the first and the last instant at which the holder provably
    /// believed it held the lock (`is_held()` true, time taken before asking): a lower bound
    /// of its belief, so an overlap found is an overlap that happened. A multi-key hold's
    /// window counts on each of its keys.
    fn check_overlap(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut windows: Vec<(u64, u64, &str, bool)> = entries
            .iter()
            .filter_map(|e| {
                let h = e.hold;
                Some((h.first_true?, h.last_true?, h.id.as_str(), h.shared))
            })
            .collect();
        windows.sort();
        // The furthest-reaching window so far, of anyone and of an excluding holder.
        let mut reach: Option<(u64, &str)> = None;
        let mut reach_excl: Option<(u64, &str)> = None;
        for (start, end, id, shared) in windows {
            let against = if shared { reach_excl } else { reach };
            if let Some((until, other)) = against {
                if start < until {
                    r.violation(
                        Rule::Overlap,
                        format!(
                        "overlap on `{key}`: {id} held it from {start} while {other} still held it until {until} ({:.3} ms)",
                        (until - start) as f64 / 1e6
                    ));
                }
            }
            if reach.is_none_or(|(until, _)| end > until) {
                reach = Some((end, id));
            }
            if !shared && reach_excl.is_none_or(|(until, _)| end > until) {
                reach_excl = Some((end, id));
            }
        }
    }

    /// No more of a semaphore's permits held than it has, at any instant: each holder's
    /// window is the span of its proven belief (as in [`check_overlap`](Self::check_overlap)),
    /// counting the permits it asked for (`inv` mode `pN`, else 1), and the windows are swept
    /// in time order. Workers that disagree on the limit are judged by the smallest.
    fn check_permits(&self, key: &str, permits: u32, holds: &[&Hold], r: &mut Report) {
        let mut edges: Vec<(u64, bool, &str, u32)> = Vec::new(); // (time, ends, hold, permits)
        for h in holds {
            if let (Some(start), Some(end)) = (h.first_true, h.last_true) {
                let n = h.permits.max(1);
                edges.push((start, false, h.id.as_str(), n));
                // Belief up to and including `end`: it ends just after.
                edges.push((end + 1, true, h.id.as_str(), n));
            }
        }
        // Ends before starts at one instant: a window [a, b] and one from b + 1 do not meet.
        edges.sort_by_key(|&(t, ends, _, _)| (t, !ends));
        let mut inside: Vec<(&str, u32)> = Vec::new();
        for (t, ends, id, n) in edges {
            if ends {
                inside.retain(|&(other, _)| other != id);
                continue;
            }
            inside.push((id, n));
            r.most_permit_holders = r.most_permit_holders.max(inside.len());
            let taken: u32 = inside.iter().map(|&(_, n)| n).sum();
            if taken > permits {
                let who: Vec<String> = inside.iter().map(|(id, n)| format!("{id} ({n})")).collect();
                r.violation(
                    Rule::Permits,
                    format!(
                        "{taken} of the {permits} permits of `{key}` held at {t}: {}",
                        who.join(", ")
                    ),
                );
            }
        }
    }

    /// The fenced resource accepted no stale write: no write was accepted after (in real
    /// time) a write with a higher fence had been accepted. A multi-key hold's writes count
    /// on each of its keys, with that key's fence.
    fn check_stale_writes(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut accepted: Vec<(u64, u64, u64, &str)> = Vec::new(); // (inv, done, fence, id)
        for e in entries.iter().filter(|e| !e.hold.unfenced) {
            for w in &e.hold.writes {
                if let Some((done, Some(true))) = w.outcome {
                    accepted.push((w.inv, done, e.fence, e.hold.id.as_str()));
                }
            }
        }
        let mut by_done = accepted.clone();
        by_done.sort_by_key(|a| a.1);
        accepted.sort_by_key(|a| a.0);
        let mut i = 0;
        let mut max: Option<(u64, &str)> = None;
        for (inv, _, fence, id) in accepted {
            while i < by_done.len() && by_done[i].1 < inv {
                if max.is_none_or(|(f, _)| by_done[i].2 > f) {
                    max = Some((by_done[i].2, by_done[i].3));
                }
                i += 1;
            }
            if let Some((mf, mid)) = max {
                if mf > fence {
                    r.stale_accepted += 1;
                    r.violation(
                        Rule::StaleWrite,
                        format!(
                        "stale write accepted on `{key}`: {id} wrote with fence {fence} after {mid} had written with {mf}"
                    ));
                }
            }
        }
    }

    /// No update was lost, judged by what the resource's store accepted (its own records,
    /// read after the run: a write whose client timed out counts if the store has it). Each
    /// accepted write of a key read the key's counter and wrote it plus one, so among the
    /// accepted writes of a key no two may have read the same value (the later one's read
    /// missed the earlier write: an update lost), the values read must be 0, 1, 2, ... and the
    /// counter the number of writes accepted. The clients' view must match the store's: a
    /// write acknowledged to its client is in the store, and one refused to it is not. Not
    /// judged when nobody read the store ([`History::resource`] `None`).
    fn check_lost_updates(&self, r: &mut Report) {
        let records = match &self.resource {
            None => return,
            Some(Err(e)) => {
                r.violation(
                    Rule::Log,
                    format!("the resource's records could not be read: {e}"),
                );
                return;
            }
            Some(Ok(records)) => records,
        };
        r.store_read = true;
        r.store_writes = records.writes.len();
        let mut by_key: BTreeMap<&str, Vec<&StoredWrite>> = BTreeMap::new();
        for key in records.values.keys() {
            by_key.entry(key).or_default();
        }
        for w in &records.writes {
            by_key.entry(&w.key).or_default().push(w);
        }
        for (key, mut writes) in by_key {
            // The first of two writes from one value is the one the store took first: its
            // order where it numbers writes, else the older fence (a fenced store accepts the
            // newer one after the older, never before).
            writes.sort_by_key(|w| (w.read, w.order, w.fence));
            for w in writes.iter().filter(|w| w.new != w.read + 1) {
                r.violation(
                    Rule::LostUpdate,
                    format!(
                        "w{} (fence {}) wrote {} to `{key}` computed from {}: not one more",
                        w.hold, w.fence, w.new, w.read
                    ),
                );
            }
            let mut values_read = 0;
            let mut lost = false;
            for group in writes.chunk_by(|a, b| a.read == b.read) {
                values_read += 1;
                let first = group[0];
                for later in &group[1..] {
                    lost = true;
                    r.lost_updates += 1;
                    r.violation(
                        Rule::LostUpdate,
                        format!(
                            "lost update on `{key}`: w{} (fence {}) wrote {} computed from {}, as w{} (fence {}) had",
                            later.hold, later.fence, later.new, later.read, first.hold, first.fence
                        ),
                    );
                }
            }
            let value = records.values.get(key).copied().unwrap_or(0);
            let chained = writes
                .chunk_by(|a, b| a.read == b.read)
                .enumerate()
                .all(|(i, group)| group[0].read == i as i64);
            // After a lost update the counter is off by design: that violation says it all.
            if !lost && (!chained || value != values_read) {
                let reads: Vec<String> = writes.iter().map(|w| w.read.to_string()).collect();
                r.violation(
                    Rule::LostUpdate,
                    format!(
                        "the records of `{key}` do not add up: its counter is {value} after {} \
                         accepted writes, which read {}",
                        writes.len(),
                        if reads.is_empty() {
                            "nothing".to_owned()
                        } else {
                            reads.join(", ")
                        }
                    ),
                );
            }
        }
        let stored: BTreeSet<(&str, usize)> = records
            .writes
            .iter()
            .map(|w| (w.hold.as_str(), w.n))
            .collect();
        for h in &self.holds {
            for (n, w) in h.writes.iter().enumerate() {
                let kept = stored.contains(&(h.id.as_str(), n));
                match w.outcome {
                    Some((_, Some(true))) if !kept => r.violation(
                        Rule::LostUpdate,
                        format!(
                            "write {n} of w{} was acknowledged to it, but the store has no record of it",
                            h.id
                        ),
                    ),
                    Some((_, Some(false))) if kept => r.violation(
                        Rule::LostUpdate,
                        format!(
                            "write {n} of w{} was refused to it, but the store applied it",
                            h.id
                        ),
                    ),
                    _ => {}
                }
            }
        }
    }

    /// A reader's fence is the fence of the newest writer before it. For each read hold R of
    /// a key, the writers (holds that exclude on the key) split by their `ok` time against
    /// R's: a writer whose acquire returned before R's did was granted before R (the two
    /// exclude each other, so the earlier grant released before the later one, and each
    /// `ok` is logged between its grant and its release; no slack is needed, as for
    /// [`check_fences`](Self::check_fences)), one that returned after was granted after.
    /// Then:
    /// - R's fence is at least the highest fence of the writers before it, and below the
    ///   lowest fence of the writers after it;
    /// - with [`exact_reader_fences`](Self::exact_reader_fences), it *equals* the fence of
    ///   the newest writer before it (W) when nothing else can have
    ///   drawn a fence in between: W's worker ran one task or fair locks (so W reserved one
    ///   fence, not spares for in-process handovers), and no write acquire of the key failed
    ///   or went unanswered between W's grant and R's (it may have drawn a fence unlogged).
    ///   With no writer before R, only the upper bound is checked (a counter may predate the
    ///   run).
    fn check_reader_fences(&self, key: &str, entries: &[Entry<'_>], r: &mut Report) {
        let mut writers: Vec<(u64, u64, &Hold)> = entries
            .iter()
            .filter(|e| !e.hold.shared && !e.hold.unfenced)
            .filter_map(|e| Some((e.hold.ok?.0, e.fence, e.hold)))
            .collect();
        if entries.iter().all(|e| !e.hold.shared) {
            return;
        }
        writers.sort_by_key(|w| w.0);
        // Write acquires of the key that failed or never answered: (invoked, answered).
        let unresolved: Vec<(u64, u64)> = self
            .holds
            .iter()
            .filter(|h| !h.shared && h.ok.is_none() && h.keys.iter().any(|k| k == key))
            .map(|h| (h.inv, h.answered().unwrap_or(u64::MAX)))
            .collect();
        for e in entries.iter().filter(|e| e.hold.shared) {
            let Some((ok, _)) = e.hold.ok else { continue };
            let split = writers.partition_point(|w| w.0 < ok);
            let (before, after) = writers.split_at(split);
            let lowest_after = after.iter().min_by_key(|w| w.1);
            let highest_before = before.iter().max_by_key(|w| w.1);
            let id = &e.hold.id;
            if let Some(&(_, f, w)) = highest_before.filter(|w| e.fence < w.1) {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {} below {f} of writer {} granted before it",
                        e.fence, w.id
                    ),
                );
                continue;
            }
            if let Some(&(_, f, w)) = lowest_after.filter(|w| e.fence >= w.1) {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {}, not below {f} of writer {} granted after it",
                        e.fence, w.id
                    ),
                );
                continue;
            }
            let Some(&(w_ok, f, w)) = before.last().filter(|_| self.exact_reader_fences) else {
                continue;
            };
            let one_fence = self
                .workers
                .iter()
                .find(|l| l.id == w.worker)
                .is_some_and(|l| l.fair || l.tasks == Some(1));
            let gap = unresolved.iter().any(|&(inv, end)| inv < ok && end > w_ok);
            if one_fence && !gap && e.fence != f {
                r.violation(
                    Rule::ReaderFence,
                    format!(
                        "reader {id} of `{key}` got fence {}, not {f} of the last writer {} before it",
                        e.fence, w.id
                    ),
                );
            }
        }
    }

    /// Fair locks grant in the order of arrival (judged when [`expect_fifo`](Self::expect_fifo)
    /// is set, measured always). For two single-key acquires A and B of one
    /// key, both by workers that took fair locks and neither a reader: when A was invoked
    /// more than [`FIFO_SLACK_NS`](super::FIFO_SLACK_NS) before B (the time for A's first
    /// attempt to reach the store and queue it), and A was still pending when B was granted
    /// (A granted after B, failed after B's grant, or never answered while its worker lived),
    /// B overtook A: a violation. The order of grants comes from the `ok` times, which follow the grants
    /// (the holds exclude one another). One violation per key, with the number of such
    /// pairs and the worst one (the greatest lead A had over B).
    fn check_fifo(&self, r: &mut Report) {
        let fair: Vec<bool> = {
            let mut fair = vec![false; self.workers.iter().map(|l| l.id + 1).max().unwrap_or(0)];
            for l in &self.workers {
                fair[l.id] = l.fair;
            }
            fair
        };
        let killed = |w: usize| {
            let target = format!("w{w}");
            self.faults
                .iter()
                .filter(|f| (f.kind == "kill" || f.kind == "hung") && f.target == target)
                .map(|f| f.start)
                .min()
                .unwrap_or(u64::MAX)
        };
        // (invoked, pending until, granted at, id)
        type Acquire<'a> = (u64, u64, Option<u64>, &'a str);
        let mut by_key: BTreeMap<&str, Vec<Acquire<'_>>> = BTreeMap::new();
        for h in &self.holds {
            if h.shared || h.keys.len() != 1 || !fair.get(h.worker).copied().unwrap_or(false) {
                continue;
            }
            // Pending from `inv` until answered, or until its worker died or finished.
            let end = h
                .answered()
                .unwrap_or_else(|| killed(h.worker).min(self.workers_end(h.worker)));
            by_key.entry(h.key.as_str()).or_default().push((
                h.inv,
                end,
                h.ok.map(|(t, _)| t),
                h.id.as_str(),
            ));
        }
        for (key, acquires) in by_key {
            let mut pairs = 0usize;
            let mut overtaking = 0usize;
            let mut worst: Option<(u64, &str, &str)> = None;
            for &(b_inv, _, b_ok, b_id) in &acquires {
                let Some(b_ok) = b_ok else { continue };
                r.fifo_grants += 1;
                let mut overtook = false;
                for &(a_inv, a_end, _, a_id) in &acquires {
                    if a_inv.saturating_add(self.fifo_slack_ns) < b_inv && a_end > b_ok {
                        pairs += 1;
                        overtook = true;
                        let lead = b_inv - a_inv;
                        if worst.is_none_or(|(l, _, _)| lead > l) {
                            worst = Some((lead, a_id, b_id));
                        }
                    }
                }
                overtaking += usize::from(overtook);
            }
            r.fifo_pairs += pairs;
            r.fifo_overtaking += overtaking;
            if let Some((lead, a, b)) = worst.filter(|_| self.expect_fifo) {
                r.violation(
                    Rule::Fifo,
                    format!(
                        "fair lock `{key}` granted out of arrival order: {pairs} pair(s), {overtaking} grant(s) \
                         overtook an earlier waiter; worst: {b} was granted while {a}, invoked {:.1} ms before it, \
                         still waited",
                        lead as f64 / 1e6
                    ),
                );
            }
        }
    }

    /// When worker `w` finished by itself (`u64::MAX` if it did not).
    fn workers_end(&self, w: usize) -> u64 {
        self.workers
            .iter()
            .find(|l| l.id == w)
            .and_then(|l| l.end)
            .unwrap_or(u64::MAX)
    }

    /// Every call returned within its bound: acquire within wait + 3 op timeouts, release
    /// within 2 op timeouts, a resource update (read, compute, write) within the worker's
    /// update limit ([`DEFAULT_UPDATE_LIMIT`] unless its spec says otherwise) plus its
    /// compute time, each plus 1 s of slack for a loaded machine; calls during which the
    /// worker itself was paused or blocked are exempt. A call that never returned from a
    /// worker that finished is a hang.
    fn check_bounds(&self, r: &mut Report) {
        const SLACK: u64 = 1_000_000_000;
        let ms = 1_000_000;
        for h in &self.holds {
            let life = &self.workers[h.worker];
            let Some((_, _, wait, op)) = life.start else {
                continue;
            };
            let finished = life.end.is_some();
            let hung = match &h.err {
                // Given up on by the worker past its bound: say so, not just how long it took.
                Some((t, code)) if code == "hung" && !self.frozen(h.worker, h.inv, *t) => {
                    r.violation(
                        Rule::Bound,
                        format!(
                            "acquire of {} (wait {wait} ms, op timeout {op} ms) never returned: \
                             the worker gave up on it after {:.0} ms; its bound is {:.0} ms",
                            h.id,
                            t.saturating_sub(h.inv) as f64 / 1e6,
                            ((wait + 3 * op) * ms + SLACK) as f64 / 1e6
                        ),
                    );
                    true
                }
                _ => false,
            };
            let mut bound = |what: &str, from: u64, to: Option<u64>, limit: u64| match to {
                Some(to) => {
                    let took = to.saturating_sub(from);
                    if what == "acquire" {
                        r.max_acquire_ns = r.max_acquire_ns.max(took);
                    }
                    if took > limit + SLACK && !self.frozen(h.worker, from, to) {
                        r.violation(
                            Rule::Bound,
                            format!(
                                "{what} of {} took {:.0} ms; its bound is {:.0} ms",
                                h.id,
                                took as f64 / 1e6,
                                (limit + SLACK) as f64 / 1e6
                            ),
                        );
                    }
                }
                None if finished => {
                    r.violation(Rule::Bound, format!("{what} of {} never returned", h.id));
                }
                None => {}
            };
            let acquired = h.ok.map(|(t, _)| t).or(h.err.as_ref().map(|(t, _)| *t));
            if !hung {
                bound("acquire", h.inv, acquired, (wait + 3 * op) * ms);
            }
            if let Some((t, _)) = h.rel {
                bound(
                    "release",
                    t,
                    h.rel_done.as_ref().map(|(t, _)| *t),
                    2 * op * ms,
                );
            }
            // An update's read, compute and write together: the worker's update limit besides
            // its compute time.
            let compute = life.resource.as_ref().map_or(0, |(_, _, compute)| *compute);
            let limit = life
                .update_limit
                .unwrap_or(DEFAULT_UPDATE_LIMIT.as_millis() as u64);
            for w in &h.writes {
                bound(
                    "write",
                    w.inv,
                    w.outcome.map(|(t, _)| t),
                    (limit + compute) * ms,
                );
            }
        }
        for f in &self.faults {
            if f.kind == "hung" {
                r.violation(
                    Rule::Hang,
                    format!("worker {} did not finish in time and was killed", f.target),
                );
            }
        }
    }

    /// Every worker that ran to its end acquired at least once after the last fault healed
    /// (the service recovers by itself).
    fn check_liveness(&self, r: &mut Report) {
        let last_heal = self
            .faults
            .iter()
            .filter(|f| f.kind != "kill" && f.kind != "hung")
            .filter_map(|f| f.end)
            .max();
        let Some(healed) = last_heal else { return };
        for life in &self.workers {
            let Some(end) = life.end else { continue };
            if end <= healed {
                continue;
            }
            let recovered = self
                .holds_of(life.id)
                .any(|h| h.ok.is_some_and(|(t, _)| t > healed));
            if !recovered {
                r.violation(
                    Rule::Liveness,
                    format!(
                    "worker w{} acquired nothing in the {:.0} ms between the last fault's end and its own",
                    life.id,
                    (end - healed) as f64 / 1e6
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
