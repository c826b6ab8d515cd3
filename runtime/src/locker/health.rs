//! [`Locker::state`] and [`Locker::state_changes`]: how the lock engine is doing, for
//! readiness probes and alerts.

use crate::kernel::health::{EngineState, EngineStates};
use crate::locker::Locker;

impl Locker {
    /// How this locker sees its lock engine now: connected, suspended (calls fail; held
    /// leases count as valid until they run out), lost (the leases of the engine's session
    /// are gone), reconnected, or closed. See [`EngineState`] for what each means on each
    /// engine, and how the locker learns of it.
    ///
    /// One atomic read: no round trip, never waits, so a readiness probe can ask it on every
    /// request. A locker starts connected (`build` connected it), or suspended when it
    /// connects lazily ([`LockerBuilder::lazy_connect`](crate::LockerBuilder::lazy_connect))
    /// until its first connection. Every clone of a locker shares its state.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let locker = leasehold::Locker::in_memory();
    /// // A readiness probe: ready while the engine answers.
    /// let ready = locker.state().is_connected();
    /// assert!(ready);
    /// # }
    /// ```
    pub fn state(&self) -> EngineState {
        self.inner.health.state()
    }

    /// Every change of [`state`](Self::state) from now on, one by one, in order: each
    /// subscriber sees each change (32 at most behind; see [`EngineStates`]), unlike a
    /// `watch` channel, which would let a subscriber that was busy miss a loss between a
    /// suspension and a reconnection. The last change is
    /// [`Closed`](EngineState::Closed), after which [`EngineStates::next`] returns `None`.
    ///
    /// ```no_run
    /// # async fn run(locker: leasehold::Locker) {
    /// use leasehold::EngineState;
    ///
    /// let mut changes = locker.state_changes();
    /// tokio::spawn(async move {
    ///     while let Some(state) = changes.next().await {
    ///         if state == EngineState::Lost {
    ///             // page someone: the locks held over the engine's session are gone
    ///         }
    ///     }
    /// });
    /// # }
    /// ```
    pub fn state_changes(&self) -> EngineStates {
        self.inner.health.changes()
    }
}
