//! # leasehold
//!
//! Distributed locks for async Rust (on Redis, ZooKeeper, etcd, PostgreSQL or in memory), as one
//! attribute on a function:
//!
//! ```
//! use leasehold::{distributed_lock, LockError, Locker};
//!
//! #[distributed_lock(key = "order:<id>", lease = "30s")]
//! async fn buy(id: u64) -> Result<u64, LockError> {
//!     // runs only while this process holds `order:<id>`; the lease is renewed while the
//!     // body runs, and the lock is released when it ends, on every path
//!     Ok(id)
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), LockError> {
//! leasehold::set_global_default(Locker::in_memory())?; // or Locker::connect(url).await?
//! assert_eq!(buy(42).await?, 42);
//! # Ok(()) }
//! ```
//!
//! or as a plain API:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), leasehold::LockError> {
//! use leasehold::Locker;
//! use std::time::Duration;
//!
//! // Or Locker::connect("redis://127.0.0.1:6379").await?, or Locker::builder() with
//! // .zookeeper(..), .etcd(..), .postgres(..), ... and .build().await?
//! let locker = Locker::in_memory();
//! let guard = locker.lock("order:42").lease(Duration::from_secs(10)).acquire().await?;
//! println!("holding order:42 with fence {}", guard.fence());
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! The repository's front page (`README.md`) and its guide (`docs/guide/`: fencing, each
//! primitive, each engine, configuration, the web frameworks, operations, security) explain all
//! of it at length; their examples are doc tests of this crate.
//!
//! ## What you get
//! - **Mutual exclusion across processes**, with a lease so that a crashed holder frees the
//!   lock, and a watchdog that renews the lease of live holders (every lease/3).
//! - **Fencing tokens** ([`LockGuard::fence`]) that strictly increase per key, to reject
//!   writes of a holder that lost its lease while paused.
//! - **Owner tokens** of 128 random bits per acquisition: a release or renewal never touches
//!   someone else's lock.
//! - **Push-based waiting**: waiters sleep until a release wakes them (a Redis channel, a
//!   ZooKeeper or etcd watch on the contender just ahead, PostgreSQL's `LISTEN`/`NOTIFY`);
//!   waiters of one key in one process queue first-come-first-served, and a release hands
//!   the lock to the next one in a single round trip.
//! - **Release on every path**: `release().await`, drop, panic, `?`, cancelled futures.
//! - **Bounded calls**: every call to the engine has a timeout
//!   ([`LockerBuilder::op_timeout`]); an engine that is down or hung is an error
//!   ([`LockError::Unavailable`]), never a hang.
//!
//! ## Engines
//! A [`Deployment`] names the engine and where it runs ([`LockerBuilder::deployment`], or a
//! shorthand such as [`LockerBuilder::url`]; [`Deployment::parse`] reads one URL). Every engine
//! offers locks, multi-key locks, unfenced locks and singleton jobs; what else it offers (read
//! locks, semaphores, leader election, how fair locks queue, the longest lease it honours) is
//! [`Locker::capabilities`], and a request for something it lacks is refused at once with
//! [`LockError::Config`] naming the engines that have it.
//!
//! Inside, every primitive is a thin type over one core: one kind of lease decided per
//! request, one contend loop, one local queue of waiters, one watchdog; each store implements
//! a small boundary, and ZooKeeper and etcd share one sequential-contender recipe.
//!
//! ## The source tree
//! From the top down; each layer imports only the layers below it.
//! - `web/`: the actix-web and axum middleware, route rules and their HTTP responses.
//! - `config/` (feature `serde`): lockers and profiles from a configuration file or the
//!   environment.
//! - `private.rs`: what `#[distributed_lock]` expands to call (and the middleware with it).
//! - `locker/`: [`Locker`], its builder, defaults, operators' calls, closing and the start-up
//!   check of call sites.
//! - `primitives/`: the public requests and guards (locks, read-write, unfenced, multi-key,
//!   semaphores, leader election, profiles), thin types over the core.
//! - `fenced/` and `checks/`: the resource's side of fencing, claims and fenced writes on
//!   Redis ([`fenced`]), fence checks in the caller's own PostgreSQL or MySQL transaction
//!   (`leasehold::postgres`, `leasehold::mysql`).
//! - `kernel/`: the core: leases and their one kind, the one contend loop, the local queue,
//!   re-entry, release, settling attempts whose outcome is unknown, the watchdog, the
//!   engine's health, and the state a locker's clones share.
//! - `store/`: the boundary every engine implements (`Store`), the engines' `Capabilities`
//!   and `Deployment`, keys and identities; one folder per engine: `memory/`, `redis/` (with
//!   `redlock/` and its Lua scripts), `sequenced/` (the recipe ZooKeeper and etcd share) with
//!   `zookeeper/` and `etcd/`, `postgres/` (with its SQL).
//! - `inspect.rs` and `error.rs`: what inspection reports and [`LockError`], used by all.
//!
//! ## What the engines store
//! For a key `K` and prefix `P` (default `leasehold`), every engine names a lock `P:lock:{K}`;
//! `{`, `}` and `%` in `K` are escaped, so no key can name another lock's data.
//! - On Redis, `P:lock:{K}` holds the owner token, `P:fence:{K}` the fence counter,
//!   `P:queue:{K}` and `P:interest:{K}` the processes waiting for the lock, and releases are
//!   published on `P:wake:{K}`; all of them share one Redis Cluster slot.
//! - On ZooKeeper, the lock is a container znode under `/leasehold` named after
//!   `P:lock:{K}`, and each contender an ephemeral sequential znode in it.
//! - On etcd, each contender is a key `P:lock:{K}/<tag>` attached to the locker's etcd lease.
//! - On PostgreSQL, the lock is the row `P:lock:{K}` of the table `leasehold_locks`, and the
//!   processes waiting for it rows of `leasehold_waiters`.
//! - Each locker that takes locks also describes itself once (service, host, process, start
//!   time; see [`LockerBuilder::service_name`]), and its locks point to that description.
//!
//! ## No process starved
//! Waiters of one key in one process queue first-come-first-served, and a release hands the
//! lease to the next of them without a round trip, up to 16 times in a row. Across processes,
//! a waiter that finds the lock taken queues its process in the engine (the queue of waiting
//! processes on Redis and PostgreSQL, the order of the contenders on ZooKeeper and etcd), and
//! a release leaves the lock to the process that waited longest: while a process waits, every
//! other process queued before it holds the key at most 17 times before it gets its turn.

#![deny(missing_docs)]
// docs.rs (nightly) marks each item with the features it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod checks;
#[cfg(feature = "serde")]
mod config;
mod error;
pub mod fenced;
mod inspect;
mod kernel;
mod locker;
mod primitives;
mod store;
#[cfg(feature = "testkit")]
pub mod testing;
pub mod web;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

// The front page's and the guide's examples as doc tests, and a check of their links.
#[cfg(any(test, doctest))]
mod guide;

#[cfg(feature = "mysql")]
pub use checks::mysql;
#[cfg(feature = "postgres")]
pub use checks::postgres;
#[cfg(feature = "serde")]
pub use config::{LockConfig, SentinelConfig};
pub use error::{BoxError, LockError, LostReason};
pub use inspect::{Holder, LockInfo, LockerDescription, Waiter, MAX_LISTED_WAITERS};
pub use kernel::close::{CloseReport, DEFAULT_CLOSE_TIMEOUT};
pub use kernel::health::{EngineState, EngineStates};
pub use kernel::observe::TraceKeys;
pub use leasehold_macros::distributed_lock;
pub use locker::global::{global_default, set_global_default};
pub use locker::{
    Locker, LockerBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_FENCE_TTL, DEFAULT_LEASE,
    DEFAULT_OP_TIMEOUT, DEFAULT_PREFIX, DEFAULT_SESSION_TIMEOUT, DEFAULT_WAIT, MAX_FENCE_OFFSET,
    MAX_PERMITS, MIN_LEASE,
};
pub use primitives::guard::LockGuard;
pub use primitives::leader::{
    LeaderObserver, LeaderRequest, Leadership, DEFAULT_OBSERVE_POLL, MAX_IDENTITY_LEN,
};
pub use primitives::leader_status::{Leader, LeaderStatus};
pub use primitives::multi::{MultiGuard, MultiLockRequest};
pub use primitives::profile::Profile;
pub use primitives::request::LockRequest;
pub use primitives::semaphore::{PermitGuard, PermitHolder, SemaphoreInfo, SemaphoreRequest};
pub use primitives::unfenced::{UnfencedGuard, UnfencedRequest};
pub use store::identity::{MAX_LABEL_LEN, MAX_SERVICE_LEN};
pub use store::keys::{MAX_KEY_LEN, MAX_PREFIX_LEN};
pub use store::{Capabilities, Deployment, Fairness};
pub use web::{
    HeaderLookup, HeldLock, LockErrorResponse, MissingRouteLock, OnLost, PathParams, RequestInfo,
    RouteLocks, RouteRule, StatusCodes,
};
