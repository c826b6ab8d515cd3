//! Lock releases: a lone release is one `leasehold_release` call, at once, as before; the
//! keys of a guard given back together ([`join_together`](crate::store::join_together)) go by
//! the group commit ([`batch`](crate::store::batch), as Redis's release scripts and
//! ZooKeeper's and etcd's deletes go), one `leasehold_release_all` call, one statement and one
//! transaction for them all. When one of their locks is busy past the lock timeout (a fenced
//! transaction of it is still open), that statement changes nothing and each is released by
//! itself, so one busy lock holds up no other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres as pg;

use super::conn::Conn;
use super::pool::Pool;
use super::text::{db_text, token_text};
use super::waiters::YIELD_WINDOW;
use crate::error::LockError;
use crate::store::batch::{self, Item, Queue};
use crate::store::join_all;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;

/// The lock releases of one store, waiting to share a statement.
pub(super) struct Releases {
    pool: Arc<Pool>,
    /// This process's name in the lines of waiters: a release leaves the lock to the one that
    /// waited longest among the others.
    contender: Arc<str>,
    /// A release waits at most this long in all: a statement of several, then (when a lock
    /// was busy) each by itself, each bounded by the operation timeout.
    bound: Duration,
    queue: Queue<Release, Releases>,
}

/// One lock's release: its stored key and wake-up payload, its owner, and until when its
/// holder counted the lease valid.
pub(super) struct Release {
    key: String,
    wake: String,
    owner: String,
    valid_until: Option<Instant>,
}

impl Releases {
    pub(super) fn new(pool: Arc<Pool>, contender: Arc<str>, op_timeout: Duration) -> Arc<Self> {
        Arc::new(Releases {
            pool,
            contender,
            bound: op_timeout * 2,
            queue: Queue::default(),
        })
    }

    /// Releases the lock `keys` if `token` holds it: whether its lease was still running.
    /// One of several given back together ([`together`](crate::store::together)) goes with
    /// them; any other is its own call, at once. (Sent through the group commit too, the
    /// releases of many tasks of one locker cost the client more than they saved: 1.41 × the
    /// hand-written statements' client CPU per cycle at 16 tasks, against 1.23 ×.)
    pub(super) async fn release(
        self: &Arc<Self>,
        keys: &LockKeys,
        token: &OwnerToken,
        valid_until: Option<Instant>,
    ) -> Result<bool, LockError> {
        if !crate::store::together() {
            let (key, wake) = (db_text(keys.lock()), db_text(keys.wake()));
            return self
                .release_one(&key, &wake, token_text(token), valid_until)
                .await;
        }
        let release = Release {
            key: db_text(keys.lock()).into_owned(),
            wake: db_text(keys.wake()).into_owned(),
            owner: token_text(token).to_owned(),
            valid_until,
        };
        let deadline = Instant::now() + self.bound;
        let late = || {
            LockError::unavailable(
                format!(
                    "PostgreSQL at {} did not answer a release within {:?}",
                    self.pool.shared.shown, self.bound
                ),
                None,
            )
        };
        batch::submit(self, release, deadline, late).await?
    }

    /// One `leasehold_release` call.
    async fn release_one(
        &self,
        key: &str,
        wake: &str,
        owner: &str,
        valid_until: Option<Instant>,
    ) -> Result<bool, LockError> {
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
        Ok(released(row.get::<_, Option<bool>>(0), sent, valid_until))
    }

    /// What every release sends beside its locks: this process's name in the lines of
    /// waiters, and how long the next in line has to take a lock (ms).
    fn releaser(&self) -> (&str, i64) {
        (&self.contender, YIELD_WINDOW.as_millis() as i64)
    }

    /// A release call on a pooled connection, and how many times it was sent (twice when the
    /// first connection closed under it: see [`released`]).
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

    /// One `leasehold_release_all` call: an answer per release, or `None` when a lock was
    /// busy past the lock timeout (or the transaction lost a deadlock) and nothing was done.
    async fn release_all(&self, all: &[Release]) -> Result<Option<Vec<bool>>, LockError> {
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
        let Some(row) = row else {
            return Ok(None);
        };
        let answers = row.get::<_, Vec<Option<bool>>>(0);
        if answers.len() != all.len() {
            return Err(LockError::unavailable(
                format!(
                    "PostgreSQL at {} answered {} releases for {}",
                    self.pool.shared.shown,
                    answers.len(),
                    all.len()
                ),
                None,
            ));
        }
        Ok(Some(
            answers
                .into_iter()
                .zip(all)
                .map(|(answer, one)| released(answer, sent, one.valid_until))
                .collect(),
        ))
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

/// What a release's answer means: whether the lease was still running. `None` (the lock was
/// not the owner's): sent again on a new connection after the first one closed, the first
/// may have deleted the row, its answer lost. The row of a lease still valid when this
/// answer came cannot have expired on the server (its expiry is later than the holder's
/// validity), so only a delete removed it: the first attempt, or an operator's
/// force_release at that very moment, which reads as this release.
fn released(answer: Option<bool>, sent: usize, valid_until: Option<Instant>) -> bool {
    match answer {
        Some(valid) => valid,
        None => sent > 1 && valid_until.is_some_and(|v| Instant::now() < v),
    }
}

impl Item<Releases> for Release {
    type Out = Result<bool, LockError>;

    fn queue(ctx: &Releases) -> &Queue<Self, Releases> {
        &ctx.queue
    }

    async fn send(ctx: &Arc<Releases>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        if let [one] = items {
            let released = ctx
                .release_one(&one.key, &one.wake, &one.owner, one.valid_until)
                .await;
            return Ok(vec![released]);
        }
        if let Some(answers) = ctx.release_all(items).await? {
            return Ok(answers.into_iter().map(Ok).collect());
        }
        Ok(join_all(
            items
                .iter()
                .map(|one| ctx.release_one(&one.key, &one.wake, &one.owner, one.valid_until)),
        )
        .await)
    }

    /// The caller went away after its release was sent: the lock was released (or was not
    /// the owner's), and nothing is left to undo.
    fn abandoned(_: &Arc<Releases>, _: Self, _: Self::Out) {}
}
