//! The hooks the test kit (the `leasehold-testkit` crate) stands on, behind the feature
//! `testkit`: an in-memory locker with faults on demand ([`in_memory_with_faults`],
//! [`Faults`]), and whether the running scope holds a key ([`held_here`]). Use the test kit
//! rather than these: it adds assertions and a history checker on top.

use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::locker::{Locker, LockerBuilder};
use crate::store::keys::LockKeys;
use crate::store::memory::MemoryStore;

/// An in-memory locker built from `builder` (its prefix, leases, waits, watchdog, profiles;
/// no engine may be named), and the handle that injects faults into its store. The locker
/// has the semantics of [`Locker::in_memory`] until a fault is injected; its clones, and the
/// lockers of other processes that [`Faults::locker`] makes, share the store and its faults.
///
/// # Errors
/// [`LockError::Config`] when an option of `builder` is invalid, as
/// [`LockerBuilder::build_in_memory`] says.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let (locker, faults) = leasehold::testing::in_memory_with_faults(leasehold::Locker::builder())?;
/// let guard = locker.lock("job:7").acquire().await?;
/// assert!(faults.lose("job:7"));
/// guard.lost().await; // the next renewal finds the lease gone
/// # Ok(()) }
/// ```
pub fn in_memory_with_faults(builder: LockerBuilder) -> Result<(Locker, Faults), LockError> {
    // Checks the options the way the in-memory build does (and drops that locker).
    drop(builder.clone().build_in_memory()?);
    let store = Arc::new(MemoryStore::new());
    let locker = Locker::with_store(store.clone(), builder.clone());
    let faults = Faults {
        prefix: locker.inner.prefix.clone(),
        store,
        builder,
    };
    Ok((locker, faults))
}

/// The faults of one in-memory locker's store ([`in_memory_with_faults`]). Every fault takes
/// effect in the store when the call returns; holders learn of it as they would from a real
/// engine (at their next renewal, or when their own count of the lease runs out), so a test
/// under Tokio's paused clock sees each step in the order the store saw it. Cheap to clone;
/// clones act on the same store.
///
/// Keys are named as the caller names them (`"order:42"`), without the locker's prefix.
#[derive(Clone)]
pub struct Faults {
    store: Arc<MemoryStore>,
    prefix: String,
    /// What [`Faults::locker`] builds from.
    builder: LockerBuilder,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Faults {
    fn keys(&self, key: &str) -> LockKeys {
        LockKeys::new(&self.prefix, key)
    }

    /// Another locker on the same store, with the same options, as another process would
    /// have: its holders and waiters contend with the first locker's in the store (not in a
    /// local queue), and the faults act on both.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let (first, faults) = leasehold::testing::in_memory_with_faults(leasehold::Locker::builder())?;
    /// let second = faults.locker();
    /// let guard = first.lock("job:7").acquire().await?;
    /// assert!(second.lock("job:7").try_acquire().await?.is_none());
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn locker(&self) -> Locker {
        Locker::with_store(self.store.clone(), self.builder.clone())
    }

    /// Ends every lease on `key` now (the writer's and each reader's), as an expiry would:
    /// each holder's next renewal finds it gone, and its guard's
    /// [`lost`](crate::LockGuard::lost) fires then (within a third of the lease with the
    /// default watchdog), and a [`distributed_lock`](crate::distributed_lock) body is
    /// cancelled as its `on_lost` says. Waiters are not woken: they retry when they would
    /// have. Whether anyone held `key`.
    pub fn lose(&self, key: &str) -> bool {
        self.store.end_leases(&self.keys(key))
    }

    /// Pauses the writer holding `key` past its lease, as a long garbage-collection pause or
    /// a stopped process would: its lease ends in the store now, so another contender can
    /// take `key` (with a higher fence), while the paused holder's renewals go unanswered and
    /// its guard still says it holds until its own count of the lease runs out. Whether
    /// anyone held `key`.
    pub fn pause_holder(&self, key: &str) -> bool {
        self.store.pause_writer(&self.keys(key))
    }

    /// Takes the engine out: every call fails with [`LockError::Unavailable`] until
    /// [`engine_up`](Self::engine_up). Leases go on expiring in the store meanwhile, as they
    /// would on a server that the clients cannot reach; waits ride the outage out or fail
    /// as [`LockRequest::retry_unavailable`](crate::LockRequest::retry_unavailable) says.
    /// What a refused acquire may have taken is given back in the background once the
    /// engine answers again, as after a real outage: until then that key looks busy to a
    /// `try_acquire` of the same locker, and a wait gets it.
    pub fn engine_down(&self) {
        self.store.faults().take_down(None);
    }

    /// Takes the engine out for `outage` (of Tokio's clock, so a paused clock moves past it
    /// as the test's tasks sleep), as [`engine_down`](Self::engine_down).
    pub fn engine_down_for(&self, outage: Duration) {
        let until = tokio::time::Instant::now() + outage;
        self.store.faults().take_down(Some(until));
    }

    /// Ends an outage ([`engine_down`](Self::engine_down)).
    pub fn engine_up(&self) {
        self.store.faults().restore();
    }

    /// Fails over to a replica that had not seen the latest writes: every lease, reader,
    /// permit and leader record is forgotten, while fences continue (every fence handed out
    /// after the failover is above every fence before it). Holders learn it at their next
    /// renewal; waiters are woken.
    pub fn fail_over(&self) {
        self.store.fail_over();
    }

    /// Ends the lease of one permit of the semaphore `semaphore` (the holder whose lease
    /// would end first), waking the semaphore's waiters; the holder learns it at its next
    /// renewal. Whether a permit was held.
    pub fn expire_permit(&self, semaphore: &str) -> bool {
        self.store
            .expire_permit(&LockKeys::semaphore(&self.prefix, semaphore))
    }

    /// Deposes the leader of the election `election`: its lease ends and its record is
    /// cleared, so observers see no leader until a candidate wins a new term (with a higher
    /// fence); the deposed leader learns it at its next renewal. Whether there was a leader.
    pub fn depose_leader(&self, election: &str) -> bool {
        self.store
            .depose(&LockKeys::election(&self.prefix, election))
    }

    /// Releases `key` as an operator's forced release would: its holders lose it (at their
    /// next renewal) and its waiters are woken at once. Whether anyone held it.
    pub fn force_release(&self, key: &str) -> bool {
        self.store.force_release(&self.keys(key))
    }

    /// Whether a writer holds `key` in the store now.
    pub fn is_locked(&self, key: &str) -> bool {
        self.store.writer_other_than(&self.keys(key), None)
    }

    /// Delays a write past its holder's lease, the lost-update scenario: pauses the writer
    /// holding `key` ([`pause_holder`](Self::pause_holder)), waits until another writer
    /// holds `key`, then runs `write` and returns its output. The write thus lands while a
    /// newer holder, with a higher fence, holds the key: a resource that checks fences
    /// refuses it, one that does not accepts a stale write.
    ///
    /// # Panics
    /// When nobody else takes `key` within an hour of Tokio's clock (under a paused clock,
    /// at once when nothing else can happen), naming `key`.
    pub async fn delay_past_lease<F: std::future::Future>(&self, key: &str, write: F) -> F::Output {
        let keys = self.keys(key);
        let before = self.store.writer(&keys);
        self.store.pause_writer(&keys);
        let give_up = tokio::time::Instant::now() + Duration::from_secs(3600);
        while !self.store.writer_other_than(&keys, before.as_ref()) {
            assert!(
                tokio::time::Instant::now() < give_up,
                "nobody took `{key}` within an hour after its holder was paused: \
                 start the contender that should take it before delaying the write"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        write.await
    }
}

/// The fence with which the running scope holds `key` on `locker`, while its lease is valid:
/// inside a [`distributed_lock`](crate::distributed_lock) body, a guard's
/// [`scope`](crate::LockGuard::scope), or anything they call. `None` when no enclosing scope
/// holds it (a sibling task's hold does not count), or its lease is lost.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let guard = locker.lock("job:7").acquire().await?;
/// assert_eq!(leasehold::testing::held_here(&locker, "job:7"), None);
/// let inside = guard.scope(async { leasehold::testing::held_here(&locker, "job:7") }).await;
/// assert_eq!(inside, Some(guard.fence()));
/// # Ok(()) }
/// ```
pub fn held_here(locker: &Locker, key: &str) -> Option<u64> {
    let keys = LockKeys::new(&locker.inner.prefix, key);
    let held = crate::kernel::reentrant::held(locker.inner.id, keys.lock())?;
    held.lease.is_held_by(held.fence).then_some(held.fence)
}
