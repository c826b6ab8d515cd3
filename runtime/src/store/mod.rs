//! Where locks are stored. Everything above this module talks to a [`Store`]: one small
//! protocol (acquire, release, renew, wait for a release, the session leases are granted
//! over) that every engine speaks, so the locker, its queues, its watchdog and the web
//! integration never learn which engine holds their locks. Each engine lives in a module of
//! its own and imports no sibling; [`Deployment`] names one, and is the only place that
//! connects them.
//!
//! The trait is crate-private on purpose: the protocol still grows with the primitives to
//! come (reserved fence ranges for in-process handovers, the cross-process queue of
//! waiters), and a public trait would freeze it. The in-memory store is the smallest
//! complete engine, and the one to read first.

#[cfg(test)]
pub(crate) mod apart;
pub(crate) mod batch;
mod capabilities;
mod deployment;
#[cfg(feature = "etcd")]
mod etcd;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod halving;
pub(crate) mod heard;
pub(crate) mod identity;
mod join;
pub(crate) mod keys;
pub(crate) mod kind;
mod lazy;
pub(crate) mod memory;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod opening;
mod parts;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod redis;
#[cfg(test)]
pub(crate) mod scripted;
pub(crate) mod secrets;
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
mod sequenced;
mod session;
mod settings;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod settling;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod sql_releases;
pub(crate) mod token;
#[cfg(feature = "zookeeper")]
mod zookeeper;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::LockError;
use crate::inspect::{Holder, Waiter};
use crate::store::identity::Identity;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;

pub(crate) use capabilities::{refusal, require, Engine, Feature};
pub use capabilities::{Capabilities, Fairness};
pub use deployment::Deployment;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) use halving::renew_halving;
pub(crate) use join::{join_all, join_together, together};
pub(crate) use lazy::{Connection, LazyStore};
pub(crate) use parts::{admin_by, leader_by, AdminParts, LeaderParts};
pub(crate) use session::Session;
pub(crate) use settings::Settings;
pub use settings::DEFAULT_SESSION_TIMEOUT;

/// A store in this process's memory, with the semantics of the others.
pub(crate) fn in_memory() -> std::sync::Arc<dyn Store> {
    std::sync::Arc::new(memory::MemoryStore::new())
}

/// What an acquire attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The lock was free and is ours now; the fencing tokens `top - reserved + 1 ..= top`
    /// are ours to hand out. The lease's validity counts from `valid_from` when the store
    /// vouches for it only from before the request was sent (etcd: from the send time of its
    /// lease's last acknowledged keep-alive), from the request's send time when `None`; never
    /// from later (the engine takes the earlier of the two).
    Granted {
        top: u64,
        valid_from: Option<tokio::time::Instant>,
    },
    /// Someone else holds it; their remaining lease, when known.
    Held { remaining: Option<Duration> },
}

impl Attempt {
    /// Granted, its validity counted from the request's send time (every engine but etcd).
    pub(crate) fn granted(top: u64) -> Self {
        Attempt::Granted {
            top,
            valid_from: None,
        }
    }
}

/// One acquire attempt.
pub(crate) struct AcquireRequest<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a OwnerToken,
    pub(crate) lease: Duration,
    /// How much of the lease the client counts on, from `sent`; RedLock refuses a quorum
    /// reached later.
    pub(crate) validity: Duration,
    /// When the request was sent: the lease's validity counts from here, or from the earlier
    /// instant the store answers ([`Attempt::Granted`]'s `valid_from`).
    pub(crate) sent: tokio::time::Instant,
    pub(crate) fence_ttl: Duration,
    /// How many fencing tokens to reserve: one for this holder, plus one for each holder of
    /// this process it may hand the lock to before releasing it.
    pub(crate) fences: u64,
    /// How long this contender still waits if the lock is taken: the store queues this
    /// process for that long, so that a release lets it in. Zero: it will not wait.
    pub(crate) interest: Duration,
    /// This contender may be queued already (an earlier attempt of this wait was).
    pub(crate) queued: bool,
    /// The name this request waits under in the store's queue when it waits alone (a fair
    /// request on an engine whose [`Fairness`] is per request); `None`: under
    /// the process's name, as the front of the process's local queue.
    pub(crate) contender: Option<&'a str>,
    /// The caller reads no fencing token ([`LockRequest::unfenced`](crate::LockRequest::unfenced)):
    /// a store may take the lock without reserving any, and answer `top` = `fences` (the
    /// tokens are then only local numbers that tell the holders of the lease apart).
    pub(crate) fenced: bool,
    /// What the lease would hold: the lock, a reader's share, or permits. An engine asked
    /// for a kind it lacks answers with the refusal of its capabilities ([`lacks`]).
    pub(crate) kind: LeaseKind,
    /// For permits: a request for several that waits takes its turn in the semaphore's
    /// queue ([`PermitWaiter`]); `None` for every other request.
    pub(crate) waiter: Option<PermitWaiter>,
}

/// One lease to renew in a watchdog batch.
#[derive(Clone, Copy)]
pub(crate) struct Renewal<'a> {
    pub(crate) keys: &'a LockKeys,
    pub(crate) token: &'a OwnerToken,
    pub(crate) lease: Duration,
    /// What the lease holds (the lock, a reader's share, permits).
    pub(crate) kind: LeaseKind,
}

/// What a renewal found for one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Extended.
    Yes,
    /// Not ours any more: the lease is lost.
    No,
    /// Could not tell (nodes failed or did not answer): try again while the lease is valid.
    Unknown,
}

/// The future of one store call. Boxed: engines' futures are deep types (RedLock joins one
/// per node, clusters route), and boxing here keeps every future above the store small.
pub(crate) type StoreFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, LockError>> + Send + 'a>>;

/// The settling of a token's calls whose outcome is unknown ([`Store::settle`]).
pub(crate) type Settling<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A lock engine. Every call is bounded by the engine's operation timeout and fails with
/// [`LockError::Unavailable`] when the engine did not answer.
///
/// Eleven methods, and what varies is data: the kind of a lease ([`LeaseKind`]), how a lease
/// ends ([`Ending`]), the place a contender leaves ([`Leave`]), and the calls of the two
/// optional parts ([`LeaderOp`], [`AdminOp`]), each one method that the engines without the
/// part leave to its default refusal.
pub(crate) trait Store: Send + Sync + 'static {
    /// What the engine is and offers ([`Info`]): asked where a request's options are
    /// resolved; cheap, and current (a lease bound can change with a new session). Its
    /// refusals derive from it (`refusal_of` on `dyn Store`, [`lacks`]).
    fn info(&self) -> Info;

    /// The session leases are granted over, for engines where its end can mean lost locks
    /// (a single server that may restart empty). `None`: only the clock and renewals tell.
    /// (What the engine sees of its connection meanwhile is in [`Info::link`].)
    fn session(&self) -> Option<Session> {
        None
    }

    /// One round trip that proves the engine answers (a `PING`, a `SELECT 1`, a keep-alive),
    /// sent by the locker's health monitor while the engine is suspended or lost, so that a
    /// locker without traffic notices it come back. Bounded by the operation timeout, and
    /// [`LockError::Unavailable`] when the engine did not answer. The default answers at
    /// once: for engines that are always there.
    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Takes the leases `batch` asks for, one [`Attempt`] per request, in order.
    ///
    /// **A batch of one** takes a lease of `req.kind` if it is free, in one round trip:
    /// - **the lock** ([`LeaseKind::Exclusive`]): reserving `req.fences` fencing tokens;
    /// - **a reader's share** ([`LeaseKind::Read`]) if no writer holds the lock or waits for
    ///   it: the lease is this reader's own, and `Granted { top }` carries its fence: at or
    ///   above every fence handed out for the key before, below every later writer's (at
    ///   least 1). `req.fences` and `req.interest` are not used;
    /// - **permits** ([`LeaseKind::Permits`]): `count` permits of the semaphore `req.keys`
    ///   ([`LockKeys::semaphore`]) if that many are free among `limit`: each permit is a
    ///   holder of its own under `req.token`, with its own lease. `Granted { top }` when
    ///   taken, `top` the holder's one fencing token (whatever `count`), reserved from the
    ///   semaphore's fence counter by the rule the engine's writers use; `Held { remaining }`,
    ///   the time until the first holder's lease ends, when too few are free. Fails with
    ///   [`LockError::Config`] when the semaphore's current holders agreed on another limit.
    ///   `req.fences`, `req.interest` and `req.contender` are not used.
    ///
    ///   Turns: a `req.waiter` (a request for several permits that waits) that finds too few
    ///   free joins the semaphore's queue of waiters, by arrival, for [`PERMIT_INTEREST`] at
    ///   most (asked again, it stays in its place). Every request, queued or not, is granted
    ///   only if the permits free after it still cover every queued waiter ahead of it (all
    ///   of them for a request that is not queued): so single permits that come free are
    ///   kept for the oldest waiter instead of being taken again at once. A granted waiter
    ///   leaves the queue.
    ///
    /// **A batch of several** (distinct keys, none queued: each request's `interest` is
    /// zero) is all or nothing, in one round trip: every answer is `Granted` when all were
    /// free and are taken now, or every answer is `Held` (`remaining` where known) and
    /// nothing changed. Only sent for keys and kinds that the engine's [`Info::at_once`]
    /// covers (`takes_all_at_once` on `dyn Store`); an engine that takes nothing at once
    /// answers a batch of several with every answer `Held` ([`one_at_a_time`]).
    ///
    /// A kind the engine lacks is refused as its capabilities say ([`lacks`]).
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>>;

    /// Ends what `token` holds of the lock `keys` as `ending` says ([`Ending`]): releases
    /// its lease, or hands the lock on to another holder of this process. A release is
    /// called through `give_back` (on `dyn Store`), which settles the token's calls first.
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended>;

    /// A contender stopped waiting without its lease (gave up, timed out, was cancelled):
    /// it leaves the place `place` says it had in the store's queue, so that it holds nobody
    /// back (a writer's wait holds new readers back; a waiter for permits keeps single
    /// permits from others), and a lock that a release had just chosen it for goes on to the
    /// others. Never blocks (runs in the background where it needs a round trip); a place
    /// that cannot be left so lapses by itself. The default leaves nothing: for engines that
    /// keep no waiting contenders.
    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        let _ = (keys, place);
    }

    /// Settles against the server every call sent for `token` whose outcome this client
    /// does not know (it timed out, its connection broke, its caller stopped waiting for
    /// it): what it resolves to is that none of them can take effect any more, within the
    /// engine's stated bound (past which the engine gives up, and a call that lands later
    /// still keeps what it took for its lease at most). `None` when nothing is left to
    /// settle: the default, for engines whose calls cannot land after a later call of the
    /// same client (in memory; or answered in order on one connection, which every later
    /// call of the token rides behind). `give_back` (on `dyn Store`) runs it first. A
    /// store that wraps another must pass it on.
    fn settle<'a>(&'a self, token: &'a OwnerToken) -> Option<Settling<'a>> {
        let _ = token;
        None
    }

    /// Extends each lease that its token still owns; one entry per renewal, in order.
    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>>;

    /// Starts listening for releases of one lock. Resolves once the subscription is active,
    /// so a release that happens after it resolved is never missed.
    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription>;

    /// One call on the leader records of the election whose lock is `keys` ([`LeaderOp`]):
    /// who leads it, recorded beside its lock and valid only while that lock is held. `record`
    /// names the record where the engine keeps it under a key of its own. Reached only where
    /// [`Capabilities::leader_election`] says the engine keeps them
    /// (`leader_records_or_refusal` on `dyn Store`); the default refuses ([`lacks`]). An
    /// engine that keeps them states its calls ([`LeaderParts`]) and answers by [`leader_by`].
    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        let _ = (keys, record, op);
        lacks(self, Feature::LeaderElection)
    }

    /// One call of the operator's part ([`AdminOp`]: inspection, listing, forced release,
    /// the locker's description, a semaphore's holders). Inspecting a semaphore is reached
    /// where [`Capabilities::semaphores`] says the engine has them, the rest only where
    /// [`Capabilities::inspection`] says the engine has an operator's part
    /// (`admin_or_refusal` on `dyn Store`). The default refuses every call: for engines
    /// without either. An engine with either states its calls ([`AdminParts`]) and answers
    /// by [`admin_by`].
    fn admin<'a>(&'a self, op: AdminOp<'a>) -> StoreFuture<'a, AdminAnswer> {
        refuse_admin(self, op)
    }
}

/// How a [`Store::release`] ends what a token holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Ends the lease of `kind` that the token holds, if it still does, and wakes the
    /// lock's waiters (a reader's: when it was the last reader; permits: the semaphore's
    /// waiters, who may fit now). Answered [`Ended::Released`]. `valid_until` is when its
    /// holder counts the lease valid until: an engine that sends a release again when it
    /// cannot tell whether the first one took effect (PostgreSQL) uses it to tell its own
    /// earlier delete of a lock from a loss.
    Release {
        kind: LeaseKind,
        valid_until: tokio::time::Instant,
    },
    /// Hands the lock the token holds on to another holder of this process. An engine that
    /// need not take part answers [`Ended::Kept`] at once, without a round trip: the next
    /// holder takes the next of the fences reserved with the lease. Otherwise
    /// [`Ended::HandedOver`]: `Some(fence)`, the next holder's fence (as the store hands it
    /// out), the first of a reservation that starts anew there; `None`, the lock cannot pass
    /// now (PostgreSQL: a fenced transaction of an earlier holder is still open; or the
    /// token no longer holds it), and is released instead. A call whose answer was lost
    /// counts as `None`, so it must change nothing if it lands after that release, or is
    /// sent again. A store that wraps another must pass it on.
    HandOver,
}

/// What a [`Store::release`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// [`Ending::Release`]: whether the lease was still held (nothing of it is left either
    /// way).
    Released(bool),
    /// [`Ending::HandOver`] on an engine that need not take part: nothing was sent.
    Kept,
    /// [`Ending::HandOver`] through the store: the next holder's fence, or `None` when the
    /// lock cannot pass now. (Only the SQL engines take part; without them nothing builds it.)
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    HandedOver(Option<u64>),
}

impl Ended {
    /// The answer to a release: whether the lease was still held. An answer of a handover
    /// here is the engine's fault, which `description` names.
    pub(crate) fn released(self, description: impl FnOnce() -> String) -> Result<bool, LockError> {
        match self {
            Ended::Released(held) => Ok(held),
            _ => Err(LockError::unavailable(
                format!("{} answered a release as a handover", description()),
                None,
            )),
        }
    }

    /// The answer to a handover: `None` when the engine need not take part (nothing was
    /// sent); otherwise the engine's answer, the next holder's fence or `None`. An answer of
    /// a release here is the engine's fault, which `description` names.
    pub(crate) fn handed_over(
        self,
        description: impl FnOnce() -> String,
    ) -> Option<Result<Option<u64>, LockError>> {
        match self {
            Ended::Kept => None,
            Ended::HandedOver(fence) => Some(Ok(fence)),
            Ended::Released(_) => Some(Err(LockError::unavailable(
                format!("{} answered a handover as a release", description()),
                None,
            ))),
        }
    }
}

/// One call on an election's leader records ([`Store::leader`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeaderOp<'a> {
    /// Records `leader` as the election's leader if `token` holds its lock and no newer term
    /// is recorded there; then wakes the lock's subscribers (observers). Answered
    /// [`LeaderAnswer::Published`]: `false` when not written (the lock is not ours any more,
    /// or a newer leader recorded itself). The record counts only while its owner token
    /// holds the lock, so it lapses with the lease and lives as long as the renewals do.
    Publish {
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    },
    /// Deletes the leader record if it still holds `term` (a resigning leader), and wakes the
    /// lock's subscribers. A newer term's record is left alone. Answered
    /// [`LeaderAnswer::Cleared`].
    Clear { term: u64 },
    /// The current leader: the record, if its owner token still holds the lock. Answered
    /// [`LeaderAnswer::Read`].
    Read,
}

/// The answer to a [`LeaderOp`], the variant named after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LeaderAnswer {
    Published(bool),
    Cleared,
    Read(Option<LeaderRecord>),
}

/// One call of an engine's operator part ([`Store::admin`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum AdminOp<'a> {
    /// The state of one lock: [`AdminAnswer::Lock`].
    Inspect(&'a LockKeys),
    /// The holders of the semaphore `keys` now (never their tokens): [`AdminAnswer::Permits`].
    Permits(&'a LockKeys),
    /// The keys (as users gave them) of the locks stored under `prefix`, held or recently
    /// held; the caller filters and inspects them: [`AdminAnswer::Keys`].
    List(&'a str),
    /// Deletes a lock whoever holds it, and wakes its waiters: [`AdminAnswer::Forced`], true
    /// when there was one.
    ForceRelease(&'a LockKeys),
    /// Stores this locker's description (`identity`) where inspection by other lockers of
    /// the same `prefix` finds it, for a while: where it expires (Redis, PostgreSQL) for
    /// [`DESCRIPTION_TTL`](identity::DESCRIPTION_TTL) from now, where it lives with the session
    /// (ZooKeeper, etcd) until the session ends (a call in the same session then costs
    /// nothing). Called by a background task of the locker from its first contention on, and
    /// every [`DESCRIBE_EVERY`](identity::DESCRIBE_EVERY), never on the acquire path; only
    /// where the engine has inspection, so engines without it store nothing:
    /// [`AdminAnswer::Described`].
    Describe {
        prefix: &'a str,
        identity: &'a Identity,
    },
}

/// The answer to an [`AdminOp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AdminAnswer {
    Lock(LockState),
    Permits(PermitState),
    Keys(Vec<String>),
    Forced(bool),
    Described,
}

/// The future of an answer of one of an optional part's calls, from the future of what the
/// engine found.
pub(crate) fn answer<'a, T: 'a, A: 'a>(
    call: impl Future<Output = Result<T, LockError>> + Send + 'a,
    wrap: fn(T) -> A,
) -> StoreFuture<'a, A> {
    Box::pin(async move { call.await.map(wrap) })
}

/// The default [`Store::admin`]: a semaphore's holders are refused as the capabilities say
/// ([`lacks`]), the rest as an engine without inspection refuses it.
pub(crate) fn refuse_admin<'a, S: Store + ?Sized>(
    store: &S,
    op: AdminOp<'_>,
) -> StoreFuture<'a, AdminAnswer> {
    match op {
        AdminOp::Permits(_) => lacks(store, Feature::Semaphores),
        _ => Box::pin(std::future::ready(Err(parts::no_inspection()))),
    }
}

/// [`Ending::HandOver`] on an engine that need not take part: answered alone ([`heard`]),
/// without a round trip.
pub(crate) fn kept<'a>() -> StoreFuture<'a, Ended> {
    Box::pin(async {
        heard::answered_alone();
        Ok(Ended::Kept)
    })
}

/// [`Store::acquire`] for an engine that takes one lease per round trip: a batch of one goes
/// to `one`; a batch of several is answered `Held` throughout, nothing taken (the caller then
/// takes the leases one by one).
pub(crate) fn one_at_a_time<'a>(
    batch: &'a [AcquireRequest<'_>],
    one: impl FnOnce(&'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt>,
) -> StoreFuture<'a, Vec<Attempt>> {
    match batch {
        [req] => {
            let call = one(req);
            Box::pin(async move { call.await.map(|attempt| vec![attempt]) })
        }
        _ => Box::pin(std::future::ready(Ok(vec![
            Attempt::Held {
                remaining: None
            };
            batch.len()
        ]))),
    }
}

/// What an engine is and offers, in one answer ([`Store::info`]).
#[derive(Clone, Debug)]
pub(crate) struct Info {
    /// Which engine this is (one Redis server, Sentinel and Cluster all answer
    /// [`Engine::Redis`], the family they share): the reasons of its refusals
    /// ([`Engine::why_not`]), and the few calls only one engine can serve (a PostgreSQL
    /// fence check in the caller's transaction refuses another engine's guard before it runs
    /// any SQL).
    pub(crate) engine: Engine,
    /// What the engine offers (read locks, semaphores, leader election, inspection, how fair
    /// locks queue, the longest lease it honours, whether locks expire in the store): the
    /// one truth for which leases it takes and which optional parts it has.
    pub(crate) capabilities: Capabilities,
    /// Whether every call is answered at once, whatever happens: the store is this
    /// process's memory. The locker then watches nothing of its health (its state stays
    /// connected).
    pub(crate) always_answers: bool,
    /// Where the locks are, for `Debug` and messages: never credentials. Borrowed where it
    /// never changes, so that asking what an in-memory store offers costs no allocation.
    pub(crate) description: Cow<'static, str>,
    /// Which leases a batch of several ([`Store::acquire`]) can take together by one write:
    /// in one round trip (a Redis script, an etcd transaction), or in as few as the engine
    /// allows (ZooKeeper: one `multi` and one read, a third `multi` to delete what it created
    /// when a key is taken, so "nothing changed" holds once the batch is answered).
    pub(crate) at_once: AtOnce,
    /// What the engine's own background work sees of its connection, beside the outcomes of
    /// the locker's calls: true while it works. ZooKeeper's session events (disconnected,
    /// connected again), etcd's keep-alives (acknowledged, or overdue), PostgreSQL's
    /// listening connection (listening, or its health check failed), a lazily connected
    /// store's first connection. `None`: only the calls tell (the locker's health then
    /// learns of an outage from a call that fails, and probes it with [`Store::probe`]).
    pub(crate) link: Option<watch::Receiver<bool>>,
}

/// Which leases an engine can take together by one write (a batch of several,
/// [`Store::acquire`]; see [`Info::at_once`]); the others are taken one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtOnce {
    /// Which keys can go together.
    pub(crate) keys: Together,
    /// Whether readers' shares ([`LeaseKind::Read`]) go in a batch beside locks. Locks
    /// always do where any keys go together; permits never do.
    pub(crate) reads: bool,
}

/// Which keys an engine can take leases on together ([`AtOnce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Together {
    /// None: every lease is taken on its own.
    Never,
    /// Any keys: they all live on one server.
    Always,
    /// Keys that share a hash slot (a Redis Cluster routes each slot to one node).
    SameSlot,
}

impl AtOnce {
    /// Nothing at once: every lease is taken on its own.
    pub(crate) const NEVER: AtOnce = AtOnce {
        keys: Together::Never,
        reads: false,
    };

    /// Whether the leases `batch` asks for (each key with its kind) can be taken together.
    pub(crate) fn covers(self, batch: &[(&LockKeys, LeaseKind)]) -> bool {
        let kinds = batch.iter().all(|(_, kind)| match kind {
            LeaseKind::Exclusive => true,
            LeaseKind::Read => self.reads,
            LeaseKind::Permits { .. } => false,
        });
        kinds
            && match self.keys {
                Together::Never => false,
                Together::Always => true,
                Together::SameSlot => batch
                    .windows(2)
                    .all(|w| keys::slot(w[0].0.lock()) == keys::slot(w[1].0.lock())),
            }
    }
}

impl Info {
    /// An engine's answer: its own row of the capabilities table, for engines whose calls
    /// go to a server.
    pub(crate) fn of(
        engine: Engine,
        capabilities: Capabilities,
        description: impl Into<Cow<'static, str>>,
    ) -> Self {
        Info {
            engine,
            capabilities,
            always_answers: false,
            description: description.into(),
            at_once: AtOnce::NEVER,
            link: None,
        }
    }
}

/// A request for several permits that waits, and so takes its turn in the semaphore's queue
/// ([`Store::acquire`] of permits): under steady load single permits never all come free at
/// once, and without a turn such a request would wait for as long as the load lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PermitWaiter {
    /// Its name in the queue for its whole wait (each attempt has a new owner token).
    pub(crate) name: u128,
    /// When it stops waiting.
    pub(crate) until: tokio::time::Instant,
}

impl PermitWaiter {
    /// Its place in a semaphore's queue of waiters: its name and the permits it waits for
    /// (the stores sum the permits the waiters ahead of a request keep from it).
    pub(crate) fn place(name: u128, count: u32) -> String {
        format!("{name:032x}:{count}")
    }

    /// How long it stays queued from now unless it asks again: until its wait ends, at most
    /// [`PERMIT_INTEREST`]. Zero: it will not wait any more, so it is not queued.
    pub(crate) fn interest(&self) -> Duration {
        self.until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(PERMIT_INTEREST)
    }
}

/// The longest a waiter stays in a semaphore's queue without asking again: it asks at least
/// every second (a wake-up, or the contenders' longest nap), so a waiter that vanished (a
/// killed process) holds the others back for this long at most.
pub(crate) const PERMIT_INTEREST: Duration = Duration::from_secs(2);

/// The place in a store's queue that a contender leaves when it stops waiting without its
/// lease ([`Store::leave`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leave<'a> {
    /// The front of this process's queue for the lock: an engine that keeps waiting
    /// contenders (ZooKeeper's znodes, the queue and interest set of Redis, the waiting
    /// writers in memory) lets go of this one.
    ProcessFront,
    /// A request that waited under its own contender name (a fair request on an engine
    /// whose [`Fairness`] is per request).
    Alone(&'a str),
    /// A [`PermitWaiter`] (named `waiter`, waiting for `count` permits) in a semaphore's
    /// queue; it wakes the others, who may fit now.
    PermitLine { waiter: u128, count: u32 },
}

/// The answer of an engine asked for something it lacks (a lease of a kind it does not
/// offer, a semaphore to inspect): the refusal its capabilities call for, with the engine's
/// reason where it has one. The requests are refused before, where their options are
/// resolved; this keeps the engine's answer the same if one gets this far. Answered alone
/// ([`heard`]): the locker's health takes it for no news of the server.
pub(crate) fn lacks<'a, T: Send + 'a, S: Store + ?Sized>(
    store: &S,
    feature: Feature,
) -> StoreFuture<'a, T> {
    let refused = refusal_by(&store.info(), feature);
    Box::pin(async move {
        heard::answered_alone();
        Err(refused)
    })
}

/// The error for a request that needs `feature` on the engine `info` describes, which lacks
/// it: the engines that have it, and the engine's reason where it has one.
fn refusal_by(info: &Info, feature: Feature) -> LockError {
    refusal(feature, &info.description, info.engine.why_not(feature))
}

impl dyn Store {
    /// Where the locks are, for `Debug` and messages ([`Info::description`]).
    pub(crate) fn describe(&self) -> String {
        self.info().description.into_owned()
    }

    /// What the engine offers ([`Info::capabilities`]).
    pub(crate) fn capabilities(&self) -> Capabilities {
        self.info().capabilities
    }

    /// Takes the lease `req` asks for: [`Store::acquire`] of a batch of one.
    pub(crate) fn acquire_one<'a>(
        &'a self,
        req: &'a AcquireRequest<'_>,
    ) -> StoreFuture<'a, Attempt> {
        let call = self.acquire(std::slice::from_ref(req));
        Box::pin(async move {
            match call.await?.pop() {
                Some(attempt) => Ok(attempt),
                None => Err(self.malformed("an acquire")),
            }
        })
    }

    /// The holders of the semaphore `keys` now, for operators (never their tokens), where
    /// the engine has semaphores (what [`Capabilities::semaphores`] says); refused elsewhere
    /// ([`lacks`]).
    pub(crate) async fn inspect_permits(&self, keys: &LockKeys) -> Result<PermitState, LockError> {
        match self.admin(AdminOp::Permits(keys)).await? {
            AdminAnswer::Permits(state) => Ok(state),
            _ => Err(self.malformed("a semaphore's inspection")),
        }
    }

    /// The error for an answer of another call than the one asked (an engine's fault).
    fn malformed(&self, what: &str) -> LockError {
        LockError::unavailable(
            format!("{} answered {what} with a malformed reply", self.describe()),
            None,
        )
    }

    /// The error for a request that needs `feature`, which the engine lacks: the engines
    /// that have it, and the engine's reason where it has one.
    pub(crate) fn refusal_of(&self, feature: Feature) -> LockError {
        refusal_by(&self.info(), feature)
    }

    /// The engine's leader records, or the refusal its capabilities call for.
    pub(crate) fn leader_records_or_refusal(&self) -> Result<LeaderRecords<'_>, LockError> {
        match self.capabilities().leader_election {
            true => Ok(LeaderRecords { store: self }),
            false => Err(self.refusal_of(Feature::LeaderElection)),
        }
    }

    /// The engine's operator part, or the refusal its capabilities call for (with the
    /// engine's reason where it has one, [`Engine::why_not_inspect`]).
    pub(crate) fn admin_or_refusal(&self) -> Result<Admin<'_>, LockError> {
        let info = self.info();
        match info.capabilities.inspection {
            true => Ok(Admin { store: self }),
            false => Err(LockError::config(match info.engine.why_not_inspect() {
                Some(why) => why.to_owned(),
                None => format!("inspecting locks is not supported on {}", info.description),
            })),
        }
    }

    /// Gives back what the acquires for `token` hold or created, a lease of `kind` whose
    /// holder counts it valid until `valid_until`; `Ok(false)` when nothing of it was held
    /// any more. Every lease ends here (its release), and every attempt whose outcome the
    /// caller cannot count on is undone here ([`Unsettled`](crate::kernel::unsettled)).
    ///
    /// The contract, for every engine and every kind of lease:
    /// - **settled first**: the token's calls whose outcome is unknown are settled against
    ///   the server before anything is removed ([`Store::settle`]), so that none of them can
    ///   land after this and take what it gives back;
    /// - **only its own**: it removes what this token holds or created (its lease, its
    ///   reader's share, its permits, the waiting place its attempt made), never another
    ///   token's, nor anything of a name or tag that a later attempt may stand on;
    /// - **bounded**: the settling by the engine's stated bound, the removal by the
    ///   operation timeout;
    /// - **off the hot path**: an attempt's give-back runs in the locker's background task;
    ///   only a caller that asked for a release awaits it, and with nothing to settle it
    ///   costs what the release costs.
    pub(crate) fn give_back<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        kind: LeaseKind,
        valid_until: tokio::time::Instant,
    ) -> StoreFuture<'a, bool> {
        let ending = Ending::Release { kind, valid_until };
        let settling = self.settle(token);
        Box::pin(async move {
            if let Some(settling) = settling {
                settling.await;
            }
            let ended = self.release(keys, token, ending).await?;
            ended.released(|| self.describe())
        })
    }
}

/// An engine's leader records ([`Store::leader`]), reached where its capabilities say it
/// keeps them (`leader_records_or_refusal` on `dyn Store`): one method per [`LeaderOp`].
#[derive(Clone, Copy)]
pub(crate) struct LeaderRecords<'a> {
    store: &'a dyn Store,
}

impl<'a> LeaderRecords<'a> {
    /// [`LeaderOp::Publish`]: whether `leader` was recorded.
    pub(crate) async fn publish_leader(
        self,
        keys: &LockKeys,
        record: &str,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> Result<bool, LockError> {
        let op = LeaderOp::Publish { token, leader };
        match self.store.leader(keys, record, op).await? {
            LeaderAnswer::Published(written) => Ok(written),
            _ => Err(self.store.malformed("a leader record's write")),
        }
    }

    /// [`LeaderOp::Clear`].
    pub(crate) async fn clear_leader(
        self,
        keys: &LockKeys,
        record: &str,
        term: u64,
    ) -> Result<(), LockError> {
        match self
            .store
            .leader(keys, record, LeaderOp::Clear { term })
            .await?
        {
            LeaderAnswer::Cleared => Ok(()),
            _ => Err(self.store.malformed("a leader record's deletion")),
        }
    }

    /// [`LeaderOp::Read`]: the current leader.
    pub(crate) async fn read_leader(
        self,
        keys: &LockKeys,
        record: &str,
    ) -> Result<Option<LeaderRecord>, LockError> {
        match self.store.leader(keys, record, LeaderOp::Read).await? {
            LeaderAnswer::Read(leader) => Ok(leader),
            _ => Err(self.store.malformed("a leader record's read")),
        }
    }
}

/// An engine's operator part ([`Store::admin`]), reached where its capabilities say it has
/// one (`admin_or_refusal` on `dyn Store`): one method per [`AdminOp`].
#[derive(Clone, Copy)]
pub(crate) struct Admin<'a> {
    store: &'a dyn Store,
}

impl<'a> Admin<'a> {
    /// [`AdminOp::Inspect`]: the state of one lock.
    pub(crate) async fn inspect(self, keys: &LockKeys) -> Result<LockState, LockError> {
        match self.store.admin(AdminOp::Inspect(keys)).await? {
            AdminAnswer::Lock(state) => Ok(state),
            _ => Err(self.store.malformed("an inspection")),
        }
    }

    /// [`AdminOp::List`]: the keys of the locks stored under `prefix`.
    pub(crate) async fn list(self, prefix: &str) -> Result<Vec<String>, LockError> {
        match self.store.admin(AdminOp::List(prefix)).await? {
            AdminAnswer::Keys(keys) => Ok(keys),
            _ => Err(self.store.malformed("a listing")),
        }
    }

    /// [`AdminOp::ForceRelease`]: true when there was a lock.
    pub(crate) async fn force_release(self, keys: &LockKeys) -> Result<bool, LockError> {
        match self.store.admin(AdminOp::ForceRelease(keys)).await? {
            AdminAnswer::Forced(deleted) => Ok(deleted),
            _ => Err(self.store.malformed("a forced release")),
        }
    }

    /// [`AdminOp::Describe`]: stores this locker's description.
    pub(crate) async fn describe_locker(
        self,
        prefix: &str,
        identity: &Identity,
    ) -> Result<(), LockError> {
        match self
            .store
            .admin(AdminOp::Describe { prefix, identity })
            .await?
        {
            AdminAnswer::Described => Ok(()),
            _ => Err(self.store.malformed("a locker's description")),
        }
    }
}

/// An elected leader as the store records it: its term (the fence of its lease) and the
/// identity it campaigned with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    pub(crate) term: u64,
    pub(crate) identity: String,
}

/// What an engine knows of one lock, for operators. Owner tokens are never part of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockState {
    pub(crate) held: bool,
    pub(crate) remaining: Option<Duration>,
    pub(crate) waiters: bool,
    pub(crate) waiting_processes: u64,
    pub(crate) last_fence: Option<u64>,
    /// Who holds it (the writer, or every reader), with their lockers' descriptions.
    pub(crate) holders: Vec<Holder>,
    /// Who waits, in order, at most [`MAX_LISTED_WAITERS`](crate::MAX_LISTED_WAITERS).
    pub(crate) waiting: Vec<Waiter>,
}

/// The error for a request whose limit differs from the one the semaphore's holders agreed on.
pub(crate) fn disagreement(agreed: u32, asked: u32) -> LockError {
    LockError::config(format!(
        "this semaphore is held with a limit of {agreed} permits, and this request asked for a \
         limit of {asked}; every caller of one semaphore must give the same `permits` (a limit \
         changes once no permit of the old one is held)"
    ))
}

/// What an engine knows of one semaphore, for operators. Owner tokens are never part of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PermitState {
    /// The limit its holders agreed on; `None` when nobody holds a permit.
    pub(crate) limit: Option<u32>,
    /// Each holder's permits, remaining lease and who it is, the soonest to end first.
    pub(crate) holders: Vec<(u32, Duration, Holder)>,
}

/// A live subscription to one lock's releases. Dropping it ends the interest; the backend
/// unsubscribes when nobody else in the process listens to the same lock.
pub(crate) struct WakeSubscription {
    rx: Wakeups,
    _interest: Option<Box<dyn Send + Sync>>,
}

/// How a subscription hears of releases: a counter bumped by each, or a log that says for
/// whom each one was.
enum Wakeups {
    Count(watch::Receiver<u64>),
    Addressed {
        rx: watch::Receiver<WakeLog>,
        seen: u64,
    },
}

/// The latest wake-ups of one lock, each for everyone (`None`) or for the one contender a
/// release let have the lock. Short: a waiter that fell more than [`WakeLog::KEPT`] behind
/// is woken whoever the missed ones were for.
#[derive(Clone, Debug, Default)]
pub(crate) struct WakeLog {
    seq: u64,
    recent: std::collections::VecDeque<(u64, Option<std::sync::Arc<str>>)>,
}

impl WakeLog {
    const KEPT: usize = 16;

    /// Records one wake-up, for everyone or for one contender.
    pub(crate) fn push(&mut self, to: Option<std::sync::Arc<str>>) {
        self.seq += 1;
        if self.recent.len() == Self::KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((self.seq, to));
    }

    /// Whether a wake-up after `seen` was for everyone or for `me` (or fell out of the log).
    fn wakes(&self, seen: u64, me: &str) -> bool {
        if self.seq <= seen {
            return false;
        }
        let oldest = self.recent.front().map_or(self.seq + 1, |(seq, _)| *seq);
        oldest > seen + 1
            || self
                .recent
                .iter()
                .filter(|(seq, _)| *seq > seen)
                .any(|(_, to)| to.as_deref().is_none_or(|to| to == me))
    }
}

impl WakeSubscription {
    pub(crate) fn new(rx: watch::Receiver<u64>, interest: Option<Box<dyn Send + Sync>>) -> Self {
        WakeSubscription {
            rx: Wakeups::Count(rx),
            _interest: interest,
        }
    }

    /// A subscription to a channel whose wake-ups say for whom they are.
    pub(crate) fn addressed(
        rx: watch::Receiver<WakeLog>,
        interest: Option<Box<dyn Send + Sync>>,
    ) -> Self {
        let seen = rx.borrow().seq;
        WakeSubscription {
            rx: Wakeups::Addressed { rx, seen },
            _interest: interest,
        }
    }

    /// Resolves at the next release seen after the previous call (or after subscribing).
    pub(crate) async fn released(&mut self) {
        self.released_for(None).await;
    }

    /// Resolves at the next release seen after the previous call (or after subscribing)
    /// that `me` may take: one for everyone, or one that chose `me` (`None`: any release).
    /// A release that let another contender have the lock is slept through: only that
    /// contender may take it for now.
    pub(crate) async fn released_for(&mut self, me: Option<&str>) {
        let changed = match &mut self.rx {
            Wakeups::Count(rx) => rx.changed().await.is_ok(),
            Wakeups::Addressed { rx, seen } => loop {
                if rx.changed().await.is_err() {
                    break false;
                }
                let log = rx.borrow_and_update();
                let wakes = me.is_none_or(|me| log.wakes(*seen, me)) && log.seq > *seen;
                *seen = log.seq;
                if wakes {
                    break true;
                }
            },
        };
        if !changed {
            // The backend is gone; never resolve, the caller's timers take over.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn addressed_wakes_skip_releases_for_others() {
        let (tx, rx) = watch::channel(WakeLog::default());
        let mut sub = WakeSubscription::addressed(rx, None);
        tx.send_modify(|l| l.push(Some("other".into())));
        let skipped =
            tokio::time::timeout(Duration::from_millis(10), sub.released_for(Some("me"))).await;
        assert!(skipped.is_err(), "woken by a release that chose another");
        tx.send_modify(|l| l.push(Some("me".into())));
        sub.released_for(Some("me")).await;
        tx.send_modify(|l| l.push(None));
        sub.released_for(Some("me")).await;
        // Unaddressed waiters hear every release.
        tx.send_modify(|l| l.push(Some("other".into())));
        sub.released_for(None).await;
    }

    /// An engine's optional parts are reached exactly where its capabilities say so, and
    /// refused otherwise with the engine's reason.
    #[test]
    fn the_parts_an_engine_offers_are_its_capabilities() {
        let memory: std::sync::Arc<dyn Store> = std::sync::Arc::new(memory::MemoryStore::new());
        let scripted: std::sync::Arc<dyn Store> =
            std::sync::Arc::new(scripted::ScriptedStore::new());
        for store in [memory, scripted] {
            // The leader records' gate is the locker's (`Calls::leader`), tested there.
            let caps = store.info().capabilities;
            let name = store.describe();
            assert_eq!(caps.inspection, store.admin_or_refusal().is_ok(), "{name}");
            let refused = store
                .admin_or_refusal()
                .err()
                .expect("no inspection in memory");
            assert!(
                refused
                    .to_string()
                    .contains("visible to its own process only"),
                "{name}: {refused}"
            );
        }
    }

    /// A refusal for what the engine lacks is the store's own answer: no news of the server
    /// for the locker's health.
    #[tokio::test]
    async fn what_an_engine_lacks_is_refused_without_the_server() {
        let store = memory::MemoryStore::new();
        let (refused, heard) = heard::heard(lacks::<(), _>(&store, Feature::Semaphores)).await;
        assert!(
            matches!(refused, Err(LockError::Config { .. })),
            "{refused:?}"
        );
        assert!(!heard, "a refusal counted as the server's answer");
    }

    #[test]
    fn a_waiter_that_fell_behind_the_log_is_woken() {
        let mut log = WakeLog::default();
        for _ in 0..WakeLog::KEPT + 1 {
            log.push(Some("other".into()));
        }
        assert!(log.wakes(0, "me"), "missed wake-ups may have been for me");
        assert!(!log.wakes(1, "me"));
        assert!(!log.wakes(log.seq, "me"));
    }
}
