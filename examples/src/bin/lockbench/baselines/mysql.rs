//! The MySQL baseline: the engine's own procedure calls sent raw by the same driver
//! (mysql_async), prepared, on a pool of connections of their own as large as the engine's:
//! an acquire is the engine's `CALL leasehold_acquire(...)`, a release its
//! `CALL leasehold_release(...)` (which leaves the lock to the process that waited longest, if
//! any, and appends to the wake log), with the arguments the engine gives them for a contender
//! that does not wait in line.
//!
//! It has no wake-ups (it would need the wake log's reader and the line of waiters, which is
//! what the library is): on a busy lock it polls, sleeping 1 ms between attempts, as the
//! PostgreSQL baseline does.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

use super::token;
use crate::key_lock::KeyLock;

/// The engine's acquire and release, as its `store/mysql/sql.rs` sends them (the library does
/// not export them; a change there must be made here too, which the smoke test's ratio shows).
const ACQUIRE: &str = "CALL leasehold_acquire(?, ?, ?, ?, ?, ?, ?)";
const RELEASE: &str = "CALL leasehold_release(?, ?, ?, ?, ?)";

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
pub(crate) const MYSQL_RAW: &str =
    "raw CALL leasehold_acquire + leasehold_release (mysql_async)";

/// Their name in the hot-key rows, where the polling shows.
pub(crate) const MYSQL_RAW_POLLING: &str =
    "raw CALL leasehold_acquire + leasehold_release (mysql_async), polling every 1 ms when busy \
     (no wake-ups)";

/// The raw lock: a pool of [`CONNECTIONS`] connections of its own.
#[derive(Clone)]
pub(crate) struct MysqlRaw {
    pool: Pool,
}

impl MysqlRaw {
    /// Connects; the schema must exist (a leasehold locker on the same database made it).
    pub(crate) async fn connect(url: &str) -> MysqlRaw {
        let opts = Opts::from_url(url).expect("a mysql:// URL");
        let constraints = PoolConstraints::new(0, CONNECTIONS).expect("0 <= 8");
        let opts = OptsBuilder::from_opts(opts)
            .prefer_socket(false)
            .pool_opts(PoolOpts::default().with_constraints(constraints));
        let raw = MysqlRaw {
            pool: Pool::new(opts),
        };
        // One connection opened now, so the first measured cycle does not pay for it.
        drop(raw.pool.get_conn().await.expect("raw connection"));
        raw
    }

    /// One attempt, with the library's default lease; the fence when granted.
    async fn try_lock(&self, key: &str, owner: &str) -> Option<i64> {
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
        let mut conn = self.pool.get_conn().await.expect("raw connection");
        let row: Option<(Option<i64>, Option<i64>)> = conn
            .exec_first(ACQUIRE, (key, owner, lease_ms, 0i64, NAME, 0i64, false))
            .await
            .expect("raw acquire");
        row.and_then(|(fence, _)| fence)
    }

    /// Deletes the row if `owner` holds it (or leaves it to the longest waiter), and logs the
    /// wake-up.
    async fn unlock(&self, key: &str, owner: &str) {
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let mut conn = self.pool.get_conn().await.expect("raw connection");
        let _: Option<(Option<i64>,)> = conn
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
