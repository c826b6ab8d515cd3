//! The connections for lock calls: a few, opened on demand and shared (tokio-postgres
//! pipelines concurrent callers' statements on one), each call bounded by the operation
//! timeout and sent once more when its connection had closed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_postgres as pg;

use super::backend::{Settlement, Unsettled};
use super::conn::{Conn, Shared};
use super::PostgresStore;
use crate::error::LockError;

/// How many connections one locker uses for its lock calls (plus one that listens).
pub(super) const POOL: usize = 4;

/// The connections for lock calls, shared with the withdrawals that run in the background.
pub(super) struct Pool {
    pub(super) shared: Arc<Shared>,
    pub(super) slots: Vec<tokio::sync::Mutex<Option<Arc<Conn>>>>,
    pub(super) next: AtomicUsize,
    /// The acquires whose outcome is unknown, until their give-back ([`super::settle`]).
    pub(super) unsettled: Unsettled,
}

impl Pool {
    /// The connection of slot `i`, opened when it has none or its last one failed.
    pub(super) async fn conn(&self, i: usize) -> Result<Arc<Conn>, LockError> {
        let mut slot = self.slots[i].lock().await;
        if let Some(conn) = slot.as_ref() {
            if !conn.client.is_closed() {
                return Ok(conn.clone());
            }
        }
        *slot = None;
        let conn = Arc::new(self.shared.open_for_locks().await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets slot `i`'s connection if it is still `conn` (it failed or timed out).
    fn discard(&self, i: usize, conn: &Arc<Conn>) {
        if let Ok(mut slot) = self.slots[i].try_lock() {
            if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                *slot = None;
            }
        } else {
            // Someone is replacing it already, or using the slot's lock briefly: the
            // connection's driver ends with it, and `is_closed` tells the next caller.
            conn.driver.abort();
        }
    }

    /// Runs one call on a pooled connection within the operation timeout. A call that
    /// failed because its connection was closed (the server restarted) is sent once more on
    /// a new one: every statement here may run twice.
    pub(super) async fn call<T, F, Fut>(self: &Arc<Self>, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        self.call_for(&[], what, f).await
    }

    /// [`call`](Self::call) of an acquire for `token`, which may create a lease or a place in
    /// line for it. When its outcome becomes unknown (no answer within the operation timeout,
    /// or its connection broke), the connection is settled ([`Pool::settle`]) and the token
    /// recorded, for its give-back to wait for; a call whose connection closed is sent again
    /// only once that settled (within the same timeout), so that the answer reported is the
    /// last word on the token.
    pub(super) async fn call_creating<T, F, Fut>(
        self: &Arc<Self>,
        token: &str,
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        self.call_for(std::slice::from_ref(&token), what, f).await
    }

    /// [`call_creating`](Self::call_creating) of one call that acquires for every token of
    /// `tokens` (a batch taken together): each token is recorded when its outcome becomes
    /// unknown, so that the give-back of any of them waits for the settlement.
    pub(super) async fn call_creating_all<T, F, Fut>(
        self: &Arc<Self>,
        tokens: &[&str],
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        self.call_for(tokens, what, f).await
    }

    async fn call_for<T, F, Fut>(
        self: &Arc<Self>,
        tokens: &[&str],
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        let limit = self.shared.settings.op_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % POOL;
        let mut retried = false;
        loop {
            let conn = match tokio::time::timeout_at(deadline, self.conn(i)).await {
                Ok(conn) => conn?,
                // Nothing was sent: the connection was still opening.
                Err(_) => return Err(self.shared.late(limit)),
            };
            match tokio::time::timeout_at(deadline, f(conn.clone())).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if e.is_closed() && !retried => {
                    self.discard(i, &conn);
                    retried = true;
                    if !tokens.is_empty() {
                        // Sent again only once the first is settled: else it could land
                        // after the answer to this one. The new connection opens meanwhile.
                        let settlement = self.unknown(tokens, &conn);
                        let (settled, _) = tokio::join!(
                            tokio::time::timeout_at(deadline, settlement.wait()),
                            tokio::time::timeout_at(deadline, self.conn(i)),
                        );
                        if settled.is_err() {
                            return Err(self.shared.unavailable(what, e));
                        }
                    }
                }
                Ok(Err(e)) => {
                    if e.code().is_none() {
                        // No answer from the server: the connection failed under the call.
                        self.discard(i, &conn);
                        if !tokens.is_empty() {
                            self.unknown(tokens, &conn);
                        }
                    }
                    return Err(self.shared.unavailable(what, e));
                }
                Err(_) => {
                    self.discard(i, &conn);
                    if !tokens.is_empty() {
                        self.unknown(tokens, &conn);
                    }
                    return Err(self.shared.late(limit));
                }
            }
        }
    }

    /// A call for `tokens` on `conn` whose outcome is unknown: settles `conn`, and records
    /// each token against that settlement.
    fn unknown(self: &Arc<Self>, tokens: &[&str], conn: &Conn) -> Settlement {
        let settlement = self.settle(conn);
        for token in tokens {
            self.unsettled.record(token, settlement.clone());
        }
        settlement
    }
}

impl PostgresStore {
    /// Runs one call on a pooled connection within the operation timeout (see [`Pool::call`]).
    pub(super) async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, pg::Error>>,
    {
        self.pool.call(what, f).await
    }

    /// One statement on a pooled connection, unprepared (the operator's calls).
    pub(super) async fn query(
        &self,
        what: &str,
        sql: &'static str,
        params: &[&(dyn pg::types::ToSql + Sync)],
    ) -> Result<Vec<pg::Row>, LockError> {
        self.call(
            what,
            |conn| async move { conn.client.query(sql, params).await },
        )
        .await
    }
}
