//! The entry points of the primitives beyond a single lock: several keys at once, semaphores,
//! leader election and its observers. Each describes a request; the engine does the rest.

use crate::error::LockError;
use crate::primitives::leader::{LeaderObserver, LeaderRequest};
use crate::primitives::multi::MultiLockRequest;
use crate::primitives::semaphore::{PermitHolder, SemaphoreInfo, SemaphoreRequest};
use crate::store::keys::{validate_key, LockKeys};

use super::Locker;

impl Locker {
    /// Describes one acquisition of all of `keys`: all or nothing, the same lease, wait and
    /// watchdog for each. Duplicates collapse (a transfer from a wallet to itself takes one
    /// lock and does not wait on itself), and the keys are taken in one global order (by
    /// their bytes), whatever order they are named in, so callers locking overlapping sets
    /// never deadlock one another. Keys to read beside them go in the same acquisition and
    /// the same order: [`read_keys`](MultiLockRequest::read_keys).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let both = locker.lock_all(["wallet:2", "wallet:1"]).acquire().await?;
    /// assert_eq!(both.keys().collect::<Vec<_>>(), ["wallet:1", "wallet:2"]);
    /// assert!(both.fence("wallet:2").is_some());
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I, S>(&self, keys: I) -> MultiLockRequest<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLockRequest::new(
            self.lock(String::new()),
            keys.into_iter().map(Into::into).collect(),
        )
    }

    /// Describes taking permits of the semaphore `key`, which lets at most `permits` holders
    /// (across every process using the store) in at a time; finish with
    /// [`acquire`](SemaphoreRequest::acquire) (one permit) or
    /// [`acquire_many`](SemaphoreRequest::acquire_many).
    ///
    /// Every permit has its own owner token and lease, renewed by the watchdog while its
    /// guard lives: a holder that crashed gives its permits back when its lease ends, and
    /// nothing is left behind once nobody holds one (but the fence counter, for `fence_ttl`,
    /// as a lock's). Waiters wake on a release (no polling)
    /// and queue first come, first served inside the process. Across processes, a request
    /// for several permits that waits takes its turn: while it waits, the permits that come
    /// free are kept for it rather than taken by later requests (under steady load of single
    /// permits it would otherwise wait as long as the load lasts), and it leaves the turn
    /// however it stops waiting; one that vanishes without leaving (a killed process) holds
    /// the others back for 2 s at most. Each holder gets a fencing token
    /// ([`PermitGuard::fence`](crate::PermitGuard::fence)). The limit is part of every
    /// request: while permits are held, a request with another limit fails with
    /// [`LockError::Config`] instead of changing it silently (the limit can change once no
    /// permit of the old one is held). A semaphore and a lock of the same key are
    /// independent.
    ///
    /// On every engine but RedLock, which refuses it with [`LockError::Config`] by design:
    /// permits counted on each master and granted where a
    /// majority granted them admit more holders than the limit (a limit of 2 on 3 masters
    /// admits 3, each master counting 2), and one agreed count takes a consensus engine.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let a = locker.semaphore("partner-api", 2).acquire().await?;
    /// let b = locker.semaphore("partner-api", 2).acquire().await?;
    /// assert!(locker.semaphore("partner-api", 2).try_acquire().await?.is_none());
    /// drop(a); // a permit comes back
    /// let c = locker.semaphore("partner-api", 2).acquire().await?;
    /// # drop((b, c));
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, key: impl Into<String>, permits: u32) -> SemaphoreRequest<'_> {
        self.lock(key).into_semaphore(permits)
    }

    /// Who holds permits of the semaphore `key` now: the limit they agreed on and each
    /// holder's permits and remaining lease (never owner tokens). Works on every engine
    /// with semaphores, in memory too.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the store fails, [`LockError::InvalidKey`] for a bad
    /// key, [`LockError::Config`] on an engine without semaphores.
    pub async fn inspect_semaphore(&self, key: &str) -> Result<SemaphoreInfo, LockError> {
        validate_key(key)?;
        let keys = LockKeys::semaphore(&self.inner.prefix, key);
        let state = self
            .inner
            .store
            .call(|store| Box::pin(store.inspect_permits(&keys)))
            .await?;
        Ok(SemaphoreInfo {
            key: key.to_owned(),
            limit: state.limit,
            holders: state
                .holders
                .into_iter()
                .map(|(permits, remaining, holder)| PermitHolder {
                    permits,
                    remaining,
                    holder,
                })
                .collect(),
        })
    }

    /// Starts describing a campaign for the leadership of `name`; finish with
    /// [`campaign`](LeaderRequest::campaign) or
    /// [`run_while_leader`](LeaderRequest::run_while_leader).
    ///
    /// An election is a lock of its own, stored apart from [`lock`](Self::lock)'s keys (a
    /// lock named like an election does not take part in it). Any non-empty name up to
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes is accepted, except one that starts with
    /// the locker's prefix and a colon, like the store's own keys.
    ///
    /// On every engine: one Redis server, Sentinel, Redis Cluster, RedLock, ZooKeeper, etcd,
    /// PostgreSQL and in memory.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let leadership = locker.leader("scheduler").identity("pod-7").campaign().await?;
    /// assert!(leadership.is_leader());
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn leader(&self, name: impl Into<String>) -> LeaderRequest<'_> {
        let name = name.into();
        LeaderRequest::new(self.lock(name.clone()), name)
    }

    /// Watches the leadership of `name`, for followers: each
    /// [`next`](LeaderObserver::next) returns the current leader (or `None`) as soon as it
    /// differs from the last one returned.
    ///
    /// # Errors
    /// [`LockError::InvalidKey`] for a bad name, [`LockError::Config`] on an engine without
    /// leader election.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let mut followers = locker.observe_leader("scheduler")?;
    /// assert_eq!(followers.next().await?, None); // nobody leads yet
    /// let leadership = locker.leader("scheduler").identity("pod-7").campaign().await?;
    /// assert_eq!(followers.next().await?.unwrap().identity(), "pod-7");
    /// # Ok(()) }
    /// ```
    pub fn observe_leader(&self, name: impl AsRef<str>) -> Result<LeaderObserver, LockError> {
        LeaderObserver::new(&self.inner, name.as_ref())
    }
}
