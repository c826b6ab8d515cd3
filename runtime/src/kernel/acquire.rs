//! Taking a lease of any kind (the lock, a reader's share, permits): re-enter if the
//! surrounding scope holds it, else queue locally, then contend in the store: try, subscribe to the wake channel, try again, and sleep until a
//! release, the holder's remaining lease or the deadline, whichever comes first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::error::LockError;
use crate::kernel::backoff::random_up_to;
use crate::kernel::hold::Hold;
use crate::kernel::inflight::{Call, InFlight};
use crate::kernel::lease::{validity, Lease, LeaseTerms};
use crate::kernel::observe;
use crate::kernel::options::Options;
use crate::kernel::outage::{self, Outage};
use crate::kernel::place::Place;
use crate::kernel::queue::{Entry, Turn};
use crate::kernel::reentrant;
use crate::kernel::state::Inner;
use crate::kernel::turns::{ActiveTurn, QueuedTurn};
use crate::kernel::unsettled::Unsettled;
use crate::store::keys::{validate_key, LockKeys};
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Fairness, PermitWaiter, Session, WakeSubscription};

/// The longest a waiter sleeps between attempts, even when the holder's lease is longer: a
/// wake message can be lost while the subscription connection reconnects.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// The most added to a subscribed waiter's sleep, so that waiters of different processes
/// sleeping on the same hint do not all retry at the same instant.
const NAP_SPREAD: Duration = Duration::from_millis(2);
/// How often to retry when no wake channel could be subscribed.
const POLL_WITHOUT_WAKES: Duration = Duration::from_millis(50);

impl Inner {
    pub(crate) async fn acquire_with(
        self: &Arc<Self>,
        user_key: String,
        opts: Options,
    ) -> Result<Hold, LockError> {
        self.acquire_as(user_key, None, opts).await
    }

    /// [`acquire_with`](Self::acquire_with) for a lock stored under `keys` instead of the
    /// user key's own (a leader election's lock); `user_key` names it in traces.
    pub(crate) async fn acquire_as(
        self: &Arc<Self>,
        user_key: String,
        keys: Option<LockKeys>,
        opts: Options,
    ) -> Result<Hold, LockError> {
        let span = observe::acquire_span(self.trace_keys, &user_key, opts.lease, opts.wait);
        let start = Instant::now();
        let mut waited = false;
        // Boxed: the future of a whole acquisition is deep (queue, contention loop, backend),
        // and callers' futures (handlers, spawned tasks) stay small and quick to compile.
        let acquisition: Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(
            self.acquire_traced(user_key, keys, opts, &mut waited)
                .instrument(span.clone()),
        );
        let mut result = acquisition.await;
        if let (Ok(guard), Some(hold)) = (&mut result, opts.hold_at_least) {
            guard.hold_at_least(hold);
        }
        let outcome = result.as_ref().map(Hold::traced_fence);
        observe::acquire_ended(&span, outcome, start.elapsed(), waited);
        drop(span);
        if let Ok(guard) = &mut result {
            guard.open_span();
        }
        result
    }

    /// The answer to a request that the surrounding scope holds already (`None` when it
    /// does not, or no longer does: a scope future that outlives its holder, released or
    /// handed over, acquires like any other task), for every kind of lease. A read inside a
    /// held read or write is granted by the holding; so is a write inside a write, and
    /// permits inside a holder of at least as many. A write inside a read, or more permits
    /// than the scope holds, would wait for itself, and a fenced request inside an unfenced
    /// hold has no token to get: all are refused. What the scope holds is what its guard
    /// holds, not the lease's kind: a downgraded read holds the write's lease as a read, and
    /// so does a write scope once its guard was released while a downgraded read holds on.
    pub(crate) fn reenter(
        self: &Arc<Self>,
        user_key: &str,
        keys: &LockKeys,
        opts: &Options,
    ) -> Option<Result<Hold, LockError>> {
        let held = reentrant::held(self.id, keys.lock())?;
        let (lease, fence, held_kind) = (held.lease.clone(), held.fence, held.kind_now());
        if !lease.holding(fence) {
            return None;
        }
        match (held_kind, opts.kind) {
            (LeaseKind::Read, LeaseKind::Exclusive) => {
                return Some(Err(LockError::config(format!(
                    "a write lock on {user_key:?} was asked for inside a read lock of the same \
                     key, which it would wait for forever; take the write lock from the start, \
                     or release the read lock first"
                ))));
            }
            (LeaseKind::Permits { count: held, .. }, LeaseKind::Permits { count, .. })
                if count > held =>
            {
                return Some(Err(LockError::config(format!(
                    "{count} permits of {user_key:?} were asked for inside a holder of {held} \
                     of them, which would wait for itself; ask for them all at once"
                ))));
            }
            _ => {}
        }
        if opts.fenced && !lease.fenced && opts.kind == LeaseKind::Read {
            return Some(Err(LockError::config(format!(
                "a read lock on {user_key:?} was asked for inside an unfenced write of the same \
                 key: a downgrade is a read with a fencing token, which an unfenced hold has none \
                 of to give; take the write lock fenced (drop `unfenced()`) to downgrade it"
            ))));
        }
        if opts.fenced && !lease.fenced {
            return Some(Err(LockError::config(format!(
                "a fenced lock on {user_key:?} was asked for inside an unfenced hold of the \
                 same key, which has no fencing token to give it; take the outer lock fenced \
                 (drop `unfenced()`), or ask for this one unfenced too"
            ))));
        }
        if !lease.is_held() {
            return Some(Err(LockError::Lost {
                reason: lease.loss_reason(),
            }));
        }
        if (held_kind, opts.kind) == (LeaseKind::Exclusive, LeaseKind::Read) {
            // A downgrade: the read holds the lock on after the write is released.
            return Some(Ok(Hold::downgraded(self.clone(), lease, fence)));
        }
        Some(Ok(Hold::reentered(self.clone(), lease, fence, held_kind)))
    }

    /// Every acquire's way in, for every kind of lease: re-enter if the surrounding scope
    /// holds the lease, else take a seat (the front of the local queue, or a place of its
    /// own) and contend in the store.
    async fn acquire_traced(
        self: &Arc<Self>,
        user_key: String,
        keys: Option<LockKeys>,
        opts: Options,
        waited: &mut bool,
    ) -> Result<Hold, LockError> {
        validate_key(&user_key)?;
        let keys = keys.unwrap_or_else(|| match opts.kind {
            LeaseKind::Permits { .. } => LockKeys::semaphore(&self.prefix, &user_key),
            _ => LockKeys::new(&self.prefix, &user_key),
        });
        if let Some(reentered) = self.reenter(&user_key, &keys, &opts) {
            return reentered;
        }
        let deadline = Instant::now() + opts.wait;
        let turn = match opts.kind {
            // Readers do not queue in the process (they do not exclude one another).
            LeaseKind::Read => ActiveTurn::own(self.seating(), &keys, LeaseKind::Read, None),
            LeaseKind::Exclusive
                if opts.fair && self.store.capabilities().fairness == Fairness::PerRequest =>
            {
                // First come, first served across every task of every process: the request
                // waits in the store's queue under a name of its own, not behind this
                // process's other tasks, and only a release that chose it wakes it.
                let name = crate::store::token::request_name(self.identity.id());
                ActiveTurn::alone(self.seating(), &keys, name.into())
            }
            LeaseKind::Exclusive => match self.line_up(&keys, &opts, deadline, waited).await? {
                InLine::Front(turn) => ActiveTurn::new(self.seating(), &keys, turn),
                InLine::HandedOver(hold) => return Ok(hold),
            },
            LeaseKind::Permits { count, .. } => {
                // First come, first served in the process, in the same local queue as a
                // lock's waiters: only the front contends in the store, and the turn passes
                // on as soon as it got its permits or gave up (permits are never handed
                // over).
                let turn = match self.line_up(&keys, &opts, deadline, waited).await? {
                    InLine::Front(turn) => turn,
                    InLine::HandedOver(hold) => return Ok(hold),
                };
                // A request for several permits that waits takes its turn in the store (see
                // `Store::acquire` of permits): single permits that come free are kept for it.
                // Its seat leaves the queue however it stops waiting without them (Busy, an
                // error, cancellation); granted, the store took it out.
                let waiter = (count > 1 && deadline > Instant::now()).then(|| PermitWaiter {
                    name: crate::store::token::waiter_name(self.identity.id()),
                    until: deadline,
                });
                ActiveTurn::own(self.seating(), &keys, opts.kind, waiter).in_line(turn)
            }
        };
        self.contend(user_key, &keys, opts, deadline, turn, waited)
            .await
    }

    /// Takes this task's place in the local queue of `keys` (the lock's, or a semaphore's)
    /// and waits, until `deadline`, to be at its front; a holder of the lock may hand its
    /// lease over instead. `Busy` when the wait ends first, or when the request does not
    /// wait and the queue is not empty.
    async fn line_up(
        self: &Arc<Self>,
        keys: &LockKeys,
        opts: &Options,
        deadline: Instant,
        waited: &mut bool,
    ) -> Result<InLine, LockError> {
        let mut entry = self.queues.enter(keys, opts, !opts.wait.is_zero());
        if let Entry::HeldHere(lease) = &entry {
            // Held by a lease of this process: busy only if the store still has it (an
            // operator may have released it by force), as another process would find.
            self.verify(lease).await;
            if !lease.is_held() {
                self.queues.forfeit(lease);
                entry = self.queues.enter(keys, opts, false);
            }
        }
        let rx = match entry {
            Entry::Active(turn) => return Ok(InLine::Front(turn)),
            Entry::Busy => return Err(LockError::Busy { retry_after: None }),
            Entry::HeldHere(lease) => {
                let valid_until = lease.state.borrow().valid_until;
                return Err(LockError::Busy {
                    retry_after: Some(valid_until.saturating_duration_since(Instant::now())),
                });
            }
            Entry::Queued(rx) => rx,
        };
        *waited = true;
        let mut queued = QueuedTurn::new(self.seating(), self, keys, rx);
        match queued.wait(deadline).await {
            None => {
                // The holder is in this process: its lease says how long is left.
                let retry_after = self.queues.turn_holder(keys.lock()).map(|lease| {
                    let valid_until = lease.state.borrow().valid_until;
                    valid_until.saturating_duration_since(Instant::now())
                });
                Err(LockError::Busy { retry_after })
            }
            Some(Turn::Granted(lease, fence)) if self.closing.is_closed() => {
                // Handed over as the locker closed: give it back, and take nothing.
                self.release_in_background(lease, fence, None);
                Err(LockError::Closed)
            }
            Some(Turn::Granted(lease, fence)) => {
                Ok(InLine::HandedOver(Hold::new(self.clone(), lease, fence)))
            }
            Some(Turn::Contend(turn)) => Ok(InLine::Front(turn)),
        }
    }

    /// The one contend loop, for every kind of lease: try, subscribe, try again, and sleep
    /// until a release, the holder's remaining lease or the deadline. `turn` is the task's
    /// seat: the front of the local queue (the lock), or a place of its own (a fair request
    /// alone in the store's queue, a reader, a semaphore's waiter); it gives back whatever a
    /// call in flight takes if this future stops being polled.
    pub(crate) async fn contend(
        self: &Arc<Self>,
        user_key: String,
        keys: &LockKeys,
        opts: Options,
        deadline: Instant,
        mut turn: ActiveTurn<'_>,
        waited: &mut bool,
    ) -> Result<Hold, LockError> {
        let inner = self;
        let kind = turn.kind;
        let mut wakes: Option<WakeSubscription> = None;
        let mut subscribed = false;
        // Whether an attempt of this wait queued this process in the store.
        let mut queued = false;
        // The engine's outage this wait is riding out, if it is in one.
        let mut outage: Option<Outage> = None;
        loop {
            // A locker closed meanwhile takes nothing more; `close` waits for this attempt
            // from here until its answer is handled.
            turn.sending(opts.lease)?;
            inner.contending();
            let token = OwnerToken::new(&inner.identity, opts.label.as_ref());
            // Fences for the waiters that may get this lease handed over (the lock, with the
            // watchdog: without it, each holder needs a lease of its own; a lease of its own
            // is never handed over).
            let fences = if kind == LeaseKind::Exclusive && opts.watchdog && !opts.fair {
                inner.queues.fences_to_reserve(keys.lock())
            } else {
                1
            };
            // Read before sending: a drop after this, even before the answer, ends the lease.
            let session = inner.store.session();
            let sent = Instant::now();
            let validity = validity(opts.lease, inner.drift);
            // Only the lock queues its process in the store for the rest of the wait; readers
            // and permits take their turns by other rules (see `Store::acquire` of permits).
            let interest = match kind {
                LeaseKind::Exclusive => deadline.saturating_duration_since(sent),
                _ => Duration::ZERO,
            };
            let call = Attempted {
                interest,
                queued,
                contender: turn.contender().map(Into::into),
                // A lease of its own always carries its fence.
                fenced: opts.fenced || kind.is_own(),
                ..Attempted::new(inner, keys, &token, opts.lease, sent, fences)
            }
            .send(inner, kind, turn.permit_waiter());
            let (call, settles) = InFlight::new(&inner.background, call);
            // Dropped from here on, the turn gives back whatever the call takes, once it is
            // answered; an error leaves it to do so too (the call may have landed).
            turn.in_flight = Some(token.clone());
            turn.settles = Some(settles);
            let attempt = match call.await {
                Ok(attempt) => attempt,
                // A waiting acquire rides out an outage (see `kernel::outage`): what the
                // failed call may have taken goes back, and it tries again after a pause.
                Err(e) if e.is_unavailable() && opts.retry_unavailable && !opts.wait.is_zero() => {
                    turn.settles = None;
                    if let Some(token) = turn.in_flight.take() {
                        outage::undo_later(inner.seating(), keys, token, kind, opts.lease);
                    }
                    // The give-back is counted for `close` on its own.
                    turn.counted = None;
                    outage
                        .get_or_insert_with(Outage::new)
                        .pause(e, deadline)
                        .await?;
                    continue;
                }
                // The turn gives back what the call may have taken as it drops.
                Err(e) => return Err(e),
            };
            outage = None;
            turn.in_flight = None;
            turn.settles = None;
            queued |= matches!(attempt, Attempt::Held { .. }) && !interest.is_zero();
            let remaining = match attempt {
                Attempt::Granted { top, valid_from } => {
                    // The store may count the lease from before the request (etcd: from its
                    // lease's last acknowledged keep-alive), never from after it.
                    let from = valid_from.map_or(sent, |at| at.min(sent));
                    // Granted over a connection that dropped while the answer was on its way
                    // (a session that ended): the lock may be gone with it (a server restarted
                    // empty), or held over the new one; a guard could not count on it either
                    // way (it would be lost at once). Given back like a late grant.
                    let intact = session.as_ref().is_none_or(Session::intact);
                    if intact && Instant::now() < from + validity {
                        let sent = Sent {
                            token,
                            from,
                            validity,
                            fences,
                            session,
                        };
                        // Counted for `close` until the lease is registered where `close`
                        // finds it, or given back by the guard's drop below.
                        let counted = turn.counted.take();
                        let guard = self.granted(turn, user_key, keys, &opts, sent, top);
                        // Closed while the attempt was in flight: the guard's drop gives it
                        // back (in the background, which `close` waits for).
                        let closed = inner.closing.check();
                        let result = closed.map(|()| guard);
                        drop(counted);
                        return result;
                    }
                    // The grant came too late to count on (its validity, counted from the
                    // send time or the store's earlier instant, is over), or over a session
                    // that ended. Give it back (the turn cleans up if this is cancelled) and
                    // try again while the wait lasts.
                    turn.in_flight = Some(token.clone());
                    let late = Unsettled {
                        keys: keys.clone(),
                        token,
                        kind,
                        lease: opts.lease,
                        settles: None,
                    };
                    let _ = late
                        .undo(&inner.store, &inner.background, &Place::Nowhere)
                        .await;
                    turn.in_flight = None;
                    turn.counted = None;
                    tracing::debug!(intact, "a grant not to count on; given back");
                    if Instant::now() >= deadline && !intact {
                        return Err(LockError::unavailable(
                            "the connection to the lock store dropped while the lease was \
                             being granted, so the grant cannot be counted on (the server may \
                             have restarted without it); it was given back: try again",
                            None,
                        ));
                    }
                    if Instant::now() >= deadline {
                        return Err(LockError::unavailable(
                            format!(
                                "the lock store granted the lease only after its validity \
                                 ({validity:?} of a {:?} lease) had run out; the network or \
                                 the server is too slow for this lease: give it a longer one",
                                opts.lease
                            ),
                            None,
                        ));
                    }
                    continue;
                }
                Attempt::Held { remaining } => remaining,
            };
            turn.counted = None;
            *waited = true;
            let now = Instant::now();
            if now >= deadline {
                return Err(LockError::Busy {
                    retry_after: remaining,
                });
            }
            if !subscribed {
                // Subscribe, then try again at once: a release between the failed attempt
                // and the subscription must not be slept through.
                subscribed = true;
                // Bounded by the deadline too: however the subscription connection behaves,
                // the wait ends on time (with one more attempt, bounded by the op timeout).
                let subscribe = inner.store.call(|store| store.subscribe(keys));
                match tokio::time::timeout_at(deadline, subscribe).await {
                    Ok(Ok(sub)) => wakes = Some(sub),
                    Ok(Err(e)) => tracing::debug!(error = %e, "no wake-ups for this wait; polling"),
                    Err(_) => tracing::debug!("subscribing outlasted the wait; one last attempt"),
                }
                continue;
            }
            tokio::select! {
                () = nap(wakes.as_mut(), turn.contender(), remaining, now, deadline) => {}
                () = inner.closing.closed() => {}
            }
        }
    }
}

/// An acquire request that owns what it names, so that it can go on in the background after
/// its caller stopped waiting for it ([`InFlight`]).
struct Attempted {
    keys: LockKeys,
    token: OwnerToken,
    lease: Duration,
    validity: Duration,
    sent: Instant,
    fence_ttl: Duration,
    fences: u64,
    interest: Duration,
    queued: bool,
    contender: Option<Box<str>>,
    fenced: bool,
}

impl Attempted {
    /// A fenced request for the lock on `keys`, sent at `sent`, that queues nobody: what a
    /// lease of another kind, a fair request or a wait changes, the caller sets.
    fn new(
        inner: &Inner,
        keys: &LockKeys,
        token: &OwnerToken,
        lease: Duration,
        sent: Instant,
        fences: u64,
    ) -> Self {
        Attempted {
            keys: keys.clone(),
            token: token.clone(),
            lease,
            validity: validity(lease, inner.drift),
            sent,
            fence_ttl: inner.fence_ttl,
            fences,
            interest: Duration::ZERO,
            queued: false,
            contender: None,
            fenced: true,
        }
    }

    /// The store's acquire of this request: of the lock, or of a lease of its own (a read
    /// lease, permits, where `waiter` takes its turn).
    fn send(
        self,
        inner: &Arc<Inner>,
        kind: LeaseKind,
        waiter: Option<PermitWaiter>,
    ) -> Call<Attempt> {
        let store = inner.store.clone();
        Box::pin(async move {
            let req = self.request(kind, waiter);
            store.call(|store| store.acquire_one(&req)).await
        })
    }

    fn request(&self, kind: LeaseKind, waiter: Option<PermitWaiter>) -> AcquireRequest<'_> {
        AcquireRequest {
            keys: &self.keys,
            token: &self.token,
            lease: self.lease,
            validity: self.validity,
            sent: self.sent,
            fence_ttl: self.fence_ttl,
            fences: self.fences,
            interest: self.interest,
            queued: self.queued,
            contender: self.contender.as_deref(),
            fenced: self.fenced,
            kind,
            waiter,
        }
    }
}

/// What was sent with an acquire that the store granted.
struct Sent {
    token: OwnerToken,
    /// When the lease's validity counts from: the request's send time, or the earlier
    /// instant the store vouched for it from.
    from: Instant,
    validity: Duration,
    /// The fencing tokens reserved.
    fences: u64,
    session: Option<crate::store::Session>,
}

impl Inner {
    /// The guard of a granted acquire: its lease (fences up to `top`), the first fence, and
    /// the local turn kept by the lease.
    fn granted(
        self: &Arc<Self>,
        turn: ActiveTurn<'_>,
        user_key: String,
        keys: &LockKeys,
        opts: &Options,
        sent: Sent,
        top: u64,
    ) -> Hold {
        let kind = turn.kind;
        // A lease of its own holds one fence, at least 1 (a reader's is the last writer's).
        let top = if kind.is_own() { top.max(1) } else { top };
        // From here on every fence is the deployment's: the store's plus the locker's offset
        // (taken off again only where a fence goes back to the store).
        let top = self.deployment_fence(top);
        let lease = Lease::new(LeaseTerms {
            user_key,
            keys: keys.clone(),
            token: sent.token,
            lease: opts.lease,
            validity: sent.validity,
            watchdog: opts.watchdog,
            from: sent.from,
            top,
            reserved: sent.fences,
            session: sent.session,
        })
        .of_kind(kind);
        let lease = Arc::new(if opts.fenced || kind.is_own() {
            lease
        } else {
            lease.into_unfenced()
        });
        let fence = lease.next_fence().expect("at least one fence reserved");
        // Before the caller checks whether the locker closed: a lease is either found by
        // `close` or given back by its caller (or both: it ends once).
        self.closing.register(&lease);
        turn.keep(&lease);
        Hold::new(self.clone(), lease, fence)
    }
}

impl Inner {
    /// Takes the leases `batch` asks for (distinct, valid keys, each with its kind: the lock
    /// or a reader's share) in one round trip, when the store can take them together
    /// ([`Info::at_once`](crate::store::Info::at_once)) and every key is free here (no local
    /// holder, waiter or enclosing hold) and in the store; `None` otherwise, with nothing
    /// taken: the caller then takes them one by one. The guards come in `batch`'s order, each
    /// with `opts` but its own kind (`opts.kind` is not used). Permits, a fair request and a
    /// batch of fewer than two are never taken at once. A drop while the answer is
    /// outstanding gives back whatever the store granted, as a single acquire does.
    pub(crate) async fn acquire_at_once(
        self: &Arc<Self>,
        batch: &[(String, LeaseKind)],
        opts: Options,
    ) -> Result<Option<Vec<Hold>>, LockError> {
        let inner = self;
        let together = |kind: &LeaseKind| matches!(kind, LeaseKind::Exclusive | LeaseKind::Read);
        if batch.len() < 2 || opts.fair || !batch.iter().all(|(_, kind)| together(kind)) {
            return Ok(None);
        }
        let keys: Vec<&String> = batch.iter().map(|(k, _)| k).collect();
        let kinds: Vec<LeaseKind> = batch.iter().map(|(_, kind)| *kind).collect();
        let lock_keys: Vec<LockKeys> = keys
            .iter()
            .map(|k| LockKeys::new(&inner.prefix, k))
            .collect();
        let asked: Vec<(&LockKeys, LeaseKind)> =
            lock_keys.iter().zip(kinds.iter().copied()).collect();
        if !inner.store.takes_all_at_once(&asked)
            || lock_keys
                .iter()
                .any(|k| reentrant::held(inner.id, k.lock()).is_some())
        {
            return Ok(None);
        }
        let start = Instant::now();
        let mut turns = Vec::with_capacity(keys.len());
        for (k, &kind) in lock_keys.iter().zip(&kinds) {
            let opts = Options { kind, ..opts };
            match kind {
                // Readers do not queue in the process (as a single reader).
                LeaseKind::Read => {
                    turns.push(ActiveTurn::own(inner.seating(), k, LeaseKind::Read, None))
                }
                _ => match inner.queues.enter(k, &opts, false) {
                    Entry::Active(turn) => turns.push(ActiveTurn::new(inner.seating(), k, turn)),
                    // Held or awaited in this process: the one-by-one path queues behind it.
                    _ => return Ok(None),
                },
            }
        }
        // Counted for `close` until the answer is handled (as a single acquire's is).
        for turn in &mut turns {
            turn.sending(opts.lease)?;
        }
        inner.contending();
        let tokens: Vec<OwnerToken> = keys
            .iter()
            .map(|_| OwnerToken::new(&inner.identity, opts.label.as_ref()))
            .collect();
        let fences: Vec<u64> = lock_keys
            .iter()
            .zip(&kinds)
            .map(|(k, kind)| {
                if opts.watchdog && *kind == LeaseKind::Exclusive {
                    inner.queues.fences_to_reserve(k.lock())
                } else {
                    1
                }
            })
            .collect();
        for (turn, token) in turns.iter_mut().zip(&tokens) {
            turn.in_flight = Some(token.clone());
        }
        // Read before sending: a drop after this, even before the answer, ends the leases.
        let sessions: Vec<_> = keys.iter().map(|_| inner.store.session()).collect();
        let sent = Instant::now();
        let validity = validity(opts.lease, inner.drift);
        let owned: Vec<(Attempted, LeaseKind)> = lock_keys
            .iter()
            .zip(&tokens)
            .zip(&fences)
            .zip(&kinds)
            .map(|(((keys, token), &fences), &kind)| {
                let attempted = Attempted {
                    // A lease of its own always carries its fence (as a single one's).
                    fenced: opts.fenced || kind.is_own(),
                    ..Attempted::new(inner, keys, token, opts.lease, sent, fences)
                };
                (attempted, kind)
            })
            .collect();
        let store = inner.store.clone();
        let call: Call<Vec<Attempt>> = Box::pin(async move {
            let requests: Vec<AcquireRequest<'_>> = owned
                .iter()
                .map(|(a, kind)| a.request(*kind, None))
                .collect();
            store.call(|store| store.acquire(&requests)).await
        });
        let (call, settles) = InFlight::new(&inner.background, call);
        for turn in &mut turns {
            turn.settles = Some(settles.clone());
        }
        drop(settles);
        // An error leaves the tokens in flight: the turns give back what may have been taken.
        let attempts = call.await?;
        let granted = |a: &Attempt| matches!(a, Attempt::Granted { .. });
        if attempts.len() == keys.len() && !attempts.iter().any(granted) {
            // Nothing taken.
            for turn in &mut turns {
                turn.in_flight = None;
            }
            return Ok(None);
        }
        // All granted; or (an engine's fault) only some, which the turns give back.
        let mut tops = Vec::with_capacity(attempts.len());
        // The leases count from the send time, or from the earliest instant the store
        // vouched for one of them from (never later).
        let mut from = sent;
        for attempt in &attempts {
            if let Attempt::Granted { top, valid_from } = attempt {
                tops.push(*top);
                from = valid_from.map_or(from, |at| at.min(from));
            }
        }
        let ended = sessions
            .iter()
            .any(|s| !s.as_ref().is_none_or(Session::intact));
        if Instant::now() >= from + validity || tops.len() != keys.len() || ended {
            // Too late to count on, or over a session that ended: the turns give the leases
            // back as they drop.
            return Ok(None);
        }
        let counted: Vec<_> = turns.iter_mut().filter_map(|t| t.counted.take()).collect();
        let mut guards = Vec::with_capacity(keys.len());
        for ((((mut turn, user_key), (token, fences)), (lock_keys, top)), session) in turns
            .into_iter()
            .zip(keys)
            .zip(tokens.into_iter().zip(fences))
            .zip(lock_keys.iter().zip(tops))
            .zip(sessions)
        {
            turn.in_flight = None;
            let span = observe::acquire_span(inner.trace_keys, user_key, opts.lease, opts.wait);
            let sent = Sent {
                token,
                from,
                validity,
                fences,
                session,
            };
            let opts = Options {
                kind: turn.kind,
                ..opts
            };
            let mut guard = self.granted(turn, user_key.clone(), lock_keys, &opts, sent, top);
            let fence = guard.fence();
            observe::acquire_ended(&span, Ok(Some(fence)), start.elapsed(), false);
            drop(span);
            guard.open_span();
            guards.push(guard);
        }
        // Closed while the attempt was in flight: the guards' drops give the keys back (in
        // the background, counted for `close` before the attempt stops being).
        let closed = self.closing.check();
        let result = closed.map(|()| Some(guards));
        drop(counted);
        result
    }
}

/// Sleeps until a release (when subscribed), the holder's remaining lease (at most
/// [`MAX_SLEEP`]) or the deadline, whichever comes first; without a subscription, polls. A
/// request queued under its own name (`me`) sleeps through releases that chose another.
async fn nap(
    wakes: Option<&mut WakeSubscription>,
    me: Option<&str>,
    remaining: Option<Duration>,
    now: Instant,
    deadline: Instant,
) {
    let nap = match &wakes {
        Some(_) => remaining.unwrap_or(MAX_SLEEP).min(MAX_SLEEP) + random_up_to(NAP_SPREAD),
        None => POLL_WITHOUT_WAKES.min(remaining.unwrap_or(POLL_WITHOUT_WAKES)),
    };
    let until = (now + nap).min(deadline);
    match wakes {
        Some(sub) => {
            tokio::select! {
                _ = sub.released_for(me) => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
        None => tokio::time::sleep_until(until).await,
    }
}

/// Where [`Inner::line_up`] left a task.
enum InLine {
    /// At the front of the local queue, holding this turn: it contends in the store.
    Front(u64),
    /// The holder before it handed its lease over.
    HandedOver(Hold),
}
