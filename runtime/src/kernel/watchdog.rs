//! The one background task of a [`Locker`](crate::Locker): renews every held lease at a third
//! of its length, in batches, and performs the releases that cannot be awaited where they
//! happen (a guard dropped, an acquire cancelled mid-flight). Each such job runs in a task of
//! its own, so a slow one (a release retried while the store is unreachable, see
//! [`crate::kernel::release`]) holds up neither the renewals nor the other jobs.
//!
//! Leases are put on the renewal schedule under a mutex rather than through a message, so
//! that taking a lock does not wake the task: most locks are released long before their first
//! renewal is due, and the task only wakes when a renewal is.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::kernel::health::Calls;
use crate::kernel::health::{self, Health};
use crate::kernel::lease::Lease;
use crate::kernel::observe;
use crate::store::{Renewal, Renewed};

/// How long the background task sleeps at most, even with no renewal due before then.
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// The most leases renewed by one script call.
const RENEW_BATCH: usize = 256;

/// Which leases to renew, and when.
#[derive(Default)]
pub(crate) struct Schedule {
    state: Mutex<Due>,
    /// Signalled when a lease is due earlier than everything scheduled before it.
    earlier: Notify,
}

#[derive(Default)]
struct Due {
    leases: HashMap<u64, (Arc<Lease>, Instant)>,
    order: BTreeSet<(Instant, u64)>,
    /// When the background task will look at the schedule next on its own. A lease due
    /// later needs no wake-up: taking a lock then costs no extra task switch.
    wakes_at: Option<Instant>,
}

impl Due {
    /// Schedules a lease that is not scheduled; true when the background task must be
    /// woken to see it in time.
    fn insert(&mut self, lease: Arc<Lease>, at: Instant) -> bool {
        self.order.insert((at, lease.id));
        self.leases.insert(lease.id, (lease, at));
        if self.wakes_at.is_none_or(|wake| at < wake) {
            self.wakes_at = Some(at);
            return true;
        }
        false
    }

    fn remove(&mut self, id: u64) {
        if let Some((_, at)) = self.leases.remove(&id) {
            self.order.remove(&(at, id));
        }
    }
}

impl Schedule {
    /// Renew `lease` every third of its length until [`Schedule::unwatch`].
    pub(crate) fn watch(&self, lease: &Arc<Lease>) {
        // A third of the lease after the request that took (or last renewed) it was sent:
        // validity counts from then, so on a slow network the answer's arrival is too late.
        // A lease the store vouched for from earlier (etcd) counts from there, and may be due
        // at once: a third of it is gone already.
        let sent = lease.state.borrow().valid_until - lease.validity;
        let at = sent + lease.lease / 3;
        let mut due = self.state.lock().unwrap();
        due.remove(lease.id);
        if due.insert(lease.clone(), at) {
            self.earlier.notify_one();
        }
    }

    /// Watch a lease without the watchdog for its end only: on an engine whose locks do not
    /// expire by themselves (ZooKeeper keeps a znode while the session lives), the lock is
    /// given back once the lease ran out, if its holder has not released it by then.
    pub(crate) fn watch_expiry(&self, lease: &Arc<Lease>) {
        let at = lease.state.borrow().valid_until + Duration::from_millis(1);
        let mut due = self.state.lock().unwrap();
        due.remove(lease.id);
        if due.insert(lease.clone(), at) {
            self.earlier.notify_one();
        }
    }

    /// Stop renewing `lease`.
    pub(crate) fn unwatch(&self, lease: &Lease) {
        self.state.lock().unwrap().remove(lease.id);
    }

    /// Whether this caller is the one that ends `lease`: marks it released and takes it off
    /// the schedule. False when another path (a release, a drop, `close`) ended it first,
    /// and there is nothing left to do.
    pub(crate) fn ends(&self, lease: &Lease) -> bool {
        if !lease.mark_released() {
            return false;
        }
        self.unwatch(lease);
        true
    }

    fn reschedule(&self, lease: &Arc<Lease>, at: Option<Instant>) {
        let mut due = self.state.lock().unwrap();
        // Only leases still on the schedule: a release may have removed it meanwhile.
        if due.leases.contains_key(&lease.id) {
            due.remove(lease.id);
            if let Some(at) = at {
                if due.insert(lease.clone(), at) {
                    self.earlier.notify_one();
                }
            }
        }
    }

    /// The leases due by `now` (taken off the schedule until renewed), the ones found lapsed,
    /// and the next due time.
    fn take_due(&self, now: Instant) -> (Vec<Arc<Lease>>, Vec<Arc<Lease>>, Instant) {
        let mut due = self.state.lock().unwrap();
        let mut batch = Vec::new();
        let mut lapsed = Vec::new();
        while let Some(&(at, id)) = due.order.first() {
            if at > now {
                break;
            }
            due.order.pop_first();
            if let Some((lease, _)) = due.leases.get(&id) {
                let lease = lease.clone();
                if !lease.is_done() && !lease.is_held() {
                    // Its validity ran out while no renewal could run (a blocked runtime, a
                    // paused process): lost, even if the store still has the token.
                    lease.mark_lost();
                    lease.report_lost("its validity ran out before a renewal could be sent");
                    lapsed.push(lease.clone());
                }
                if !lease.watchdog {
                    // Only watched for its end (see `watch_expiry`): never renewed. Due a
                    // little early on a coarse timer: look again at its end.
                    if lease.is_done() || lease.state.borrow().lost {
                        due.leases.remove(&id);
                    } else {
                        let end = lease.state.borrow().valid_until + Duration::from_millis(1);
                        due.order.insert((end, id));
                        due.leases.insert(id, (lease, end));
                    }
                } else if lease.is_done() || lease.state.borrow().lost {
                    due.leases.remove(&id);
                } else {
                    // Parked far away until the renewal reports back.
                    let parked = now + Duration::from_secs(3600 * 24);
                    due.order.insert((parked, id));
                    due.leases.insert(id, (lease.clone(), parked));
                    batch.push(lease);
                }
            }
        }
        // With nothing due soon, look again after a while anyway: leases scheduled meanwhile
        // for later than that wake nobody.
        let next = due
            .order
            .first()
            .map_or(now + IDLE_LOOK, |&(at, _)| at.min(now + IDLE_LOOK));
        due.wakes_at = Some(next);
        (batch, lapsed, next)
    }
}

/// Work for the background task that cannot be done where it arises (a guard dropped, an
/// acquire cancelled mid-flight): a future that the task runs in a task of its own.
pub(crate) type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Starts the background task on the current Tokio runtime, and beside it the monitor of the
/// engine's health (see [`health`]); `None` outside of a runtime. The task ends when the
/// locker is gone (it holds the store only weakly).
pub(crate) fn spawn(
    store: &Arc<Calls>,
    schedule: &Arc<Schedule>,
    health: &Arc<Health>,
) -> Option<mpsc::UnboundedSender<Job>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (tx, rx) = mpsc::unbounded_channel();
    runtime.spawn(run(
        Arc::downgrade(store),
        schedule.clone(),
        Arc::downgrade(health),
        rx,
    ));
    health::spawn(&runtime, store, health);
    Some(tx)
}

async fn run(
    store: Weak<Calls>,
    schedule: Arc<Schedule>,
    health: Weak<Health>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    loop {
        let earlier = schedule.earlier.notified();
        tokio::pin!(earlier);
        // Register interest before reading the schedule, so no earlier lease slips by.
        earlier.as_mut().enable();
        let (batch, lapsed, next) = schedule.take_due(Instant::now());
        if !batch.is_empty() || !lapsed.is_empty() {
            let Some(store) = store.upgrade() else { return };
            for lease in lapsed {
                delete_lapsed(&store, lease);
            }
            if !batch.is_empty() {
                tokio::spawn(renew(store, schedule.clone(), health.clone(), batch));
            }
        }
        tokio::select! {
            job = jobs.recv() => {
                let Some(job) = job else { return };
                tokio::spawn(job);
            }
            _ = &mut earlier => {}
            _ = tokio::time::sleep_until(next) => {}
        }
    }
}

/// Deletes the lock of a lease that ran out on this process's clock, if the store still has
/// it in our name, in the background. One call: on an engine where locks expire by themselves
/// (Redis) a failure costs nothing, and the engines whose locks live as long as a session
/// (ZooKeeper, etcd) retry a delete whose outcome is unknown themselves until they get an
/// answer. Without it, a session that survived a pause would keep a lock its holder already
/// gave up.
fn delete_lapsed(store: &Arc<Calls>, lease: Arc<Lease>) {
    // Nobody may believe in the lease once its lock can go: a holder that still counted on
    // it (its validity not quite over) would overlap with the next one.
    lease.mark_lost();
    let store = Arc::downgrade(store);
    tokio::spawn(async move {
        if let Some(store) = store.upgrade() {
            let _ = lease.give_back(&store).await;
        }
    });
}

/// Tries a failed renewal again soon, if the lease is still valid by then; else the lease
/// is lost (and its lock given back), and so is the engine's session for the locker's health.
fn retry(store: &Arc<Calls>, schedule: &Schedule, health: &Weak<Health>, lease: &Arc<Lease>) {
    let retry = Instant::now() + (lease.lease / 10).max(Duration::from_millis(5));
    let valid_until = lease.state.borrow().valid_until;
    if retry < valid_until {
        schedule.reschedule(lease, Some(retry));
    } else {
        lease.report_lost("renewals failed until the lease ran out");
        schedule.reschedule(lease, None);
        delete_lapsed(store, lease.clone());
        // Once the lease counts as lost: whoever sees the state lost finds it so.
        lost(health, "a lease ran out while its renewals failed");
    }
}

/// The leases of the engine's session are lost, for the locker's health.
fn lost(health: &Weak<Health>, why: &str) {
    if let Some(health) = health.upgrade() {
        health.lost(why);
    }
}

/// Renews `lease` now, alone, as its scheduled renewal would: for a task of its process that
/// asks whether the store still has it ([`Inner::verify`](crate::kernel::state::Inner)).
pub(crate) async fn renew_now(
    store: Arc<Calls>,
    schedule: Arc<Schedule>,
    health: Weak<Health>,
    lease: Arc<Lease>,
) {
    renew(store, schedule, health, vec![lease]).await;
}

/// Renews a batch and puts each lease back on the schedule (or takes it off).
async fn renew(
    store: Arc<Calls>,
    schedule: Arc<Schedule>,
    health: Weak<Health>,
    batch: Vec<Arc<Lease>>,
) {
    for chunk in batch.chunks(RENEW_BATCH) {
        let renewals: Vec<Renewal<'_>> = chunk
            .iter()
            .map(|l| Renewal {
                keys: &l.keys,
                token: &l.token,
                lease: l.lease,
                kind: l.kind,
            })
            .collect();
        let sent = Instant::now();
        // Due a third of the lease after the last acquire or renewal was sent (see
        // `Schedule::watch`); a retried renewal counts from its first due time.
        observe::renewals_sent(chunk.iter().map(|l| {
            let due = l.state.borrow().valid_until - l.validity + l.lease / 3;
            sent.saturating_duration_since(due)
        }));
        match store.renew(&renewals).await {
            Ok(renewed) => {
                let mut yes = 0;
                let mut unknown = 0;
                for (lease, outcome) in chunk.iter().zip(renewed) {
                    if lease.is_done() {
                        schedule.reschedule(lease, None);
                        continue;
                    }
                    match outcome {
                        Renewed::Yes if lease.renewed(sent) => {
                            yes += 1;
                            schedule.reschedule(lease, Some(sent + lease.lease / 3));
                        }
                        Renewed::Yes => {
                            // It lapsed before this renewal answered: lost for good, and not
                            // renewed again, so that the lock frees itself in Redis.
                            let ran_out = lease.state.borrow().valid_until <= Instant::now();
                            lease.report_lost("its validity ran out before a renewal answered");
                            schedule.reschedule(lease, None);
                            delete_lapsed(&store, lease.clone());
                            if ran_out {
                                lost(&health, "a lease ran out before its renewal was answered");
                            }
                        }
                        Renewed::No => {
                            lease.mark_lost();
                            lease.report_lost("the lock expired or was taken over before renewal");
                            schedule.reschedule(lease, None);
                        }
                        Renewed::Unknown => {
                            unknown += usize::from(!lease.loss_reported());
                            retry(&store, &schedule, &health, lease);
                        }
                    }
                }
                observe::renewed(yes);
                if unknown > 0 {
                    observe::renew_failed(unknown, &"no majority of nodes answered");
                }
            }
            Err(e) => {
                // Not for leases already reported lost (their holder saw the validity end): that
                // was said once, and retry() below gives them back quietly.
                let believed = chunk.iter().filter(|l| !l.loss_reported()).count();
                if believed > 0 {
                    observe::renew_failed(believed, &e);
                }
                for lease in chunk {
                    retry(&store, &schedule, &health, lease);
                }
            }
        }
    }
}
