//! One lease in the store: its owner token, the fencing tokens reserved with it, and the time until
//! which the client may still count on it, judged on the client's monotonic clock. A lease can
//! pass from holder to holder inside the process (each with its own fence) before it is
//! released.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::health::Calls;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::Session;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// In a lease's `downgrades`: the write guard was released while downgraded reads held on.
const WRITER_GONE: u32 = 1 << 31;

/// The default clock drift allowance: 1% of the lease (plus a fixed 2 ms).
pub(crate) const DEFAULT_DRIFT: f64 = 0.01;

/// How much of a lease the client trusts: `lease − (lease × drift + 2 ms)`. The margin covers
/// clock-rate differences between client and server and the time a reply takes to arrive.
pub(crate) fn validity(lease: Duration, drift: f64) -> Duration {
    let margin = lease.mul_f64(drift) + Duration::from_millis(2);
    lease.saturating_sub(margin)
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct LeaseState {
    /// Until when the lease counts as held: send time of the last successful acquire or renew
    /// (or the earlier instant the store vouched for an acquire from) plus [`validity`].
    pub(crate) valid_until: Instant,
    /// The store said the lock is not ours any more.
    pub(crate) lost: bool,
}

/// A lease's state, read and written under a lock of its own; its changes wake
/// [`Lease::lost_for`] through the lease's `changed`. Inline rather than a `watch` channel
/// (two of them per lease cost two allocations per acquire and about 800 bytes per held lock).
pub(crate) struct StateCell(std::sync::Mutex<LeaseState>);

impl StateCell {
    /// A copy of the state now.
    pub(crate) fn borrow(&self) -> LeaseState {
        *self.0.lock().unwrap()
    }

    /// Runs `f` on the state under its lock; true when it changed it.
    fn modify(&self, f: impl FnOnce(&mut LeaseState) -> bool) -> bool {
        f(&mut self.0.lock().unwrap())
    }
}

pub(crate) struct Lease {
    pub(crate) id: u64,
    pub(crate) user_key: String,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) lease: Duration,
    /// How much of each lease period the client counts on (see [`validity`]).
    pub(crate) validity: Duration,
    pub(crate) watchdog: bool,
    pub(crate) state: StateCell,
    /// The fence of the guard that holds the lease now; 0 between holders (after a release,
    /// before the next holder of a handover takes it). Re-entered guards share their outer
    /// guard's fence, so they stop counting as held the moment that holding ends.
    holder: AtomicU64,
    /// Notified (all waiters) whenever `state` or `holder` changes: wakes [`Lease::lost_for`],
    /// which registers before it reads them, so no change slips between its read and its wait.
    changed: tokio::sync::Notify,
    /// Released in the store (or lost and given up): the watchdog must leave it alone.
    done: AtomicBool,
    /// The loss of this lease was reported (traces, metrics) already.
    lost_reported: AtomicBool,
    /// Given back by [`Locker::close`](crate::Locker::close): no guard holds it any more.
    closed: AtomicBool,
    /// The reserved fencing tokens not handed out yet: `next..=top`.
    fences: Mutex<(u64, u64)>,
    /// The connection it was granted over, where the backend tracks one.
    session: Option<Session>,
    /// What it holds: the lock (handed over in the process), or a lease of its own (a
    /// reader's share, a semaphore's permits).
    pub(crate) kind: LeaseKind,
    /// Read locks taken inside the write lock this lease holds (a downgrade, see
    /// [`Lease::join_downgrade`]): their number, and [`WRITER_GONE`] once the write guard was
    /// released while they held on.
    downgrades: AtomicU32,
    /// Where the verifications of this lease by other tasks of its process stand (see
    /// [`crate::kernel::verify`]).
    pub(crate) verifying: crate::kernel::verifying::Verifying,
    /// The latest end of a hold ([`LockRequest::hold_at_least`](crate::LockRequest::hold_at_least))
    /// among the guards of a downgrade that were done before the last of them: the last one
    /// keeps the lock taken until then too.
    hold_of_the_done: Mutex<Option<Instant>>,
    /// Its fencing tokens come from the store. False for an unfenced lease
    /// ([`LockRequest::unfenced`](crate::LockRequest::unfenced)), whose tokens are only local
    /// numbers that tell its holders apart: never handed to a fenced waiter.
    pub(crate) fenced: bool,
}

/// What a granted acquire made a [`Lease`] of.
pub(crate) struct LeaseTerms {
    /// The key as the caller named it.
    pub(crate) user_key: String,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) lease: Duration,
    /// How long the holder may count on it from `from`: the lease less the drift allowance.
    pub(crate) validity: Duration,
    pub(crate) watchdog: bool,
    /// The send time of the request that acquired it, or the earlier instant its store
    /// vouched for it from.
    pub(crate) from: Instant,
    /// The highest fencing token reserved; `reserved` of them end with it.
    pub(crate) top: u64,
    pub(crate) reserved: u64,
    /// The store's session it was granted over, where the lock lives with one.
    pub(crate) session: Option<Session>,
}

impl Lease {
    /// A lease on `terms`: valid from `from` for `validity`, with the fencing tokens
    /// `top - reserved + 1 ..= top`.
    pub(crate) fn new(terms: LeaseTerms) -> Self {
        let LeaseTerms {
            user_key,
            keys,
            token,
            lease,
            validity,
            watchdog,
            from,
            top,
            reserved,
            session,
        } = terms;
        let state = LeaseState {
            valid_until: from + validity,
            lost: false,
        };
        Lease {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            user_key,
            keys,
            token,
            lease,
            validity,
            watchdog,
            state: StateCell(std::sync::Mutex::new(state)),
            holder: AtomicU64::new(0),
            changed: tokio::sync::Notify::new(),
            done: AtomicBool::new(false),
            lost_reported: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            fences: Mutex::new((top + 1 - reserved.max(1), top)),
            session,
            kind: LeaseKind::Exclusive,
            fenced: true,
            downgrades: AtomicU32::new(0),
            verifying: Default::default(),
            hold_of_the_done: Mutex::new(None),
        }
    }

    /// This lease as one of `kind` (a reader's share, a semaphore's permits).
    pub(crate) fn of_kind(mut self, kind: LeaseKind) -> Self {
        self.kind = kind;
        self
    }

    /// This lease as an unfenced one: its tokens are local numbers, not fencing tokens.
    pub(crate) fn into_unfenced(mut self) -> Self {
        self.fenced = false;
        self
    }

    /// Ends this lease in the store, by its kind: a read lease leaves the readers, permits go
    /// back to the semaphore, an exclusive lease deletes the lock; `Ok(false)` when it was not
    /// held any more.
    pub(crate) async fn give_back(&self, store: &Calls) -> Result<bool, LockError> {
        let state = self.state.borrow();
        // A lease known lost gives no validity to count on.
        let valid_until = match state.lost {
            true => Instant::now(),
            false => state.valid_until,
        };
        store
            .give_back(&self.keys, &self.token, self.kind, valid_until)
            .await
    }

    /// The next reserved fencing token, for the next holder of this lease; `None` when the
    /// reservation is used up. An unfenced lease never runs out: its tokens are local numbers.
    pub(crate) fn next_fence(&self) -> Option<u64> {
        let mut fences = self.fences.lock().unwrap();
        if !self.fenced {
            fences.1 = fences.1.max(fences.0);
        }
        let (next, top) = *fences;
        (next <= top).then(|| {
            fences.0 += 1;
            next
        })
    }

    /// The store gave the lease's next holder `fence`, the first of a new reservation (an
    /// engine that takes part in handovers, see `Ending::HandOver`): the fences reserved
    /// before are not handed out any more.
    pub(crate) fn restart_fences(&self, fence: u64) {
        *self.fences.lock().unwrap() = (fence, fence);
    }

    /// How long the store keeps the lock from now if nothing renews it: the lease from the
    /// send time of the last acquire or renewal that counted (the validity ends earlier, by
    /// the drift margin).
    pub(crate) fn left_in_store(&self) -> Duration {
        let counted_from = self.state.borrow().valid_until - self.validity;
        (counted_from + self.lease).saturating_duration_since(Instant::now())
    }

    /// True while the lease is still trusted: not lost, not past its validity, not released.
    pub(crate) fn is_held(&self) -> bool {
        let s = self.state.borrow();
        !s.lost
            && Instant::now() < s.valid_until
            && !self.is_done()
            && self.session_intact()
            && !self.closed.load(Ordering::Acquire)
    }

    /// The locker that granted it was closed, which gives it back: its guards are told (their
    /// `lost()` resolves, [`LostReason::Closed`](crate::LostReason::Closed)).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// The guard with `fence` holds the lease from now on.
    pub(crate) fn begin_holding(&self, fence: u64) {
        self.holder.store(fence, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// The holding of the guard with `fence` ends (release, drop); its re-entered guards
    /// stop counting as held and their `lost()` resolves.
    pub(crate) fn end_holding(&self, fence: u64) {
        if self
            .holder
            .compare_exchange(fence, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.changed.notify_waiters();
        }
    }

    /// Whether the guard with `fence` still holds this lease (its holding has not ended).
    pub(crate) fn holding(&self, fence: u64) -> bool {
        self.holder.load(Ordering::Acquire) == fence
    }

    /// [`Lease::is_held`], for the guard with `fence`: false once its holding ended.
    pub(crate) fn is_held_by(&self, fence: u64) -> bool {
        self.holding(fence) && self.is_held()
    }

    /// A read lock of the same key was taken inside the write lock this lease holds: the
    /// lease now ends only once both the write guard and every such read guard are done
    /// (a downgrade keeps the lock, exclusively, until its read is released).
    pub(crate) fn join_downgrade(&self) {
        self.downgrades.fetch_add(1, Ordering::AcqRel);
    }

    /// The write guard is done with this lease: true when it ends it now, false when
    /// downgraded read guards hold on (the last of them ends it, see
    /// [`Lease::leave_downgrade`]).
    pub(crate) fn writer_done(&self) -> bool {
        let mut now = self.downgrades.load(Ordering::Acquire);
        loop {
            if now & !WRITER_GONE == 0 {
                return true;
            }
            match self.downgrades.compare_exchange(
                now,
                now | WRITER_GONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return false,
                Err(seen) => now = seen,
            }
        }
    }

    /// A downgraded read guard is done with this lease: true when it was the last one and
    /// the write guard is done already, so it ends the lease now.
    pub(crate) fn leave_downgrade(&self) -> bool {
        let before = self.downgrades.fetch_sub(1, Ordering::AcqRel);
        before == WRITER_GONE | 1
    }

    /// Whether the write guard of a downgrade was released while downgraded reads hold on:
    /// what is held of the lease since then is only those reads.
    pub(crate) fn writer_gone(&self) -> bool {
        self.downgrades.load(Ordering::Acquire) & WRITER_GONE != 0
    }

    /// A guard of a downgrade is done before the others, with a hold until `until`: the
    /// last of them keeps the lock taken until then too.
    pub(crate) fn keep_hold(&self, until: Option<Instant>) {
        let mut kept = self.hold_of_the_done.lock().unwrap();
        *kept = (*kept).max(until);
    }

    /// The last guard of a downgrade ends the lease: its own hold, or a later one kept by a
    /// guard done before it ([`Lease::keep_hold`]), whichever ends last.
    pub(crate) fn last_hold(&self, own: Option<Instant>) -> Option<Instant> {
        self.hold_of_the_done.lock().unwrap().take().max(own)
    }

    /// Why this lease counts as lost (when it does).
    pub(crate) fn loss_reason(&self) -> crate::error::LostReason {
        use crate::error::LostReason;
        if self.closed.load(Ordering::Acquire) {
            LostReason::Closed
        } else if !self.session_intact() {
            LostReason::ConnectionDropped
        } else if self.state.borrow().lost {
            LostReason::Refused
        } else {
            LostReason::Expired
        }
    }

    /// False once the connection the lease was granted over dropped.
    fn session_intact(&self) -> bool {
        self.session.as_ref().is_none_or(Session::intact)
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Marks the lease released; true for the first caller only.
    pub(crate) fn mark_released(&self) -> bool {
        !self.done.swap(true, Ordering::AcqRel)
    }

    /// A renewal sent at `sent` succeeded. Returns whether the lease is still held: a lease
    /// whose validity ran out before the answer came stays lost, even though the store still had
    /// its token. It was already reported lost (`is_held()` false, `lost()` resolved), and a
    /// holder told so must never find itself holding the lock again.
    pub(crate) fn renewed(&self, sent: Instant) -> bool {
        let until = sent + self.validity;
        let mut held = true;
        let changed = self.state.modify(|s| {
            // Read under the state's lock: a clock read before it could let a reader see the
            // lease expire and then see it held again.
            let now = Instant::now();
            if s.lost {
                held = false;
                return false;
            }
            if now >= s.valid_until {
                s.lost = true;
                held = false;
                return true;
            }
            if until <= s.valid_until {
                return false;
            }
            s.valid_until = until;
            true
        });
        if changed {
            self.changed.notify_waiters();
        }
        held
    }

    /// Reports the loss of this lease (once, however many parts of the library notice it),
    /// with the fence of its current holder.
    /// Whether the loss of this lease was reported already.
    pub(crate) fn loss_reported(&self) -> bool {
        self.lost_reported.load(Ordering::Acquire)
    }

    pub(crate) fn report_lost(&self, why: &'static str) {
        if !self.lost_reported.swap(true, Ordering::AcqRel) {
            let fence = self.fences.lock().unwrap().0.saturating_sub(1);
            crate::kernel::observe::lost(fence, why);
        }
    }

    /// The store said the lock is not ours any more.
    pub(crate) fn mark_lost(&self) {
        if self.state.modify(|s| !std::mem::replace(&mut s.lost, true)) {
            self.changed.notify_waiters();
        }
    }

    /// Resolves once the lease is lost: the store said so, or its validity ran out without a
    /// renewal. Works without the watchdog: it watches the clock itself.
    pub(crate) async fn lost(&self) {
        self.lost_for(None).await
    }

    /// [`Lease::lost`], or the end of the holding of the guard with fence `holder`, whichever
    /// comes first.
    pub(crate) async fn lost_for(&self, holder: Option<u64>) {
        let mut epoch = self.session.as_ref().map(Session::epoch);
        loop {
            // Registered before the state is read: a change after the read wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let s = self.state.borrow();
            // Only a guard watches its holding (see `holder`).
            let ended = holder.is_some_and(|fence| !self.holding(fence));
            let closed = self.closed.load(Ordering::Acquire);
            if ended
                || s.lost
                || closed
                || Instant::now() >= s.valid_until
                || !self.session_intact()
            {
                return;
            }
            let dropped = async {
                let changed = match epoch.as_mut() {
                    Some(e) => e.changed().await.is_ok(),
                    None => false,
                };
                if !changed {
                    // No session, or the backend is gone: only the clock and the store tell.
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(s.valid_until) => {}
                _ = dropped => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_leaves_a_margin() {
        assert_eq!(
            validity(Duration::from_secs(10), DEFAULT_DRIFT),
            Duration::from_millis(9898)
        );
        assert_eq!(
            validity(Duration::from_millis(1), DEFAULT_DRIFT),
            Duration::ZERO
        );
        assert_eq!(
            validity(Duration::from_secs(10), 0.1),
            Duration::from_millis(8998)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn lost_fires_at_validity_end_unless_renewed() {
        let start = Instant::now();
        let lease = Lease::new(LeaseTerms {
            user_key: "k".into(),
            keys: LockKeys::new("p", "k"),
            token: OwnerToken::generate(),
            lease: Duration::from_secs(1),
            validity: validity(Duration::from_secs(1), DEFAULT_DRIFT),
            watchdog: true,
            from: start,
            top: 10,
            reserved: 3,
            session: None,
        });
        assert_eq!(lease.next_fence(), Some(8));
        assert_eq!(lease.next_fence(), Some(9));
        assert_eq!(lease.next_fence(), Some(10));
        assert_eq!(lease.next_fence(), None);
        tokio::time::advance(Duration::from_millis(500)).await;
        lease.renewed(Instant::now());
        lease.lost().await;
        let held_for = Instant::now() - start;
        assert!(held_for >= Duration::from_millis(1400), "{held_for:?}");
        assert!(!lease.is_held());
    }
}
