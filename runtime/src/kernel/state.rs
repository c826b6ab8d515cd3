//! What the clones of one [`Locker`](crate::Locker) share: the store, the defaults, the local
//! queues of waiters and the renewal schedule, and the way to hand work to the background
//! task. Everything that runs on behalf of a locker (acquiring, releasing, the background
//! task's jobs) holds this, not the public handle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::kernel::background::Background;
use crate::kernel::close::{self, CloseReport};
use crate::kernel::closing::Closing;
use crate::kernel::health::Calls;
use crate::kernel::health::Health;
use crate::kernel::lease::Lease;
use crate::kernel::observe::TraceKeys;
use crate::kernel::queue::Queues;
use crate::kernel::turns::{Holders, Seating};
use crate::kernel::watchdog::{Job, Schedule};
use crate::store::identity::Identity;
use crate::store::Connection;

static NEXT_LOCKER_ID: AtomicU64 = AtomicU64::new(1);

/// What a locker's owner chose for its core: the defaults of its requests and how its
/// leases, fences and traces are kept (see [`LockerBuilder`](crate::LockerBuilder), where
/// each is described).
pub(crate) struct LockerSettings {
    pub(crate) prefix: String,
    pub(crate) default_lease: Duration,
    pub(crate) default_wait: Duration,
    pub(crate) default_watchdog: bool,
    pub(crate) retry_unavailable: bool,
    pub(crate) fence_ttl: Duration,
    pub(crate) fence_offset: u64,
    pub(crate) drift: f64,
    pub(crate) trace_keys: TraceKeys,
}

pub(crate) struct Inner {
    pub(crate) id: u64,
    /// Who this locker is, as its tokens and its description in the store tell.
    pub(crate) identity: Arc<Identity>,
    /// Whether the upkeep of its description started ([`Inner::contending`]).
    pub(crate) described: std::sync::atomic::AtomicBool,
    /// Its calls to the engine, each observed by `health`.
    pub(crate) store: Arc<Calls>,
    pub(crate) prefix: String,
    pub(crate) default_lease: Duration,
    pub(crate) default_wait: Duration,
    pub(crate) default_watchdog: bool,
    /// Waiting acquires ride out outages unless a request says otherwise.
    pub(crate) retry_unavailable: bool,
    pub(crate) fence_ttl: Duration,
    /// Added to every fence the store hands out before anyone sees it, and taken off where a
    /// fence goes back to the store ([`LockerBuilder::fence_offset`](crate::LockerBuilder::fence_offset)).
    pub(crate) fence_offset: u64,
    /// Clock drift allowance, as a fraction of the lease.
    pub(crate) drift: f64,
    /// How keys appear in traces.
    pub(crate) trace_keys: TraceKeys,
    pub(crate) queues: Arc<Queues>,
    /// The renewal schedule of the watchdog.
    pub(crate) schedule: Arc<Schedule>,
    /// Where work goes that outlives its caller.
    pub(crate) background: Arc<Background>,
    /// What closing the locker reaches: its leases, its waiters, its background jobs.
    pub(crate) closing: Arc<Closing>,
    /// How the engine is doing, fed by the calls through `store` (see [`Calls`]).
    pub(crate) health: Arc<Health>,
}

impl Inner {
    /// The core of a new locker on `engine`, which was connected (or is being connected)
    /// with `identity`'s locker id. Every call's outcome feeds the locker's health, but where
    /// the engine always answers ([`Calls`]).
    pub(crate) fn new(
        engine: Connection,
        identity: Arc<Identity>,
        settings: LockerSettings,
    ) -> Arc<Inner> {
        let store = Calls::new(engine);
        let health = store.health().clone();
        let LockerSettings {
            prefix,
            default_lease,
            default_wait,
            default_watchdog,
            retry_unavailable,
            fence_ttl,
            fence_offset,
            drift,
            trace_keys,
        } = settings;
        let schedule = Arc::<Schedule>::default();
        let closing = Arc::<Closing>::default();
        let background = Background::new(store.clone(), schedule.clone(), closing.clone());
        Arc::new(Inner {
            id: NEXT_LOCKER_ID.fetch_add(1, Ordering::Relaxed),
            identity,
            described: Default::default(),
            store,
            health,
            prefix,
            default_lease,
            default_wait,
            default_watchdog,
            retry_unavailable,
            fence_ttl,
            fence_offset,
            drift,
            trace_keys,
            queues: Default::default(),
            schedule,
            background: Arc::new(background),
            closing,
        })
    }

    /// A fence as the deployment sees it: `store_fence`, as the store handed it out, plus
    /// this locker's [`fence_offset`](crate::LockerBuilder::fence_offset).
    pub(crate) fn deployment_fence(&self, store_fence: u64) -> u64 {
        store_fence + self.fence_offset
    }

    /// A fence as the store knows it: `fence`, as this locker handed it out, less the
    /// locker's offset ([`Inner::deployment_fence`] undone), where a fence goes back to the
    /// store.
    pub(crate) fn store_fence(&self, fence: u64) -> u64 {
        fence - self.fence_offset
    }

    /// Starts the background task if it is not running yet.
    pub(crate) fn start_background(&self) {
        self.background.start();
    }

    /// What a contender's seat in the local queue and the store uses of this locker.
    pub(crate) fn seating(&self) -> Seating<'_> {
        Seating {
            store: &self.store,
            queues: &self.queues,
            background: &self.background,
        }
    }

    /// Closes this locker (see [`crate::kernel::close`]), waiting at most `timeout`.
    pub(crate) async fn close(&self, timeout: Duration) -> CloseReport {
        close::close(
            &self.closing,
            &self.health,
            &self.store,
            &self.queues,
            &self.schedule,
            timeout,
        )
        .await
    }

    /// This locker is about to contend for a lease: the first time, starts keeping its
    /// description in the store (in a task of its own: the attempt does not wait for it). A
    /// locker that never contends (an operator's, which only inspects) stores nothing. One
    /// atomic load on every later attempt.
    pub(crate) fn contending(&self) {
        if !self.described.load(std::sync::atomic::Ordering::Relaxed)
            && !self
                .described
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            crate::kernel::describe::spawn(
                &self.store,
                &self.prefix,
                &self.identity,
                &self.closing,
            );
        }
    }

    /// Releases (or hands over) the lease of a guard that was dropped without
    /// `release().await`, in the background. False when no background task can run (no
    /// runtime): the lock then frees itself when its lease ends.
    pub(crate) fn release_in_background(
        self: &Arc<Self>,
        lease: Arc<Lease>,
        fence: u64,
        hold_until: Option<Instant>,
    ) -> bool {
        let inner = self.clone();
        self.in_background(Box::pin(inner.release_dropped(lease, fence, hold_until)))
            .is_ok()
    }

    /// Runs `job` in the background task; gives it back when no background task can run
    /// (no runtime here, or the runtime it ran on is gone).
    pub(crate) fn in_background(&self, job: Job) -> Result<(), Job> {
        self.background.run(job)
    }
}

/// A queued task's requests about the leases of this locker that hold its turn.
impl Holders for Arc<Inner> {
    fn verify_soon(&self, lease: &Arc<Lease>, heard: bool) {
        Inner::verify_soon(self, lease, heard);
    }

    fn release_in_background(&self, lease: Arc<Lease>, fence: u64) {
        Inner::release_in_background(self, lease, fence, None);
    }
}
