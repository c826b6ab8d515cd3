//! Lock releases of the SQL engines (PostgreSQL, MySQL and MariaDB), written once over each
//! engine's two calls ([`ReleaseCalls`]): a lone release is one call, at once; the keys of a
//! guard given back together ([`join_together`](crate::store::join_together)) go by the group
//! commit ([`batch`](crate::store::batch), as Redis's release scripts and ZooKeeper's and
//! etcd's deletes go), one call for them all: one statement, one transaction. When one of
//! their locks is busy past the lock timeout (or the transaction lost a deadlock), that call
//! changes nothing and each is released by itself, so one busy lock holds up no other.
//!
//! A release call may run twice (its connection closed under it and the pool sent it again):
//! [`released`] reads the second answer right.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::store::batch::{self, Item, Queue};
use crate::store::join_all;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;

/// One lock's release: its stored key and wake-up payload, its owner's stored token, and
/// until when its holder counted the lease valid.
pub(crate) struct Release {
    pub(crate) key: String,
    pub(crate) wake: String,
    pub(crate) owner: String,
    pub(crate) valid_until: Option<Instant>,
}

/// The answers of one call releasing several locks, in their order, and how many times the
/// call was sent; `None` when a lock was busy and nothing was done.
pub(crate) type AllReleased = Option<(Vec<Option<bool>>, usize)>;

/// An engine's release calls. Each answer per lock is the engine's release answer: `Some`
/// (whether the lease was still running) when the lock was the owner's and is released now,
/// `None` when it was not the owner's; with how many times the call was sent.
pub(crate) trait ReleaseCalls: Send + Sync + 'static {
    /// The engine and its server, for errors (`PostgreSQL at db:5432`).
    fn shown(&self) -> &str;

    /// A lock's stored key and wake-up payload, and its owner's stored token.
    fn stored<'a>(
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> (Cow<'a, str>, Cow<'a, str>, &'a str);

    /// One lock's release call.
    fn one(
        &self,
        key: &str,
        wake: &str,
        owner: &str,
    ) -> impl Future<Output = Result<(Option<bool>, usize), LockError>> + Send;

    /// One call releasing every lock of `all` in one transaction, answers in `all`'s order;
    /// `Ok(None)` when a lock was busy past the lock timeout or the transaction lost a
    /// deadlock, and nothing was done.
    fn all(&self, all: &[Release]) -> impl Future<Output = Result<AllReleased, LockError>> + Send;
}

/// The lock releases of one store, waiting to share a call.
pub(crate) struct Releases<E: ReleaseCalls> {
    calls: E,
    /// A release waits at most this long in all: a call of several, then (when a lock was
    /// busy) each by itself, each bounded by the operation timeout.
    bound: Duration,
    queue: Queue<Release, Releases<E>>,
}

impl<E: ReleaseCalls> Releases<E> {
    /// Releases over `calls`, each call bounded by `op_timeout`.
    pub(crate) fn new(calls: E, op_timeout: Duration) -> Arc<Self> {
        Arc::new(Releases {
            calls,
            bound: op_timeout * 2,
            queue: Queue::default(),
        })
    }

    /// Releases the lock `keys` if `token` holds it: whether its lease was still running.
    /// One of several given back together ([`together`](crate::store::together)) goes with
    /// them; any other is its own call, at once. (Sent through the group commit too, the
    /// releases of many tasks of one locker cost the client more than they saved: on
    /// PostgreSQL 1.41 × the hand-written statements' client CPU per cycle at 16 tasks,
    /// against 1.23 ×.)
    pub(crate) async fn release(
        self: &Arc<Self>,
        keys: &LockKeys,
        token: &OwnerToken,
        valid_until: Option<Instant>,
    ) -> Result<bool, LockError> {
        let (key, wake, owner) = E::stored(keys, token);
        if !crate::store::together() {
            return self.one(&key, &wake, owner, valid_until).await;
        }
        let release = Release {
            key: key.into_owned(),
            wake: wake.into_owned(),
            owner: owner.to_owned(),
            valid_until,
        };
        let deadline = Instant::now() + self.bound;
        let late = || {
            LockError::unavailable(
                format!(
                    "{} did not answer a release within {:?}",
                    self.calls.shown(),
                    self.bound
                ),
                None,
            )
        };
        batch::submit(self, release, deadline, late).await?
    }

    /// One lock's release call, its answer read.
    async fn one(
        &self,
        key: &str,
        wake: &str,
        owner: &str,
        valid_until: Option<Instant>,
    ) -> Result<bool, LockError> {
        let (answer, sent) = self.calls.one(key, wake, owner).await?;
        Ok(released(answer, sent, valid_until))
    }

    /// One call for all of `all`: an answer per release, or `None` when nothing was done.
    async fn all(&self, all: &[Release]) -> Result<Option<Vec<bool>>, LockError> {
        let Some((answers, sent)) = self.calls.all(all).await? else {
            return Ok(None);
        };
        if answers.len() != all.len() {
            return Err(LockError::unavailable(
                format!(
                    "{} answered {} releases for {}",
                    self.calls.shown(),
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

/// What a release's answer means: whether the lease was still running. `None` (the lock was
/// not the owner's): sent again on a new connection after the first one closed, the first
/// may have deleted the row, its answer lost. The row of a lease still valid when this
/// answer came cannot have expired on the server (its expiry is later than the holder's
/// validity), so only a delete removed it: the first attempt, or an operator's
/// force_release at that very moment, which reads as this release.
pub(crate) fn released(answer: Option<bool>, sent: usize, valid_until: Option<Instant>) -> bool {
    match answer {
        Some(valid) => valid,
        None => sent > 1 && valid_until.is_some_and(|v| Instant::now() < v),
    }
}

impl<E: ReleaseCalls> Item<Releases<E>> for Release {
    type Out = Result<bool, LockError>;

    fn queue(ctx: &Releases<E>) -> &Queue<Self, Releases<E>> {
        &ctx.queue
    }

    async fn send(ctx: &Arc<Releases<E>>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        if let [one] = items {
            let released = ctx
                .one(&one.key, &one.wake, &one.owner, one.valid_until)
                .await;
            return Ok(vec![released]);
        }
        if let Some(answers) = ctx.all(items).await? {
            return Ok(answers.into_iter().map(Ok).collect());
        }
        Ok(join_all(
            items
                .iter()
                .map(|one| ctx.one(&one.key, &one.wake, &one.owner, one.valid_until)),
        )
        .await)
    }

    /// The caller went away after its release was sent: the lock was released (or was not
    /// the owner's), and nothing is left to undo.
    fn abandoned(_: &Arc<Releases<E>>, _: Self, _: Self::Out) {}
}
