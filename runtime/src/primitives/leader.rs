//! Leader election on the lock machinery: a leadership is a held lock (watchdog on, loss
//! judged on the monotonic clock) whose fence is the term, plus a record of the leader's
//! identity beside the lock, fenced by term, that followers read and watch.
//!
//! Store layout, for an election `N` under prefix `P` (Redis; the other engines mirror it):
//! the lock `P:leader:lock:{N}` with its fence counter and wake channel (the lock keys under
//! the prefix `P:leader`, so that no lock key and no other election can name them, and which
//! no locker's prefix may be: see `store::keys::validate_prefix`), and the
//! record `P:leader:record:{N}` (term, identity, owner token). The record counts only while
//! its owner token holds the lock: it lapses with the lease and is renewed with it, free.
//!
//! Campaigns are fair lock requests: a release never hands a leadership over to another
//! task of the same process without the store (which would keep the owner token and the
//! recorded identity); every new leader takes the lock with an owner token and a term of
//! its own, and records itself before it counts as elected.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::state::Inner;
use crate::primitives::guard::LockGuard;
use crate::primitives::leader_status::{Leader, LeaderStatus};
use crate::primitives::request::LockRequest;
use crate::store::keys::{leader_record, validate_key, LockKeys};
use crate::store::{self, Feature, LeaderRecord, WakeSubscription};

/// The longest identity a leader may campaign with, in bytes. An identity names an instance
/// (`"pod-7"`, a host and port), it is not a place for payloads.
pub const MAX_IDENTITY_LEN: usize = 256;

/// How often an observer reads the record even without a wake-up, by default: 1 s. A
/// leader that crashed publishes nothing; its lease runs out, and the next read says so.
pub const DEFAULT_OBSERVE_POLL: Duration = Duration::from_secs(1);

/// How long one campaign round waits before it queues again, when the campaign waits for
/// ever: long enough to cost nothing, short enough to keep `Instant` arithmetic safe.
const CAMPAIGN_ROUND: Duration = Duration::from_secs(3600);

/// The first pause before [`LeaderRequest::run_while_leader`] campaigns again after an
/// error that may pass (the store unavailable), and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Where one election lives in the store.
#[derive(Clone, Debug)]
struct Election {
    name: String,
    keys: LockKeys,
    record: String,
}

impl Election {
    /// The election `name` of `inner`'s locker, checked: a name like a lock key (non-empty,
    /// bounded) that does not pass itself off as one of the store's own keys.
    fn new(inner: &Inner, name: &str) -> Result<Election, LockError> {
        validate_key(name).map_err(|e| match e {
            LockError::InvalidKey { reason } => LockError::invalid_key(format!(
                "leader election name: {}",
                reason.replace("the key", "the name")
            )),
            other => other,
        })?;
        if name.starts_with(&format!("{}:", inner.prefix)) {
            return Err(LockError::invalid_key(format!(
                "the leader election name starts with `{}:`, like the store's own keys; name \
                 the role instead, e.g. \"scheduler\" (elections are stored apart from locks \
                 whatever their name)",
                inner.prefix
            )));
        }
        let caps = inner.store.capabilities();
        store::require(Feature::LeaderElection, &caps, &inner.store.info())?;
        Ok(Election {
            name: name.to_owned(),
            keys: LockKeys::election(&inner.prefix, name),
            record: leader_record(&inner.prefix, name),
        })
    }
}

/// Checks an identity: non-empty, at most [`MAX_IDENTITY_LEN`] bytes, no control characters
/// (it ends up in logs and traces).
fn validate_identity(identity: &str) -> Result<(), LockError> {
    if identity.is_empty() {
        return Err(LockError::config(
            "the leader identity is empty; name this instance, e.g. .identity(\"pod-7\"), or \
             leave it out for a random one",
        ));
    }
    if identity.len() > MAX_IDENTITY_LEN {
        return Err(LockError::config(format!(
            "the leader identity is {} bytes long; the limit is {MAX_IDENTITY_LEN} bytes (name \
             the instance, e.g. its pod name or host:port)",
            identity.len()
        )));
    }
    if identity.chars().any(char::is_control) {
        return Err(LockError::config(
            "the leader identity contains control characters (newlines, NUL, ...); use a \
             printable name such as the pod name",
        ));
    }
    Ok(())
}

/// One campaign being described: the election's name, this instance's identity, the lease
/// and the watchdog. Made by [`Locker::leader`](crate::Locker::leader).
#[derive(Debug)]
#[must_use = "a campaign does nothing until .campaign().await or .run_while_leader(..).await"]
pub struct LeaderRequest<'a> {
    /// The campaign's lock request (a fair one, on the election's name), with its lease,
    /// watchdog and wait.
    request: LockRequest<'a>,
    name: String,
    identity: Option<String>,
    /// Whether this campaign leads now, for whoever asks ([`LeaderRequest::status`]).
    status: LeaderStatus,
}

impl<'a> LeaderRequest<'a> {
    /// A campaign for the election `name`, with the options of `request` (the locker's
    /// defaults for the lock on `name`).
    pub(crate) fn new(request: LockRequest<'a>, name: String) -> Self {
        LeaderRequest {
            request: request.fair(true),
            name,
            identity: None,
            status: LeaderStatus::new(),
        }
    }
}

impl LeaderRequest<'_> {
    /// The identity followers see for this leader: a pod name, a host and port. At most
    /// [`MAX_IDENTITY_LEN`] bytes, printable. Defaults to 16 random hex digits.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// The handle that tells, from anywhere and at any time, whether this campaign leads now
    /// and in which term (see [`LeaderStatus`]): every term of
    /// [`lead_forever`](Self::lead_forever) and [`run_while_leader`](Self::run_while_leader)
    /// shows in it, and so does the [`Leadership`] [`campaign`](Self::campaign) returns.
    /// Cheap to clone. For a campaign that runs in a task of its own, make the status first
    /// and give it to the campaign with [`with_status`](Self::with_status).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let campaign = locker.leader("expiry-worker");
    /// let status = campaign.status();
    /// let leadership = campaign.campaign().await?;
    /// assert_eq!(status.term(), Some(leadership.term()));
    /// leadership.resign().await?;
    /// assert!(!status.is_leader());
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// Shows this campaign's leadership in `status` (a clone of one made with
    /// [`LeaderStatus::new`]): for a campaign that runs in a task of its own, while the rest
    /// of the program (a status endpoint, a handler only the leader serves) keeps the status.
    /// A status shows one campaign at a time: give each campaign a status of its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use leasehold::{LeaderStatus, Locker};
    /// let locker = Locker::in_memory();
    /// let status = LeaderStatus::new();
    /// let worker = tokio::spawn({
    ///     let (locker, status) = (locker.clone(), status.clone());
    ///     async move {
    ///         locker
    ///             .leader("expiry-worker")
    ///             .with_status(status)
    ///             .lead_forever(|_leader| async {
    ///                 // expire reservations, then wait for the next round
    ///                 std::future::pending::<()>().await
    ///             })
    ///             .await
    ///     }
    /// });
    /// // GET /status: {"leader": status.is_leader(), "term": status.term()}
    /// while !status.is_leader() {
    ///     tokio::task::yield_now().await;
    /// }
    /// assert!(status.term().is_some());
    /// worker.abort();
    /// # Ok(()) }
    /// ```
    pub fn with_status(mut self, status: LeaderStatus) -> Self {
        self.status = status;
        self
    }

    /// How long the leadership outlives this process if it stops renewing it (crash, pause,
    /// partition): the longest a dead leader keeps the others waiting. Defaults to the
    /// locker's default lease; at least 10 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.request = self.request.lease(lease);
        self
    }

    /// Whether the lease is renewed in the background (every lease/3) while the leadership
    /// lasts. With `false` the leadership is lost when its lease ends: a term of fixed
    /// length. Defaults to the locker's setting (on).
    pub fn watchdog(mut self, on: bool) -> Self {
        self.request = self.request.watchdog(on);
        self
    }

    /// How long [`campaign`](Self::campaign) waits to be elected before it fails with
    /// [`LockError::Busy`]. Defaults to waiting for ever.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// Uses the settings of the locker's profile `name` for the leadership's lease, its
    /// watchdog and the campaign's wait, as [`LockRequest::profile`](crate::LockRequest::profile)
    /// says (a campaign stays first come, first served whatever the profile's `fair`).
    ///
    /// # Errors
    /// The campaign fails with [`LockError::Config`] when the locker has no such profile, or
    /// when the profile sets a `limit`.
    pub fn profile(mut self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        self.request = self.request.profile(name).fair(true);
        self
    }

    /// Waits until this instance is elected, and returns its [`Leadership`].
    ///
    /// Campaigns are served first come, first served (they are fair lock requests: request by
    /// request across processes on Redis, process by process on the other engines; see
    /// [`LockRequest::fair`](crate::LockRequest::fair)). The new leader records its identity
    /// and term beside the lock before this returns, so followers see it as soon as it leads.
    ///
    /// Cancel-safe: dropping the future at any point leaves no leadership, no place in the
    /// queue and no record behind (a lock taken just before the drop is released in the
    /// background; a record it wrote counts for nobody once that lock is gone).
    ///
    /// # Errors
    /// [`LockError::Busy`] when [`wait`](Self::wait) ran out, [`LockError::Unavailable`]
    /// when the store failed or did not answer in time, [`LockError::InvalidKey`] and
    /// [`LockError::Config`] for a bad name, identity or lease, or an engine without leader
    /// election.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let first = locker.leader("scheduler").identity("pod-1").campaign().await?;
    /// let second = locker
    ///     .leader("scheduler")
    ///     .identity("pod-2")
    ///     .wait(Duration::from_millis(50))
    ///     .campaign()
    ///     .await;
    /// assert!(second.unwrap_err().is_busy());
    /// # drop(first);
    /// # Ok(()) }
    /// ```
    pub async fn campaign(self) -> Result<Leadership, LockError> {
        self.campaign_once().await
    }

    async fn campaign_once(&self) -> Result<Leadership, LockError> {
        let inner = self.request.inner;
        let election = Arc::new(Election::new(inner, &self.name)?);
        let identity = match &self.identity {
            Some(identity) => identity.clone(),
            None => crate::store::token::contender_name(),
        };
        validate_identity(&identity)?;
        let mut opts = self.request.options()?;
        // Unset, the campaign waits for ever (in rounds), not the locker's default wait.
        let deadline = self.request.wait.map(|wait| Instant::now() + wait);
        loop {
            opts.wait = deadline.map_or(CAMPAIGN_ROUND, |d| {
                d.saturating_duration_since(Instant::now())
            });
            let acquired = inner
                .acquire_as(self.name.clone(), Some(election.keys.clone()), opts)
                .await;
            let guard = match acquired {
                Err(LockError::Busy { .. }) if deadline.is_none() => continue,
                other => other?,
            };
            // The store keeps its own fences: the locker's offset stays out of the record.
            let record = LeaderRecord {
                term: inner.store_fence(guard.fence()),
                identity: identity.clone(),
            };
            let written = inner
                .store
                .leader(|records| {
                    records.publish_leader(
                        &election.keys,
                        &election.record,
                        guard.owner_token(),
                        &record,
                    )
                })
                .await?;
            if written && guard.is_held() {
                let leader = Leader {
                    identity,
                    term: shown_term(&record, inner),
                };
                self.status.elected(leader.clone(), guard.held_entry());
                return Ok(Leadership {
                    guard: Some(guard.into()),
                    inner: inner.clone(),
                    election,
                    leader,
                    status: self.status.clone(),
                });
            }
            // The lease ended before the record was written: not elected after all.
            tracing::debug!("a leadership was lost before it was recorded; campaigning again");
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(LockError::Busy { retry_after: None });
            }
        }
    }

    /// Runs `task` only while this instance leads, and campaigns again when it stops leading.
    ///
    /// In a loop: campaign (waiting as long as it takes); once elected, call `task` with the
    /// [`Leader`] this instance is now (identity and term: give the term to fenced writes)
    /// and run the future it returns until either
    /// - the future completes: the leadership is resigned and its output returned as
    ///   `Ok(output)` (resigning errors are not reported: the future ran as leader); or
    /// - the leadership is lost ([`Leadership::lost`]: the lease could not be renewed in
    ///   time, or the store said it is someone else's): the future is dropped (cancelled) at
    ///   its next `.await`, and the loop campaigns again; the next call of `task` gets a new
    ///   term. If both happen at once, the loss wins.
    ///
    /// Errors that may pass ([`LockError::Unavailable`], [`LockError::Busy`] when a
    /// [`wait`](Self::wait) is set, [`LockError::Lost`]) are retried after a pause that
    /// doubles from 100 ms up to 5 s; it returns `Err` only for errors that retrying cannot
    /// mend ([`LockError::Config`], [`LockError::InvalidKey`], [`LockError::Closed`] once the
    /// locker is closed).
    ///
    /// It returns once the task completes: to lead whenever possible, for as long as the
    /// process runs, use [`lead_forever`](Self::lead_forever).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let ran_in_term = locker
    ///     .leader("scheduler")
    ///     .identity("pod-7")
    ///     .run_while_leader(|leader| async move {
    ///         // the leader-only work: a scheduler loop, a stream consumer, ...
    ///         leader.term()
    ///     })
    ///     .await?;
    /// assert!(ran_in_term > 0);
    /// # Ok(()) }
    /// ```
    pub async fn run_while_leader<F, Fut>(self, mut task: F) -> Result<Fut::Output, LockError>
    where
        F: FnMut(Leader) -> Fut,
        Fut: Future,
    {
        let mut pause = RETRY_FIRST;
        loop {
            let leadership = match self.campaign_once().await {
                Ok(leadership) => leadership,
                Err(
                    e @ (LockError::Config { .. }
                    | LockError::InvalidKey { .. }
                    | LockError::Closed),
                ) => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "campaign failed; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                    continue;
                }
            };
            pause = RETRY_FIRST;
            let work = task(leadership.leader.clone());
            tokio::pin!(work);
            let output = tokio::select! {
                biased;
                _ = leadership.lost() => None,
                output = &mut work => Some(output),
            };
            match output {
                Some(output) => {
                    let _ = leadership.resign().await;
                    return Ok(output);
                }
                None => {
                    tracing::info!(
                        term = leadership.term(),
                        "leadership lost; the leader's task was cancelled, campaigning again"
                    );
                }
            }
        }
    }

    /// Leads whenever possible, for as long as the process runs: the loop of
    /// [`run_while_leader`](Self::run_while_leader) that does not end when the task does.
    /// Each time this instance is elected, `task` runs with the [`Leader`] it is now; when
    /// the task's future completes, the leadership is resigned (another instance may take
    /// its turn: Curator's `autoRequeue`) and this one campaigns again; when the leadership is
    /// lost, the future is cancelled and it campaigns again. Errors that may pass are retried
    /// as in `run_while_leader`. The task is where pacing goes: one that returns at once is
    /// campaigned for again at once (a campaign, a record and a resignation per term).
    ///
    /// # Errors
    /// Only the errors that retrying cannot mend: [`LockError::Config`],
    /// [`LockError::InvalidKey`], and [`LockError::Closed`] when the locker is closed (the
    /// way to stop it from outside, besides dropping the future). A `Config` or `InvalidKey`
    /// error (a profile the locker lacks, a bad name) is also logged at `error` (target
    /// `leasehold::config`): a worker spawned and never awaited does not stop silently.
    /// [`Locker::check_profiles`](crate::Locker::check_profiles) finds a missing profile at
    /// start-up.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// let locker = leasehold::Locker::in_memory();
    /// let terms = std::sync::Arc::new(AtomicU32::new(0));
    /// let counted = terms.clone();
    /// let leading = tokio::spawn({
    ///     let locker = locker.clone();
    ///     async move {
    ///         locker
    ///             .leader("scheduler")
    ///             .lead_forever(move |_leader| {
    ///                 let counted = counted.clone();
    ///                 async move {
    ///                     counted.fetch_add(1, Ordering::SeqCst); // one scheduling round
    ///                 }
    ///             })
    ///             .await
    ///     }
    /// });
    /// while terms.load(Ordering::SeqCst) < 3 {
    ///     tokio::task::yield_now().await;
    /// }
    /// let _ = locker.close().await; // stops it
    /// assert!(matches!(leading.await.unwrap(), Err(leasehold::LockError::Closed)));
    /// # Ok(()) }
    /// ```
    pub async fn lead_forever<F, Fut>(self, mut task: F) -> Result<Infallible, LockError>
    where
        F: FnMut(Leader) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            let request = LeaderRequest {
                request: self.request.clone(),
                name: self.name.clone(),
                identity: self.identity.clone(),
                status: self.status.clone(),
            };
            if let Err(e) = request.run_while_leader(&mut task).await {
                if let LockError::Config { .. } | LockError::InvalidKey { .. } = e {
                    // A leader-only worker that can never run: often spawned and not awaited,
                    // so its error must reach the operator here too.
                    tracing::error!(
                        target: "leasehold::config",
                        election = %self.name,
                        error = %e,
                        "lead_forever stops: this campaign can never lead (check the election's \
                         name, identity and profile; Locker::check_profiles finds a missing \
                         profile at start-up)"
                    );
                }
                return Err(e);
            }
            // A term whose task ended at once, on an engine that answers without waiting (in
            // memory), would otherwise never let the other tasks of its thread run.
            tokio::task::yield_now().await;
        }
    }
}

/// A recorded term as the deployment shows it: the store's fence plus the locker's offset
/// ([`LockerBuilder::fence_offset`](crate::LockerBuilder::fence_offset)).
fn shown_term(record: &LeaderRecord, inner: &Inner) -> u64 {
    inner.deployment_fence(record.term)
}

/// Being the leader of one election. While it lives (and is not lost) no other campaigner
/// of the election, in any process, leads.
///
/// - [`term`](Self::term) is the fence of the leadership: strictly greater than every
///   earlier leader's. Pass it with every write to shared state and let the state refuse
///   writes with a term older than one it has seen: a leader that was deposed while paused
///   (and does not know it yet) is then refused instead of obeyed.
/// - [`lost`](Self::lost) resolves when the leadership is lost (judged on this process's
///   monotonic clock, as a lock's lease); [`is_leader`](Self::is_leader) turns false.
/// - [`resign`](Self::resign) steps down and lets the next campaigner in; dropping the
///   handle resigns in the background.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let leadership = locker.leader("scheduler").identity("pod-7").campaign().await?;
/// let term = leadership.term(); // send it along with the leader's writes
/// tokio::select! {
///     _ = leadership.lost() => println!("deposed; stop acting as leader"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
/// }
/// leadership.resign().await?;
/// let next = locker.leader("scheduler").identity("pod-8").campaign().await?;
/// assert!(next.term() > term);
/// # Ok(()) }
/// ```
#[must_use = "the leadership is resigned as soon as it is dropped"]
pub struct Leadership {
    /// `None` only once resigned.
    guard: Option<LockGuard>,
    inner: Arc<Inner>,
    election: Arc<Election>,
    leader: Leader,
    /// Shows this leadership to whoever asks, until it ends.
    status: LeaderStatus,
}

impl Leadership {
    /// The term of this leadership: strictly greater than every earlier leader's term of the
    /// same election, in any process (it is the fencing token of the leader's lock; see
    /// [`LockGuard::fence`]).
    pub fn term(&self) -> u64 {
        self.leader.term
    }

    /// The identity this leader campaigned with.
    pub fn identity(&self) -> &str {
        &self.leader.identity
    }

    /// The guard of the leader's lock, until it resigned.
    pub(crate) fn lease_guard(&self) -> Option<&LockGuard> {
        self.guard.as_ref()
    }

    /// The election's name, as given to [`Locker::leader`](crate::Locker::leader).
    pub fn name(&self) -> &str {
        &self.election.name
    }

    /// This leader as followers see it.
    pub fn leader(&self) -> &Leader {
        &self.leader
    }

    /// A cheap, cloneable handle that tells, from anywhere, whether this leadership still
    /// holds and its term; see [`LeaderStatus`].
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// The owner token of the leadership's lease (tests check that a new leader never
    /// shares it).
    #[cfg(test)]
    pub(crate) fn owner_token(&self) -> Option<crate::store::token::OwnerToken> {
        self.guard.as_ref().map(|g| g.hold().owner_token().clone())
    }

    /// Where the election lives in the store: its lock keys and record key (for tests).
    #[cfg(test)]
    pub(crate) fn store_keys(&self) -> (LockKeys, String) {
        (self.election.keys.clone(), self.election.record.clone())
    }

    /// Whether this instance still leads: not resigned, not lost, and within the lease's
    /// validity on this process's monotonic clock. False for good once false.
    pub fn is_leader(&self) -> bool {
        self.guard.as_ref().is_some_and(LockGuard::is_held)
    }

    /// Resolves when the leadership is lost: the watchdog found it taken over or gone, or
    /// its validity ran out without a renewal (a process paused past its lease learns it the
    /// moment it runs again). Cancel-safe; use it in `tokio::select!` to stop leader-only
    /// work in time.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// use std::time::Duration;
    /// let locker = leasehold::Locker::in_memory();
    /// let leadership = locker
    ///     .leader("scheduler")
    ///     .lease(Duration::from_millis(50))
    ///     .watchdog(false)
    ///     .campaign()
    ///     .await?;
    /// leadership.lost().await; // the lease ran out unrenewed
    /// assert!(!leadership.is_leader());
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        if let Some(guard) = &self.guard {
            guard.lost().await;
        }
    }

    /// Steps down: removes this leader's record (followers see no leader at once) and
    /// releases the lock, so that the next campaigner is elected with a new term. Goes
    /// through even if this future is dropped.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the leadership had been lost already (another may lead now;
    /// its record is left alone), [`LockError::Unavailable`] when the store failed (the
    /// leadership then ends with its lease).
    pub async fn resign(mut self) -> Result<(), LockError> {
        let Some(guard) = self.guard.take() else {
            return Ok(());
        };
        self.status.ended(self.term());
        let term = self.inner.store_fence(self.term());
        let (keys, record) = (&self.election.keys, &self.election.record);
        let cleared = self
            .inner
            .store
            .leader(|records| records.clear_leader(keys, record, term))
            .await;
        if let Err(e) = cleared {
            tracing::debug!(error = %e, "removing the leader record failed; it lapses with the lease");
        }
        guard.release().await
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        self.status.ended(self.term());
        // Record first, lock second, as `resign` does: followers see no leader at once, and
        // never the record of a lock that another task holds.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            drop(guard); // the record counts for nobody once the lease ends
            return;
        };
        let term = self.inner.store_fence(self.term());
        let (inner, election) = (self.inner.clone(), self.election.clone());
        runtime.spawn(async move {
            let (keys, record) = (&election.keys, &election.record);
            let _ = inner
                .store
                .leader(|records| records.clear_leader(keys, record, term))
                .await;
            drop(guard);
        });
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("identity", &self.leader.identity)
            .field("term", &self.leader.term)
            .field("leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

/// Follows the leadership of one election: made by
/// [`Locker::observe_leader`](crate::Locker::observe_leader).
///
/// [`next`](Self::next) returns the current state (a [`Leader`], or `None` when nobody
/// leads) whenever it differs from the last one returned: the first call at once, later
/// calls when a leader is elected, resigns or loses its lease. Changes are pushed (the
/// store's wake-ups) and also polled every [`poll_every`](Self::poll_every) (a crashed
/// leader's lease runs out without a message). States that come faster than they are read
/// are not queued: each call returns the latest, so a change is never missed but a leader
/// that came and went between two calls may never be seen. Terms never go backwards in what
/// it returns.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let mut followers = locker.observe_leader("scheduler")?;
/// let elected = locker.leader("scheduler").identity("pod-7").campaign().await?;
/// let seen = followers.next().await?.expect("pod-7 leads");
/// assert_eq!(seen.term(), elected.term());
/// elected.resign().await?;
/// assert_eq!(followers.next().await?, None);
/// # Ok(()) }
/// ```
pub struct LeaderObserver {
    inner: Arc<Inner>,
    election: Election,
    wakes: Option<WakeSubscription>,
    subscribed: bool,
    /// The last state returned; `None` before the first.
    delivered: Option<Option<Leader>>,
    /// The highest term returned: older records (a lagging replica) are not returned.
    highest: u64,
    /// Whether the leadership of `highest` was seen to end (`None` returned after it): a
    /// lagging server that shows that term again shows a deposed leader, not returned either.
    highest_ended: bool,
    poll: Duration,
}

impl LeaderObserver {
    /// An observer of the election `name`.
    pub(crate) fn new(inner: &Arc<Inner>, name: &str) -> Result<Self, LockError> {
        let election = Election::new(inner, name)?;
        Ok(LeaderObserver {
            inner: inner.clone(),
            election,
            wakes: None,
            subscribed: false,
            delivered: None,
            highest: 0,
            highest_ended: false,
            poll: DEFAULT_OBSERVE_POLL,
        })
    }

    /// How often to read the leader record when no wake-up came. Defaults to 1 s
    /// ([`DEFAULT_OBSERVE_POLL`]); at least 10 ms.
    #[must_use]
    pub fn poll_every(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(10));
        self
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.election.name
    }

    /// Waits until the leadership differs from what the previous call returned (the first
    /// call returns at once), and returns it: the leader, or `None` when nobody leads.
    /// Cancel-safe: a call dropped before it returned loses nothing.
    ///
    /// Terms never go back: a leader whose term is older than one returned, or whose term was
    /// returned and then seen to end (a `None` after it), is not returned again, whatever a
    /// server that lags behind (a replica, a follower) answers; a newer term is.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when the store failed or did not answer; the observer can
    /// be asked again. On RedLock also when the nodes that answered cannot tell who leads: a
    /// record on some of them that the nodes that did not answer could make a majority (never
    /// `None` then, which would tell a follower that nobody leads while somebody may).
    pub async fn next(&mut self) -> Result<Option<Leader>, LockError> {
        let inner = self.inner.clone();
        if !self.subscribed {
            // Subscribe before reading: a change between the read and the subscription must
            // still wake us.
            let subscribe = inner
                .store
                .call(|store| store.subscribe(&self.election.keys));
            match tokio::time::timeout(self.poll, subscribe).await {
                Ok(Ok(sub)) => self.wakes = Some(sub),
                Ok(Err(e)) => tracing::debug!(error = %e, "no wake-ups for this observer; polling"),
                Err(_) => tracing::debug!("subscribing took too long; polling"),
            }
            // Only now: a call dropped while subscribing leaves the next one to try again.
            self.subscribed = true;
        }
        loop {
            let (keys, record) = (&self.election.keys, &self.election.record);
            let read = inner
                .store
                .leader(|records| records.read_leader(keys, record))
                .await?;
            let state = read.map(|r| Leader {
                term: shown_term(&r, &inner),
                identity: r.identity,
            });
            // A term older than one returned, or the one returned last once its end was seen:
            // a server that lags behind (terms only grow, and an ended term never leads again).
            let backwards = state.as_ref().is_some_and(|l| {
                l.term < self.highest || (l.term == self.highest && self.highest_ended)
            });
            if !backwards && self.delivered.as_ref() != Some(&state) {
                match &state {
                    Some(leader) => {
                        self.highest = leader.term;
                        self.highest_ended = false;
                    }
                    None => self.highest_ended = self.highest > 0,
                }
                self.delivered = Some(state.clone());
                return Ok(state);
            }
            let until = Instant::now() + self.poll;
            match self.wakes.as_mut() {
                Some(wakes) => {
                    tokio::select! {
                        _ = wakes.released() => {}
                        _ = tokio::time::sleep_until(until) => {}
                    }
                }
                None => tokio::time::sleep_until(until).await,
            }
        }
    }
}

impl fmt::Debug for LeaderObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderObserver")
            .field("name", &self.election.name)
            .field("last", &self.delivered)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}
