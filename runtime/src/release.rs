//! Giving a lock back: hand it straight to the next local waiter in one script when there is
//! one, else delete it (if still ours) and wake the waiters of other processes.

use std::sync::Arc;

use tokio::time::Instant;

use crate::error::LockError;
use crate::lease::Lease;
use crate::locker::Inner;
use crate::queue::Turn;
use crate::token::OwnerToken;
use crate::watchdog::Job;

impl Inner {
    /// Ends `lease`: hands it over or releases it, and passes the local turn on.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the lock was not ours any more (nothing was touched),
    /// [`LockError::Unavailable`] when Redis failed (the lease then runs out on its own).
    pub(crate) async fn release_lease(
        self: &Arc<Self>,
        lease: Arc<Lease>,
    ) -> Result<(), LockError> {
        if !lease.finish() {
            return Ok(());
        }
        if !self.holds_turn(&lease) {
            // The lease was lost and forfeited its turn: the queue moved on without it.
            return self.delete(&lease).await;
        }
        let mut current = lease;
        // Set when a handover reached a waiter that had just left: its lease came back to us,
        // and the caller's own release already succeeded.
        let mut outcome: Option<Result<(), LockError>> = None;
        loop {
            let keys = &current.keys;
            let Some(next) = self.next_for_handoff(&keys.lock) else {
                let released = self.delete(&current).await;
                self.pass_turn(&keys.lock);
                return outcome.unwrap_or(released);
            };
            let token = OwnerToken::generate();
            let sent = Instant::now();
            let moved = self
                .backend
                .handoff(keys, &current.token, &token, next.lease, self.fence_ttl)
                .await;
            match moved {
                Ok(Some(fence)) => {
                    let handed = Arc::new(Lease::new(
                        current.user_key.clone(),
                        keys.clone(),
                        token,
                        fence,
                        next.lease,
                        next.watchdog,
                        sent,
                    ));
                    self.hold_turn(&handed);
                    match next.tx.send(Turn::Granted(handed)) {
                        Ok(()) => return outcome.unwrap_or(Ok(())),
                        Err(Turn::Granted(orphan)) => {
                            orphan.finish();
                            outcome.get_or_insert(Ok(()));
                            current = orphan;
                        }
                        Err(Turn::Contend) => unreachable!("sent Granted"),
                    }
                }
                Ok(None) => {
                    self.let_contend(&keys.lock, next);
                    return outcome.unwrap_or(Err(LockError::Lost));
                }
                Err(e) => {
                    // Unknown whether the handover happened: delete both tokens' locks
                    // (each only if it is there) and let the waiter try Redis itself.
                    for stale in [current.token.clone(), token] {
                        let _ = self.send_job(Job::Cleanup {
                            inner: self.clone(),
                            keys: keys.clone(),
                            token: stale,
                        });
                    }
                    self.let_contend(&keys.lock, next);
                    return outcome.unwrap_or(Err(e));
                }
            }
        }
    }

    /// Deletes the lock in Redis if `lease` still owns it.
    async fn delete(&self, lease: &Lease) -> Result<(), LockError> {
        match self.backend.release(&lease.keys, &lease.token).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LockError::Lost),
            Err(e) => Err(e),
        }
    }
}
