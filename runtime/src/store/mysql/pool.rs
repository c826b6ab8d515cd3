//! The connections for lock calls: [`POOL`] of them, opened on demand, each carrying one call
//! at a time (MySQL's protocol answers one statement after the other on a connection, with no
//! pipelining), every call bounded by the operation timeout and sent once more when its
//! connection broke.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::conn::{Io, Shared};
use super::errors::answered;
use super::MysqlStore;
use crate::error::LockError;
use crate::store::opening;
use crate::store::settling::{Settlement, Unsettled};

/// How many connections one locker uses for its lock calls (plus the wake log's reader): a
/// call waits for a free one, so this bounds how many calls of one locker run at once.
pub(super) const POOL: usize = 8;

/// One pooled connection, while it is open; owned by the call that uses it, or by the task
/// that opens it.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<mysql_async::Conn>>>;

/// A slot taken for one call.
type Taken = opening::Taken<mysql_async::Conn>;

/// The connections for lock calls, shared with the calls that run in the background.
pub(super) struct Pool {
    pub(super) shared: Arc<Shared>,
    pub(super) slots: Vec<Slot>,
    pub(super) next: AtomicUsize,
    /// The acquires whose outcome is unknown, until their give-back ([`super::settle`]).
    pub(super) unsettled: Unsettled,
}

impl Pool {
    /// A free slot whose connection is open; else a free one to open; else the next one in
    /// turn once it is free. (After an outage every connection opens again one call at a
    /// time: a call goes out on one that opened meanwhile rather than wait for its own.)
    async fn slot(&self) -> Taken {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut closed = None;
        for i in 0..POOL {
            let Ok(slot) = self.slots[(start + i) % POOL].clone().try_lock_owned() else {
                continue;
            };
            if slot.as_ref().is_some_and(|c| !c.is_disconnected()) {
                return slot;
            }
            closed.get_or_insert(slot);
        }
        match closed {
            Some(slot) => slot,
            None => self.slots[start % POOL].clone().lock_owned().await,
        }
    }

    /// Opens a connection into `slot` in a task of its own ([`opening::open_in`]), bounded by
    /// the connect timeout ([`Shared::open`]).
    async fn open_in(&self, slot: Taken) -> Result<Taken, LockError> {
        let shared = self.shared.clone();
        let server = format!("MySQL at {}", self.shared.shown);
        opening::open_in(slot, async move { shared.open().await }, server).await
    }

    /// Opens every connection now (for `connect`): the first error, if any.
    pub(super) async fn open_all(&self) -> Result<(), LockError> {
        let opened = crate::store::join_all(self.slots.iter().map(|slot| async move {
            let mut slot = slot.lock().await;
            if slot.is_none() {
                *slot = Some(self.shared.open().await?);
            }
            Ok::<_, LockError>(())
        }))
        .await;
        opened.into_iter().collect()
    }

    /// Runs one call on a pooled connection within the operation timeout. A call whose
    /// connection broke under it is sent once more on a new one: every call here may run twice.
    pub(super) async fn call<T, F>(self: &Arc<Self>, what: &str, f: F) -> Result<T, LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
    {
        self.call_for(&[], what, f).await
    }

    /// [`call`](Self::call) of an acquire for `token`, which may create a lease or a place in
    /// line for it. When its outcome becomes unknown (no answer within the operation timeout,
    /// its connection broke, or the server stopped it midway), the connection's session is
    /// settled ([`Pool::settle`]) and the token recorded, for its give-back to wait for; a call
    /// whose connection broke is sent again only once that settled (within the same timeout),
    /// so that the answer reported is the last word on the token.
    pub(super) async fn call_creating<T, F>(
        self: &Arc<Self>,
        token: &str,
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
    {
        self.call_for(std::slice::from_ref(&token), what, f).await
    }

    /// [`call_creating`](Self::call_creating) of one call that acquires for every token of
    /// `tokens` (a batch taken together): each token is recorded when its outcome becomes
    /// unknown, so that the give-back of any of them waits for the settlement.
    pub(super) async fn call_creating_all<T, F>(
        self: &Arc<Self>,
        tokens: &[&str],
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
    {
        self.call_for(tokens, what, f).await
    }

    async fn call_for<T, F>(
        self: &Arc<Self>,
        tokens: &[&str],
        what: &str,
        f: F,
    ) -> Result<T, LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
    {
        let limit = self.shared.settings.op_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let Ok(mut slot) = tokio::time::timeout_at(deadline, self.slot()).await else {
            // Nothing was sent: every connection was busy.
            return Err(self.shared.late(limit));
        };
        let mut retried = false;
        loop {
            if slot.as_ref().is_none_or(|c| c.is_disconnected()) {
                *slot = None;
                match tokio::time::timeout_at(deadline, self.open_in(slot)).await {
                    Ok(opened) => slot = opened?,
                    // Nothing was sent: the connection was still opening (and goes on opening
                    // for the next call).
                    Err(_) => return Err(self.shared.late(limit)),
                }
            }
            let conn = slot.as_mut().expect("opened");
            let id = conn.id();
            let answer = tokio::time::timeout_at(deadline, f(conn)).await;
            match answer {
                Ok(Ok(v)) => return Ok(v),
                // The server answered: the statement did nothing (its procedure rolled back).
                Ok(Err(e)) if answered(&e) => return Err(self.shared.unavailable(what, e)),
                Ok(Err(e)) => {
                    // The connection broke under the call, or the server stopped it midway.
                    *slot = None;
                    let settlement = (!tokens.is_empty()).then(|| self.unknown(tokens, id));
                    if retried || matches!(e, mysql_async::Error::Server(_)) {
                        return Err(self.shared.unavailable(what, e));
                    }
                    retried = true;
                    if let Some(settlement) = settlement {
                        // Sent again only once the first is settled: else it could land after
                        // the answer to this one.
                        let settled = tokio::time::timeout_at(deadline, settlement.wait()).await;
                        if settled.is_err() {
                            return Err(self.shared.unavailable(what, e));
                        }
                    }
                }
                Err(_) => {
                    *slot = None;
                    if !tokens.is_empty() {
                        self.unknown(tokens, id);
                    }
                    return Err(self.shared.late(limit));
                }
            }
        }
    }

    /// A call for `tokens` on the connection `id` whose outcome is unknown: settles that
    /// connection's session, and records each token against that settlement.
    fn unknown(self: &Arc<Self>, tokens: &[&str], id: u32) -> Settlement {
        let settlement = self.settle(id);
        for token in tokens {
            self.unsettled.record(token, settlement.clone());
        }
        settlement
    }
}

impl MysqlStore {
    /// Runs one call on a pooled connection within the operation timeout (see [`Pool::call`]).
    pub(super) async fn call<T, F>(&self, what: &str, f: F) -> Result<T, LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
    {
        self.pool.call(what, f).await
    }
}
