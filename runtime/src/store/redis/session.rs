//! The session of the lock connection (single server): each drop of the connection ends it,
//! and with it every lease granted over it (the server may have restarted without them).
//! The connection is brought back as soon as the server answers again.

use std::sync::Arc;

use redis::aio::{AsyncPushSender, SendError};
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

/// What the lock connection's client tells of its pushes: a drop ends the session at once,
/// in the client's own call, before the connection it reconnects with can carry a request (the
/// client starts reconnecting, then tells); the pushes go on to [`watch_lock_conn`]. Ended by
/// a task that reads the pushes instead, the session could end late: after an acquire granted
/// over the new connection had read the old session, which then counted that lease lost.
pub(super) struct DropSender {
    pub(super) epoch: Arc<watch::Sender<u64>>,
    pub(super) forward: mpsc::UnboundedSender<PushInfo>,
}

impl AsyncPushSender for DropSender {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        if info.kind == PushKind::Disconnection {
            self.epoch.send_modify(|n| *n += 1);
        }
        self.forward.send(info).map_err(|_| SendError)
    }
}

/// Brings the lock connection back as soon as the server answers again after each drop (see
/// [`Revival`]); the drop itself ended the session already ([`DropSender`]).
pub(super) async fn watch_lock_conn(
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
