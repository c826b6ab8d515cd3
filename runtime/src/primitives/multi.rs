//! Locks on several keys at once, write locks and read locks together: all or nothing, in one
//! global order, so that callers that name the same keys in any order never deadlock one
//! another.
//!
//! A [`MultiLockRequest`] sorts its keys (by their bytes, whatever their kind) and drops
//! duplicates (a key named for reading and for writing is written). When every key is free
//! and the store can take them together, one call takes them all in one round trip.
//! Otherwise it takes them one after another with the single-key machinery of the locker,
//! each key as a lone lock or a lone reader would: each key waits (and
//! wakes on its own release) as a lone lock would, and every process takes any two keys in
//! the same order, so no cycle of waits can form. `wait` bounds the whole acquisition; when a
//! key cannot be had in time, or the call is cancelled, the keys taken so far are released at
//! once. The [`MultiGuard`] renews every key's lease with the watchdog and counts as lost as
//! soon as any key is. Without the watchdog each key's lease counts from its own grant, so a
//! key taken early may run out while a later one is awaited: the call then gives every key
//! back and starts again while the wait lasts, and never returns a guard with a key already
//! lost.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::primitives::guard::LockGuard;
use crate::primitives::request::LockRequest;
use crate::store::keys::validate_key;
use crate::store::kind::LeaseKind;

/// Several keys to lock together. Made by [`Locker::lock_all`](crate::Locker::lock_all).
#[derive(Debug)]
#[must_use = "a lock request does nothing until .acquire().await or .try_acquire().await"]
pub struct MultiLockRequest<'a> {
    /// The options every key shares (its key and kind are not used).
    request: LockRequest<'a>,
    /// Each key as named, with what it takes: the write lock ([`LeaseKind::Exclusive`]) or
    /// a reader's share ([`LeaseKind::Read`]).
    keys: Vec<(String, LeaseKind)>,
}

impl<'a> MultiLockRequest<'a> {
    /// A request for the write locks of `keys`, with the options of `request` (the locker's
    /// defaults, for no key).
    pub(crate) fn new(request: LockRequest<'a>, keys: Vec<String>) -> Self {
        MultiLockRequest {
            request,
            keys: keys
                .into_iter()
                .map(|key| (key, LeaseKind::Exclusive))
                .collect(),
        }
    }
}

impl MultiLockRequest<'_> {
    /// Adds the read side of each of `keys` (see [`Locker::read_lock`](crate::Locker::read_lock))
    /// to this acquisition: "read the venue, write these seats" taken all or nothing, every
    /// key, read or written, in the one global order (by the key's bytes), so that readers
    /// and writers of overlapping sets never deadlock one another. A key named both for
    /// reading and for writing is written (the write lock lets its holder read too).
    ///
    /// Each read key is a reader's share, with its own fence among the key's writers (see
    /// [`Locker::read_lock`](crate::Locker::read_lock)), held beside the others under the
    /// same lease, wait and watchdog; the [`MultiGuard`] gives it as any key. A reader has no
    /// fair mode: [`fair`](Self::fair) applies to the written keys only.
    ///
    /// When every key is free, the written and the read keys are taken together in one round
    /// trip where the engine can (one script call on one Redis server or Sentinel's master,
    /// and on a Redis Cluster for keys of one hash slot); elsewhere, and when a key is busy,
    /// one by one in the same global order.
    ///
    /// # Errors
    /// The acquire fails with [`LockError::Config`] on an engine without read locks
    /// ([`Capabilities::read_locks`](crate::Capabilities::read_locks)).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let booking = locker
    ///     .lock_all(["seat:14B", "seat:14A"])
    ///     .read_keys(["venue:9"])
    ///     .acquire()
    ///     .await?;
    /// assert_eq!(booking.keys().collect::<Vec<_>>(), ["seat:14A", "seat:14B", "venue:9"]);
    /// // Other readers of the venue get in; its writers wait.
    /// let reader = locker.read_lock("venue:9").try_acquire().await?;
    /// assert!(reader.is_some());
    /// assert!(locker.write_lock("venue:9").try_acquire().await?.is_none());
    /// # drop(reader);
    /// booking.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.keys
            .extend(keys.into_iter().map(|key| (key.into(), LeaseKind::Read)));
        self
    }

    /// The lease of each key; see [`LockRequest::lease`](crate::LockRequest::lease).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.request = self.request.lease(lease);
        self
    }

    /// How long the whole acquisition may wait for busy keys before failing with
    /// [`LockError::Busy`] (having released the keys it took).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// Whether every key's lease is renewed in the background while the guard lives; see
    /// [`LockRequest::watchdog`](crate::LockRequest::watchdog).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.request = self.request.watchdog(on);
        self
    }

    /// Whether every key is taken first come, first served across processes, as
    /// [`LockRequest::fair`](crate::LockRequest::fair) says for one key: the keys are then
    /// taken one by one (never in one round trip), each released key goes back to the store
    /// (never handed to another task of the process), and each key's waiters are served in
    /// order. Defaults to off.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let both = locker.lock_all(["wallet:1", "wallet:2"]).fair(true).acquire().await?;
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair(mut self, on: bool) -> Self {
        self.request = self.request.fair(on);
        self
    }

    /// A short label operators see beside each of these locks' holder; see
    /// [`LockRequest::label`](crate::LockRequest::label), whose rules and errors it follows.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.request = self.request.label(label);
        self
    }

    /// Uses the settings of the locker's profile `name` for every key; see
    /// [`LockRequest::profile`](crate::LockRequest::profile).
    pub fn profile(mut self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        self.request = self.request.profile(name);
        self
    }

    /// Whether the options resolve against the locker (no key is looked at).
    pub(crate) fn check(&self) -> Result<(), LockError> {
        self.request.options()?;
        if self.keys.iter().any(|(_, kind)| *kind == LeaseKind::Read) {
            self.for_key(String::new(), LeaseKind::Read).options()?;
        }
        Ok(())
    }

    /// The request of one key of this acquisition, with the options every key shares.
    fn for_key(&self, key: String, kind: LeaseKind) -> LockRequest<'_> {
        let mut request = self.request.for_key(key).of_kind(kind);
        if kind == LeaseKind::Read {
            // A reader has no fair mode: the acquisition's `fair` is for its written keys.
            request.fair = false;
        }
        request
    }

    /// Takes every key, waiting up to `wait` in all. Dropping the returned future at any
    /// point releases the keys taken so far and leaves no renewal behind. Without the
    /// watchdog, a key whose lease ran out while a later key was awaited is taken again (all
    /// keys are given back and the call starts over): the guard returned holds every key.
    ///
    /// # Errors
    /// [`LockError::InvalidKey`] for an empty list or a bad key (before any key is taken),
    /// and otherwise as [`LockRequest::acquire`](crate::LockRequest::acquire); on any error
    /// no key stays locked.
    pub async fn acquire(mut self) -> Result<MultiGuard, LockError> {
        let keys = ordered(std::mem::take(&mut self.keys))?;
        self.check()?;
        let inner = self.request.inner;
        // The wait as resolved (a profile may set it), for the whole acquisition.
        let wait = self.request.options()?.wait;
        let deadline = Instant::now() + wait;
        // All free: one round trip where the store can (one Redis server, one Cluster slot).
        let first = self.request.for_key(keys[0].0.clone()).wait(wait);
        let opts = first.options()?;
        match inner.acquire_at_once(&keys, opts).await {
            Ok(Some(holds)) => {
                let guards = holds.into_iter().map(LockGuard::from).collect();
                return Ok(MultiGuard { guards });
            }
            Ok(None) => {}
            // Key by key, each acquire rides out the outage while the wait lasts.
            Err(e) if e.is_unavailable() && opts.retry_unavailable && !wait.is_zero() => {}
            Err(e) => return Err(e),
        }
        loop {
            let mut guards: Vec<LockGuard> = Vec::with_capacity(keys.len());
            for (key, kind) in &keys {
                let request = self
                    .for_key(key.clone(), *kind)
                    .wait(deadline.saturating_duration_since(Instant::now()));
                match request.acquire().await {
                    Ok(guard) => guards.push(guard),
                    Err(e) => {
                        release_newest_first(guards).await;
                        return Err(e);
                    }
                }
            }
            // Without the watchdog an earlier key's lease runs while a later key is awaited,
            // and may have run out (another holder may have the key by now): such a guard
            // must never be handed out as holding every key. Give all back and try again
            // while the wait lasts.
            if guards.iter().all(LockGuard::is_held) {
                return Ok(MultiGuard { guards });
            }
            release_newest_first(guards).await;
            if Instant::now() >= deadline {
                return Err(LockError::Busy { retry_after: None });
            }
            tracing::debug!(
                "an earlier key's lease ran out while a later key was awaited; trying again"
            );
        }
    }

    /// Takes every key if all are free right now; `Ok(None)` when one is not (the others
    /// are given back). Never waits.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), but never [`LockError::Busy`].
    pub async fn try_acquire(self) -> Result<Option<MultiGuard>, LockError> {
        match self.wait(Duration::ZERO).acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Releases the keys taken so far, newest first, so that a waiter of an earlier key does not
/// get it only to wait on a later one this call still holds.
async fn release_newest_first(guards: Vec<LockGuard>) {
    for guard in guards.into_iter().rev() {
        let _ = guard.release().await;
    }
}

/// Checks, sorts and dedups the keys of one multi-lock: one global order by the keys' bytes,
/// whatever their kind, and a key named for reading and for writing is written.
fn ordered(mut keys: Vec<(String, LeaseKind)>) -> Result<Vec<(String, LeaseKind)>, LockError> {
    if keys.is_empty() {
        return Err(LockError::invalid_key(
            "lock_all was given no key; name at least one",
        ));
    }
    for (key, _) in &keys {
        validate_key(key)?;
    }
    // Written before read, so that the written one stays when duplicates collapse.
    keys.sort_unstable_by(|(a, ka), (b, kb)| {
        a.cmp(b)
            .then_with(|| (*ka == LeaseKind::Read).cmp(&(*kb == LeaseKind::Read)))
    });
    keys.dedup_by(|later, earlier| later.0 == earlier.0);
    Ok(keys)
}

/// The locks of a [`MultiLockRequest`], one [`LockGuard`] per distinct key, in key order.
/// Dropping it releases them all in the background; [`release`](Self::release) does it now.
#[must_use = "dropping a MultiGuard releases its locks at once"]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// The keys held, in the order they were taken (sorted, without duplicates).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.guards.iter().map(LockGuard::key)
    }

    /// Every key held with the fencing token of its acquisition, in key order: what to pass
    /// along with the writes each key protects.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let seats = locker.lock_all(["seat:14B", "seat:14A"]).acquire().await?;
    /// for (key, fence) in seats.fences() {
    ///     // UPDATE seats SET holder = $1, fence = $fence WHERE key = $key AND fence < $fence
    ///     assert!(key.starts_with("seat:") && fence > 0);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn fences(&self) -> impl Iterator<Item = (&str, u64)> {
        self.guards.iter().map(|g| (g.key(), g.fence()))
    }

    /// The fencing token of `key`'s acquisition (see [`LockGuard::fence`]); `None` when the
    /// key is not one of this guard's.
    pub fn fence(&self, key: &str) -> Option<u64> {
        self.guard(key).map(LockGuard::fence)
    }

    /// The guard of one key, to pass its fence to the resource that key protects.
    pub fn guard(&self, key: &str) -> Option<&LockGuard> {
        self.guards
            .binary_search_by(|g| g.key().cmp(key))
            .ok()
            .map(|i| &self.guards[i])
    }

    /// Every key's guard, in key order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Whether every key is still held (see [`LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// Resolves as soon as any key's lease is lost: the whole guard is lost then.
    /// Cancel-safe.
    pub async fn lost(&self) {
        let mut each: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = self
            .guards
            .iter()
            .map(|g| Box::pin(g.lost()) as Pin<Box<dyn Future<Output = ()> + Send + '_>>)
            .collect();
        std::future::poll_fn(|cx| {
            let mut lost = false;
            for f in &mut each {
                lost |= f.as_mut().poll(cx).is_ready();
            }
            if lost {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Runs `fut` with every key marked as held by the enclosing scope (see
    /// [`LockGuard::scope`]): inside it, acquiring any of the keys re-enters.
    pub fn scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> + use<F> {
        let held: Vec<_> = self.guards.iter().map(|g| g.hold().held_entry()).collect();
        crate::kernel::reentrant::scope_many(held, fut)
    }

    /// Releases every key, all of them even when one fails. The releases go out together, so
    /// an engine that groups concurrent calls (Redis) takes them in one call: none goes out
    /// alone ahead of the others.
    ///
    /// # Errors
    /// [`LockError::Lost`] when any key was not ours any more (the work under the guard may
    /// have run unprotected), else the first [`LockError::Unavailable`] (in the keys' order).
    pub async fn release(self) -> Result<(), LockError> {
        let mut outcome = Ok(());
        let released = crate::store::join_together(self.guards.into_iter().map(LockGuard::release));
        for result in released.await {
            match (result, &outcome) {
                (Ok(()), _) | (Err(_), Err(LockError::Lost { .. })) => {}
                (Err(e @ LockError::Lost { .. }), _) | (Err(e), Ok(())) => outcome = Err(e),
                (Err(_), Err(_)) => {}
            }
        }
        outcome
    }

    /// The error for this guard's loss: the first lost key's.
    pub(crate) fn lost_error(&self) -> LockError {
        self.guards
            .iter()
            .find(|g| !g.is_held())
            .unwrap_or(&self.guards[0])
            .hold()
            .lost_error()
    }

    /// Reports the loss on every key's lease that was lost.
    pub(crate) fn report_lost(&self, why: &'static str) {
        for guard in self.guards.iter().filter(|g| !g.is_held()) {
            guard.hold().report_lost(why);
        }
    }
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard")
            .field(
                "fences",
                &self
                    .guards
                    .iter()
                    .map(|g| (g.key(), g.fence()))
                    .collect::<Vec<_>>(),
            )
            .field("held", &self.is_held())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locker;

    #[test]
    fn keys_are_sorted_deduplicated_and_checked() {
        use LeaseKind::{Exclusive as W, Read as R};
        let keys = |k: &[(&str, LeaseKind)]| -> Vec<(String, LeaseKind)> {
            k.iter().map(|(k, kind)| (k.to_string(), *kind)).collect()
        };
        assert_eq!(
            ordered(keys(&[("b", W), ("a", W), ("b", W)])).unwrap(),
            keys(&[("a", W), ("b", W)])
        );
        // One order for reads and writes; a key both read and written is written.
        assert_eq!(
            ordered(keys(&[("c", R), ("b", W), ("a", R), ("c", W), ("a", R)])).unwrap(),
            keys(&[("a", R), ("b", W), ("c", W)])
        );
        assert!(ordered(Vec::new()).is_err());
        assert!(ordered(keys(&[("a", W), ("", R)])).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn opposite_orders_never_deadlock_and_a_busy_key_gives_back_the_others() {
        let locker = Locker::in_memory();
        let mut tasks = Vec::new();
        for i in 0..20 {
            let locker = locker.clone();
            tasks.push(tokio::spawn(async move {
                let keys = if i % 2 == 0 {
                    ["w1", "w2"]
                } else {
                    ["w2", "w1"]
                };
                let guard = locker
                    .lock_all(keys)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                guard.release().await.unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }

        let held = locker.lock("w2").acquire().await.unwrap();
        let e = locker
            .lock_all(["w1", "w2"])
            .wait(Duration::from_millis(50))
            .acquire()
            .await
            .unwrap_err();
        assert!(e.is_busy(), "{e:?}");
        // w1 was taken, then given back when w2 stayed busy.
        assert!(locker.lock("w1").try_acquire().await.unwrap().is_some());
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_key_twice_is_one_lock_and_losing_any_key_loses_the_guard() {
        let locker = Locker::in_memory();
        let one = locker
            .lock_all(["w", "w"])
            .wait(Duration::ZERO)
            .acquire()
            .await
            .unwrap();
        assert_eq!(one.guards().len(), 1);
        drop(one);

        let two = locker.lock_all(["y", "x"]).acquire().await.unwrap();
        let fences: Vec<(&str, u64)> = two.fences().collect();
        assert_eq!(fences.len(), 2);
        assert_eq!((fences[0].0, fences[1].0), ("x", "y"));
        assert_eq!(fences[0].1, two.guard("x").unwrap().fence());
        assert_eq!(fences[1].1, two.guard("y").unwrap().fence());
        drop(two);

        let both = locker
            .lock_all(["a", "b"])
            .lease(Duration::from_millis(100))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        assert!(both.is_held());
        tokio::time::timeout(Duration::from_secs(1), both.lost())
            .await
            .expect("the unrenewed leases run out");
        assert!(!both.is_held());
        assert!(both.release().await.unwrap_err().is_lost());
    }

    /// Found by the differential test (issue 28): without the watchdog, a key taken early ran
    /// out of lease while a later key was awaited, a reader took it, and `acquire` still
    /// returned a guard "holding" every key, its fence for that key below the reader's.
    #[tokio::test(start_paused = true)]
    async fn a_key_whose_lease_ran_out_while_a_later_one_was_awaited_is_taken_again() {
        let locker = Locker::in_memory();
        let blocker = locker.lock("b").acquire().await.unwrap();
        let all = {
            let locker = locker.clone();
            tokio::spawn(async move {
                locker
                    .lock_all(["a", "b"])
                    .lease(Duration::from_millis(100))
                    .watchdog(false)
                    .wait(Duration::from_secs(5))
                    .acquire()
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        // `a`'s lease ran out meanwhile: a reader gets in.
        let reader = locker.read_lock("a").try_acquire().await.unwrap();
        let reader = reader.expect("a's lease ran out while b was awaited");
        let reader_fence = reader.fence();
        reader.release().await.unwrap();
        blocker.release().await.unwrap();
        let both = all.await.unwrap().unwrap();
        assert!(
            both.is_held(),
            "lock_all handed out a guard with a key already lost"
        );
        assert!(both.fence("a").unwrap() > reader_fence);
        both.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_acquisition_leaves_no_key_locked() {
        let locker = Locker::in_memory();
        let blocker = locker.lock("z").acquire().await.unwrap();
        let pending = locker.lock_all(["a", "z"]).wait(Duration::from_secs(60));
        let cancelled = tokio::time::timeout(Duration::from_millis(20), pending.acquire()).await;
        assert!(cancelled.is_err(), "still waiting for z");
        tokio::task::yield_now().await;
        assert!(
            locker.lock("a").try_acquire().await.unwrap().is_some(),
            "the key taken before the cancel was given back"
        );
        drop(blocker);
    }

    /// "Read the venue, write these seats": the venue's readers share, its writers wait, the
    /// seats exclude; a key both read and written is written.
    #[tokio::test(start_paused = true)]
    async fn read_keys_share_with_readers_and_exclude_writers() {
        let locker = Locker::in_memory();
        let first = locker
            .lock_all(["seat:2", "seat:1"])
            .read_keys(["venue"])
            .acquire()
            .await
            .unwrap();
        assert_eq!(
            first.keys().collect::<Vec<_>>(),
            ["seat:1", "seat:2", "venue"]
        );
        let second = locker
            .lock_all(["seat:3"])
            .read_keys(["venue"])
            .try_acquire()
            .await
            .unwrap()
            .expect("readers of the venue share");
        assert!(locker
            .write_lock("venue")
            .try_acquire()
            .await
            .unwrap()
            .is_none());
        assert!(locker
            .read_lock("seat:1")
            .try_acquire()
            .await
            .unwrap()
            .is_none());
        // A busy seat gives the venue's share back.
        assert!(locker
            .lock_all(["seat:1"])
            .read_keys(["venue"])
            .try_acquire()
            .await
            .unwrap()
            .is_none());
        drop((first, second));
        tokio::task::yield_now().await;

        let both = locker
            .lock_all(["venue"])
            .read_keys(["venue", "seat:1"])
            .acquire()
            .await
            .unwrap();
        assert_eq!(both.keys().collect::<Vec<_>>(), ["seat:1", "venue"]);
        assert!(
            locker
                .read_lock("venue")
                .try_acquire()
                .await
                .unwrap()
                .is_none(),
            "named for reading and writing: written"
        );
        assert!(locker
            .read_lock("seat:1")
            .try_acquire()
            .await
            .unwrap()
            .is_some());
        drop(both);
    }

    /// Readers and writers of overlapping sets, in opposite orders, with writers of the read
    /// keys among them (whose waiting holds new readers back): nobody deadlocks, and no
    /// writer of a key overlaps a holder of it.
    #[tokio::test(start_paused = true)]
    async fn reads_and_writes_in_opposite_orders_never_deadlock() {
        use std::sync::atomic::{AtomicI32, Ordering};
        use std::sync::Arc;
        let locker = Locker::in_memory();
        // Per key: -1 written, n > 0 read by n.
        let state: Arc<[AtomicI32; 3]> = Arc::new(Default::default());
        let names = ["k0", "k1", "k2"];
        let mut tasks = Vec::new();
        for i in 0..24usize {
            let (locker, state) = (locker.clone(), state.clone());
            tasks.push(tokio::spawn(async move {
                let (w, r) = (i % 3, (i + 1 + i / 3 % 2) % 3);
                let guard = locker
                    .lock_all([names[w]])
                    .read_keys([names[r]])
                    .wait(Duration::from_secs(600))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(state[w].swap(-1, Ordering::SeqCst), 0, "a writer overlaps");
                assert!(
                    state[r].fetch_add(1, Ordering::SeqCst) >= 0,
                    "read while written"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
                state[w].store(0, Ordering::SeqCst);
                state[r].fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }));
        }
        let all = async {
            for t in tasks {
                t.await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(300), all)
            .await
            .expect("a deadlock");
    }
}
