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
//! A grant over a turn left to `~<name>` counts as that waiter's: a turn whose window lapsed
//! and that a newcomer took (the engine's documented cost of a waiter too slow to take its
//! turn) is not told apart.
//!
//! The same events come from a Redis lock store's own order through `MONITOR`, which shows
//! every command a script runs, in the order the server ran them
//! ([`record_redis_order`]): a `ZADD NX` to a lock's queue is a join, a `ZREM` from it a leave,
//! a `SET` of the lock key a grant (a `SET NX` that the same script follows with a `GET` of the
//! key did not take it), each script run one transaction.

use std::collections::{BTreeMap, HashMap};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
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

/// The lines a Redis server's `MONITOR` showed, recorded from [`record_redis_order`] on.
pub struct RedisOrder {
    lines: Arc<Mutex<Vec<String>>>,
    reader: JoinHandle<()>,
}

/// Records the order a Redis server at `addr` runs its commands in, scripts' own commands
/// included, from the time this returns.
///
/// # Errors
/// When the server cannot be reached or refuses `MONITOR`.
pub async fn record_redis_order(addr: SocketAddr) -> Result<RedisOrder, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream
        .write_all(b"*1\r\n$7\r\nMONITOR\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    reader
        .read_line(&mut first)
        .await
        .map_err(|e| e.to_string())?;
    if first.trim_end() != "+OK" {
        return Err(format!("MONITOR answered {first:?}"));
    }
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let reader = tokio::spawn(async move {
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if let Some(text) = line.trim_end().strip_prefix('+') {
                        kept.lock()
                            .expect("the monitor's lines")
                            .push(text.to_owned());
                    }
                }
            }
        }
    });
    Ok(RedisOrder { lines, reader })
}

impl RedisOrder {
    /// Stops recording; the events of the lock keys the server saw, in its order.
    pub fn events(self) -> Vec<StoreEvent> {
        redis_events(&self.lines())
    }

    /// Stops recording; the lines the server showed, in its order.
    pub fn lines(self) -> Vec<String> {
        self.reader.abort();
        std::mem::take(&mut *self.lines.lock().expect("the monitor's lines"))
    }
}

/// The arguments of one `MONITOR` line (`<time> [<db> <source>] "cmd" "arg" ...`), and
/// whether a script ran it.
pub(super) fn monitor_args(line: &str) -> Option<(bool, Vec<String>)> {
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let scripted = line[open..close].ends_with(" lua");
    let mut args = Vec::new();
    let mut chars = line[close + 1..].chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        // The argument's bytes (`MONITOR` shows each byte outside printable ASCII as `\xNN`),
        // read back as UTF-8.
        let mut arg = Vec::new();
        let push = |arg: &mut Vec<u8>, c: char| {
            let mut utf8 = [0; 4];
            arg.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        };
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'x' => {
                        let hex: String = [chars.next()?, chars.next()?].iter().collect();
                        arg.push(u8::from_str_radix(&hex, 16).ok()?);
                    }
                    'n' => arg.push(b'\n'),
                    'r' => arg.push(b'\r'),
                    't' => arg.push(b'\t'),
                    other => push(&mut arg, other),
                },
                other => push(&mut arg, other),
            }
        }
        args.push(String::from_utf8_lossy(&arg).into_owned());
    }
    Some((scripted, args))
}

/// A lock's key of the Redis engine (`<prefix>:<kind>:{<name>}`): its kind and the lock it
/// belongs to (the prefix and name).
pub(super) fn redis_key(key: &str) -> Option<(&str, String)> {
    let (head, name) = key.rsplit_once(":{")?;
    let (prefix, kind) = head.rsplit_once(':')?;
    Some((kind, format!("{prefix}:{{{name}")))
}

/// The store's events in the lines of a Redis server's `MONITOR` (see the module docs).
pub fn redis_events(lines: &[String]) -> Vec<StoreEvent> {
    let mut events = Vec::new();
    let mut tx = 0_i64;
    let mut line_of: HashMap<String, std::collections::BTreeSet<String>> = HashMap::new();
    let mut owner: HashMap<String, String> = HashMap::new();
    // A `SET NX` of this transaction not yet known to have taken its lock.
    let mut pending: Option<(String, String)> = None;
    let push = |events: &mut Vec<StoreEvent>,
                tx: i64,
                event: &str,
                key: &str,
                who: &str,
                prev: Option<String>| {
        events.push(StoreEvent {
            seq: i64::try_from(events.len()).unwrap_or(i64::MAX) + 1,
            tx,
            event: event.to_owned(),
            key: key.to_owned(),
            who: who.to_owned(),
            prev,
        });
    };
    let settle = |events: &mut Vec<StoreEvent>,
                  owner: &mut HashMap<String, String>,
                  pending: &mut Option<(String, String)>,
                  tx: i64| {
        if let Some((key, value)) = pending.take() {
            owner.insert(key.clone(), value.clone());
            push(events, tx, "grant", &key, &value, None);
        }
    };
    for line in lines {
        let Some((scripted, args)) = monitor_args(line) else {
            continue;
        };
        if !scripted {
            settle(&mut events, &mut owner, &mut pending, tx);
            tx += 1;
            continue;
        }
        let Some(command) = args.first().map(|c| c.to_ascii_lowercase()) else {
            continue;
        };
        let Some((kind, key)) = args.get(1).and_then(|k| redis_key(k)) else {
            continue;
        };
        match (command.as_str(), kind) {
            // A `SET NX` followed by a look at what the key holds did not take it.
            ("get", "lock") if pending.as_ref().is_some_and(|(k, _)| *k == key) => {
                pending = None;
            }
            ("set", "lock") => {
                let value = args.get(2).cloned().unwrap_or_default();
                settle(&mut events, &mut owner, &mut pending, tx);
                if args.iter().any(|a| a.eq_ignore_ascii_case("nx")) {
                    pending = Some((key, value));
                } else {
                    let prev = owner.insert(key.clone(), value.clone());
                    push(&mut events, tx, "grant", &key, &value, prev);
                }
            }
            ("append", "lock") => {
                if let Some(value) = owner.get_mut(&key) {
                    value.push('+');
                }
            }
            ("del", "lock") => {
                settle(&mut events, &mut owner, &mut pending, tx);
                owner.remove(&key);
            }
            ("zadd", "queue") => {
                let nx = args.iter().any(|a| a.eq_ignore_ascii_case("nx"));
                if let (true, Some(name)) = (nx, args.last()) {
                    if line_of.entry(key.clone()).or_default().insert(name.clone()) {
                        push(&mut events, tx, "join", &key, name, None);
                    }
                }
            }
            ("zrem", "queue") => {
                settle(&mut events, &mut owner, &mut pending, tx);
                for name in &args[2..] {
                    if line_of.entry(key.clone()).or_default().remove(name) {
                        push(&mut events, tx, "leave", &key, name, None);
                    }
                }
            }
            _ => {}
        }
    }
    settle(&mut events, &mut owner, &mut pending, tx);
    events
}

/// The label in an owner token (`h1.<locker>.<ms>.<label>.<32 hex digits>`), if it has one.
pub(super) fn label_of(owner: &str) -> Option<&str> {
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

/// [`judge_fifo`], asserted: panics unless the store chose a waiter at least once and never let
/// a request overtake a waiter that joined its line first (naming each overtaking, and
/// `context` for the run). Returns how many choices were judged.
pub fn assert_store_fifo(events: &[StoreEvent], context: &str) -> usize {
    let judged = judge_fifo(events);
    assert!(
        judged.judged > 0,
        "no waiter was ever chosen: nothing judged ({context})"
    );
    assert!(
        judged.violations.is_empty(),
        "the store let requests overtake waiters that joined its line first ({context}):\n{}",
        judged.violations.join("\n")
    );
    judged.judged
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
    fn a_redis_monitor_shows_joins_leaves_and_grants_in_the_servers_order() {
        let lines: Vec<String> = [
            // a takes the free lock.
            r#"1.1 [0 127.0.0.1:1] "evalsha" "x""#.to_owned(),
            format!(r#"1.2 [0 lua] "SET" "p:lock:{{k}}" "{A}" "NX" "PX" "2000""#),
            r#"1.3 [0 lua] "INCRBY" "p:fence:{k}" "1""#.to_owned(),
            // b finds it taken and joins the line.
            r#"1.4 [0 127.0.0.1:2] "evalsha" "x""#.to_owned(),
            format!(r#"1.5 [0 lua] "SET" "p:lock:{{k}}" "{B}" "NX" "PX" "2000""#),
            r#"1.6 [0 lua] "GET" "p:lock:{k}""#.to_owned(),
            r#"1.7 [0 lua] "APPEND" "p:lock:{k}" "+""#.to_owned(),
            r#"1.8 [0 lua] "ZADD" "p:queue:{k}" "NX" "17" "b\x2dname""#.to_owned(),
            // a's release leaves the lock to b.
            r#"1.9 [0 127.0.0.1:1] "evalsha" "y""#.to_owned(),
            r#"2.0 [0 lua] "ZREM" "p:queue:{k}" "a-proc""#.to_owned(),
            r#"2.1 [0 lua] "ZREM" "p:queue:{k}" "b-name""#.to_owned(),
            r#"2.2 [0 lua] "SET" "p:lock:{k}" "~b-name" "PX" "200""#.to_owned(),
            // b takes its turn.
            r#"2.3 [0 127.0.0.1:2] "evalsha" "x""#.to_owned(),
            format!(r#"2.4 [0 lua] "SET" "p:lock:{{k}}" "{B}" "NX" "PX" "2000""#),
            r#"2.5 [0 lua] "GET" "p:lock:{k}""#.to_owned(),
            format!(r#"2.6 [0 lua] "SET" "p:lock:{{k}}" "{B}" "PX" "2000""#),
        ]
        .into();
        let events = redis_events(&lines);
        let shown: Vec<(i64, &str, &str, Option<&str>)> = events
            .iter()
            .map(|e| (e.tx, e.event.as_str(), e.who.as_str(), e.prev.as_deref()))
            .collect();
        let plus = format!("{A}+");
        assert_eq!(
            shown,
            [
                (1, "grant", A, None),
                (2, "join", "b-name", None),
                (3, "leave", "b-name", None),
                (3, "grant", "~b-name", Some(plus.as_str())),
                (4, "grant", B, Some("~b-name")),
            ]
        );
        assert!(events.iter().all(|e| e.key == "p:{k}"));
        let judged = judge_fifo(&events);
        assert!(judged.violations.is_empty(), "{:?}", judged.violations);
        // a's grant of the free lock, and the release's choice of b.
        assert_eq!(judged.judged, 2);
    }

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
