//! The order a PostgreSQL lock store saw its fair requests in, for judging first come, first
//! served without a client's stopwatch: triggers on the engine's tables record, in one
//! sequence the server hands out, every waiter that joins or leaves a lock's line
//! (`leasehold_waiters`) and every change of a lock's owner (`leasehold_locks`), each with the
//! transaction it happened in and the owner before. The store chooses who goes next in one of
//! two ways: a release leaves the lock to the waiter that waited longest (the owner becomes
//! `~<name>`, the waiter leaving the line in that transaction), or a waiter takes a free lock
//! and leaves the line in the transaction of its grant. An owner token's label is the hold's
//! id (the history worker labels its acquires with [`holder_label`]), which names the holds.
//!
//! The rule judged: when the store chooses a waiter, no waiter still in the line joined it
//! before the chosen one did; a request granted without waiting in the line while others wait
//! there overtook them all. A waiter that left the line without its grant (it stopped
//! waiting, or did not take a turn left to it in time and went to the back) keeps no place.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::NoTls;

/// The label a hold's acquire carries in its owner token: its id, dots made dashes (the
/// token's own separator is the dot).
pub fn holder_label(hold: &str) -> String {
    hold.replace('.', "-")
}

/// The triggers and their log, installed once the engine's schema exists (a locker built on
/// the database first makes it).
const INSTALL: &str = "
CREATE TABLE IF NOT EXISTS test_store_order (
    seq   bigserial PRIMARY KEY,
    tx    bigint NOT NULL DEFAULT txid_current(),
    event text   NOT NULL,
    key   text   NOT NULL,
    who   text   NOT NULL,
    prev  text
);
CREATE OR REPLACE FUNCTION test_log_waiters() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO test_store_order (event, key, who) VALUES ('join', NEW.key, NEW.name);
    ELSE
        INSERT INTO test_store_order (event, key, who) VALUES ('leave', OLD.key, OLD.name);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION test_log_grants() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.owner IS DISTINCT FROM OLD.owner THEN
        INSERT INTO test_store_order (event, key, who, prev)
            VALUES ('grant', NEW.key, NEW.owner, CASE WHEN TG_OP = 'UPDATE' THEN OLD.owner END);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS test_log_waiters ON leasehold_waiters;
CREATE TRIGGER test_log_waiters AFTER INSERT OR DELETE ON leasehold_waiters
    FOR EACH ROW EXECUTE FUNCTION test_log_waiters();
DROP TRIGGER IF EXISTS test_log_grants ON leasehold_locks;
CREATE TRIGGER test_log_grants AFTER INSERT OR UPDATE ON leasehold_locks
    FOR EACH ROW EXECUTE FUNCTION test_log_grants();
";

/// One event the store recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreEvent {
    /// Its place in the store's order.
    pub seq: i64,
    /// The transaction it happened in.
    pub tx: i64,
    /// `join`, `leave` or `grant`.
    pub event: String,
    /// The lock's stored key.
    pub key: String,
    /// The waiter's name (`join`, `leave`) or the new owner (`grant`).
    pub who: String,
    /// The owner before a `grant` (none for a new row).
    pub prev: Option<String>,
}

/// Records the store's order on the database at `url` from now on.
///
/// # Errors
/// When the database cannot be reached, or has no lock schema yet.
pub async fn record_store_order(url: &str) -> Result<(), String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    client
        .batch_execute(INSTALL)
        .await
        .map_err(|e| e.to_string())
}

/// Every event the store recorded, in its order.
///
/// # Errors
/// When the database cannot be reached, or nothing was recorded there.
pub async fn store_order(url: &str) -> Result<Vec<StoreEvent>, String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT seq, tx, event, key, who, prev FROM test_store_order ORDER BY seq",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|r| StoreEvent {
            seq: r.get(0),
            tx: r.get(1),
            event: r.get(2),
            key: r.get(3),
            who: r.get(4),
            prev: r.get(5),
        })
        .collect())
}

/// The label in an owner token (`h1.<locker>.<ms>.<label>.<32 hex digits>`), if it has one.
fn label_of(owner: &str) -> Option<&str> {
    let rest = owner.strip_prefix("h1.")?;
    let body = rest.strip_suffix('+').unwrap_or(rest);
    let body = body.get(..body.len().checked_sub(33)?)?;
    let mut parts = body.splitn(3, '.');
    let (_locker, _ms) = (parts.next()?, parts.next()?);
    parts.next().filter(|l| !l.is_empty())
}

/// What the store's order shows of first come, first served: the grants that overtook a
/// request still waiting in the line, each named by the holds' labels, and how many grants
/// of waiting requests it judged.
#[derive(Debug, Default)]
pub struct FifoJudged {
    /// One line per overtaking grant.
    pub violations: Vec<String>,
    /// Grants of requests that had waited in the line.
    pub judged: usize,
}

/// Judges the store's order (see the module docs).
pub fn judge_fifo(events: &[StoreEvent]) -> FifoJudged {
    let mut judged = FifoJudged::default();
    // Per key, the line: waiter name -> the seq it joined at; and the last join of each
    // name, which outlives its leaving (the chosen waiter leaves before it is granted).
    let mut lines: BTreeMap<&str, BTreeMap<&str, i64>> = BTreeMap::new();
    let mut joined: HashMap<(&str, &str), i64> = HashMap::new();
    // Per key, the waiters that left in each transaction (the grant's own leave).
    let mut left_in: HashMap<(i64, &str), &str> = HashMap::new();
    // Per key and name, the hold it was granted as, once known (for the messages).
    let mut names: HashMap<(&str, &str), String> = HashMap::new();
    for e in events {
        let key = e.key.as_str();
        let line = lines.entry(key).or_default();
        match e.event.as_str() {
            "join" => {
                line.insert(e.who.as_str(), e.seq);
                joined.insert((key, e.who.as_str()), e.seq);
            }
            "leave" => {
                line.remove(e.who.as_str());
                left_in.insert((e.tx, key), e.who.as_str());
            }
            "grant" => {
                let prev = e.prev.as_deref().unwrap_or("");
                if let Some(chosen) = e.who.strip_prefix('~') {
                    // A release left the lock to `chosen`: the store's choice.
                    let at = joined.get(&(key, chosen)).copied();
                    judge(&mut judged, line, &names, key, e.seq, chosen, at, None);
                } else if e.who.starts_with("h1.") {
                    let label = label_of(&e.who).unwrap_or("?").to_owned();
                    if let Some(chosen) = prev.strip_prefix('~') {
                        // The chosen waiter took its turn: judged when it was chosen.
                        names.insert((key, chosen), label);
                    } else if let Some(&chosen) = left_in.get(&(e.tx, key)) {
                        // A waiter took a free lock and left the line with it.
                        names.insert((key, chosen), label.clone());
                        let at = joined.get(&(key, chosen)).copied();
                        judge(
                            &mut judged,
                            line,
                            &names,
                            key,
                            e.seq,
                            chosen,
                            at,
                            Some(&label),
                        );
                    } else {
                        // Granted without waiting in the line (a free lock, or one whose holder's
                        // lease ran out): it overtook whoever waits there.
                        judge(
                            &mut judged,
                            line,
                            &names,
                            key,
                            e.seq,
                            "",
                            Some(e.seq),
                            Some(&label),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    judged
}

/// Judges one choice of the store: `chosen` (joined the line at `at`) goes next; every waiter
/// still in the line that joined before it was overtaken.
#[allow(clippy::too_many_arguments)]
fn judge(
    judged: &mut FifoJudged,
    line: &BTreeMap<&str, i64>,
    names: &HashMap<(&str, &str), String>,
    key: &str,
    seq: i64,
    chosen: &str,
    at: Option<i64>,
    label: Option<&str>,
) {
    let Some(at) = at else { return };
    judged.judged += 1;
    let shown = label.map_or_else(|| format!("waiter {chosen}"), str::to_owned);
    for (&other, &joined) in line {
        if other == chosen || joined >= at {
            continue;
        }
        let who = names
            .get(&(key, other))
            .cloned()
            .unwrap_or_else(|| format!("waiter {other}"));
        judged.violations.push(format!(
            "on {key}: {shown} went next (store event {seq}) while {who}, which joined the \
             line before it, still waited"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: i64, tx: i64, event: &str, who: &str) -> StoreEvent {
        StoreEvent {
            seq,
            tx,
            event: event.into(),
            key: "k".into(),
            who: who.into(),
            prev: None,
        }
    }

    fn took(seq: i64, tx: i64, who: &str, prev: &str) -> StoreEvent {
        StoreEvent {
            prev: Some(prev.into()),
            ..ev(seq, tx, "grant", who)
        }
    }

    const A: &str = "h1.0123456789abcdef.1700000000000.0-1-3.0123456789abcdef0123456789abcdef";
    const B: &str = "h1.0123456789abcdef.1700000000000.1-0-7.0123456789abcdef0123456789abcdef";

    #[test]
    fn labels_come_out_of_owner_tokens() {
        assert_eq!(label_of(A), Some("0-1-3"));
        assert_eq!(label_of(&format!("{A}+")), Some("0-1-3"));
        assert_eq!(label_of("~somebody"), None);
        assert_eq!(holder_label("0.1.3"), "0-1-3");
    }

    #[test]
    fn a_grant_in_line_order_passes_and_one_that_overtakes_is_named() {
        // a joins, then b; a is granted (leaving in its grant's transaction), then b.
        let fair = [
            ev(1, 10, "join", "a"),
            ev(2, 11, "join", "b"),
            ev(3, 12, "leave", "a"),
            ev(4, 12, "grant", A),
            ev(5, 13, "leave", "b"),
            ev(6, 13, "grant", B),
        ];
        let judged = judge_fifo(&fair);
        assert!(judged.violations.is_empty(), "{:?}", judged.violations);
        assert_eq!(judged.judged, 2);

        // b is granted while a, which joined first, still waits.
        let unfair = [
            ev(1, 10, "join", "a"),
            ev(2, 11, "join", "b"),
            ev(3, 12, "leave", "b"),
            ev(4, 12, "grant", B),
        ];
        let judged = judge_fifo(&unfair);
        assert_eq!(judged.violations.len(), 1, "{:?}", judged.violations);
        assert!(
            judged.violations[0].contains("1-0-7"),
            "{:?}",
            judged.violations
        );

        // A release leaves the lock to the waiter that joined first: fine; to a later one: not.
        let handed = [
            ev(1, 10, "join", "a"),
            ev(2, 11, "join", "b"),
            ev(3, 12, "leave", "a"),
            took(4, 12, "~a", B),
            took(5, 13, A, "~a"),
        ];
        assert!(judge_fifo(&handed).violations.is_empty());
        let skipped = [
            ev(1, 10, "join", "a"),
            ev(2, 11, "join", "b"),
            ev(3, 12, "leave", "b"),
            took(4, 12, "~b", A),
            took(5, 13, B, "~b"),
        ];
        assert_eq!(judge_fifo(&skipped).violations.len(), 1);
        // A request that never queued takes the lock while a waiter waits: it overtook it.
        let barged = [ev(1, 10, "join", "a"), took(2, 11, B, "")];
        assert_eq!(judge_fifo(&barged).violations.len(), 1);

        // A waiter that left without its grant keeps no place.
        let left = [
            ev(1, 10, "join", "a"),
            ev(2, 11, "join", "b"),
            ev(3, 12, "leave", "a"),
            ev(4, 13, "leave", "b"),
            ev(5, 13, "grant", B),
        ];
        assert!(judge_fifo(&left).violations.is_empty());
    }
}
