//! The wake log's reader, one task per locker with a connection of its own: while this
//! process has waiters it reads the rows that releases appended to `leasehold_wakes` every
//! [`READ_EVERY`], and wakes the waiters of each released lock; idle, it only checks its
//! connection now and then. It also runs the periodic sweep of dead rows, and after a lost
//! connection wakes every waiter once it is back.
//!
//! Auto-increment values are drawn when a row is inserted and become visible when its
//! transaction commits, so a row can appear behind rows with larger numbers. The reader keeps
//! the highest number it read and the numbers below it that it has not seen ("holes": a
//! transaction still running, or one rolled back, whose number is never used) for
//! [`late_commits`] after it first missed them, and asks for both each time: `seq > last OR seq
//! IN (holes)`, a range and a few point reads on the primary key, so a row committed late is
//! still read, once.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::sync::watch;
use tokio::time::Instant;

use super::conn::Shared;
use super::sql::{NOW_US, SWEEP, WAKES_KEPT};
use super::MysqlStore;
use crate::error::LockError;

/// How often the reader reads the wake log while this process has waiters: the longest a
/// waiter waits for a release beyond its commit, besides the round trip. One query per locker
/// each time, however many waiters it has (see the module docs of the engine for the cost).
pub(super) const READ_EVERY: Duration = Duration::from_millis(25);

/// How often the idle reader proves its connection is alive.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// How often each locker sweeps dead rows.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The most rows one read returns; more are read at once after it.
const READ_LIMIT: usize = 1000;

/// The most holes kept (the oldest go first).
const MAX_HOLES: usize = 10_000;

/// How long a hole (a number below the highest read, not seen yet) is asked for: a transaction
/// that drew it and has not committed is bounded by the operation timeout on the server (every
/// lock call), so twice that, and at least 2 s.
fn late_commits(op_timeout: Duration) -> Duration {
    (op_timeout * 2).max(Duration::from_secs(2))
}

/// Where the reader is in the log.
struct Cursor {
    last: u64,
    holes: BTreeMap<u64, Instant>,
}

/// The reader of the wake log. Ends with the store.
pub(super) async fn listen(shared: Weak<Shared>, up: watch::Sender<bool>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(store) = shared.upgrade() else {
            return;
        };
        let opened = store.open().await;
        drop(store);
        let mut conn = match opened {
            Ok(conn) => conn,
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        up.send_replace(true);
        let ended = read(&shared, &mut conn).await;
        up.send_replace(false);
        drop(conn);
        if let Some(store) = shared.upgrade() {
            store.wakes.deactivate();
            // Releases while nobody read were missed: everyone looks again.
            store.wakes.wake_all();
        }
        if ended {
            return;
        }
    }
}

/// Reads while the connection answers: false when it failed, true when the store is gone.
async fn read(shared: &Weak<Shared>, conn: &mut mysql_async::Conn) -> bool {
    let mut cursor: Option<Cursor> = None;
    let mut check = tokio::time::interval(CHECK_EVERY);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let Some(store) = shared.upgrade() else {
            return true;
        };
        let op = store.settings.op_timeout;
        let reading = store.wakes.keep_reading();
        if !reading {
            cursor = None;
        }
        drop(store);
        let wanted = async {
            if let Some(store) = shared.upgrade() {
                store.wakes.wanted.notified().await
            }
        };
        // A subscription waiting for the starting point is served at once.
        let pause = match cursor {
            Some(_) => READ_EVERY,
            None => Duration::ZERO,
        };
        tokio::select! {
            _ = wanted, if !reading => continue,
            _ = tokio::time::sleep(pause), if reading => {
                let Some(store) = shared.upgrade() else { return true };
                let read = match cursor.as_mut() {
                    None => start(conn, op).await.map(|c| {
                        cursor = Some(c);
                        store.wakes.activate();
                    }),
                    Some(cursor) => read_new(conn, cursor, &store).await,
                };
                if read.is_err() {
                    return false;
                }
            }
            _ = check.tick(), if !reading => {
                let alive = tokio::time::timeout(op, conn.query_drop("SELECT 1")).await;
                if !matches!(alive, Ok(Ok(()))) {
                    return false;
                }
            }
            _ = sweep.tick() => {
                // Best effort: the next sweep, or an acquirer, takes what this one left.
                let swept = tokio::time::timeout(
                    op,
                    conn.exec_drop(SWEEP, (WAKES_KEPT.as_millis() as i64,)),
                )
                .await;
                match swept {
                    Ok(Ok(())) => {}
                    Ok(Err(mysql_async::Error::Server(e))) => {
                        tracing::debug!(error = %e, "the sweep of dead lock rows failed");
                        // Stopped midway (the server's statement bound), it may have left its
                        // transaction open, holding a guard row: end it.
                        let ended = tokio::time::timeout(op, conn.query_drop("ROLLBACK")).await;
                        if !matches!(ended, Ok(Ok(()))) {
                            return false;
                        }
                    }
                    _ => return false,
                }
            }
        }
    }
}

/// The starting point: the highest number now, and the numbers missing among the rows of
/// the last [`late_commits`] (transactions that may still commit).
async fn start(conn: &mut mysql_async::Conn, op: Duration) -> Result<Cursor, LockError> {
    let late_us = late_commits(op).as_micros() as i64;
    let work = async {
        let last: Option<u64> = conn
            .query_first("SELECT COALESCE(MAX(seq), 0) FROM leasehold_wakes")
            .await?;
        let recent: Vec<u64> = conn
            .exec(
                format!("SELECT seq FROM leasehold_wakes WHERE at >= {NOW_US} - ? ORDER BY seq"),
                (late_us,),
            )
            .await?;
        Ok::<_, mysql_async::Error>((last.unwrap_or(0), recent))
    };
    let (last, recent) = bounded(op, work).await?;
    let mut cursor = Cursor {
        last,
        holes: BTreeMap::new(),
    };
    if let Some(&first) = recent.first() {
        let seen: HashSet<u64> = recent.iter().copied().collect();
        let now = Instant::now();
        for seq in (first..=last).filter(|s| !seen.contains(s)).take(MAX_HOLES) {
            cursor.holes.insert(seq, now);
        }
    }
    Ok(cursor)
}

/// Reads the rows after the cursor and its holes, wakes their waiters, and moves the cursor.
async fn read_new(
    conn: &mut mysql_async::Conn,
    cursor: &mut Cursor,
    store: &Shared,
) -> Result<(), LockError> {
    let op = store.settings.op_timeout;
    let now = Instant::now();
    let late = late_commits(op);
    cursor
        .holes
        .retain(|_, first| now.duration_since(*first) < late);
    loop {
        let mut sql = format!(
            "SELECT seq, wake, to_name FROM leasehold_wakes WHERE seq > {}",
            cursor.last
        );
        if !cursor.holes.is_empty() {
            sql.push_str(" OR seq IN (");
            for (i, seq) in cursor.holes.keys().enumerate() {
                if i > 0 {
                    sql.push(',');
                }
                sql.push_str(&seq.to_string());
            }
            sql.push(')');
        }
        sql.push_str(&format!(" ORDER BY seq LIMIT {READ_LIMIT}"));
        let rows: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = bounded(op, conn.query(sql)).await?;
        let full = rows.len() == READ_LIMIT;
        let mut expected = cursor.last + 1;
        for (seq, wake, to) in &rows {
            if cursor.holes.remove(seq).is_none() && *seq > cursor.last {
                for hole in expected..*seq {
                    cursor.holes.insert(hole, now);
                }
                expected = seq + 1;
                cursor.last = *seq;
            }
            let to = to
                .as_deref()
                .map(|name| Arc::from(String::from_utf8_lossy(name).as_ref()));
            store.wakes.wake(wake, to);
        }
        while cursor.holes.len() > MAX_HOLES {
            cursor.holes.pop_first();
        }
        if !full {
            return Ok(());
        }
    }
}

/// A read on the reader's connection, bounded by the operation timeout.
async fn bounded<T>(
    op: Duration,
    work: impl std::future::Future<Output = Result<T, mysql_async::Error>>,
) -> Result<T, LockError> {
    match tokio::time::timeout(op, work).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(LockError::unavailable(
            format!("the wake log could not be read: {e}"),
            Some(Box::new(e)),
        )),
        Err(_) => Err(LockError::unavailable(
            "the wake log was not read in time",
            None,
        )),
    }
}

impl MysqlStore {
    /// Waits until the reader's connection is up, for `limit` at most.
    pub(super) async fn wait_reader(&self, limit: Duration) -> Result<(), LockError> {
        let mut up = self.reader_up.clone();
        let ok = tokio::time::timeout(limit, up.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok());
        match ok {
            true => Ok(()),
            false => Err(LockError::unavailable(
                format!(
                    "MySQL at {} did not let this locker open its wake log's reader within \
                     {limit:?}",
                    self.shared.shown
                ),
                None,
            )),
        }
    }
}
