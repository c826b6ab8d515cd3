//! The lock recipe ZooKeeper and etcd share, written once over a small [`Driver`] that each
//! engine implements with its own client (as Curator's `LockInternals` over its driver).
//!
//! **The recipe.** Each contender for a lock is an entry of its own in the lock's queue (an
//! ephemeral sequential znode, a key attached to the locker's lease), ordered by when the
//! server created it; the first one holds the lock. A writer holds it when its contender is
//! the first of all, readers included; a reader when no writer's contender is ahead of its
//! own. Every other contender watches only its predecessor (no herd): a writer the one just
//! ahead, a reader that waits, without an entry, the nearest writer ahead. So the order is
//! first come, first served across processes, readers share, and a waiting writer holds back
//! every reader after it. Inside one process, waiters of a key queue locally as on every
//! engine, and only the one at the front has a contender.
//!
//! **Fences.** A contender's creation order (ZooKeeper's `czxid`, etcd's create revision) is
//! global and strictly increasing: the fences of a writer are `order × 32 + n`, where `n`
//! numbers the holders of this process the lease is handed to in a row.
//!
//! **Nothing left behind.** A contender is known from before it is created (by its name,
//! which carries its attempt's tag) until it is deleted; one that stops waiting is forgotten
//! and deleted in the background; a delete whose outcome is unknown is tried again until the
//! server answers; the release of an attempt abandoned before its answer came deletes what
//! that attempt may have created. Unlike a Redis key, a contender has no TTL of its own: left
//! behind, it would stand first in the queue as long as its session lives.
//!
//! What the engines do differently stays with them: how a session is kept and judged, how a
//! contender is created and looked at (ZooKeeper in two round trips, etcd in one
//! transaction), how a reader's fence is recorded, and etcd's sweep for orphans.

mod contenders;
mod driver;
mod leader;
mod permits;
mod recipe;
mod semaphore;
mod store;
mod subscribe;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_permits;

pub(crate) use contenders::{Contender, Contenders, WeakContenders};
pub(crate) use driver::{tag, writer_top, Driver, Head, Place, Queued, Role, Wake, FENCE_SLOTS};
pub(crate) use permits::{fits, holders, standing, Standing};
pub(crate) use recipe::Sequenced;
pub(crate) use store::{Engine as SequencedEngine, Renews};
