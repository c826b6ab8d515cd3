//! Whether a Redis lock store let readers pass waiting writers, judged by the order the server
//! ran the scripts' commands in (its `MONITOR`, [`record_redis_order`]) and by its own clock,
//! not by when a client logged its acquires.
//!
//! What the engine promises (`read_acquire.lua`): once a writer waits for a read-write lock,
//! new readers wait for it. A waiting writer is the store's record of it: its process's entry
//! in the lock's interest set (`ZADD P:interest:{K} <waits until, ms> <name>`, written by the
//! writer's attempt that found the lock taken). A reader is granted when a script adds its token to
//! the lock's readers (`ZADD P:readers:{K} <lease end> <token>`; a renewal is `ZADD XX`).
//!
//! The rule judged: no reader is granted while a writer waits in that order. A reader whose
//! request reached the server before the writer's is not held back, whatever the clients'
//! clocks say; one that reached it after is, however close the two were. A writer stops
//! waiting when the store grants it the lock (the key's value names its process: its token,
//! or `~<name>` when a release left the lock to it), when it withdraws (`withdraw.lua`: the
//! call's first command takes it out of the queue), or when its wait runs out on the server's
//! clock; a script that takes a writer out of the interest set otherwise (a release's
//! next-in-line bookkeeping gone wrong) does not end its wait here, so the readers it would let
//! in are caught.
//!
//! [`record_redis_order`]: super::record_redis_order

use std::collections::{BTreeMap, HashMap};

use super::store_order::{label_of, monitor_args, redis_key};

/// How far past a writer's "waits until" the server's clock must be for its interest to
/// count as lapsed at a reader's grant, in milliseconds: the scripts read the clock once per
/// call (`TIME`), and `MONITOR` stamps each command a little later than that.
const LAPSE_SLACK_MS: f64 = 5.0;

/// What the store's order shows of readers and waiting writers.
#[derive(Debug, Default)]
pub struct ReadersJudged {
    /// One line per reader granted while a writer's interest was live.
    pub passed: Vec<String>,
    /// Readers granted (each judged).
    pub readers: usize,
    /// Readers granted after a writer of their lock had waited and left the line.
    pub after_a_writer: usize,
    /// Readers' attempts the store held back for a waiting writer: a `read_acquire.lua` call
    /// that looked at the writers' interest (`ZRANGE P:interest:{K} -1 -1 WITHSCORES`) while a
    /// writer waited, and granted nothing (the scenario's premise).
    pub held_back: usize,
}

/// The server's time in milliseconds at the head of a `MONITOR` line (`<secs>.<micros> [...`).
fn line_ms(line: &str) -> Option<f64> {
    let head = line.split_whitespace().next()?;
    Some(head.parse::<f64>().ok()? * 1000.0)
}

/// The members and scores a `ZADD` names (after its options), as (member, score) pairs; and
/// whether it only updates members that exist (`XX`).
fn zadd_pairs(args: &[String]) -> (bool, Vec<(String, f64)>) {
    let mut rest = &args[2.min(args.len())..];
    let mut only_existing = false;
    while let Some(option) = rest.first() {
        match option.to_ascii_uppercase().as_str() {
            "XX" => only_existing = true,
            "NX" | "GT" | "LT" | "CH" | "INCR" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    let pairs = rest
        .chunks(2)
        .filter_map(|pair| match pair {
            [score, member] => Some((member.clone(), score.parse::<f64>().ok()?)),
            _ => None,
        })
        .collect();
    (only_existing, pairs)
}

/// The process (locker) a lock key's value names: an owner token's locker
/// (`h1.<locker>.…`), or the contender a release left the lock to (`~<name>`); none for
/// readers' `R`.
fn locker_of(value: &str) -> Option<&str> {
    if let Some(name) = value.strip_prefix('~') {
        return Some(name);
    }
    value.strip_prefix("h1.")?.split('.').next()
}

/// What one script call (one transaction) did to a lock, settled when it ends.
#[derive(Default)]
struct InCall {
    /// Its first command on the lock, when that was taking one contender out of the queue:
    /// `withdraw.lua`, a writer that stopped waiting.
    withdrawn: Option<String>,
    /// The process that held the lock when the call began.
    holder_before: Option<String>,
    /// Processes the call granted the lock to.
    granted: Vec<String>,
    /// A `SET NX` not yet known to have taken the lock (a `GET` of the key after it in the
    /// same call means it did not).
    pending: Option<String>,
    /// Writers the call took out of the interest set.
    removed: Vec<String>,
    /// Whether the call looked at the last waiting writer's interest, as a reader's attempt
    /// does, and whether it granted a reader.
    reader_looked: bool,
    reader_granted: bool,
}

/// One lock's state in the store's order.
#[derive(Default)]
struct LockSeen {
    /// The writers waiting: process name -> waits until (server ms).
    waiting: BTreeMap<String, f64>,
    /// The process that holds the lock, as its key's value names it.
    holder: Option<String>,
    /// Whether a writer that waited has left the line (granted or gone).
    writer_left: bool,
    /// Its recent lines, for the messages.
    recent: Vec<String>,
}

/// The writers of `seen` still waiting at `now` (server ms), with until when.
fn live(seen: &LockSeen, now: f64) -> impl Iterator<Item = (&String, f64)> {
    seen.waiting
        .iter()
        .map(|(name, until)| (name, *until))
        .filter(move |(_, until)| *until > now + LAPSE_SLACK_MS)
}

struct Judge {
    locks: HashMap<String, LockSeen>,
    call: HashMap<String, InCall>,
    now: f64,
    judged: ReadersJudged,
}

impl Judge {
    /// The call ended: its grants end their writers' wait; a writer it took out of the
    /// interest set left the line only when it was granted, withdrew, had held the lock (a
    /// release takes the releasing process out), or its wait had run out on the server's
    /// clock. Taken out otherwise, it still waits, as far as this judge is concerned.
    fn settle(&mut self) {
        for (lock, mut call) in self.call.drain() {
            let seen = self.locks.entry(lock).or_default();
            if call.reader_looked && !call.reader_granted && live(seen, self.now).next().is_some() {
                self.judged.held_back += 1;
            }
            if let Some(name) = call.pending.take() {
                seen.holder = Some(name.clone());
                call.granted.push(name);
            }
            for name in &call.granted {
                if seen.waiting.remove(name).is_some() {
                    seen.writer_left = true;
                }
            }
            for name in &call.removed {
                let Some(&until) = seen.waiting.get(name) else {
                    continue;
                };
                let left = call.withdrawn.as_ref() == Some(name)
                    || call.holder_before.as_ref() == Some(name)
                    || until <= self.now + LAPSE_SLACK_MS;
                if left {
                    seen.waiting.remove(name);
                    seen.writer_left = true;
                }
            }
        }
    }

    fn command(&mut self, line: &str, command: &str, kind: &str, lock: String, args: &[String]) {
        let seen = self.locks.entry(lock.clone()).or_default();
        seen.recent.push(line.to_owned());
        if seen.recent.len() > 40 {
            seen.recent.remove(0);
        }
        let first = !self.call.contains_key(&lock);
        let call = self.call.entry(lock.clone()).or_default();
        if first {
            call.holder_before = seen.holder.clone();
            if let ("zrem", "queue", [_, _, name]) = (command, kind, args) {
                call.withdrawn = Some(name.clone());
            }
        }
        match (command, kind) {
            ("set", "lock") => {
                let value = args.get(2).map_or("", String::as_str);
                if let Some(name) = call.pending.take() {
                    seen.holder = Some(name.clone());
                    call.granted.push(name);
                }
                let name = locker_of(value).map(str::to_owned);
                if args.iter().any(|a| a.eq_ignore_ascii_case("nx")) {
                    call.pending = name;
                } else {
                    seen.holder = name.clone();
                    call.granted.extend(name);
                }
            }
            ("get", "lock") => call.pending = None,
            ("del", "lock") => {
                if let Some(name) = call.pending.take() {
                    call.granted.push(name);
                }
                seen.holder = None;
            }
            ("zadd", "interest") => seen.waiting.extend(zadd_pairs(args).1),
            ("zrange", "interest") => {
                call.reader_looked |=
                    args[2..]
                        .iter()
                        .map(String::as_str)
                        .eq(["-1", "-1", "WITHSCORES"]);
            }
            ("zrem", "interest") => call.removed.extend(args[2..].iter().cloned()),
            ("del", "interest") => call.removed.extend(seen.waiting.keys().cloned()),
            ("zadd", "readers") => {
                let (renewal, pairs) = zadd_pairs(args);
                if !renewal {
                    call.reader_granted = true;
                    for (token, _) in pairs {
                        self.reader_granted(&lock, &token);
                    }
                }
            }
            _ => {}
        }
    }

    /// Judges a reader's grant against the writers waiting then.
    fn reader_granted(&mut self, lock: &str, token: &str) {
        let seen = &self.locks[lock];
        self.judged.readers += 1;
        self.judged.after_a_writer += usize::from(seen.writer_left);
        let live: Vec<String> = live(seen, self.now)
            .map(|(name, until)| format!("{name} (waits {:.0} ms more)", until - self.now))
            .collect();
        if !live.is_empty() {
            self.judged.passed.push(format!(
                "reader {} of `{lock}` granted while writers waited: {}; the server's last \
                 commands on the lock:\n  {}",
                label_of(token).unwrap_or(token),
                live.join(", "),
                seen.recent.join("\n  ")
            ));
        }
    }
}

/// Judges the lines of a Redis server's `MONITOR` (see the module docs).
pub fn judge_readers(lines: &[String]) -> ReadersJudged {
    let mut judge = Judge {
        locks: HashMap::new(),
        call: HashMap::new(),
        now: 0.0,
        judged: ReadersJudged::default(),
    };
    for line in lines {
        if let Some(t) = line_ms(line) {
            judge.now = t;
        }
        let Some((scripted, args)) = monitor_args(line) else {
            continue;
        };
        if !scripted {
            // A client's command: the script call before it has ended.
            judge.settle();
            continue;
        }
        let Some(command) = args.first().map(|c| c.to_ascii_lowercase()) else {
            continue;
        };
        let Some((kind, lock)) = args.get(1).and_then(|k| redis_key(k)) else {
            continue;
        };
        judge.command(line, &command, kind, lock, &args);
    }
    judge.settle();
    judge.judged
}

/// [`judge_readers`], asserted: panics unless the store held readers back for a waiting writer
/// and granted readers after one had waited (the scenario happened) and none was granted while a writer waited (naming the first
/// ones, and `context` for the run). Returns the judgment.
pub fn assert_readers_wait_for_writers(lines: &[String], context: &str) -> ReadersJudged {
    let judged = judge_readers(lines);
    assert!(
        judged.held_back > 0 && judged.after_a_writer > 0,
        "the scenario did not happen: the store held back {} reader attempts for a waiting \
         writer and granted {} readers after one had waited ({context}; {} readers)",
        judged.held_back,
        judged.after_a_writer,
        judged.readers
    );
    assert!(
        judged.passed.is_empty(),
        "the store granted {} reader(s) while a writer waited ({context}):\n{}",
        judged.passed.len(),
        judged.passed[..judged.passed.len().min(3)].join("\n")
    );
    judged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, args: &[&str]) -> String {
        let quoted: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
        format!("{t} [0 lua] {}", quoted.join(" "))
    }

    /// A client's script call: what follows is another call.
    fn call(t: &str) -> String {
        format!("{t} [0 127.0.0.1:5000] \"EVALSHA\" \"abc\" \"1\"")
    }

    const READER: &str = "h1.L.1.w1-r2.0123456789abcdef0123456789abcdef";
    const WRITER_A: &str = "h1.proc-a.1.w0-w1.0123456789abcdef0123456789abcdef";

    #[test]
    fn a_reader_granted_while_a_writer_waits_passed_it() {
        let lines = vec![
            call("999.900000"),
            line(
                "1000.000000",
                &["ZADD", "p:interest:{k}", "1000500", "proc-a"],
            ),
            call("1000.090000"),
            line("1000.100000", &["ZADD", "p:readers:{k}", "1000700", READER]),
        ];
        let judged = judge_readers(&lines);
        assert_eq!(judged.readers, 1);
        assert_eq!(judged.passed.len(), 1, "{judged:?}");
        assert!(judged.passed[0].contains("w1-r2"), "{}", judged.passed[0]);
    }

    #[test]
    fn readers_after_the_writer_was_granted_withdrew_or_lapsed_pass_nobody() {
        let lines = vec![
            // proc-a waits, then is granted (SET NX that took the lock, then its ZREMs).
            call("999.900000"),
            line(
                "1000.000000",
                &["ZADD", "p:interest:{k}", "1000500", "proc-a"],
            ),
            call("1000.005000"),
            line(
                "1000.006000",
                &["SET", "p:lock:{k}", WRITER_A, "NX", "PX", "600"],
            ),
            line("1000.006100", &["ZREM", "p:queue:{k}", "proc-a"]),
            line("1000.006200", &["ZREM", "p:interest:{k}", "proc-a"]),
            call("1000.010000"),
            line("1000.011000", &["DEL", "p:lock:{k}"]),
            call("1000.015000"),
            line("1000.020000", &["ZADD", "p:readers:{k}", "1000700", READER]),
            // proc-b waits and withdraws.
            call("1000.025000"),
            line(
                "1000.030000",
                &["ZADD", "p:interest:{k}", "1001000", "proc-b"],
            ),
            call("1000.035000"),
            line("1000.036000", &["ZREM", "p:queue:{k}", "proc-b"]),
            line("1000.036100", &["ZREM", "p:interest:{k}", "proc-b"]),
            call("1000.038000"),
            line(
                "1000.040000",
                &["ZADD", "p:readers:{k}", "XX", "1000800", READER],
            ),
            // proc-c's wait runs out on the server's clock; proc-d waits for another lock.
            call("1000.045000"),
            line(
                "1000.050000",
                &["ZADD", "p:interest:{k}", "1000100", "proc-c"],
            ),
            call("1000.195000"),
            line("1000.200000", &["ZADD", "p:readers:{k}", "1000900", READER]),
            call("1000.205000"),
            line(
                "1000.210000",
                &["ZADD", "p:interest:{j}", "1000900", "proc-d"],
            ),
            call("1000.215000"),
            line("1000.220000", &["ZADD", "p:readers:{k}", "1000900", READER]),
        ];
        let judged = judge_readers(&lines);
        assert!(judged.passed.is_empty(), "{judged:?}");
        assert_eq!((judged.readers, judged.after_a_writer), (3, 3));
    }

    /// A script that takes a waiting writer out of the interest set without granting it
    /// anything (a release's bookkeeping gone wrong) does not end its wait: the reader let in
    /// behind it passed it.
    #[test]
    fn a_writer_taken_out_of_the_line_without_its_grant_still_waits() {
        let lines = vec![
            call("999.900000"),
            line(
                "1000.000000",
                &["ZADD", "p:interest:{k}", "1000500", "proc-a"],
            ),
            call("1000.005000"),
            line("1000.006000", &["GET", "p:lock:{k}"]),
            line("1000.006100", &["DEL", "p:interest:{k}"]),
            call("1000.010000"),
            line("1000.020000", &["ZADD", "p:readers:{k}", "1000700", READER]),
        ];
        let judged = judge_readers(&lines);
        assert_eq!(judged.passed.len(), 1, "{judged:?}");
    }
}
