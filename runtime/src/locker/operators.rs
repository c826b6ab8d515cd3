//! What operators ask a locker: the state of one lock or semaphore, the locks held under a
//! pattern, and a forced release.

use crate::error::LockError;
use crate::inspect::{glob, LockInfo};
use crate::store::keys::{validate_key, LockKeys};

use super::Locker;

/// What [`Locker::fence_ceiling`] adds to its probe's fence: a second of reservations at the
/// rate (10⁶ per second) above which a Redis fence counter runs ahead of the server clock.
/// [`Locker::fence_offset_above`] adds it too: a second of the server clock that Redis and
/// PostgreSQL fences follow, should it step back after the probe.
const FENCE_CEILING_MARGIN: u64 = 1_000_000;

impl Locker {
    /// Reads the state of one lock: whether it is held, for how much longer, with which last
    /// fence, and who holds it and who waits for it ([`LockInfo::holders`],
    /// [`LockInfo::waiting`]): each holder's and waiter's locker as it described itself
    /// ([`LockerBuilder::service_name`](crate::LockerBuilder::service_name)), since when, and
    /// the acquisition's label. Never an owner token. A few round trips: the lock, then the
    /// descriptions of the lockers it names.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the engine fails, [`LockError::InvalidKey`] for a bad key,
    /// [`LockError::Config`] on a RedLock or in-memory locker (inspect each node with a
    /// locker of its own).
    pub async fn inspect(&self, key: &str) -> Result<LockInfo, LockError> {
        validate_key(key)?;
        let keys = LockKeys::new(&self.inner.prefix, key);
        let state = self.inner.store.admin_or_refusal()?.inspect(&keys).await?;
        Ok(LockInfo {
            key: key.to_owned(),
            held: state.held,
            remaining: state.remaining,
            waiters: state.waiters,
            waiting_processes: state.waiting_processes,
            // The deployment's fences: the store's plus the locker's offset.
            last_fence: state
                .last_fence
                .map(|fence| self.inner.deployment_fence(fence)),
            holders: state.holders,
            waiting: state.waiting,
        })
    }

    /// The locks held now whose keys match `pattern` (a glob: `*` any run of characters, `?`
    /// one character; `*` for all), in key order. Found on Redis with `SCAN` (never `KEYS`),
    /// on ZooKeeper by listing `/leasehold`, on etcd by a range read of the prefix, on
    /// PostgreSQL by a query of `leasehold_locks`.
    ///
    /// # Errors
    /// As [`inspect`](Self::inspect).
    pub async fn list_held(&self, pattern: &str) -> Result<Vec<LockInfo>, LockError> {
        let mut keys = self
            .inner
            .store
            .admin_or_refusal()?
            .list(&self.inner.prefix)
            .await?;
        keys.sort();
        keys.dedup();
        let mut found = Vec::new();
        for key in keys {
            if glob(pattern, &key) {
                let info = self.inspect(&key).await?;
                if info.held {
                    found.push(info);
                }
            }
        }
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    /// A number above every fence and leader term this locker's deployment has handed out
    /// so far, on every key: what the deployment the locks move to must stay above, so that
    /// its fences keep increasing past these (`leasehold fences` in the CLI); the new
    /// deployment turns it into its offset with [`fence_offset_above`](Self::fence_offset_above).
    /// It takes a lock of a key of its own (under `leasehold:fence-ceiling:`), reads its fence
    /// and releases it: the engines' fence rules put that fence above every earlier one of
    /// every key (PostgreSQL's one sequence, ZooKeeper's zxids, etcd's revisions), or, where
    /// fences follow the server's clock (Redis), at the clock; the answer adds a margin of 10⁶
    /// for counters that ran ahead of it (a second of reservations at the rate where that can
    /// happen). Works on every engine, including RedLock and in memory.
    ///
    /// # Errors
    /// As [`LockRequest::acquire`](crate::LockRequest::acquire).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let old = leasehold::Locker::in_memory();
    /// let last = old.lock("stock:1").acquire().await?.fence();
    /// let ceiling = old.fence_ceiling().await?;
    /// // The new deployment, with the offset that puts its fences above the ceiling:
    /// let probe = leasehold::Locker::in_memory();
    /// let offset = probe.fence_offset_above(ceiling).await?;
    /// let new = leasehold::Locker::builder().fence_offset(offset).build_in_memory()?;
    /// assert!(new.lock("stock:1").acquire().await?.fence() > last);
    /// # Ok(()) }
    /// ```
    pub async fn fence_ceiling(&self) -> Result<u64, LockError> {
        let fence = self.probe_fence().await?;
        Ok(self.inner.deployment_fence(fence) + FENCE_CEILING_MARGIN)
    }

    /// The [`fence_offset`](crate::LockerBuilder::fence_offset) that puts every fence and
    /// leader term this locker's deployment hands out from now on above `ceiling`, the
    /// [`fence_ceiling`](Self::fence_ceiling) of the deployment the locks move from
    /// (`leasehold fences --above CEILING` in the CLI): the ceiling less what this engine
    /// hands out now (its own fences without any offset), plus a margin of 10⁶ (a second of
    /// the clock that Redis and PostgreSQL fences follow, should it step back), and 0 when
    /// the engine hands out more than that already. Give it to every process of this
    /// deployment before they take locks.
    ///
    /// Not the ceiling itself: an offset adds to the engine's own fences, which on Redis and
    /// PostgreSQL are the server clock in µs (about 1.8 × 10¹⁵), so a ceiling taken for the
    /// offset on every move grows by a clock's worth each time, and passes
    /// [`MAX_FENCE_OFFSET`](crate::MAX_FENCE_OFFSET) after two moves. This offset stays
    /// within a clock's worth of fences (plus what ZooKeeper's and etcd's counters add),
    /// however many times the locks move.
    ///
    /// It takes a lock of a key of its own, as [`fence_ceiling`](Self::fence_ceiling) does,
    /// to read the engine's fence rule; this locker's own offset does not count.
    ///
    /// # Errors
    /// As [`LockRequest::acquire`](crate::LockRequest::acquire); [`LockError::Config`] when
    /// the offset would be above [`MAX_FENCE_OFFSET`](crate::MAX_FENCE_OFFSET) (a ceiling
    /// within 2⁵² of the largest fence).
    pub async fn fence_offset_above(&self, ceiling: u64) -> Result<u64, LockError> {
        let fence = self.probe_fence().await?;
        // Every fence this engine hands out from now on is above `fence`, or, where fences
        // follow a server clock, above `fence` less the margin (a clock stepped back).
        let offset = ceiling
            .saturating_add(FENCE_CEILING_MARGIN)
            .saturating_sub(fence);
        if offset > crate::locker::MAX_FENCE_OFFSET {
            return Err(LockError::config(format!(
                "the fence offset above {ceiling} would be {offset}, above the largest fence \
                 offset, {} (2^52): fences must stay below 2^53, which doubles hold exactly",
                crate::locker::MAX_FENCE_OFFSET
            )));
        }
        Ok(offset)
    }

    /// The fence the store hands out now (without this locker's offset), from a lock of a key
    /// of its own, taken and released.
    async fn probe_fence(&self) -> Result<u64, LockError> {
        let probe = format!(
            "leasehold:fence-ceiling:{}",
            crate::store::token::contender_name()
        );
        let guard = self
            .lock(probe)
            .lease(std::time::Duration::from_secs(10))
            .wait(std::time::Duration::from_secs(5))
            .acquire()
            .await?;
        let fence = self.inner.store_fence(guard.fence());
        let _ = guard.release().await;
        Ok(fence)
    }

    /// Deletes a lock whoever holds it, and wakes its waiters; true when there was one.
    ///
    /// The holder's process learns of it as soon as another process could take the lock:
    /// when one of its own tasks asks for the lock (a `try_acquire` has the holding lease
    /// verified in the store first; a waiting task has it verified as it queues and on the
    /// release it hears), or, with this locker as the holder's, before this returns. Until
    /// then (or its next renewal, a third of the lease later, when none of its tasks asks)
    /// the holder itself is not told, and may write: fencing tokens still protect resources
    /// that check them, since the next holder's token is larger.
    ///
    /// # Errors
    /// As [`inspect`](Self::inspect).
    pub async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        validate_key(key)?;
        let keys = LockKeys::new(&self.inner.prefix, key);
        let released = self
            .inner
            .store
            .admin_or_refusal()?
            .force_release(&keys)
            .await?;
        if let Some(lease) = self.inner.queues.turn_holder(keys.lock()) {
            // This locker's own lease, as Redisson's `forceUnlock` from the holder's client.
            self.inner.verify(&lease).await;
        }
        Ok(released)
    }
}
