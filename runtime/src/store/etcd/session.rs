//! The etcd lease of one session as the rest of the engine sees it: the way to its keeper
//! (a keep-alive asked for, a [`Beat`]), and what to clear when it ends.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::calls::lease_gone;
use super::cleanup::CLEAN_UP_FOR;
use crate::store::sequenced::WeakContenders;

/// Asks the lease's keeper for a keep-alive sent from now on; answered once it is
/// acknowledged, dropped when it is not.
pub(super) type Beat = oneshot::Sender<()>;

/// The lease of the current session and the way to its keeper.
pub(super) struct LeaseSession {
    pub(super) id: i64,
    pub(super) session: u64,
    pub(super) beats: mpsc::UnboundedSender<Beat>,
    /// The send time of the last acknowledged keep-alive (or of the grant).
    pub(super) acked: Arc<Mutex<Instant>>,
}

/// What to clear when a lease ends.
pub(super) struct Ended {
    pub(super) client: etcd::Client,
    pub(super) id: i64,
    pub(super) epoch: Weak<watch::Sender<u64>>,
    pub(super) contenders: WeakContenders<i64>,
    pub(super) current: Weak<tokio::sync::Mutex<Option<LeaseSession>>>,
    pub(super) session: u64,
}

impl Ended {
    /// The lease is over for us: every lease granted over it reads as lost, its keys are
    /// forgotten, and it is revoked in the background, so that, should it still live at etcd,
    /// its keys do not stand in any queue (nothing keeps it alive any more, so it would expire
    /// within a TTL anyway).
    pub(super) async fn end(&self, why: &str) {
        if let Some(contenders) = self.contenders.upgrade() {
            contenders.forget_session(self.session);
        }
        if let Some(epoch) = self.epoch.upgrade() {
            epoch.send_modify(|n| *n = (*n).max(self.session + 1));
        }
        if let Some(current) = self.current.upgrade() {
            let mut current = current.lock().await;
            if current.as_ref().is_some_and(|c| c.session == self.session) {
                *current = None;
            }
        }
        revoke_later(self.client.clone(), self.id);
        tracing::warn!("the etcd lease ended ({why}): locks held over it count as lost");
    }
}

/// Revokes a lease in the background until etcd answers (or says it is gone already).
pub(super) fn revoke_later(client: etcd::Client, id: i64) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let give_up = Instant::now() + CLEAN_UP_FOR;
        let mut pause = Duration::from_millis(50);
        while Instant::now() < give_up {
            let mut c = client.clone();
            match tokio::time::timeout(Duration::from_secs(2), c.lease_revoke(id)).await {
                Ok(Ok(_)) => return,
                Ok(Err(e)) if lease_gone(&e) => return,
                _ => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
}
