//! The lock recipe ZooKeeper and etcd share (locks, read locks, semaphores and leader records), written once over a small [`Driver`] that each
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
//! numbers the holders of this process the lease is handed to in a row. A reader's fence is
//! the top of the last earlier writer's slots, `order × 32 + 31` ([`slots_top`]): how many
//! fences that writer handed out is decided by the attempt that is granted (one per waiter of
//! its process queued by then), which may come long after the attempt that queued it, and a
//! record of that number could be lowered by a rewrite whose answer was lost and landed late;
//! the slots' top depends on the writer's order alone (issue 46).
//!
//! **Nothing left behind.** A contender is known from before it is created (by its name,
//! which carries its attempt's tag) until it is deleted; one that stops waiting is forgotten
//! and deleted in the background; a delete whose outcome is unknown is tried again until the
//! server answers. Unlike a Redis key, a contender has no TTL of its own: left behind, it
//! would stand first in the queue as long as its session lives.
//!
//! **Unknown outcomes (issue 45).** A create whose answer came is recorded at once as what it
//! is for: a waiter's turn (a lock's waiting contender, a permits waiter's seat), which belongs
//! to the wait from then on and goes only with the wait's end (its withdrawal), or a holder's
//! lease. The give-back of an attempt that failed or was cancelled afterwards (a listing or a
//! look that timed out, a lease check that failed) deletes nothing: the wait's next attempt
//! may be granted on that turn. Only an attempt whose create was sent and never answered is
//! cleaned up after by its name ([`Driver::abandoned`]): what the server may have applied is
//! known nowhere here. That clean-up, however late it runs or repeats, never deletes a
//! contender this process knows as a waiter's or a holder's. Before the fix, the give-back
//! deleted "every znode of the attempt's tag" (ZooKeeper) or "the key of the attempt's name"
//! (etcd), at once and again later, after the next attempt had been granted on it: the
//! holder's contender was gone while it held, and another process was granted too.
//!
//! **Interest.** A waiter's contender stands in the queue only while its wait's attempts look
//! at it, as a waiter's turn does on every engine (Redis and PostgreSQL keep one 2 s past the
//! last attempt): one that no attempt of its wait looked at for [`MAX_INTEREST`](interest::MAX_INTEREST)
//! (2 s; a polled wait tries at least every second, every 2 s in an outage) is forgotten and
//! deleted, checked every 250 ms. Otherwise a live process whose waiting future is no longer
//! polled (held, never dropped) would keep it in the queue, first in line in the end, for its
//! session's life, and everyone behind would wait. An attempt in progress keeps its contender
//! for as long as a polled attempt can run (2 × connect timeout + 12 × op timeout): past that
//! it stopped being polled midway, and its contender lapses all the same. An attempt that
//! comes back to a contender that lapsed is never granted on it (it is being deleted): it
//! reports the lock taken, and the wait, polled again, queues anew. Bound: a waiter that is
//! not polled keeps others out at most 2.25 s (plus one delete) after its wait's last attempt
//! ended, or, stopped in the middle of an attempt, 2.25 s + 2 × connect timeout + 12 × op
//! timeout after that attempt began.
//!
//! **Batches (`lock_all`).** Free keys of one call, locks and readers' shares, are taken by
//! one write that creates every contender, all or nothing (see `together`): etcd's
//! transaction compares first and creates nothing when a key is taken; ZooKeeper's `multi`
//! creates them all, a read tells where they stand, and a key taken deletes them all again.
//! Each contender's name carries its own request's tag, so the give-back of each token cleans
//! up after a batch whose answer was lost, as after a single attempt's.
//!
//! **Semaphores: a weighted queue.** A permits request is a contender of the semaphore's own
//! queue (`LockKeys::semaphore`) that carries its limit and count (in its name on ZooKeeper,
//! its value on etcd), so one listing tells the whole queue. It holds when the permits of
//! every contender ahead of it and its own fit in the limit (`permits::standing`): a later
//! contender never changes the sum ahead of an earlier one and deletions only lower it, so a
//! holder holds until it goes, the holders are a prefix of the queue, and their permits never
//! exceed the limit. It is first come, first served: a request for several permits that
//! waits keeps its contender (its turn) across its attempts under its waiter's name, and any
//! other request looks at the queue first and enters only if it would fit behind everyone,
//! queued waiters included, leaving at once if it does not hold. A contender ahead with
//! another limit is a disagreement (`LockError::Config`). A holder's fence is its
//! contender's first writer fence, `order × 32 + 1`. Permits waiters wake on any deletion
//! from the queue, not only of the contender just ahead. A permit lives as long as its
//! session, like a lock: a crashed holder's permits come back when its session ends, and one
//! whose lease lapsed without the watchdog is given back by the locker.
//!
//! **Leader records on the holder's contender.** An election is a lock; its leader's term and
//! identity are written into the data of the contender that holds it
//! ([`Store::leader`](crate::store::Store::leader), over the driver's [`Records`]), only
//! while that contender is this process's held one in the current session and the term is one
//! of its own fences. Read back, a record counts only from the queue's first contender and
//! with a term of that contender's fences; it goes with the contender (release, session end).
//! A waiter without a contender of its own (an observer) watches the first writer's data as
//! well as the last writer, so a record written or cleared wakes it at once.
//!
//! What the engines do differently stays with them: how a session is kept and judged, how a
//! contender is created and looked at (ZooKeeper in two round trips, etcd in one
//! transaction), how a reader's fence is recorded, and etcd's sweep for orphans. An engine
//! plugs in as a [`Driver`] of fifteen calls (contend, take a batch together, and wait), and
//! two small parts that only
//! some requests ask for: [`Inspection`] (who a contender is, how long its owner keeps it:
//! the operator's calls) and [`Records`] (the first contender's data, a write of one's own:
//! leader elections).

mod contenders;
mod creates;
mod driver;
mod inspect;
mod interest;
mod leader;
mod permits;
mod recipe;
mod releases;
mod semaphore;
mod store;
mod subscribe;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_at_once;
#[cfg(test)]
mod tests_creates;
#[cfg(test)]
mod tests_permits;
mod together;

pub(crate) use contenders::{Contender, Contenders, WeakContenders};
pub(crate) use driver::{
    slots_top, tag, writer_top, Ask, Awaited, Create, Created, Creation, Driver, Head, Inspection,
    Made, Place, Queued, Records, Role, Wake, Who, FENCE_SLOTS,
};
pub(crate) use inspect::{inspect, who, Seen};
pub(crate) use interest::patience;
pub(crate) use permits::{fits, holders, standing, Standing};
pub(crate) use recipe::Sequenced;
pub(crate) use store::{Engine as SequencedEngine, Renews};
