//! What the harnesses take a key with: leasehold's locker on any engine ([`Ours`]) or a
//! baseline, behind one small trait, so that each measuring loop is written once.

use std::future::Future;

use leasehold::{LockGuard, Locker};

use crate::versus::SEVERAL;

/// Takes a key and gives it back: leasehold or a baseline, connected in one process.
pub(crate) trait KeyLock: Clone + Send + Sync + 'static {
    /// What [`acquire`](Self::acquire) hands to [`release`](Self::release): a guard, an owner
    /// token.
    type Held<'a>: Send
    where
        Self: 'a;

    /// Waits until `key` is held.
    fn acquire<'a>(&'a self, key: &'a str) -> impl Future<Output = Self::Held<'a>> + Send + 'a;

    /// Gives `key` up, and waits until it is given up.
    fn release<'a>(
        &'a self,
        key: &'a str,
        held: Self::Held<'a>,
    ) -> impl Future<Output = ()> + Send + 'a;

    /// What one task of a process takes keys with: the process's own, unless the lock needs
    /// one per task.
    fn for_task(&self) -> impl Future<Output = Self> + Send {
        std::future::ready(self.clone())
    }
}

/// leasehold, on whichever engine its locker was built for.
#[derive(Clone)]
pub(crate) struct Ours {
    locker: Locker,
    /// `fair(true)` locks: no handover inside a process.
    fair: bool,
}

impl Ours {
    pub(crate) fn new(locker: Locker) -> Ours {
        Ours {
            locker,
            fair: false,
        }
    }

    pub(crate) fn fair(locker: Locker) -> Ours {
        Ours { locker, fair: true }
    }
}

impl KeyLock for Ours {
    type Held<'a> = LockGuard;

    async fn acquire<'a>(&'a self, key: &'a str) -> LockGuard {
        self.locker
            .lock(key)
            .fair(self.fair)
            .acquire()
            .await
            .expect("acquire")
    }

    async fn release<'a>(&'a self, _: &'a str, guard: LockGuard) {
        guard.release().await.expect("release");
    }
}

/// Several keys taken in one request and given back in one, written by hand on an engine: the
/// floor a `lock_all` of free keys is measured against ([`AllOf`]).
pub(crate) trait KeysAtOnce: Clone + Send + Sync + 'static {
    /// What [`acquire_all`](Self::acquire_all) hands to [`release_all`](Self::release_all).
    type Held: Send;

    /// Takes every one of `keys`, all free (uncontended cycles only), in one request.
    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
    ) -> impl Future<Output = Self::Held> + Send + 'a;

    /// Gives every one of `keys` back in one request, and waits until they are given back.
    fn release_all<'a>(
        &'a self,
        keys: &'a [String],
        held: Self::Held,
    ) -> impl Future<Output = ()> + Send + 'a;
}

/// A [`KeysAtOnce`] lock as a [`KeyLock`]: taking `key` takes `count` keys `{key}-0`,
/// `{key}-1`, … together, so that one measuring loop runs it.
#[derive(Clone)]
pub(crate) struct AllOf<L> {
    lock: L,
    count: usize,
}

impl<L> AllOf<L> {
    /// [`SEVERAL`] keys at once.
    pub(crate) fn several(lock: L) -> AllOf<L> {
        AllOf {
            lock,
            count: SEVERAL,
        }
    }

    /// The same request with one key: the single key by hand, written as the several are.
    pub(crate) fn one(lock: L) -> AllOf<L> {
        AllOf { lock, count: 1 }
    }

    /// The keys taken for `key`, in order.
    fn keys(&self, key: &str) -> Vec<String> {
        (0..self.count).map(|k| format!("{key}-{k}")).collect()
    }
}

impl<L: KeysAtOnce> KeyLock for AllOf<L> {
    type Held<'a> = L::Held;

    async fn acquire<'a>(&'a self, key: &'a str) -> L::Held {
        self.lock.acquire_all(&self.keys(key)).await
    }

    async fn release<'a>(&'a self, key: &'a str, held: L::Held) {
        self.lock.release_all(&self.keys(key), held).await;
    }
}
