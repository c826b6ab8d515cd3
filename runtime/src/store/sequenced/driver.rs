//! The plug-in point of the sequential-contender recipe: the few things an engine does with
//! its own client (create a contender, look where it stands, delete it, watch the one ahead).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::Contender;
use crate::error::LockError;
use crate::inspect::LockerDescription;
use crate::store::identity::Stamp;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{join_all, AcquireRequest};

/// Fences of one contender: `order × FENCE_SLOTS + n`, `n` below it.
pub(crate) const FENCE_SLOTS: u64 = 32;

/// The top of the fence slots of the contender created at `order`: at or above every fence
/// it (or any contender created before it) handed out or reserved, and below every fence of a
/// contender created after it: inspection's `last_fence`, and the fence of a reader after the
/// writer created at `order`.
pub(crate) fn slots_top(order: i64) -> u64 {
    order.max(0) as u64 * FENCE_SLOTS + (FENCE_SLOTS - 1)
}

/// The top of a writer's fences: its creation order makes every fence of a later writer
/// (created after it, so of a larger order) larger than all of its own.
pub(crate) fn writer_top(order: i64, fences: u64) -> u64 {
    (order.max(0) as u64) * FENCE_SLOTS + fences
}

/// The tag of an attempt: the first 16 hex digits of its owner token's secret. A contender's
/// name carries it, so that an attempt cancelled before its answer arrived can still find and
/// delete what it created.
pub(crate) fn tag(token: &OwnerToken) -> &str {
    &token.secret()[..16]
}

/// What a contender contends for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The lock itself: it holds when its contender is the first of all.
    Writer,
    /// A reader's share: it holds when no writer's contender is ahead of its own.
    Reader,
    /// `count` of a semaphore's `limit` permits: it holds when the permits of every
    /// contender ahead of it and its own fit in the limit (see [`standing`](super::standing)).
    Permits { limit: u32, count: u32 },
}

/// One contender of a queue as a listing shows it, in creation order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Queued {
    /// Its name: the znode's path, the etcd key (as [`Contender::name`]).
    pub(crate) name: String,
    /// What it contends for, as its name (ZooKeeper) or its value (etcd) says.
    pub(crate) role: Role,
    /// Who keeps it: the etcd lease it is attached to (0 on ZooKeeper, whose listing does not
    /// tell), for [`Inspection::remaining`].
    pub(crate) owner: i64,
}

/// Who a listed contender is, for inspection ([`Inspection::who`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Who {
    /// What its token says, where its data is its token (not a leader record, not etcd's
    /// permits value): its locker, time and label.
    pub(crate) stamp: Option<Stamp>,
    /// The description of the locker whose session (ZooKeeper) or lease (etcd) it lives on.
    pub(crate) description: Option<LockerDescription>,
    /// When the server created it, where it keeps that (ZooKeeper's `ctime`).
    pub(crate) created: Option<SystemTime>,
    /// Its creation order ([`Head::order`]), the base of its fences.
    pub(crate) order: i64,
}

/// The first contender of a queue, as [`Records::head`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// When the server created it: the base of its fences.
    pub(crate) order: i64,
    /// What [`Records::write`] recorded on it (a leader record), or what it was created with.
    pub(crate) data: Vec<u8>,
}

/// Where a contender stands in its lock's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// It holds the lock; `top` is the top of its fences (a writer's by [`writer_top`], a
    /// reader's from the engine's record of the last writer before it).
    Holds { top: u64 },
    /// Someone is ahead: a writer's predecessor, a writer ahead of a reader.
    Behind,
    /// It is not in the queue any more (an operator deleted it, its session ended).
    Gone,
}

/// Resolves when what a waiter waits for went (or the watch broke: the waiter then looks).
pub(crate) type Wake = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a subscription waits for in its queue ([`Driver::watch`]).
#[derive(Debug)]
pub(crate) enum Awaited<'a, V> {
    /// The deletion of the contender just ahead of this process's own.
    Predecessor(&'a Contender<V>),
    /// The deletion of any writer's contender, or a change of the data of the first one (a
    /// leader record written or cleared, [`Records::write`]): what a waiter without a
    /// contender waits for (a reader, an election's observer). Readers' contenders coming and
    /// going, and new writers', do not wake it.
    Writers,
    /// The deletion of any contender of the queue: a semaphore's waiters may fit once any
    /// contender ahead of them goes, not only the one just ahead. Creations do not wake it.
    Deletions,
}

/// The contenders a batch created ([`Driver::create_all`]), each with where it stands if the
/// same round trip could tell.
pub(crate) type Created<V> = Vec<(Contender<V>, Option<Place>)>;

/// One contender to create ([`Driver::create`], [`Driver::create_many`]): over which session,
/// under which name ([`Driver::name`], which carries its attempt's tag), for which lock and
/// token, as what, and how many fences a writer reserves. Owned (its names are shared, not
/// copied), so that it can wait in the recipe's group commit.
#[derive(Clone)]
pub(crate) struct Creation<V> {
    pub(crate) via: V,
    pub(crate) session: u64,
    pub(crate) name: String,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) role: Role,
    /// A writer's fences ([`AcquireRequest::fences`]); unused for the other roles.
    pub(crate) fences: u64,
}

impl<V: Clone> Creation<V> {
    /// The contender this creation made, at `order` in its lock's queue.
    pub(crate) fn contender(&self, order: i64) -> Contender<V> {
        Contender {
            name: self.name.clone(),
            order,
            session: self.session,
            via: self.via.clone(),
        }
    }
}

/// What the create of one contender answers: the contender, and where it stands if the same
/// round trip could tell.
pub(crate) type CreateOutcome<V> = Result<(Contender<V>, Option<Place>), LockError>;

/// A create the recipe's group commit sends ([`Driver::create_many`]): one contender, or a
/// batch taken together, all or nothing ([`Driver::create_all`]).
#[derive(Clone)]
pub(crate) enum Create<V> {
    One(Creation<V>),
    All(Vec<Creation<V>>),
}

impl<V: Clone + Send + Sync + 'static> Create<V> {
    /// Sends it by itself, as it goes without the group commit: [`Driver::create`] or
    /// [`Driver::create_all`].
    pub(crate) async fn alone<D: Driver<Via = V> + ?Sized>(&self, driver: &D) -> Made<V> {
        match self {
            Create::One(one) => Made::One(driver.create(one).await),
            Create::All(all) => Made::All(driver.create_all(all).await),
        }
    }
}

impl<V> Create<V> {
    /// The contenders it creates.
    pub(crate) fn creations(&self) -> &[Creation<V>] {
        match self {
            Create::One(one) => std::slice::from_ref(one),
            Create::All(all) => all,
        }
    }
}

/// Never: the group commit answers each create in its own kind.
fn mismatched() -> LockError {
    LockError::unavailable("a create was answered as another kind of create", None)
}

/// The answer to a [`Create`], of its kind.
pub(crate) enum Made<V> {
    One(CreateOutcome<V>),
    All(Result<Option<Created<V>>, LockError>),
}

impl<V> Made<V> {
    /// The answer of a call that failed as a whole, for a create of `kind`'s kind.
    pub(crate) fn failed(kind: &Create<V>, e: LockError) -> Self {
        match kind {
            Create::One(_) => Made::One(Err(e)),
            Create::All(_) => Made::All(Err(e)),
        }
    }

    /// The answer to a [`Create::One`].
    pub(crate) fn one(self) -> CreateOutcome<V> {
        match self {
            Made::One(made) => made,
            Made::All(_) => Err(mismatched()),
        }
    }

    /// The answer to a [`Create::All`].
    pub(crate) fn all(self) -> Result<Option<Created<V>>, LockError> {
        match self {
            Made::All(made) => made,
            Made::One(_) => Err(mismatched()),
        }
    }
}

/// One lease of a batch taken together ([`Driver::create_all`]): its request, what its
/// contender contends for (a writer or a reader), and the contender's name
/// ([`Driver::name`]), which carries the request's tag.
pub(crate) struct Ask<'a, 'r> {
    pub(crate) req: &'a AcquireRequest<'r>,
    pub(crate) role: Role,
    pub(crate) name: String,
}

/// What one engine does for the recipe, with its own client. Every call is bounded by the
/// engine's operation timeout and fails with [`LockError::Unavailable`] when the engine did
/// not answer.
pub(crate) trait Driver: Send + Sync + 'static {
    /// How a contender is reached again: ZooKeeper's client of the session that created it,
    /// etcd's lease it is attached to.
    type Via: Clone + Send + Sync + 'static;
    /// What a subscription watches a lock's queue with, for as long as it lives.
    type Watcher: Send + Sync + 'static;

    /// The engine and where it is, for messages: never credentials.
    fn describe(&self) -> String;

    /// The name of the contender an attempt of `token` creates, fixed before it is created:
    /// etcd's key, or the path ZooKeeper appends a sequence number to (and, for permits, their
    /// limit and count first). A permits contender's name does not depend on its limit and
    /// count, which are recorded with it when it is created: the release of an abandoned
    /// attempt, which knows neither, finds it by its tag alone.
    fn name(&self, keys: &LockKeys, token: &OwnerToken, role: Role) -> String;

    /// The session a contender for a lease of `lease` goes over now (a new one when the last
    /// ended), and its number; refuses a lease the session cannot carry.
    fn open(
        &self,
        lease: Duration,
    ) -> impl Future<Output = Result<(Self::Via, u64), LockError>> + Send;

    /// Whether the session can be counted on for `req.validity`, and from when: `None` from
    /// `req.sent`, `Some(from)` from an earlier instant (the lease is granted counted from
    /// there, [`Attempt::Granted`](crate::store::Attempt::Granted)'s `valid_from`). Run
    /// alongside the create or look, and its answer used only for a contender that would hold.
    fn vouch(
        &self,
        session: u64,
        req: &AcquireRequest<'_>,
    ) -> impl Future<Output = Result<Option<Instant>, LockError>> + Send;

    /// Creates the contender `one` describes, with what the engine records along (a writer's
    /// fences); and where it stands, if the same round trip could tell.
    fn create(
        &self,
        one: &Creation<Self::Via>,
    ) -> impl Future<Output = Result<(Contender<Self::Via>, Option<Place>), LockError>> + Send;

    /// Whether concurrent attempts' creates of writers' and readers' contenders go to the
    /// engine together ([`create_many`](Self::create_many), through the recipe's group commit,
    /// `creates`): where one round trip carries them at a lower cost than one each.
    fn creates_together(&self) -> bool {
        false
    }

    /// Where creates go together ([`creates_together`](Self::creates_together)), whether a
    /// batch taken together ([`create_all`](Self::create_all): `lock_all`, a reservation)
    /// rides with them too, or goes by itself as it would alone.
    fn batches_together(&self) -> bool {
        true
    }

    /// Sends every create of `batch` (single contenders, and batches taken together, of
    /// distinct locks, over any sessions) in one round trip, each with its own outcome, as
    /// [`create`](Self::create) or [`create_all`](Self::create_all) would have answered it
    /// alone: one create does not depend on another. The outer error fails them all (the
    /// call's outcome is unknown), but for [`LockError::Config`], a refusal that made nothing:
    /// the recipe then sends each again alone. By default each by itself, side by side.
    fn create_many(
        &self,
        batch: &[Create<Self::Via>],
    ) -> impl Future<Output = Result<Vec<Made<Self::Via>>, LockError>> + Send {
        async move { Ok(join_all(batch.iter().map(|create| create.alone(self))).await) }
    }

    /// Creates the contenders of `batch` (writers' and readers', each key once, all over one
    /// session) in one transaction, with what the engine records along (each writer's
    /// fences): `None` when the engine saw a lease taken and created nothing (etcd compares
    /// first), else every contender in `batch`'s order, and where each stands if the same
    /// round trip could tell. All of them share one creation order: they were created by one
    /// write. A batch the engine cannot send as one transaction (too many keys) is answered
    /// `None` without a round trip.
    fn create_all(
        &self,
        batch: &[Creation<Self::Via>],
    ) -> impl Future<Output = Result<Option<Created<Self::Via>>, LockError>> + Send;

    /// Where each of `mine`, the contenders [`create_all`](Self::create_all) made for
    /// `batch`, stands, in one round trip where the engine can.
    fn look_all(
        &self,
        batch: &[Ask<'_, '_>],
        mine: &[Contender<Self::Via>],
    ) -> impl Future<Output = Result<Vec<Place>, LockError>> + Send;

    /// Deletes every one of `mine` (contenders of one batch) in one round trip where the
    /// engine can; `Ok(false)` when that could not be done at once (one was gone already,
    /// say): the caller then deletes them one by one.
    fn delete_all(
        &self,
        mine: &[Contender<Self::Via>],
    ) -> impl Future<Output = Result<bool, LockError>> + Send;

    /// Where `mine`, a writer's or a reader's contender (`role`), stands in its lock's queue
    /// now; a writer that holds has its fences recorded if the engine records them here. Never
    /// asked of a permits contender: where one stands, the recipe reads from a listing
    /// ([`standing`](super::standing)).
    fn look(
        &self,
        req: &AcquireRequest<'_>,
        mine: &Contender<Self::Via>,
        role: Role,
    ) -> impl Future<Output = Result<Place, LockError>> + Send;

    /// Deletes `mine` if it is still the one this process created; `Ok(false)` when it was
    /// gone already.
    fn delete(
        &self,
        mine: &Contender<Self::Via>,
    ) -> impl Future<Output = Result<bool, LockError>> + Send;

    /// Deletes `mine` in the background, trying again until the engine answers or its
    /// session ended. Never blocks.
    fn delete_later(&self, mine: Contender<Self::Via>);

    /// An attempt sent the create of `name` and never had its answer: what it made, if the
    /// server applied it, is known nowhere here. Delete whatever of it is in the queue, now
    /// and should it land later; but never a contender this process knows as a waiter's or a
    /// holder's ([`Contenders::stands`](super::Contenders::stands)), however late a repeat of
    /// the clean-up runs. Only for such an attempt: the contender of an answered create
    /// belongs to the wait or the lease it was recorded for (see
    /// [`Sequenced::release_once`](super::Sequenced::release_once)).
    fn abandoned(&self, name: &str) -> impl Future<Output = Result<(), LockError>> + Send;

    /// The contenders of `keys`' queue now, in creation order.
    fn list(&self, keys: &LockKeys) -> impl Future<Output = Result<Vec<Queued>, LockError>> + Send;

    /// What a subscription to `keys` watches the queue with.
    fn watcher(
        &self,
        keys: &LockKeys,
    ) -> impl Future<Output = Result<Self::Watcher, LockError>> + Send;

    /// Sets a watch on what a waiter of `watcher`'s queue waits for ([`Awaited`]). `None`
    /// when there is nothing to wait for (the contender is first, or gone). Armed before this
    /// returns: what goes after it is never missed.
    fn watch(
        watcher: &Self::Watcher,
        awaited: Awaited<'_, Self::Via>,
    ) -> impl Future<Output = Result<Option<Wake>, String>> + Send;
}

/// What inspection reads of a queue beside its listing ([`Driver::list`]): who each contender
/// is, and how long its owner keeps it. Only the operator's calls and a semaphore's
/// inspection ask it, never an acquire.
pub(crate) trait Inspection: Driver {
    /// How long each of `owners` ([`Queued::owner`]) keeps its contenders at most if nothing
    /// renews it any more, as far as the engine can tell: the remaining TTL of an etcd lease;
    /// on ZooKeeper, which cannot tell of another client's session, this locker's session
    /// timeout, the bound of every lease of a session like it.
    fn remaining(
        &self,
        owners: &[i64],
    ) -> impl Future<Output = Result<Vec<std::time::Duration>, LockError>> + Send;

    /// Who each of `contenders` (of `keys`' queue, as [`Driver::list`] gave them) is, for
    /// inspection: its data and its session's description, read side by side. `None` for one
    /// that is gone since.
    fn who(
        &self,
        keys: &LockKeys,
        contenders: &[Queued],
    ) -> impl Future<Output = Result<Vec<Option<Who>>, LockError>> + Send;
}

/// Leader records, kept in the data of the contender that holds an election's lock (see
/// [`leader`](super::leader)): the first contender's data is read, and a contender's own
/// data replaced. Only leader elections ask it.
pub(crate) trait Records: Driver {
    /// The first contender of `keys`' queue and its data; `None` when the queue is empty.
    fn head(&self, keys: &LockKeys)
        -> impl Future<Output = Result<Option<Head>, LockError>> + Send;

    /// Replaces the data of `mine` while it is the one this process created (and, on etcd,
    /// keeps it on its lease); `Ok(false)` when it is gone.
    fn write(
        &self,
        mine: &Contender<Self::Via>,
        data: &[u8],
    ) -> impl Future<Output = Result<bool, LockError>> + Send;
}
