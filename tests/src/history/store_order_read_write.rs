//! Whether a Redis lock store let readers pass waiting writers, judged by the order the server
//! ran the scripts' commands in (its `MONITOR`, [`record_redis_order`]) and by its own clock,
//! not by when a client logged its acquires.
//!
//! What the engine promises (`read_acquire.lua`): once a writer waits for a read-write lock,
//! new readers wait for it. A waiting writer is the store's record of it: its process's entry
//! in the lock's interest set (`ZADD P:interest:{K} <waits until, ms> <name>`, written by the
//! writer's attempt that found the lock taken), live from that command until the writer
//! leaves it (`ZREM`: granted, stopped waiting, or passed over as gone) or the server's clock
//! passes the time it said it waits until. A reader is granted when a script adds its token to
//! the lock's readers (`ZADD P:readers:{K} <lease end> <token>`; a renewal is `ZADD XX`).
//!
//! The rule judged: no reader is granted while a writer's interest is live in that order. A
//! reader whose request reached the server before the writer's is not held back, whatever the
//! clients' clocks say; one that reached it after is, however close the two were.
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
    /// Readers granted after a writer of their lock had waited and left the line: the readers a
    /// waiting writer could have held back (the scenario's premise).
    pub after_a_writer: usize,
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

/// Judges the lines of a Redis server's `MONITOR` (see the module docs).
pub fn judge_readers(lines: &[String]) -> ReadersJudged {
    let mut judged = ReadersJudged::default();
    // Per lock: the writers' interest (process name -> waits until, server ms).
    let mut interest: HashMap<String, BTreeMap<String, f64>> = HashMap::new();
    // Per lock: whether a writer's interest ever left it (granted or gone).
    let mut writer_left: HashMap<String, bool> = HashMap::new();
    // Per lock: its recent lines, for the messages.
    let mut recent: HashMap<String, Vec<String>> = HashMap::new();
    let mut now = 0.0_f64;
    for line in lines {
        if let Some(t) = line_ms(line) {
            now = t;
        }
        let Some((scripted, args)) = monitor_args(line) else {
            continue;
        };
        if !scripted {
            continue;
        }
        let Some(command) = args.first().map(|c| c.to_ascii_lowercase()) else {
            continue;
        };
        let Some((kind, lock)) = args.get(1).and_then(|k| redis_key(k)) else {
            continue;
        };
        let seen = recent.entry(lock.clone()).or_default();
        seen.push(line.clone());
        if seen.len() > 40 {
            seen.remove(0);
        }
        match (command.as_str(), kind) {
            ("zadd", "interest") => {
                let (_, pairs) = zadd_pairs(&args);
                interest.entry(lock).or_default().extend(pairs);
            }
            ("zrem", "interest") => {
                let waiting = interest.entry(lock.clone()).or_default();
                for name in &args[2..] {
                    if waiting.remove(name).is_some() {
                        writer_left.insert(lock.clone(), true);
                    }
                }
            }
            ("del", "interest") => {
                interest.remove(&lock);
                writer_left.insert(lock, true);
            }
            ("zadd", "readers") => {
                let (only_existing, pairs) = zadd_pairs(&args);
                if only_existing {
                    continue; // a renewal
                }
                for (token, _) in pairs {
                    judged.readers += 1;
                    if writer_left.get(&lock).copied().unwrap_or(false) {
                        judged.after_a_writer += 1;
                    }
                    let live: Vec<String> = interest
                        .get(&lock)
                        .into_iter()
                        .flatten()
                        .filter(|(_, until)| **until > now + LAPSE_SLACK_MS)
                        .map(|(name, until)| format!("{name} (waits {:.0} ms more)", until - now))
                        .collect();
                    if !live.is_empty() {
                        judged.passed.push(format!(
                            "reader {} of `{lock}` granted while writers waited: {}; the \
                             server's last commands on the lock:\n  {}",
                            label_of(&token).unwrap_or(&token),
                            live.join(", "),
                            recent.get(&lock).map_or(String::new(), |l| l.join("\n  "))
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    judged
}

/// [`judge_readers`], asserted: panics unless readers were granted after a writer had waited
/// (the scenario happened) and none was granted while a writer waited (naming the first
/// ones, and `context` for the run). Returns the judgment.
pub fn assert_readers_wait_for_writers(lines: &[String], context: &str) -> ReadersJudged {
    let judged = judge_readers(lines);
    assert!(
        judged.after_a_writer > 0,
        "no reader was granted after a writer had waited: nothing judged ({context}; {} \
         readers)",
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

    const READER: &str = "h1.L.1.w1-r2.0123456789abcdef0123456789abcdef";

    #[test]
    fn a_reader_granted_while_a_writer_waits_passed_it() {
        let lines = vec![
            line(
                "1000.000000",
                &["ZADD", "p:interest:{k}", "1000500", "proc-a"],
            ),
            line("1000.100000", &["ZADD", "p:readers:{k}", "1000700", READER]),
        ];
        let judged = judge_readers(&lines);
        assert_eq!(judged.readers, 1);
        assert_eq!(judged.passed.len(), 1, "{judged:?}");
        assert!(judged.passed[0].contains("w1-r2"), "{}", judged.passed[0]);
    }

    #[test]
    fn readers_after_the_writer_left_or_lapsed_or_renewing_pass_nobody() {
        let lines = vec![
            line(
                "1000.000000",
                &["ZADD", "p:interest:{k}", "1000500", "proc-a"],
            ),
            line("1000.010000", &["ZREM", "p:interest:{k}", "proc-a"]),
            line("1000.020000", &["ZADD", "p:readers:{k}", "1000700", READER]),
            line(
                "1000.030000",
                &["ZADD", "p:interest:{k}", "1000100", "proc-b"],
            ),
            line(
                "1000.040000",
                &["ZADD", "p:readers:{k}", "XX", "1000800", READER],
            ),
            line("1000.200000", &["ZADD", "p:readers:{k}", "1000900", READER]),
            line(
                "1000.210000",
                &["ZADD", "p:interest:{j}", "1000900", "proc-c"],
            ),
            line("1000.220000", &["ZADD", "p:readers:{k}", "1000900", READER]),
        ];
        let judged = judge_readers(&lines);
        assert!(judged.passed.is_empty(), "{judged:?}");
        assert_eq!((judged.readers, judged.after_a_writer), (3, 3));
    }
}
