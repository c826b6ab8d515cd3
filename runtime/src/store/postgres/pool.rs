//! The connections for lock calls: a few, opened on demand and shared (tokio-postgres
//! pipelines concurrent callers' statements on one), each call bounded by the operation
//! timeout and sent once more when its connection had closed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_postgres as pg;

use super::backend::{Settlement, Unsettled};
use super::conn::{Conn, Shared};
use super::errors::session_ended;
use super::PostgresStore;
use crate::error::LockError;
use crate::store::opening;

/// How many connections one locker uses for its lock calls (plus one that listens).
pub(super) const POOL: usize = 4;

/// One pooled connection's place: its connection, or none while it is closed or opening.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

/// The connections for lock calls, shared with the withdrawals that run in the background.
pub(super) struct Pool {
    pub(super) shared: Arc<Shared>,
    pub(super) slots: Vec<Slot>,
    pub(super) next: AtomicUsize,
    /// The acquires whose outcome is unknown, until their give-back ([`super::settle`]).
    pub(super) unsettled: Unsettled,
}

impl Pool {
    /// A connection for a call that would use slot `i`, and the slot it is in: slot `i`'s own
    /// when it is open; else, while slot `i`'s opens, another slot's open connection (calls
    /// share connections anyway); else slot `i`'s once it opened.
    ///
    /// A slot's connection opens in a task of its own, which holds the slot meanwhile: what it
    /// opens stays there even when the call that needed it gives up first. Opening takes a
    /// dozen round trips (the session's settings, the prepared statements), more than a short
    /// operation timeout on a loaded machine; when the waiting call's timeout threw the
    /// opening away, every call after an outage paid it again and failed again, and a call
    /// sent while one connection was open and another was opening failed for no fault of the
    /// server.
    pub(super) async fn conn(&self, i: usize) -> Result<(usize, Arc<Conn>), LockError> {
        let opening = match self.slots[i].clone().try_lock_owned() {
            Ok(slot) => match open(&slot) {
                Some(conn) => return Ok((i, conn)),
                None => Some(self.open_in(slot)),
            },
            // Opening, or being looked at by another call this instant.
            Err(_) => None,
        };
        if let Some(found) = self.any_open() {
            return Ok(found);
        }
        let conn = match opening {
            Some(opening) => opening.await?,
            None => {
                let slot = self.slots[i].clone().lock_owned().await;
                match open(&slot) {
                    Some(conn) => conn,
                    None => self.open_in(slot).await?,
                }
            }
        };
        Ok((i, conn))
    }

    /// An open connection of any slot that is not opening, and its slot.
    fn any_open(&self) -> Option<(usize, Arc<Conn>)> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(k, slot)| open(&*slot.try_lock().ok()?).map(|conn| (k, conn)))
    }

    /// Opens a connection into `slot` in a task of its own ([`opening::open_in`]); resolves
    /// to what it opened (dropping the future does not stop the opening).
    fn open_in(
        &self,
        slot: opening::Taken<Arc<Conn>>,
    ) -> impl std::future::Future<Output = Result<Arc<Conn>, LockError>> {
        let shared = self.shared.clone();
        let server = format!("PostgreSQL at {}", self.shared.shown);
        let opened = opening::open_in(
            slot,
            async move { Ok(Arc::new(shared.open_for_locks().await?)) },
            server,
        );
        async move { Ok(opened.await?.as_ref().expect("opened").clone()) }
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
    /// failed because its connection was closed (the server restarted) or its session ended
    /// (a FATAL answer, as to an operator's `pg_terminate_backend`) is sent once more on a
    /// new one: every statement here may run twice.
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
        let mut i = self.next.fetch_add(1, Ordering::Relaxed) % POOL;
        let mut retried = false;
        loop {
            let conn = match tokio::time::timeout_at(deadline, self.conn(i)).await {
                Ok(found) => {
                    let (slot, conn) = found?;
                    i = slot;
                    conn
                }
                // Nothing was sent: the connection was still opening.
                Err(_) => return Err(self.shared.late(limit)),
            };
            match tokio::time::timeout_at(deadline, f(conn.clone())).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if (e.is_closed() || session_ended(&e)) && !retried => {
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
                    if e.code().is_none() || session_ended(&e) {
                        // No answer from the server, or the session ended: the connection
                        // failed under the call.
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

/// The slot's connection, if it has one that is open.
fn open(slot: &Option<Arc<Conn>>) -> Option<Arc<Conn>> {
    slot.as_ref()
        .filter(|conn| !conn.client.is_closed())
        .cloned()
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
