//! The check of a holder cut off from its engine: its guard must stop trusting its lease no
//! later than the moment another process holds the lock (never two holders by the client's own
//! judgement), shared by the engines whose servers may grant other session bounds than asked.

use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockGuard, Locker};
use tokio::time::Instant;

use crate::harness::{ProxyMode, TcpProxy};

/// What [`cut_off`] saw, from the moment of the cut.
pub struct CutOff {
    /// When the other locker held the lock.
    pub taken: Duration,
    /// When the cut-off guard's `lost()` resolved.
    pub noticed: Duration,
    /// The other locker's guard.
    pub next: LockGuard,
}

/// Stalls `proxy` (the only way `first`'s locker reaches its engine), lets `other` take `key`
/// (waiting up to 15 s), and fails unless `first` reported its lease lost by then and the new
/// fence is greater.
///
/// # Panics
/// On two holders, or when the lock never comes free or `lost()` never resolves.
pub async fn cut_off(first: Arc<LockGuard>, proxy: &TcpProxy, other: &Locker, key: &str) -> CutOff {
    let fence = first.fence();
    proxy.set_mode(ProxyMode::Stall);
    let at = Instant::now();
    let watched = first.clone();
    let lost = tokio::spawn(async move {
        watched.lost().await;
        at.elapsed()
    });
    let next = other
        .lock(key)
        .wait(Duration::from_secs(15))
        .acquire()
        .await
        .expect("the lock never came free while its holder was cut off");
    // Read at once, on the clock both guards are judged by: the other holds the lock now.
    let taken = at.elapsed();
    let still_held = first.is_held();
    let lost_by_then = tokio::time::timeout(Duration::ZERO, first.lost())
        .await
        .is_ok();
    assert!(next.fence() > fence);
    assert!(
        !still_held && lost_by_then,
        "two holders: another process holds the lock {taken:?} into the partition, and the \
         cut-off guard still trusts its lease (held: {still_held}, lost: {lost_by_then})"
    );
    let noticed = tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("lost() never resolved")
        .unwrap();
    CutOff {
        taken,
        noticed,
        next,
    }
}
