//! [`LockRequest`], the description of one acquisition of a lock or a reader's share: its
//! options are resolved against the locker's defaults and its engine's capabilities here, once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::LockError;
use crate::kernel::options::{check_lease, Options};
use crate::kernel::state::Inner;
use crate::primitives::guard::LockGuard;
use crate::primitives::profile::{self, Profiles};
use crate::store::identity::Label;
use crate::store::kind::LeaseKind;
use crate::store::{self, Feature};

/// One acquisition being described: key, lease, wait and watchdog. Made by
/// [`Locker::lock`](crate::Locker::lock).
#[derive(Clone)]
#[must_use = "a lock request does nothing until .acquire().await or .try_acquire().await"]
pub struct LockRequest<'a> {
    /// The core of the locker that made it.
    pub(crate) inner: &'a Arc<Inner>,
    /// The locker's named profiles.
    pub(crate) profiles: &'a Profiles,
    pub(crate) key: String,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) watchdog: Option<bool>,
    /// The lock, or the read side of a read-write lock ([`Locker::read_lock`](crate::Locker::read_lock)); a
    /// semaphore's request sets its permits.
    pub(crate) kind: LeaseKind,
    /// First come, first served across processes ([`LockRequest::fair`]).
    pub(crate) fair: bool,
    /// `fair` is the named profile's, not asked for by the caller: read locks and permits,
    /// which have no fair mode, leave it out rather than refuse it.
    pub(crate) fair_of_profile: bool,
    /// Keep the lock at least this long after it was taken ([`LockRequest::hold_at_least`]).
    pub(crate) hold_at_least: Option<Duration>,
    /// Takes a fencing token; false once [`unfenced`](LockRequest::unfenced) was called.
    pub(crate) fenced: bool,
    /// Rides out an outage while waiting ([`LockRequest::retry_unavailable`]); `None`: the
    /// locker's default.
    pub(crate) retry_unavailable: Option<bool>,
    /// The named profile whose settings override this request's ([`LockRequest::profile`]).
    pub(crate) profile: Option<std::borrow::Cow<'static, str>>,
    /// What operators see beside the holder ([`LockRequest::label`]), checked at the acquire.
    pub(crate) label: Option<String>,
}

impl<'a> LockRequest<'a> {
    /// A request for the lock on `key`, with the locker's defaults.
    pub(crate) fn new(inner: &'a Arc<Inner>, profiles: &'a Profiles, key: String) -> Self {
        LockRequest {
            inner,
            profiles,
            key,
            lease: None,
            wait: None,
            watchdog: None,
            kind: LeaseKind::Exclusive,
            fair: false,
            fair_of_profile: false,
            hold_at_least: None,
            fenced: true,
            retry_unavailable: None,
            profile: None,
            label: None,
        }
    }

    /// The same options for another key: the requests of every primitive keep their lease,
    /// wait and watchdog in a `LockRequest`, resolved in one place ([`Self::options`]).
    pub(crate) fn for_key(&self, key: String) -> Self {
        LockRequest {
            key,
            ..self.clone()
        }
    }

    /// This request for a lease of `kind` (the attribute's options carry it).
    pub(crate) fn of_kind(mut self, kind: LeaseKind) -> Self {
        self.kind = kind;
        self
    }

    /// How long this holder may count on the lock without a renewal. Where locks expire by
    /// themselves (Redis, RedLock, PostgreSQL, in memory) it is also how long the engine keeps
    /// the lock if this process stops renewing it (crash, pause, partition). On ZooKeeper and
    /// etcd a lock lives as long as the locker's session, which bounds the lease (a longer one
    /// is shortened to the session timeout, or refused without the watchdog), and a crashed
    /// holder's locks go when its session ends. Defaults to the locker's default lease; at
    /// least 10 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long to wait for a busy lock before failing with [`LockError::Busy`]; zero fails
    /// at once. Defaults to the locker's default wait.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Whether to renew the lease in the background (every lease/3) while the guard lives.
    /// With `false` the lease is a hard maximum: the guard counts as lost when it ends.
    /// Defaults to the locker's setting (on).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = Some(on);
        self
    }

    /// First come, first served across every task of every process. By default a release
    /// hands the lock straight to the next waiter of the same process, without a round trip,
    /// up to 16 times in a row before another process gets its turn: faster, less fair.
    ///
    /// On Redis (one server, Sentinel, Cluster) and PostgreSQL a fair request waits in the
    /// store's queue under a name of its own, a release leaves the lock to the request that waited longest
    /// (for 200 ms only it can take it), and the wake-up names it, so only that request asks
    /// again. So requests get the lock in the order they first found it taken, whichever
    /// process they come from. A request that gives up or is cancelled leaves the queue at
    /// once; one whose process died holds the others up once, for at most 1.2 s (the window,
    /// then the 1 s the others sleep at most between attempts), and only while its place
    /// lasts (2 s after its last attempt).
    ///
    /// On RedLock, ZooKeeper, etcd and in memory, fair requests queue in the process first
    /// (first come, first served) and the store's queue orders processes: processes take
    /// turns in the order they started waiting.
    ///
    /// A fair release costs a round trip to the store every time.
    ///
    /// For the lock, the write side of a read-write lock and [`lock_all`](crate::Locker::lock_all)
    /// (each key), and always on for leader election.
    ///
    /// # Errors
    /// [`acquire`](Self::acquire) fails with [`LockError::Config`] for a read lock: readers
    /// never queue in the process and are let in by the writers-first rule (see
    /// [`Locker::read_lock`](crate::Locker::read_lock)), so their order is not first come, first served. (A
    /// [profile](Self::profile)'s `fair` does not apply to read locks or semaphores, which
    /// have no fair mode.)
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = on;
        self.fair_of_profile = false;
        self
    }

    /// Whether this acquire, while it waits, rides out an outage of the engine (a failover,
    /// a restart, a network blip): an attempt that finds the engine unavailable is tried
    /// again with backoff (100 ms doubling up to 2 s, jittered), and the acquire fails with
    /// [`LockError::Unavailable`] only once its [`wait`](Self::wait) is over, its message
    /// saying how long the engine was out. With `false` the first unavailable answer ends
    /// the wait at once. An acquire that does not wait ([`try_acquire`](Self::try_acquire),
    /// a wait of zero) never retries. Defaults to the locker's setting
    /// ([`LockerBuilder::retry_unavailable`](crate::LockerBuilder::retry_unavailable), on).
    ///
    /// What an attempt that failed may have taken (its answer never came, so it may have
    /// landed) is given back before the next attempt.
    pub fn retry_unavailable(mut self, on: bool) -> Self {
        self.retry_unavailable = Some(on);
        self
    }

    /// Keeps the lock for at least `hold` after it was taken, even when the guard is
    /// released (or dropped) sooner: for a job that must run once per window across a fleet
    /// whose schedulers fire at slightly different moments, so that an instance triggered a
    /// moment after the job finished elsewhere still finds the lock taken. Released later
    /// than that, the lock is released at once, as usual. Defaults to no minimum (zero).
    ///
    /// How the lock stays taken after an early release:
    /// - Where locks expire by themselves (one Redis server, Sentinel, Redis Cluster, RedLock,
    ///   PostgreSQL, in memory), the release sets the lock to expire at the end of the hold,
    ///   if it is still ours (one owner-checked call, the one a renewal makes), and stops
    ///   renewing it; the lock is then not deleted. The hold survives this process: if it
    ///   dies, the lock still frees itself at the end of the hold, not before.
    /// - On ZooKeeper and etcd, where a lock lives as long as the session that took it, the
    ///   lock is kept (and renewed) by the locker's background task and released at the end
    ///   of the hold. If this process dies before then, the lock frees itself when its
    ///   session ends (ZooKeeper: the session timeout; etcd: the lease's TTL), which may be
    ///   before the end of the hold.
    ///
    /// The local waiters of the key are not handed the lock meanwhile: they wait in the
    /// store like anyone else. `#[distributed_lock(hold_at_least = "30s")]` is this.
    ///
    /// On a read lock, the reader's share stays (writers stay out) until the end of the hold.
    /// Through a downgrade (a read taken inside the held write, see [`Locker::read_lock`](crate::Locker::read_lock))
    /// the hold of the write and the read's own both count: the lock stays taken until the
    /// later of them ends, whichever guard ends the lease. A re-entered acquire (inside a
    /// scope that holds the key already) releases nothing, and keeps no hold of its own.
    ///
    /// # Errors
    /// [`acquire`](Self::acquire) fails with [`LockError::Config`] when `hold` is longer than
    /// a lease that is not renewed (`.watchdog(false)`): the lock would end before the hold.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let job = locker
    ///     .lock("job:nightly-report")
    ///     .hold_at_least(Duration::from_secs(30))
    ///     .try_acquire()
    ///     .await?;
    /// if let Some(guard) = job {
    ///     // ... the job, done in a second ...
    ///     guard.release().await?;
    /// }
    /// // 30 s after the job started, the lock is still taken: a late trigger skips it.
    /// assert!(locker.lock("job:nightly-report").try_acquire().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn hold_at_least(mut self, hold: Duration) -> Self {
        self.hold_at_least = Some(hold);
        self
    }

    /// A short label for this acquisition that operators see beside its holder
    /// ([`Locker::inspect`](crate::Locker::inspect), `leasehold show`): a request id, a job
    /// run, an order number, so that "who holds `order:42`" has an answer down to the
    /// request. It is stored in the engine with the lock (inside the owner value every
    /// acquire, renewal and release sends already: no extra round trip), and is visible to
    /// anyone who can read the engine: never a secret, a token or personal data. A lease
    /// handed to another task of the same process without a round trip keeps the label it
    /// was taken with. Defaults to none.
    ///
    /// # Errors
    /// The acquire fails with [`LockError::InvalidKey`] when the label is empty, longer than
    /// [`MAX_LABEL_LEN`](crate::MAX_LABEL_LEN) (64) bytes, or has anything but printable ASCII
    /// (letters, digits, punctuation, spaces): a label often comes from request data, as keys
    /// do, and a web handler answers it as a bad request.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("order:42").label("req-7f3a").acquire().await?;
    /// guard.release().await?;
    /// assert!(locker.lock("order:42").label("line\nbreak").acquire().await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Takes the lock, waiting up to `wait` for the current holder to release it. Waiters in
    /// one process queue in order (first come, first served) and a release hands the lock
    /// straight to the next one.
    ///
    /// A nested acquire of a key that the surrounding scope already holds (inside a
    /// `#[distributed_lock]` body, or [`LockGuard::scope`]) re-enters without a round trip.
    ///
    /// Dropping the returned future at any point leaves no lock and no renewal behind.
    ///
    /// # Errors
    /// [`LockError::Busy`] when the lock stayed taken for the whole wait,
    /// [`LockError::Unavailable`] when the engine failed or did not answer within the
    /// operation timeout (after riding out the outage until the wait is over, see
    /// [`retry_unavailable`](Self::retry_unavailable)), [`LockError::InvalidKey`] and
    /// [`LockError::Config`] for bad input or for what the engine does not offer.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker
    ///     .lock("stock:sku-7")
    ///     .lease(Duration::from_secs(10))
    ///     .wait(Duration::from_millis(500))
    ///     .acquire()
    ///     .await?;
    /// assert!(guard.is_held());
    /// # Ok(()) }
    /// ```
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let opts = self.options()?;
        self.inner
            .acquire_with(self.key, opts)
            .await
            .map(LockGuard::from)
    }

    /// Takes the lock if it is free right now; `Ok(None)` when it is not. Never waits.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), but never [`LockError::Busy`].
    pub async fn try_acquire(mut self) -> Result<Option<LockGuard>, LockError> {
        self.wait = Some(Duration::ZERO);
        match self.acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Uses the settings of the locker's profile `name` (the config's `[profiles.NAME]`, or
    /// [`LockerBuilder::profile`](crate::LockerBuilder::profile)): what the profile sets
    /// (lease, wait, watchdog, fairness) replaces what this request set before, and the
    /// request keeps its own settings for what the profile leaves unset. Settings given after
    /// `.profile(...)` override the profile's. A profile's `limit` is for semaphores
    /// ([`SemaphoreRequest::profile`](crate::SemaphoreRequest::profile)); its `fair` is for
    /// locks, writes and [`lock_all`](crate::Locker::lock_all), and a read lock leaves it out (see
    /// [`fair`](Self::fair)).
    ///
    /// # Errors
    /// The acquire fails with [`LockError::Config`] when the locker has no such profile, or
    /// when the profile sets a `limit` (this is not a semaphore).
    /// [`Locker::check_call_sites`](crate::Locker::check_call_sites) finds the attributes
    /// that name such a profile at start-up.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use leasehold::{Locker, Profile};
    /// use std::time::Duration;
    ///
    /// let locker = Locker::builder()
    ///     .profile("payments", Profile::new().lease(Duration::from_secs(45)))
    ///     .build_in_memory()?;
    /// let guard = locker.lock("payout:7").profile("payments").acquire().await?;
    /// assert!(guard.is_held());
    /// assert!(locker.lock("payout:8").profile("payment").acquire().await.is_err()); // a typo
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        let name = name.into();
        if let Some(profile) = self.profiles.get(&*name) {
            self.lease = profile.lease.or(self.lease);
            self.wait = profile.wait.or(self.wait);
            self.watchdog = profile.watchdog.or(self.watchdog);
            if let Some(fair) = profile.fair {
                self.fair = fair;
                self.fair_of_profile = true;
            }
            if let (Some(limit), LeaseKind::Permits { limit: asked, .. }) =
                (profile.limit, &mut self.kind)
            {
                *asked = limit;
            }
        }
        self.profile = Some(name);
        self
    }

    pub(crate) fn options(&self) -> Result<Options, LockError> {
        let inner = self.inner;
        inner.closing.check()?;
        // The profile's settings were applied when it was named; here it is checked, once,
        // for every primitive.
        if let Some(name) = &self.profile {
            let profile = profile::find(self.profiles, name)?;
            if let (Some(limit), LeaseKind::Exclusive | LeaseKind::Read) =
                (profile.limit, self.kind)
            {
                return Err(profile::limit_on_a_lock(name, limit, self.kind));
            }
        }
        let label = self.label.as_deref().map(Label::new).transpose()?;
        let watchdog = self.watchdog.unwrap_or(inner.default_watchdog);
        let mut lease = self.lease.unwrap_or(inner.default_lease);
        check_lease(lease, "lease")?;
        let caps = inner.store.capabilities();
        if let Some(bound) = caps.max_lease {
            // Renewed, a lease above the bound is as good as the bound; unrenewed, it would
            // end long before the caller counts on (a singleton job's `hold_at_most`).
            if !watchdog && lease > bound {
                return Err(LockError::config(format!(
                    "a lease of {lease:?} without the watchdog is longer than {} honours \
                     ({bound:?}: the session timeout, which bounds every lease there): the \
                     lock would end after {bound:?}; raise session_timeout above {lease:?}, \
                     shorten the lease, or turn the watchdog on",
                    inner.store.describe()
                )));
            }
            lease = lease.min(bound);
        }
        // What the lease holds is checked against what the engine offers here, once.
        let needs = match self.kind {
            LeaseKind::Exclusive => None,
            LeaseKind::Read => Some(Feature::ReadLocks),
            LeaseKind::Permits { .. } => Some(Feature::Semaphores),
        };
        if let Some(feature) = needs {
            store::require(feature, &caps, &inner.store.info())?;
        }
        let fair = match self.kind {
            LeaseKind::Exclusive => self.fair,
            kind if self.fair && !self.fair_of_profile => return Err(fair_not_offered(kind)),
            // A profile's fairness is for the locks it also serves.
            _ => false,
        };
        if !self.fenced && self.kind != LeaseKind::Exclusive {
            return Err(LockError::config(
                "unfenced reads are not offered: every reader gets a fencing token that orders \
                 it among the writers (the store keeps the readers' fences in step with the \
                 writers'); drop unfenced(), or take an unfenced lock (lock(key).unfenced()) \
                 where nobody reads beside it",
            ));
        }
        let hold_at_least = self.hold_at_least.filter(|hold| !hold.is_zero());
        if let Some(hold) = hold_at_least {
            if !watchdog && hold > lease {
                return Err(LockError::config(format!(
                    "hold_at_least of {hold:?} is longer than the lease of {lease:?}, which is \
                     not renewed (watchdog off): the lock would end before the hold; shorten \
                     the hold, lengthen the lease, or turn the watchdog on"
                )));
            }
        }
        Ok(Options {
            lease,
            wait: self.wait.unwrap_or(inner.default_wait),
            watchdog,
            fair,
            kind: self.kind,
            hold_at_least,
            fenced: self.fenced,
            retry_unavailable: self.retry_unavailable.unwrap_or(inner.retry_unavailable),
            label,
        })
    }
}

impl fmt::Debug for LockRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockRequest")
            .field("store", &self.inner.store.describe())
            .field("key", &self.key)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .field("watchdog", &self.watchdog)
            .field("kind", &self.kind)
            .field("fair", &self.fair)
            .field("hold_at_least", &self.hold_at_least)
            .field("fenced", &self.fenced)
            .field("retry_unavailable", &self.retry_unavailable)
            .field("profile", &self.profile)
            .field("label", &self.label)
            .finish()
    }
}

/// The refusal of `fair` for a kind of lease that has no fair mode.
fn fair_not_offered(kind: LeaseKind) -> LockError {
    LockError::config(match kind {
        LeaseKind::Read => {
            "fair read locks are not offered: readers never queue in the process and are let \
             in by the writers-first rule (a new reader waits for every writer that holds or \
             waits for the lock, so it may wait as long as writers keep coming); drop fair \
             from the read lock (a profile's fair is left out by read locks), or take the \
             write lock where the order of requests matters"
        }
        _ => {
            "fair semaphores are not offered: a semaphore's waiters queue first come, first \
             served in their process, and a request for several permits takes its turn across \
             processes (see Locker::semaphore); drop fair (a profile's fair is left out by \
             semaphores)"
        }
    })
}
