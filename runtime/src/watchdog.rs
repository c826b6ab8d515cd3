//! The one background task of a [`Locker`](crate::Locker): renews every held lease at a third
//! of its length, in batches, and performs the releases that cannot be awaited where they
//! happen (a guard dropped, an acquire cancelled mid-flight).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::backend::Renewal;
use crate::key::LockKeys;
use crate::lease::Lease;
use crate::locker::Inner;
use crate::token::OwnerToken;

/// The most leases renewed by one script call.
const RENEW_BATCH: usize = 256;

/// Work for the background task.
pub(crate) enum Job {
    /// Keep this lease alive until it is released.
    Watch(Arc<Lease>),
    /// A guard was dropped without `release().await`: release (or hand over) in the background.
    Release {
        inner: Arc<Inner>,
        lease: Arc<Lease>,
    },
    /// An acquire was abandoned while its answer was outstanding: delete the lock if that
    /// attempt took it, then pass the local turn on.
    Abandon {
        inner: Arc<Inner>,
        keys: LockKeys,
        token: OwnerToken,
    },
    /// Delete the lock if `token` owns it; nothing else.
    Cleanup {
        inner: Arc<Inner>,
        keys: LockKeys,
        token: OwnerToken,
    },
}

/// Starts the background task on the current Tokio runtime; `None` outside of one.
pub(crate) fn spawn(inner: Weak<Inner>) -> Option<mpsc::UnboundedSender<Job>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (tx, rx) = mpsc::unbounded_channel();
    runtime.spawn(run(inner, rx));
    Some(tx)
}

/// When a lease's next renewal is due, or `None` to stop watching it.
type Rescheduled = Vec<(Arc<Lease>, Option<Instant>)>;

async fn run(inner: Weak<Inner>, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let (renewed_tx, mut renewed_rx) = mpsc::unbounded_channel::<Rescheduled>();
    let mut watched: HashMap<u64, Arc<Lease>> = HashMap::new();
    let mut due: BTreeSet<(Instant, u64)> = BTreeSet::new();
    loop {
        let next = due.first().map(|&(at, _)| at);
        tokio::select! {
            job = jobs.recv() => {
                let Some(job) = job else { return };
                match job {
                    Job::Watch(lease) => {
                        due.insert((Instant::now() + lease.lease / 3, lease.id));
                        watched.insert(lease.id, lease);
                    }
                    Job::Release { inner, lease } => {
                        tokio::spawn(async move {
                            if let Err(e) = inner.release_lease(lease).await {
                                tracing::debug!(error = %e, "background release failed");
                            }
                        });
                    }
                    Job::Abandon { inner, keys, token } => {
                        tokio::spawn(async move {
                            let _ = inner.backend.release(&keys, &token).await;
                            inner.pass_turn(&keys.lock);
                        });
                    }
                    Job::Cleanup { inner, keys, token } => {
                        tokio::spawn(async move {
                            let _ = inner.backend.release(&keys, &token).await;
                        });
                    }
                }
            }
            Some(rescheduled) = renewed_rx.recv() => {
                for (lease, at) in rescheduled {
                    match at {
                        Some(at) if watched.contains_key(&lease.id) => {
                            due.insert((at, lease.id));
                        }
                        _ => {
                            watched.remove(&lease.id);
                        }
                    }
                }
            }
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                let mut batch = Vec::new();
                while let Some(&(at, id)) = due.first() {
                    if at > now {
                        break;
                    }
                    due.pop_first();
                    let Some(lease) = watched.get(&id) else { continue };
                    if lease.is_done() || lease.state.borrow().lost {
                        watched.remove(&id);
                        continue;
                    }
                    batch.push(lease.clone());
                }
                if !batch.is_empty() {
                    let Some(inner) = inner.upgrade() else { return };
                    tokio::spawn(renew(inner, batch, renewed_tx.clone()));
                }
            }
        }
    }
}

/// Renews a batch and reports when each lease is due next.
async fn renew(
    inner: Arc<Inner>,
    batch: Vec<Arc<Lease>>,
    report: mpsc::UnboundedSender<Rescheduled>,
) {
    for chunk in batch.chunks(RENEW_BATCH) {
        let renewals: Vec<Renewal<'_>> = chunk
            .iter()
            .map(|l| Renewal {
                keys: &l.keys,
                token: &l.token,
                lease: l.lease,
            })
            .collect();
        let sent = Instant::now();
        let result = inner.backend.renew(&renewals).await;
        let mut next = Vec::with_capacity(chunk.len());
        match result {
            Ok(renewed) => {
                for (lease, ok) in chunk.iter().zip(renewed) {
                    if lease.is_done() {
                        next.push((lease.clone(), None));
                    } else if ok {
                        lease.renewed(sent);
                        next.push((lease.clone(), Some(sent + lease.lease / 3)));
                    } else {
                        lease.mark_lost();
                        tracing::warn!(
                            fence = lease.fence,
                            "lease lost: the lock expired or was taken over before renewal"
                        );
                        next.push((lease.clone(), None));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, leases = chunk.len(), "lease renewal failed; retrying");
                let now = Instant::now();
                for lease in chunk {
                    let retry = now + (lease.lease / 10).max(Duration::from_millis(5));
                    let valid_until = lease.state.borrow().valid_until;
                    next.push((lease.clone(), (retry < valid_until).then_some(retry)));
                }
            }
        }
        if report.send(next).is_err() {
            return;
        }
    }
}
