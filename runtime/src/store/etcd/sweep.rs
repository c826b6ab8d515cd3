//! The orphan sweep: once an attempt of a session was abandoned, the session's lease is
//! listed every two seconds, and contender keys nobody here knows are deleted.

use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client as etcd;

use super::names::lock_of;
use super::session::LeaseSession;
use super::Etcd;
use crate::store::sequenced::WeakContenders;

/// How often a session's lease is swept for keys of abandoned attempts that landed late (see
/// "Orphans" in the module docs).
pub(super) const ORPHAN_SWEEP: Duration = Duration::from_secs(2);

impl Etcd {
    /// Starts sweeping the current session's lease for orphans (see "Orphans" in the module
    /// docs), unless it is swept already; the sweep goes on until the session ends.
    pub(super) fn sweep_orphans(&self) {
        let session = *self.epoch.borrow();
        {
            let mut swept = self.swept.lock().unwrap();
            if *swept == Some(session) {
                return;
            }
            *swept = Some(session);
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: no keep-alives either, the lease expires with its keys
        };
        runtime.spawn(sweep(
            self.client.clone(),
            Arc::downgrade(&self.current),
            self.contenders.downgrade(),
            session,
            self.settings.op_timeout,
        ));
    }
}

/// Sweeps the lease of `session` every [`ORPHAN_SWEEP`] until the session ends: deletes each
/// contender key attached to it that no attempt in flight, waiter or holder of this process
/// knows (see "Orphans" in the module docs).
pub(super) async fn sweep(
    client: etcd::Client,
    current: Weak<tokio::sync::Mutex<Option<LeaseSession>>>,
    contenders: WeakContenders<i64>,
    session: u64,
    op_timeout: Duration,
) {
    loop {
        tokio::time::sleep(ORPHAN_SWEEP).await;
        let Some(current) = current.upgrade() else {
            return; // the store is gone, and its keep-alives with it
        };
        let lease = match tokio::time::timeout(op_timeout, current.lock()).await {
            Ok(c) => match c.as_ref() {
                Some(c) if c.session == session => c.id,
                // Ended (the lease, and its keys, go), or a newer session: not ours to sweep.
                Some(_) | None => return,
            },
            Err(_) => continue,
        };
        drop(current);
        let options = etcd::LeaseTimeToLiveOptions::new().with_keys();
        let mut c = client.clone();
        let Ok(Ok(attached)) =
            tokio::time::timeout(op_timeout, c.lease_time_to_live(lease, Some(options))).await
        else {
            continue; // etcd did not answer: next round
        };
        let orphans: Vec<String> = {
            let Some(contenders) = contenders.upgrade() else {
                return;
            };
            attached
                .keys()
                .iter()
                .filter_map(|k| std::str::from_utf8(k).ok())
                .filter(|k| lock_of(k).is_some() && !contenders.knows(k))
                .map(str::to_owned)
                .collect()
        };
        for key in orphans {
            // Only while it is still on our lease: never a key another process made since.
            let txn = etcd::Txn::new()
                .when([etcd::Compare::lease(
                    key.clone(),
                    etcd::CompareOp::Equal,
                    lease,
                )])
                .and_then([etcd::TxnOp::delete(key.clone(), None)]);
            let mut c = client.clone();
            if let Ok(Ok(answer)) = tokio::time::timeout(op_timeout, c.txn(txn)).await {
                if answer.succeeded() {
                    tracing::info!(
                        key = %key,
                        "deleted a key of an abandoned etcd attempt that landed after its cleanup"
                    );
                }
            }
        }
    }
}
