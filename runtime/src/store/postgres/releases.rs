//! PostgreSQL's lock release calls: one lock is one `leasehold_release` call; the keys of a
//! guard given back together are one `leasehold_release_all` call, one statement and one
//! transaction for them all (the grouping, and the fallback when a lock is busy, are
//! [`sql_releases`](crate::store::sql_releases)'s, shared with MySQL and MariaDB).

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_postgres as pg;

use super::conn::Conn;
use super::pool::Pool;
use super::text::{db_text, token_text};
use super::waiters::YIELD_WINDOW;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sql_releases::{self, AllReleased, Release, ReleaseCalls};
use crate::store::token::OwnerToken;

/// The lock releases of one store, waiting to share a statement.
pub(super) type Releases = sql_releases::Releases<Calls>;

/// The release statements of one store.
pub(super) struct Calls {
    pool: Arc<Pool>,
    /// This process's name in the lines of waiters: a release leaves the lock to the one that
    /// waited longest among the others.
    contender: Arc<str>,
    shown: String,
}

impl Calls {
    pub(super) fn new(pool: Arc<Pool>, contender: Arc<str>) -> Self {
        let shown = format!("PostgreSQL at {}", pool.shared.shown);
        Calls {
            pool,
            contender,
            shown,
        }
    }

    /// What every release sends beside its locks: this process's name in the lines of
    /// waiters, and how long the next in line has to take a lock (ms).
    fn releaser(&self) -> (&str, i64) {
        (&self.contender, YIELD_WINDOW.as_millis() as i64)
    }

    /// A release call on a pooled connection, and how many times it was sent (twice when the
    /// first connection closed under it: see [`sql_releases::released`]).
    async fn counted<T, F, Fut>(&self, f: F) -> Result<(T, usize), LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        let sent = AtomicUsize::new(0);
        let answer = self
            .pool
            .call("refused a release", |conn| {
                sent.fetch_add(1, Ordering::Relaxed);
                f(conn)
            })
            .await?;
        Ok((answer, sent.load(Ordering::Relaxed)))
    }
}

impl ReleaseCalls for Calls {
    fn shown(&self) -> &str {
        &self.shown
    }

    fn stored<'a>(
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> (Cow<'a, str>, Cow<'a, str>, &'a str) {
        (
            db_text(keys.lock()),
            db_text(keys.wake()),
            token_text(token),
        )
    }

    /// One `leasehold_release` call.
    async fn one(
        &self,
        key: &str,
        wake: &str,
        owner: &str,
    ) -> Result<(Option<bool>, usize), LockError> {
        let (name, window_ms) = self.releaser();
        let (row, sent) = self
            .counted(|conn| async move {
                let params: [&(dyn pg::types::ToSql + Sync); 5] =
                    [&key, &owner, &name, &window_ms, &wake];
                conn.client
                    .query_one(&conn.statements.release, &params)
                    .await
            })
            .await?;
        Ok((row.get::<_, Option<bool>>(0), sent))
    }

    /// One `leasehold_release_all` call (it takes the rows in the keys' order).
    async fn all(&self, all: &[Release]) -> Result<AllReleased, LockError> {
        let keys: Vec<&str> = all.iter().map(|r| r.key.as_str()).collect();
        let owners: Vec<&str> = all.iter().map(|r| r.owner.as_str()).collect();
        let wakes: Vec<&str> = all.iter().map(|r| r.wake.as_str()).collect();
        let (name, window_ms) = self.releaser();
        let (row, sent) = self
            .counted(|conn| {
                let (keys, owners, wakes) = (&keys, &owners, &wakes);
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 5] =
                        [keys, owners, &name, &window_ms, wakes];
                    match conn
                        .client
                        .query_one(&conn.statements.release_all, &params)
                        .await
                    {
                        Ok(row) => Ok(Some(row)),
                        Err(e) if busy(&e) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        Ok(row.map(|row| (row.get::<_, Vec<Option<bool>>>(0), sent)))
    }
}

/// The statement failed on a busy lock: a row locked past the session's lock timeout, or a
/// deadlock the server broke. Its transaction was rolled back; nothing was done.
fn busy(e: &pg::Error) -> bool {
    use pg::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::T_R_DEADLOCK_DETECTED
    })
}
