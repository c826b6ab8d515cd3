//! The public face of the engine's health: [`EngineState`], and [`EngineStates`], the
//! changes one by one.

use std::collections::VecDeque;
use std::fmt;

use tokio::sync::watch;

/// How a [`Locker`](crate::Locker) sees its lock engine now: what a readiness probe reads
/// ([`Locker::state`](crate::Locker::state)), after ZooKeeper's Curator and its connection
/// states.
///
/// One meaning on every engine: **connected** while the engine answers;
/// **suspended** while its calls fail (no answer, a timeout, a broken connection, no
/// majority), when the leases already held still count as valid on this process's clock
/// until they run out; **lost** once the leases granted over the engine's session are gone
/// (held locks count as lost); **reconnected** once it answers again after being suspended
/// or lost; **closed** after [`Locker::close`](crate::Locker::close), for good. What each
/// engine calls its session and how the locker learns of it:
///
/// | engine | suspended | lost |
/// | --- | --- | --- |
/// | one Redis server | calls fail (`Unavailable`) | the lock connection dropped: the server may have restarted without the locks |
/// | Sentinel, Cluster | calls fail (`Unavailable`) | a lease ran out while its renewals failed (a failover ends no session the client sees) |
/// | RedLock | no majority of nodes answers | a lease ran out while its renewals failed |
/// | ZooKeeper | the session is disconnected (or calls fail) | the session expired, closed, or stayed disconnected for its whole timeout |
/// | etcd | keep-alives are not acknowledged (or calls fail) | etcd says the lease is gone, or no keep-alive was acknowledged for its whole TTL |
/// | PostgreSQL | calls fail, or the listening connection's health check does | a lease ran out while its renewals failed (locks are rows, not a session) |
/// | in memory | never | never |
///
/// On every engine a lease whose renewals failed until it ran out, or whose renewal was
/// answered only after it ran out, makes the state lost too. A lazily connected locker
/// ([`LockerBuilder::lazy_connect`](crate::LockerBuilder::lazy_connect)) is suspended until
/// its first connection, then connected. Every other locker starts connected: `build`
/// connected it.
///
/// No round trip is made to read it: the locker keeps it current from its calls, its
/// renewals and the engine's own reports, and while the engine is suspended or lost it sends
/// one probe a second (a `PING`, a `SELECT 1`, a keep-alive) so that a locker with no
/// traffic (a service taken out of its load balancer) still notices the engine come back.
/// A locker with no traffic and no held lease on one Redis server, PostgreSQL or RedLock
/// notices a stalled engine only with its next call; ZooKeeper, etcd and PostgreSQL notice
/// by themselves (their sessions, keep-alives and listening connection keep talking).
///
/// Only an answer from the server moves the state towards connected, on every engine: what
/// a store answers from its own knowledge (the give-back of an attempt that held nothing, a
/// renewal over a session that is gone) is no news of the server, and leaves a suspended or
/// lost state where it is. There is no debounce: one call that finds the engine unreachable
/// suspends it (the calls of that moment fail; a probe that hides it would send traffic
/// there), and one call sent after it and answered by the server reconnects it. Outcomes are ordered by when their calls were *sent*,
/// not by when they came back: a slow call sent before a failure does not count as the
/// engine answering after it, and a failure of a call sent before an answered one does not
/// suspend it. Debounce a readiness probe in the orchestrator (Kubernetes'
/// `failureThreshold` and `successThreshold`) if a flapping engine should not flap it.
///
/// ```
/// use leasehold::EngineState;
///
/// let locker = leasehold::Locker::in_memory();
/// assert_eq!(locker.state(), EngineState::Connected);
/// assert!(locker.state().is_connected());
/// assert_eq!(EngineState::Suspended.to_string(), "suspended");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineState {
    /// The engine answers, and has not failed since the locker connected.
    Connected,
    /// Calls fail; the leases held still count as valid until they run out on this
    /// process's clock (their guards' [`lost()`](crate::LockGuard::lost) tells each one).
    Suspended,
    /// The leases granted over the engine's session are gone: locks held then count as lost.
    Lost,
    /// The engine answers again after it was suspended or lost. Locks lost meanwhile stay
    /// lost; new ones can be taken.
    Reconnected,
    /// The locker was closed ([`Locker::close`](crate::Locker::close)); it stays closed.
    Closed,
}

impl EngineState {
    /// Whether the engine answers: [`Connected`](Self::Connected) or
    /// [`Reconnected`](Self::Reconnected). What a readiness probe asks.
    pub fn is_connected(self) -> bool {
        matches!(self, EngineState::Connected | EngineState::Reconnected)
    }

    /// Its name in traces, metrics and responses: `connected`, `suspended`, `lost`,
    /// `reconnected` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineState::Connected => "connected",
            EngineState::Suspended => "suspended",
            EngineState::Lost => "lost",
            EngineState::Reconnected => "reconnected",
            EngineState::Closed => "closed",
        }
    }

    /// Every state, in the order of their numbers ([`EngineState::code`]).
    pub(crate) const ALL: [EngineState; 5] = [
        EngineState::Connected,
        EngineState::Suspended,
        EngineState::Lost,
        EngineState::Reconnected,
        EngineState::Closed,
    ];

    /// Its number, to keep it in an atomic.
    pub(crate) fn code(self) -> u8 {
        match self {
            EngineState::Connected => 0,
            EngineState::Suspended => 1,
            EngineState::Lost => 2,
            EngineState::Reconnected => 3,
            EngineState::Closed => 4,
        }
    }

    pub(crate) fn from_code(code: u8) -> EngineState {
        EngineState::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(EngineState::Closed)
    }
}

impl fmt::Display for EngineState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The latest changes of one locker's state, numbered, for [`EngineStates`]. Short: a
/// subscriber that fell more than [`StateLog::KEPT`] changes behind skips to the oldest kept.
#[derive(Clone, Debug)]
pub(crate) struct StateLog {
    pub(crate) seq: u64,
    pub(crate) recent: VecDeque<(u64, EngineState)>,
    /// The state now.
    pub(crate) now: EngineState,
}

impl StateLog {
    pub(crate) const KEPT: usize = 32;

    pub(crate) fn new(now: EngineState) -> Self {
        StateLog {
            seq: 0,
            recent: VecDeque::new(),
            now,
        }
    }

    pub(crate) fn push(&mut self, state: EngineState) {
        self.seq += 1;
        if self.recent.len() == Self::KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((self.seq, state));
        self.now = state;
    }

    /// The first change after `seen` still kept, with its number.
    fn after(&self, seen: u64) -> Option<(u64, EngineState)> {
        self.recent.iter().copied().find(|(seq, _)| *seq > seen)
    }
}

/// Every change of a locker's [`EngineState`], in order
/// ([`Locker::state_changes`](crate::Locker::state_changes)): for a service that flips its
/// readiness, pages someone, or stops work that needs the engine. Clones share nothing: each
/// one sees every change after it was made (or cloned).
///
/// Unlike a `watch` channel, which keeps only the latest value, it hands out each change: a
/// subscriber busy elsewhere while the engine was lost and reconnected still sees the loss.
/// The locker keeps the last 32 changes; one that fell further behind goes on from the
/// oldest of them.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use leasehold::EngineState;
///
/// let locker = leasehold::Locker::in_memory();
/// let mut changes = locker.state_changes();
/// locker.close().await;
/// assert_eq!(changes.next().await, Some(EngineState::Closed));
/// assert_eq!(changes.next().await, None); // closed for good
/// # }
/// ```
#[derive(Clone)]
pub struct EngineStates {
    rx: watch::Receiver<StateLog>,
    seen: u64,
}

impl EngineStates {
    pub(crate) fn new(rx: watch::Receiver<StateLog>) -> Self {
        let seen = rx.borrow().seq;
        EngineStates { rx, seen }
    }

    /// The state now (no round trip, never waits).
    pub fn current(&self) -> EngineState {
        self.rx.borrow().now
    }

    /// The next change after the last one this returned (or after this was made); waits for
    /// it. `None` once the locker is closed and its [`Closed`](EngineState::Closed) was
    /// returned, or once the locker is gone. Cancel-safe: in a `tokio::select!` that drops
    /// it, no change is missed.
    pub async fn next(&mut self) -> Option<EngineState> {
        loop {
            {
                let log = self.rx.borrow_and_update();
                if let Some((seq, state)) = log.after(self.seen) {
                    self.seen = seq;
                    return Some(state);
                }
                if log.now == EngineState::Closed {
                    return None;
                }
            }
            if self.rx.changed().await.is_err() {
                // The locker is gone; what it logged before was returned above.
                let log = self.rx.borrow();
                return log.after(self.seen).map(|(seq, state)| {
                    self.seen = seq;
                    state
                });
            }
        }
    }
}

impl fmt::Debug for EngineStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineStates")
            .field("current", &self.current())
            .finish()
    }
}
