//! MySQL's and MariaDB's lock release calls: one lock is one `leasehold_release` call; the
//! keys of a guard given back together are one `leasehold_release_all` call, one transaction
//! for them all (the grouping, and the fallback when a lock is busy, are
//! [`sql_releases`](crate::store::sql_releases)'s, shared with PostgreSQL).

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use mysql_async::prelude::Queryable;

use super::conn::Io;
use super::errors::{driver_error, is_lock_wait};
use super::pool::Pool;
use super::sql::{RELEASE, RELEASE_ALL};
use super::text::{hex, token_text};
use super::waiters::YIELD_WINDOW;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sql_releases::{self, AllReleased, Release, ReleaseCalls};
use crate::store::token::OwnerToken;

/// The lock releases of one store, waiting to share a call.
pub(super) type Releases = sql_releases::Releases<Calls>;

/// The release calls of one store.
pub(super) struct Calls {
    pool: Arc<Pool>,
    /// This process's name in the lines of waiters: a release leaves the lock to the one that
    /// waited longest among the others.
    contender: Arc<str>,
    shown: String,
}

impl Calls {
    pub(super) fn new(pool: Arc<Pool>, contender: Arc<str>, shown: String) -> Self {
        Calls {
            pool,
            contender,
            shown,
        }
    }

    /// A release call on a pooled connection, and how many times it was sent (twice when the
    /// first connection broke under it: see [`sql_releases::released`]).
    async fn counted<T, F>(&self, f: F) -> Result<(T, usize), LockError>
    where
        F: for<'c> Fn(&'c mut mysql_async::Conn) -> Io<'c, T>,
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

/// How long the next in line has to take a lock a release left to it, in ms.
fn window_ms() -> i64 {
    YIELD_WINDOW.as_millis() as i64
}

impl ReleaseCalls for Calls {
    fn shown(&self) -> &str {
        &self.shown
    }

    fn stored<'a>(
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> (Cow<'a, str>, Cow<'a, str>, &'a str) {
        (keys.lock().into(), keys.wake().into(), token_text(token))
    }

    /// One `leasehold_release` call.
    async fn one(
        &self,
        key: &str,
        wake: &str,
        owner: &str,
    ) -> Result<(Option<bool>, usize), LockError> {
        let name: &str = &self.contender;
        let (row, sent) = self
            .counted(|conn| {
                let params = (
                    key.to_owned(),
                    owner.to_owned(),
                    name.to_owned(),
                    window_ms(),
                    wake.to_owned(),
                );
                Box::pin(conn.exec_first::<(Option<i64>,), _, _>(RELEASE, params))
            })
            .await?;
        Ok((row.and_then(|(valid,)| valid).map(|v| v == 1), sent))
    }

    /// One `leasehold_release_all` call: the batch as JSON, keys, owners and wake payloads in
    /// hex, sorted by key so that two batches lock their rows in the same order (as
    /// `leasehold_acquire_all`'s do); its answer, `1`, `0` or `N` per lock in that order.
    async fn all(&self, all: &[Release]) -> Result<AllReleased, LockError> {
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by(|&a, &b| all[a].key.cmp(&all[b].key));
        let mut json = String::from("[");
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                json.push(',');
            }
            let one = &all[i];
            json.push_str(&format!(
                "[\"{}\",\"{}\",\"{}\"]",
                hex(one.key.as_bytes()),
                hex(one.owner.as_bytes()),
                hex(one.wake.as_bytes())
            ));
        }
        json.push(']');
        let name: &str = &self.contender;
        let answer = self
            .counted(|conn| {
                let params = (json.clone(), name.to_owned(), window_ms());
                Box::pin(conn.exec_first::<(Option<String>,), _, _>(RELEASE_ALL, params))
            })
            .await;
        let (row, sent) = match answer {
            Err(e) if driver_error(&e).is_some_and(is_lock_wait) => return Ok(None),
            other => other?,
        };
        let text = row.and_then(|(answers,)| answers).unwrap_or_default();
        let sorted: Vec<Option<bool>> = text
            .split(',')
            .filter(|a| !a.is_empty())
            .map(|a| match a {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            })
            .collect();
        if sorted.len() != all.len() {
            // The shared check reports it.
            return Ok(Some((sorted, sent)));
        }
        let mut answers = vec![None; all.len()];
        for (&i, answer) in order.iter().zip(sorted) {
            answers[i] = answer;
        }
        Ok(Some((answers, sent)))
    }
}
