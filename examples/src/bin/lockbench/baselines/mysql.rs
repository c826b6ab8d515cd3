//! The MySQL baseline: the engine's own procedure calls sent raw by the same driver
//! (mysql_async), prepared, on as many connections of their own as the engine's pool holds,
//! their sessions set up as the engine's are (READ COMMITTED), used in turn:
//! an acquire is the engine's `CALL leasehold_acquire(...)`, a release its
//! `CALL leasehold_release(...)` (which leaves the lock to the process that waited longest, if
//! any, and appends to the wake log), with the arguments the engine gives them for a contender
//! that does not wait in line.
//!
//! It has no wake-ups (it would need the wake log's reader and the line of waiters, which is
//! what the library is): on a busy lock it polls, sleeping 1 ms between attempts, as the
//! PostgreSQL baseline does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};
use tokio::sync::Mutex;

use super::{bounded, token};
use crate::key_lock::{KeyLock, KeysAtOnce};

/// The engine's acquire and release, as its `store/mysql/sql.rs` sends them (the library does
/// not export them; a change there must be made here too, which the smoke test's ratio shows).
const ACQUIRE: &str = "CALL leasehold_acquire(?, ?, ?, ?, ?, ?, ?)";
const RELEASE: &str = "CALL leasehold_release(?, ?, ?, ?, ?)";
/// Several keys at once, as `sql.rs` sends them: `lock_all` of free keys, and a guard of
/// several keys given back; each batch as JSON, keys in order (see [`batch`]).
const ACQUIRE_ALL: &str = "CALL leasehold_acquire_all(?, ?)";
const RELEASE_ALL: &str = "CALL leasehold_release_all(?, ?, ?)";

/// How long a release leaves the lock to the next in line: the engine's (and PostgreSQL's)
/// window, taken from the library.
const YIELD_WINDOW: Duration = leasehold::postgres::statements::YIELD_WINDOW;

/// The raw side's name in the line of waiters (it never waits in line: it polls).
const NAME: &str = "raw-baseline-000";

/// As many connections as the engine's pool holds.
const CONNECTIONS: usize = 8;

/// How long the raw side sleeps when the lock is busy before it asks again.
const POLL: Duration = Duration::from_millis(1);

/// The raw statements' name in the report.
pub(crate) const MYSQL_RAW: &str = "raw CALL leasehold_acquire + leasehold_release (mysql_async)";

/// The name of several keys in one call ([`KeysAtOnce`]) in the report.
pub(crate) const MYSQL_KEYS_RAW: &str =
    "raw CALL leasehold_acquire_all + leasehold_release_all (mysql_async)";

/// Their name in the hot-key rows, where the polling shows.
pub(crate) const MYSQL_RAW_POLLING: &str =
    "raw CALL leasehold_acquire + leasehold_release (mysql_async), polling every 1 ms when busy \
     (no wake-ups)";

/// The raw lock: [`CONNECTIONS`] connections of its own, one call on each at a time (a MySQL
/// connection runs one statement at a time), taken in turn.
#[derive(Clone)]
pub(crate) struct MysqlRaw {
    conns: Arc<Vec<Mutex<Conn>>>,
    next: Arc<AtomicUsize>,
}

impl MysqlRaw {
    /// Connects; the schema must exist (a leasehold locker on the same database made it).
    pub(crate) async fn connect(url: &str) -> MysqlRaw {
        let opts = Opts::from_url(url).expect("a mysql:// URL");
        let opts = OptsBuilder::from_opts(opts)
            // The address given, as the engine connects (never the server's socket).
            .prefer_socket(false)
            .init(vec![
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            ]);
        let mut conns = Vec::new();
        for _ in 0..CONNECTIONS {
            let conn = Conn::new(opts.clone()).await.expect("raw connection");
            conns.push(Mutex::new(conn));
        }
        MysqlRaw {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The next connection in turn, once its call before ended.
    async fn conn(&self) -> tokio::sync::MutexGuard<'_, Conn> {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[at].lock().await
    }

    /// One attempt, with the library's default lease; the fence when granted.
    pub(crate) async fn try_lock(&self, key: &str, owner: &str) -> Option<i64> {
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
        let answer = self
            .conn()
            .await
            .exec_first::<(Option<i64>, Option<i64>), _, _>(
                ACQUIRE,
                (key, owner, lease_ms, 0i64, NAME, 0i64, false),
            )
            .await;
        match answer {
            Ok(row) => row.and_then(|(fence, _)| fence),
            // A lock wait or deadlock on the lock's rows: held, as the engine reads it.
            Err(mysql_async::Error::Server(e)) if [1205, 3572, 1213].contains(&e.code) => None,
            Err(e) => panic!("raw acquire: {e}"),
        }
    }

    /// Deletes the row if `owner` holds it (or leaves it to the longest waiter), and logs the
    /// wake-up.
    pub(crate) async fn unlock(&self, key: &str, owner: &str) {
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let _: Option<(Option<i64>,)> = self
            .conn()
            .await
            .exec_first(RELEASE, (key, owner, NAME, window_ms, key))
            .await
            .expect("raw release");
    }
}

/// An acquisition polls until the lock is granted, under a fresh owner token.
impl KeyLock for MysqlRaw {
    type Held<'a> = String;

    async fn acquire<'a>(&'a self, key: &'a str) -> String {
        let owner = token();
        while self.try_lock(key, &owner).await.is_none() {
            tokio::time::sleep(POLL).await;
        }
        owner
    }

    async fn release<'a>(&'a self, key: &'a str, owner: String) {
        self.unlock(key, &owner).await;
    }
}

/// Several free keys in one call, the engine's own `leasehold_acquire_all` (one acquire per
/// key, all or none), given back in one, its `leasehold_release_all`, with the batches written
/// as the engine writes them: the floor of ours on MariaDB, where `lock_all` of free keys is
/// that call.
impl KeysAtOnce for MysqlRaw {
    /// Their owner token (one per key, the same).
    type Held = String;

    async fn acquire_all<'a>(&'a self, keys: &'a [String]) -> String {
        let owner = token();
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis();
        let json = batch(keys, |key| {
            format!("\"{}\",\"{}\",0,{lease_ms},0", hex(key), hex(&owner))
        });
        let mut conn = self.conn().await;
        let answer: Option<(Option<String>, Option<i64>, Option<i64>)> = bounded(
            "the raw acquire of several keys",
            conn.exec_first(ACQUIRE_ALL, (json, NAME)),
        )
        .await
        .expect("raw acquire of several keys");
        assert!(
            answer.is_some_and(|(fences, _, _)| fences.is_some()),
            "the raw calls are measured on free keys only"
        );
        owner
    }

    async fn release_all<'a>(&'a self, keys: &'a [String], owner: String) {
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let json = batch(keys, |key| {
            format!("\"{}\",\"{}\",\"{}\"", hex(key), hex(&owner), hex(key))
        });
        let mut conn = self.conn().await;
        let _: Option<(Option<String>,)> = bounded(
            "the raw release of several keys",
            conn.exec_first(RELEASE_ALL, (json, NAME, window_ms)),
        )
        .await
        .expect("raw release of several keys");
    }
}

/// A batch as the engine sends it: a JSON array with one array per key, sorted by key (so that
/// two batches lock their rows in the same order), each made by `one`.
fn batch(keys: &[String], one: impl Fn(&str) -> String) -> String {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let items: Vec<String> = sorted.iter().map(|key| format!("[{}]", one(key))).collect();
    format!("[{}]", items.join(","))
}

/// Lowercase hex, as the engine writes keys and tokens into its batches.
fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}
