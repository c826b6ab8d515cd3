//! The ZooKeeper engine: the sequential-contender recipe (`store::sequenced`) over ephemeral
//! sequential znodes, with the session as the lease.
//!
//! A lock `K` is a container znode `/leasehold/<K encoded>`; each acquisition creates an
//! ephemeral sequential child `n-<seq>` under it, and the lowest sequence holds the lock. A
//! writer's create shares a transaction with its fence record's write, whose answer (the
//! container's `Stat`) counts the children: one means the new znode is alone, so it holds
//! without a listing (`together::first_alone`).
//! Every other contender watches only its predecessor (no herd), so the order is first come,
//! first served across processes by construction. Inside one process, waiters of a key queue
//! locally as on every engine, and only the one at the front has a znode.
//!
//! **Order across the wrap.** A sequence number is the container's `cversion` (its count of
//! child creations and deletions), a signed 32-bit number: after 2^31 changes of one container
//! it goes negative (`n-<tag>--2147483648`), and after 2^32 back to 0. The queue is read in
//! serial-number order (RFC 1982) over 2^32, starting after the widest gap between the live
//! contenders' numbers (see `names::in_order`), so it stays the order of creation across both
//! wraps. Bound: the contenders in one container at one time were created within 2^31 changes
//! of it (one would otherwise have waited while two billion others came and went); an empty
//! container is deleted by the server and starts again at 0.
//!
//! **The session is the lease.** Ephemeral znodes vanish when the ZooKeeper session expires, so
//! a crashed holder frees its locks after the session timeout. While connected, a renewal
//! proves the session and the znode alive; while disconnected it cannot, and the lease is
//! judged on this process's monotonic clock like every lease: lost once its validity passed
//! without a successful renewal. A lease is therefore never longer than the session timeout
//! (see [`Capabilities`](crate::Capabilities)): the server cannot expire the session before the
//! client stops trusting it. An expired session bumps [`Session`](crate::store::Session), which
//! every lease granted over it reads as lost at once, and the next call opens a new session.
//!
//! **The session timeout is the server's.** A server grants the timeout asked for only within
//! its `minSessionTimeout ..= maxSessionTimeout` (by default 2 to 20 ticks), so the timeout
//! every bound is taken from is the one each session negotiated, read again on every new
//! session: the lease bound, the disconnected give-up time, and the check that refuses an
//! acquire asking for a longer lease than the session it would go over (see
//! `ZooKeeper::fits_session`).
//!
//! **Fences.** A znode's creation zxid (`czxid`) is global, strictly increasing across every
//! write of the ensemble, and survives restarts and leader changes; sequence numbers do not
//! (they restart when a container is deleted and created again). The fence of a holder is
//! `czxid × 32 + n`, where `n ≤ 17` numbers the holders of this process that the lease is
//! handed to in a row: the next holder's znode is created after ours, so its `czxid` is larger
//! and its fences are above all of ours.
//!
//! **Read locks.** A reader's znode is `r-<tag>-<sequence>` in the same queue (sequence numbers
//! are the container's, shared by both kinds). A reader holds the lock when no writer's znode
//! (`n-`) is ahead of its own; a writer only when its znode is the first of all, readers
//! included. So readers share, a writer waits for the readers ahead of it, and a waiting writer
//! holds back every reader that comes after it (no writer starvation). A reader that cannot get
//! in deletes its znode at once and waits, without a znode, for the deletion of the last
//! writer's znode ahead: a reader never stands in the queue while it waits, so a reader that
//! stops waiting leaves nothing behind. Each reader's znode is its own lease: it goes with its
//! release, with the locker giving a lapsed lease back, or with the session. Each writer's
//! znode is created in one transaction with a record of its fences in the container's data; a
//! reader's fence is the top of the fence slots of the last writer before it (`czxid × 32 +
//! 31`), the writer that record names (see [`reader_fence`](driver::reader_fence) for when it
//! is not): at or above every fence a writer of the key was given before the reader, also
//! those a writer that waited handed to its process's holders, and below every fence of the
//! writers after.
//!
//! **Semaphores.** A semaphore `K` is the container of `P:sem:{K}`; each permits request
//! creates `p-<tag>-<limit>-<count>-<sequence>`, so that one listing of the children is the
//! whole weighted queue of the recipe (see `store::sequenced`): a request holds when the
//! permits of the znodes ahead of it and its own fit in the limit, and its fence is its
//! `czxid × 32 + 1`. Its waiters watch the container's children and wake on any deletion.
//! A crashed holder's znodes go with its session.
//!
//! **Leader election.** The election's lock is a lock like any other; the elected leader's
//! term and identity are the data of its own znode (`setData`, only while the znode lives),
//! read from the queue's first znode, and cleared or gone with it. An observer watches the
//! first writer's znode (a data change) and the last writer's.
//!
//! **Credentials, ACLs and TLS.** The connect string is
//! `[user:password@]host:port[,host:port...][/chroot][?tls&ca=...&cert=...&key=...&auth=...]`
//! (see `ensemble`). With credentials, every session authenticates (`addauth digest`, or SASL
//! DIGEST-MD5 with `auth=sasl`) and every znode the locker creates (the root, each lock's
//! container, each contender) gets the ACL `auth::cdrwa`: every permission to that identity
//! and none to anyone else, reading included, so no other client can delete a lock, stand in
//! its queue, rewrite its fence record or read its keys, owner tokens and leader records (see
//! `access`). Lockers sharing locks must use the same credentials; an operator inspects and
//! force-releases with them too. A wrong digest password is another identity to ZooKeeper,
//! not a refusal: a dry run of a create under the root when each session opens turns it into
//! [`LockError::Config`](crate::LockError::Config) at `build`, as SASL's refusal
//! (`AuthFailed`) and any later `NoAuth` are. A root left open by an unauthenticated locker
//! is warned about until an operator closes it with `setAcl -R /leasehold auth::cdrwa`.
//! Without credentials the znodes are open to anyone (`world:anyone:cdrwa`), as before. TLS
//! (the `tls` feature) goes to each server's `secureClientPort`, checked against `ca=` (or
//! `SSL_CERT_FILE`), with a client certificate from `cert=` and `key=` when the servers ask;
//! the PEM files are read again for each new session. The connect string's credentials never
//! appear in `Debug`, `describe`, logs or errors: messages name the servers alone.
//!
//! **Cleanup.** Lock znodes are containers (the server deletes them once their last child is
//! gone); a contender that stops waiting deletes its znode (see
//! [`Store::leave`](crate::store::Store::leave)), and so does one that no attempt of its
//! wait looked at for 2 s (its future is no longer polled: see "Interest" in
//! `store::sequenced`); a crashed client's znodes vanish with its session; the znodes of a
//! session this process gave up on are deleted all the same, in case the session comes back
//! to life. An attempt whose create was sent and never answered has every znode of its tag
//! deleted by the give-back of its token, over the session the create went over (whose
//! requests ZooKeeper answers in order, so the listing sees the create if it was applied),
//! except a znode this process knows as a waiter's or a holder's: one whose create was
//! answered belongs to the wait or the lease it was recorded for.

mod access;
mod admin;
mod cleanup;
mod driver;
mod ensemble;
mod names;
mod session;
mod store;
#[cfg(test)]
mod tests;
mod together;
mod watch;
mod znodes;

pub(crate) use ensemble::Ensemble;
pub(crate) use session::ZooKeeper;
pub(crate) use store::ZooKeeperStore;
