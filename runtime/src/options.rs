//! The resolved options of one acquisition, shared by the locker, the local queue and the
//! acquire paths (a module of its own, so that the queue need not import the locker).

use std::time::Duration;

/// The resolved options of one acquisition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    /// No handover inside the process: every release goes through the store.
    pub(crate) fair: bool,
    /// The read side of a read-write lock.
    pub(crate) shared: bool,
    /// Keep the lock at least this long after it was taken; `None`: no minimum.
    pub(crate) hold_at_least: Option<Duration>,
    /// Permits of a semaphore: `(limit, count)`.
    pub(crate) semaphore: Option<(u32, u32)>,
    /// Takes fencing tokens; false for [`LockRequest::unfenced`](crate::LockRequest::unfenced): on Redis a native
    /// `SET NX PX`, and a guard with no fence to read.
    pub(crate) fenced: bool,
}
