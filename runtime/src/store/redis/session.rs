//! The session of the lock connection (single server): each drop of the connection ends it,
//! and with it every lease granted over it (the server may have restarted without them).
//! The connection is brought back as soon as the server answers again.

use redis::{PushInfo, PushKind};
use tokio::sync::{mpsc, watch};

use super::conn::ping;
use super::items::Core;
use super::revive::{Revival, Step};
use super::RedisStore;
use crate::store::Session;

impl RedisStore {
    /// The current session of the lock connection (single server only).
    pub(super) fn current_session(&self) -> Option<Session> {
        self.epoch.as_deref().map(Session::current)
    }
}

/// Ends the lock connection's session each time it drops, and brings the connection back as
/// soon as the server answers again (see [`Revival`]).
pub(super) async fn watch_lock_conn(
    epoch: std::sync::Weak<watch::Sender<u64>>,
    core: std::sync::Weak<Core>,
    mut drops: mpsc::UnboundedReceiver<PushInfo>,
    down_at_connect: bool,
) {
    let mut revival = Revival::default();
    if down_at_connect {
        revival.dropped();
    }
    loop {
        tokio::select! {
            push = drops.recv() => {
                let Some(push) = push else { return };
                if push.kind != PushKind::Disconnection {
                    continue;
                }
                let Some(epoch) = epoch.upgrade() else { return };
                epoch.send_modify(|n| *n += 1);
                tracing::warn!(
                    "the connection to redis dropped: leases granted over it count as lost \
                     (the server may have restarted without them)"
                );
                revival.dropped();
            }
            step = revival.step(), if revival.active() => {
                if step == Step::Due {
                    let Some(core) = core.upgrade() else { return };
                    revival.probe(Box::pin(async move {
                        ping(&core.conn, &core.endpoint, core.op_timeout).await
                    }));
                }
            }
        }
    }
}
