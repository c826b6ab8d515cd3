//! The etcd engine: the sequential-contender recipe (`store::sequenced`) over keys attached
//! to this process's etcd lease. The key with the lowest create revision holds the lock, and
//! every other contender watches only the deletion of the key just ahead of it.
//!
//! A lock `K` is the key range `P:lock:{K}/`; an acquisition puts `P:lock:{K}/<tag>` (the tag
//! being the first 16 hex digits of its owner token) with the lease, in one transaction with
//! the read of the range's first key by create revision: one round trip when the lock is free.
//! Waiters of other processes queue by create revision, each watching its predecessor's
//! deletion (no herd), so waiting is first come, first served across processes. Inside one
//! process, waiters of a key queue locally as on every engine, and only the one at the front
//! has a key.
//!
//! **One etcd lease per locker, not one per lock.** Like a ZooKeeper session, the lease is the
//! locker's: granted on connect with a TTL of the session timeout, kept alive by one stream,
//! and every key of the locker is attached to it. A lease per lock would cost a grant before
//! every acquire and a revoke after every release (three round trips for an uncontended lock
//! instead of two), a keep-alive per held lock, and leases leaked by every attempt cancelled
//! between the grant and the put; it would buy nothing the client's clock does not already
//! give, since the lock's validity is judged here anyway. A crashed process frees all its
//! locks after one TTL, as it would on ZooKeeper. The price: a lease is at most the TTL (see
//! [`Capabilities`](crate::Capabilities)), and the watchdog renews it.
//!
//! **The TTL is the one asked for, never more than etcd's.** etcd grants at least the TTL asked
//! for: its shortest is `1.5 × --election-timeout` in whole seconds, and a shorter request gets
//! that. Every bound here (the lease bound, when a keep-alive is due, when the session is given
//! up) is the TTL asked for, so the client counts on no more than etcd keeps; a longer grant
//! only means a crashed process's locks wait for it. A grant shorter than asked (which etcd
//! does not make) is refused: etcd would expire keys the client still trusts.
//!
//! **Loss.** etcd expires the lease a TTL after the last keep-alive it received, so a lease is
//! judged on this process's monotonic clock from the *send* time of the last acknowledged
//! keep-alive (the keeper sends one every third of the TTL), as a Redis lease is from the send
//! time of its last renewal. A lock granted over the lease counts from that send time, not
//! from its own: a put attached to a lease succeeds only while the lease lives, and etcd cannot
//! expire it before that keep-alive's send time plus the TTL (its countdown restarts when the
//! keep-alive *arrives*, after it was sent; a new leader restarts every lease's countdown, and
//! a member acknowledges a keep-alive only once the leader renewed the lease), so the key lives
//! at least until then on our clock. A lock of a lease as long as the TTL is so good for
//! `lease − margin` from `acked`, the send time of the keep-alive whose acknowledgement was
//! received last (the keeper matches each answer to its keep-alive: etcd answers those of one
//! stream in order; `acked` never moves back); a shorter lease counts from as much later as the
//! TTL outlasts it, never from later than its own send time (see
//! [`counted_from`](lease::counted_from)). No acquire waits for a keep-alive of its own, as
//! long as that leaves at least half the validity from the request's send time: otherwise
//! (keep-alives stalled, none acknowledged lately) the acquire sends one with its request, in
//! parallel, and counts from its send time once etcd acknowledged it, or reports
//! `Unavailable` when etcd does not in time. A grant that arrives after its validity so
//! counted ran out is given back. The watchdog renews a lock a third of its lease after its
//! validity began (at once, when that is past), and a renewal counts only once a keep-alive
//! sent after it was acknowledged (sent with it, in parallel). A put does not refresh an etcd
//! lease; without these rules a lock taken late in a keep-alive period could outlive the lease
//! in the client's eyes. When no keep-alive was acknowledged for a whole TTL, or etcd says the
//! lease is gone, the session ends: [`Session`](crate::store::Session) moves on (every lease
//! granted over it reads as lost at once), the lease is revoked in the background (its keys go
//! with it, should it still live), and the next call grants a new one.
//!
//! **Fences.** A key's create revision is the cluster's revision at its creation: global,
//! strictly increasing with every write, and kept across restarts and leader changes. The
//! fence of a holder is `create revision × 32 + n`, where `n ≤ 17` numbers the holders of this
//! process that the lease is handed to in a row: the next holder's key is created after ours,
//! so its revision is larger and its fences are above all of ours.
//!
//! **Read locks.** A reader's key is `P:lock:{K}/~r-<tag>`, in the same range as the writers'
//! (`~` sorts after every hex digit, so the writers' keys alone are the range up to
//! `P:lock:{K}/~`). A reader holds the lock when no writer's key has a lower create revision
//! than its own; a writer only when its key is the first of the whole range, readers
//! included. So readers share, a writer waits for the readers ahead of it, and a waiting
//! writer holds back every reader that comes after it (no writer starvation). The reader's
//! put, the read of the first writer's key and of the fence record are one transaction: one
//! round trip when the lock is free. A reader that cannot get in deletes its key at once and
//! waits, without a key, for the deletion of a writer's key (a watch on the writers' range):
//! a reader never stands in the queue while it waits, so one that stops waiting leaves nothing
//! behind. A reader's key is attached to the locker's lease like a writer's, renewed and
//! judged the same way, and deleted by its release or by the locker giving a lapsed lease
//! back. A writer given the lock records the top of its fences in `P:fence:{K}`, attached to
//! its locker's lease, in the transaction that finds its key first (the put when the lock is
//! free, the look of a queued writer otherwise): no extra round trip. A reader's fence is the
//! top of the fence slots of the writer that record names (`create revision × 32 + 31`, not
//! the recorded top, which a late look whose answer was lost could lower), or, with no record
//! (the lease of the locker that wrote it ended), its own key's `create revision × 32`: at or
//! above every fence of the writers before it, below every fence of the writers after.
//!
//! **Semaphores.** A semaphore `K` is the key range `P:sem:{K}/`; each permits request puts
//! `P:sem:{K}/<tag>` on the locker's lease with the value `permits:<limit>:<count>`, so that
//! one read of the range (by create revision) is the whole weighted queue of the recipe (see
//! `store::sequenced`): a request holds when the permits of the keys ahead of it and its own
//! fit in the limit, and its fence is its `create revision × 32 + 1`. Its waiters watch the
//! range for deletions. A crashed holder's keys go with its lease.
//!
//! **Leader election.** The election's lock is a lock like any other; the elected leader's
//! term and identity are the value of its own key (a transaction that compares the key's
//! create revision and keeps it on its lease), read from the range's first key, and cleared
//! or gone with it. An observer's watch of the writers' keys wakes on a deletion and on a
//! changed value (a record), not on a new writer's key.
//!
//! **Cleanup.** A release deletes the key only while its create revision is ours (a
//! transaction), so a lock deleted by an operator and taken by another is never touched. A
//! contender that stops waiting deletes its key (see
//! [`Store::leave`](crate::store::Store::leave)); a waiting key that no attempt of its
//! wait looked at for 2 s (its future is no longer polled) is deleted too (see "Interest" in
//! `store::sequenced`); an attempt whose put was sent and never answered has the key it may
//! have created deleted by the give-back of its token (its tag names it), never a key this
//! process knows as a waiter's or a holder's (one whose put was answered belongs to the wait
//! or the lease it was recorded for); a delete whose outcome is unknown (failover, partition)
//! is tried again in the background until etcd answers or the session ends. A key has no TTL
//! of its own: left behind, it would stand in the queue as long as this process keeps its
//! lease alive.
//!
//! **Orphans.** The deletions of an abandoned attempt (at once, and again 2 × `op_timeout`
//! later) cannot catch a put that lands after both, for example one held up at another member
//! or in the network: attached to this process's lease, such a key would stand first in the
//! queue for the locker's lifetime. So once an attempt of a session was abandoned, the locker
//! sweeps that session's lease every [`ORPHAN_SWEEP`](sweep::ORPHAN_SWEEP) (2 s) until the
//! session ends: it lists the keys attached to the lease (one `LeaseTimeToLive` call) and
//! deletes every contender key that none of its attempts in flight, waiters or holders knows (a
//! transaction that checks the key is still on our lease). An attempt's key is known from
//! before its put is sent until it is recorded as waiting or held, and a held key until its
//! release's delete is answered, so the sweep never takes a live key (nor one under release,
//! whose release would then report `Lost`). Bound: a key of an abandoned attempt that lands
//! late is deleted within `ORPHAN_SWEEP` + `op_timeout` of landing (longer only while etcd does
//! not answer), or with the lease when the session ends; a locker that never abandoned an
//! attempt never sweeps.

mod admin;
mod calls;
mod cleanup;
mod driver;
mod endpoints;
mod keeper;
mod lease;
mod names;
mod permits;
mod reader;
mod session;
mod store;
mod sweep;
#[cfg(test)]
mod tests;
mod together;
mod watch;
mod writer;

pub(crate) use endpoints::Endpoints;
pub(crate) use lease::Etcd;
pub(crate) use store::EtcdStore;
