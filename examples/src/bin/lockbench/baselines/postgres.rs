//! The PostgreSQL baseline: the engine's own statements sent raw by the same driver
//! (tokio-postgres), prepared, on connections of their own: an acquire is the engine's
//! `leasehold_acquire(...)`, a release its `leasehold_release(...)` (which leaves the lock to
//! the process that waited longest, if any, and notifies), with the same arguments the engine
//! gives them for a contender that does not wait in line.
//!
//! It has no wake-ups (it would need a listening connection and a table of waiters, which is
//! what the library is): on a busy lock it polls, sleeping 1 ms between attempts, as the Redis
//! polling loop does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

// The engine's own statements and their parameter types, and how long its release leaves the
// lock to the next in line: taken from the library, so that they cannot drift apart.
use leasehold::postgres::statements::{
    ACQUIRE, ACQUIRE_ALL, ACQUIRE_ALL_TYPES, ACQUIRE_TYPES, RELEASE, RELEASE_ALL,
    RELEASE_ALL_TYPES, RELEASE_TYPES, YIELD_WINDOW,
};
use leasehold::postgres::tokio_postgres as pg;

use super::{bounded, token};
use crate::key_lock::{KeyLock, KeysAtOnce};

/// The raw side's name in the line of waiters (it never waits in line: it polls).
const NAME: &str = "raw-baseline-000";

/// As many connections as the engine shares among its lock calls (it pipelines concurrent
/// statements on them; so does the raw side, round robin).
const CONNECTIONS: usize = 4;

/// How long the raw side sleeps when the lock is busy before it asks again.
const POLL: Duration = Duration::from_millis(1);

/// The raw statements' name in the report.
pub(crate) const POSTGRES_RAW: &str = "raw leasehold_acquire + leasehold_release (tokio-postgres)";

/// The name of several keys in one statement ([`KeysAtOnce`]) in the report.
pub(crate) const POSTGRES_KEYS_RAW: &str =
    "raw leasehold_acquire_all + leasehold_release_all (tokio-postgres)";

/// Their name in the hot-key rows, where the polling shows.
pub(crate) const POSTGRES_RAW_POLLING: &str =
    "raw leasehold_acquire + leasehold_release (tokio-postgres), polling every 1 ms when busy \
     (no wake-ups)";

/// One raw connection with the statements prepared: a lock's acquire and release, and those of
/// several keys at once.
struct RawConn {
    client: pg::Client,
    acquire: pg::Statement,
    release: pg::Statement,
    acquire_all: pg::Statement,
    release_all: pg::Statement,
    driver: tokio::task::AbortHandle,
}

impl Drop for RawConn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// The raw lock: [`CONNECTIONS`] connections of its own, used in turn.
#[derive(Clone)]
pub(crate) struct PostgresRaw {
    conns: Arc<Vec<RawConn>>,
    next: Arc<AtomicUsize>,
}

impl PostgresRaw {
    /// Connects; the lock table must exist (a leasehold locker on the same database made it).
    pub(crate) async fn connect(url: &str) -> PostgresRaw {
        let mut conns = Vec::new();
        for _ in 0..CONNECTIONS {
            let (client, connection) = pg::connect(url, pg::NoTls).await.expect("raw connection");
            let driver = tokio::spawn(async move {
                let _ = connection.await;
            })
            .abort_handle();
            let acquire = client
                .prepare_typed(ACQUIRE, &ACQUIRE_TYPES)
                .await
                .expect("prepare the acquire");
            let release = client
                .prepare_typed(RELEASE, &RELEASE_TYPES)
                .await
                .expect("prepare the release");
            let acquire_all = client
                .prepare_typed(ACQUIRE_ALL, &ACQUIRE_ALL_TYPES)
                .await
                .expect("prepare the acquire of several keys");
            let release_all = client
                .prepare_typed(RELEASE_ALL, &RELEASE_ALL_TYPES)
                .await
                .expect("prepare the release of several keys");
            conns.push(RawConn {
                client,
                acquire,
                release,
                acquire_all,
                release_all,
                driver,
            });
        }
        PostgresRaw {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn conn(&self) -> &RawConn {
        &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()]
    }

    /// One attempt, with the library's default lease; the fence when granted.
    async fn try_lock(&self, key: &str, owner: &str) -> Option<i64> {
        let conn = self.conn();
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
        let row = conn
            .client
            .query_one(
                &conn.acquire,
                &[&key, &owner, &lease_ms, &0i64, &NAME, &0i64, &false],
            )
            .await
            .expect("raw acquire");
        row.get(0)
    }

    /// Deletes the row if `owner` holds it (or leaves it to the longest waiter), and notifies.
    async fn unlock(&self, key: &str, owner: &str) {
        let conn = self.conn();
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        conn.client
            .query_one(&conn.release, &[&key, &owner, &NAME, &window_ms, &key])
            .await
            .expect("raw release");
    }
}

/// An acquisition polls until the lock is granted, under a fresh owner token.
impl KeyLock for PostgresRaw {
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

/// Several free keys in one statement, the engine's own `leasehold_acquire_all` (one
/// `leasehold_acquire` per key, all or none), given back in one, its `leasehold_release_all`:
/// the floor of ours on PostgreSQL, where `lock_all` of free keys is that statement.
impl KeysAtOnce for PostgresRaw {
    /// Their owner token (one per key, the same).
    type Held = String;

    async fn acquire_all<'a>(&'a self, keys: &'a [String]) -> String {
        let owner = token();
        let conn = self.conn();
        let n = keys.len();
        let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
        let params: (Vec<&str>, Vec<bool>, Vec<i64>, Vec<i64>) = (
            vec![owner.as_str(); n],
            vec![false; n],
            vec![lease_ms; n],
            vec![0; n],
        );
        let args: [&(dyn pg::types::ToSql + Sync); 6] =
            [&keys, &params.0, &params.1, &params.2, &params.3, &NAME];
        let rows = bounded(
            "the raw acquire of several keys",
            conn.client.query(&conn.acquire_all, &args),
        )
        .await
        .expect("raw acquire of several keys");
        assert!(
            rows.len() == n
                && rows
                    .iter()
                    .all(|row| row.get::<_, Option<i64>>(0).is_some()),
            "the raw statements are measured on free keys only"
        );
        owner
    }

    async fn release_all<'a>(&'a self, keys: &'a [String], owner: String) {
        let conn = self.conn();
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let owners = vec![owner.as_str(); keys.len()];
        let args: [&(dyn pg::types::ToSql + Sync); 5] = [&keys, &owners, &NAME, &window_ms, &keys];
        bounded(
            "the raw release of several keys",
            conn.client.query_one(&conn.release_all, &args),
        )
        .await
        .expect("raw release of several keys");
    }
}

/// One connection of the baselines its driver aborted when it is dropped (which closes
/// the session); the notifications it hears (after a `LISTEN`) go to `notices`.
pub(crate) struct PgConnection {
    pub(crate) client: pg::Client,
    driver: tokio::task::AbortHandle,
}

impl Drop for PgConnection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl PgConnection {
    pub(crate) async fn open(
        url: &str,
        notices: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    ) -> PgConnection {
        let (client, mut connection) = pg::connect(url, pg::NoTls).await.expect("connect");
        let driver = tokio::spawn(async move {
            while let Some(Ok(message)) =
                std::future::poll_fn(|cx| connection.poll_message(cx)).await
            {
                if let (pg::AsyncMessage::Notification(_), Some(tx)) = (message, &notices) {
                    let _ = tx.send(());
                }
            }
        })
        .abort_handle();
        PgConnection { client, driver }
    }
}
