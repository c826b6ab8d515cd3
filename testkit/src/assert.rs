//! Assertions about locks in the user's own code: [`assert_held!`](crate::assert_held) inside
//! a body, and a [`Witness`] that a function ran under a lock every time it ran.

use std::sync::{Arc, Mutex};

use leasehold::Locker;

/// Asserts that the running scope holds a key with a valid lease (inside a
/// `#[distributed_lock]` body, a guard's [`scope`](leasehold::LockGuard::scope), or anything
/// they call), and evaluates to the fence it holds it with. `assert_held!(locker, key)`
/// asks `locker`; `assert_held!(key)` asks the global default locker
/// ([`leasehold::set_global_default`]).
///
/// A sibling task's hold does not count: the lock must be held by a scope this code runs in.
///
/// # Panics
/// When the scope does not hold the key, or its lease is lost, naming the key (and when
/// `assert_held!(key)` finds no global default locker).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// use leasehold_testkit::assert_held;
///
/// let locker = leasehold::Locker::in_memory();
/// let guard = locker.lock("order:42").acquire().await?;
/// let fence = guard.scope(async { assert_held!(locker, "order:42") }).await;
/// assert_eq!(fence, guard.fence());
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! assert_held {
    ($locker:expr, $key:expr $(,)?) => {
        $crate::__private::assert_held(&$locker, ::core::convert::AsRef::<str>::as_ref(&$key))
    };
    ($key:expr $(,)?) => {
        $crate::__private::assert_held_by_default(::core::convert::AsRef::<str>::as_ref(&$key))
    };
}

/// What [`assert_held!`](crate::assert_held) expands to call.
#[doc(hidden)]
pub mod __private {
    use leasehold::Locker;

    #[track_caller]
    pub fn assert_held(locker: &Locker, key: &str) -> u64 {
        match leasehold::testing::held_here(locker, key) {
            Some(fence) => fence,
            None => panic!(
                "`{key}` is not held here: no enclosing lock scope holds it with a valid lease \
                 (take it with #[distributed_lock], or run this code inside the guard's scope())"
            ),
        }
    }

    #[track_caller]
    pub fn assert_held_by_default(key: &str) -> u64 {
        let Some(locker) = leasehold::global_default() else {
            panic!(
                "assert_held!(\"{key}\") asks the global default locker, and none is set: call \
                 leasehold::set_global_default(..) first, or write assert_held!(locker, \"{key}\")"
            );
        };
        assert_held(locker, key)
    }
}

/// A witness that a function ran under a lock every time it ran: the function calls
/// [`here`](Self::here) where it touches what the lock protects, and the test, after running
/// it, calls [`assert_always_held`](Self::assert_always_held). Unlike
/// [`assert_held!`](crate::assert_held), nothing panics inside the function under test (a
/// panic there could be caught by the code around it). Cheap to clone; clones share the
/// record.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// use leasehold_testkit::Witness;
///
/// let locker = leasehold::Locker::in_memory();
/// let witness = Witness::new(&locker, "stock:42");
/// let guard = locker.lock("stock:42").acquire().await?;
/// guard.scope(async { witness.here() }).await;
/// witness.assert_always_held();
/// witness.here(); // outside the scope: not held
/// assert_eq!(witness.unheld_calls(), vec![1]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Witness {
    locker: Locker,
    key: String,
    calls: Arc<Mutex<Vec<Option<u64>>>>,
}

impl Witness {
    /// A witness of `key` on `locker`, with no call recorded.
    pub fn new(locker: &Locker, key: impl Into<String>) -> Self {
        Witness {
            locker: locker.clone(),
            key: key.into(),
            calls: Arc::default(),
        }
    }

    /// Records one call: whether the running scope holds the key now, with which fence.
    pub fn here(&self) {
        let fence = leasehold::testing::held_here(&self.locker, &self.key);
        self.calls.lock().unwrap().push(fence);
    }

    /// How many calls were recorded.
    pub fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// The fence of each call made under the lock, in order (`None` for a call without it).
    pub fn fences(&self) -> Vec<Option<u64>> {
        self.calls.lock().unwrap().clone()
    }

    /// The indexes (from 0) of the calls made without the lock.
    pub fn unheld_calls(&self) -> Vec<usize> {
        let calls = self.calls.lock().unwrap();
        (0..calls.len()).filter(|&i| calls[i].is_none()).collect()
    }

    /// Asserts that the function ran at least once, and every time under the lock.
    ///
    /// # Panics
    /// When it never ran, or ran without the lock, naming the key and the calls.
    #[track_caller]
    pub fn assert_always_held(&self) {
        let calls = self.calls();
        assert!(calls > 0, "the witness of `{}` was never called", self.key);
        let unheld = self.unheld_calls();
        assert!(
            unheld.is_empty(),
            "{} of {calls} call(s) ran without holding `{}` (calls {unheld:?}, from 0)",
            unheld.len(),
            self.key,
        );
    }
}
