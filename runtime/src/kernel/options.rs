//! The resolved options of one acquisition, shared by the locker, the local queue and the
//! acquire paths (a module of its own, so that the queue need not import the locker).

use std::time::Duration;

use crate::store::identity::Label;
use crate::store::kind::LeaseKind;

/// The resolved options of one acquisition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) watchdog: bool,
    /// No handover inside the process: every release goes through the store.
    pub(crate) fair: bool,
    /// What the lease holds: the lock, a reader's share, or permits of a semaphore.
    pub(crate) kind: LeaseKind,
    /// Keep the lock at least this long after it was taken; `None`: no minimum.
    pub(crate) hold_at_least: Option<Duration>,
    /// Takes fencing tokens; false for [`LockRequest::unfenced`](crate::LockRequest::unfenced): on Redis a native
    /// `SET NX PX`, and a guard with no fence to read.
    pub(crate) fenced: bool,
    /// A waiting acquire tries an unavailable engine again until its wait is over
    /// ([`crate::kernel::outage`]).
    pub(crate) retry_unavailable: bool,
    /// What operators see beside the holder ([`LockRequest::label`](crate::LockRequest::label)).
    pub(crate) label: Option<Label>,
}
