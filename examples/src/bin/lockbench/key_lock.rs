//! What the harnesses take a key with: leasehold's locker on any engine ([`Ours`]) or a
//! baseline, behind one small trait, so that each measuring loop is written once.

use std::future::Future;

use leasehold::{LockGuard, Locker};

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
