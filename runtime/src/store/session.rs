//! The session a lease is granted over, where an engine tracks one: when it ends, nobody
//! can vouch for the leases granted over it any more.

use tokio::sync::watch;

/// The connection a lease was granted over. When it drops, nobody can vouch for the lease
/// any more: the server may have restarted empty (and granted the lock to someone else
/// already), failed over, or been flushed. The lease then counts as lost, for good.
pub(crate) struct Session {
    epoch: watch::Receiver<u64>,
    at: u64,
}

impl Session {
    /// The current session of a connection whose drops bump `epoch`.
    pub(crate) fn current(epoch: &watch::Sender<u64>) -> Session {
        let epoch = epoch.subscribe();
        let at = *epoch.borrow();
        Session { epoch, at }
    }

    /// Whether the connection it was granted over is still the one open.
    pub(crate) fn intact(&self) -> bool {
        *self.epoch.borrow() == self.at
    }

    /// A receiver of the connection's epoch, which changes when the connection drops.
    pub(crate) fn epoch(&self) -> watch::Receiver<u64> {
        self.epoch.clone()
    }
}
