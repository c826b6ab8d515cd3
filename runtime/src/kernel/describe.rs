//! Keeping the locker's description in the engine: written when the locker first contends for
//! a lease (in a task of its own, which that attempt does not wait for) and again every
//! [`DESCRIBE_EVERY`], so that where it expires it outlives the locker by at most
//! [`DESCRIPTION_TTL`](crate::store::identity::DESCRIPTION_TTL), and where it lives with the
//! session it is there again soon after a new session. Never on the acquire path; a locker
//! that never contends (an operator's) stores nothing.

use std::sync::{Arc, Weak};

use crate::kernel::closing::Closing;
use crate::kernel::health::Calls;
use crate::store::identity::{Identity, DESCRIBE_EVERY, DESCRIBE_RETRY};

/// Starts keeping `identity` described in `store` under `prefix`, on the current runtime, for
/// as long as the locker lives and is not closed. Nothing for engines without inspection.
pub(crate) fn spawn(
    store: &Arc<Calls>,
    prefix: &str,
    identity: &Arc<Identity>,
    closing: &Arc<Closing>,
) {
    if !store.capabilities().inspection {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (store, prefix, identity, closing) = (
        Arc::downgrade(store),
        prefix.to_owned(),
        identity.clone(),
        Arc::downgrade(closing),
    );
    runtime.spawn(keep(store, prefix, identity, closing));
}

async fn keep(store: Weak<Calls>, prefix: String, identity: Arc<Identity>, closing: Weak<Closing>) {
    loop {
        if closing.upgrade().is_none_or(|c| c.is_closed()) {
            return;
        }
        let Some(store) = store.upgrade() else { return };
        let described = match store.admin_or_refusal() {
            Ok(admin) => admin.describe_locker(&prefix, &identity).await,
            Err(e) => Err(e),
        };
        let pause = match described {
            Ok(()) => DESCRIBE_EVERY,
            Err(e) => {
                tracing::debug!(error = %e, "could not store the locker's description; trying again");
                DESCRIBE_RETRY
            }
        };
        // Only a weak reference across the pause: dropping the locker ends the task.
        drop(store);
        tokio::time::sleep(pause).await;
    }
}
