//! What operators ask a locker: the state of one lock or semaphore, the locks held under a
//! pattern, and a forced release.

use crate::error::LockError;
use crate::primitives::inspect::{glob, LockInfo};
use crate::store::keys::{validate_key, LockKeys};

use super::Locker;

impl Locker {
    /// Reads the state of one lock.
    ///
    /// # Errors
    /// [`LockError::Unavailable`] when Redis fails, [`LockError::InvalidKey`] for a bad key,
    /// [`LockError::Config`] on a RedLock or in-memory locker (inspect each node with a
    /// locker of its own).
    pub async fn inspect(&self, key: &str) -> Result<LockInfo, LockError> {
        validate_key(key)?;
        let keys = LockKeys::new(&self.inner.prefix, key);
        let state = self.inner.store.admin()?.inspect(&keys).await?;
        Ok(LockInfo {
            key: key.to_owned(),
            held: state.held,
            remaining: state.remaining,
            waiters: state.waiters,
            waiting_processes: state.waiting_processes,
            last_fence: state.last_fence,
        })
    }

    /// The locks held now whose keys match `pattern` (a glob: `*` any run of characters, `?`
    /// one character; `*` for all), found with `SCAN` (never `KEYS`), in key order.
    ///
    /// # Errors
    /// As [`inspect`](Self::inspect).
    pub async fn list_held(&self, pattern: &str) -> Result<Vec<LockInfo>, LockError> {
        let mut keys = self.inner.store.admin()?.list(&self.inner.prefix).await?;
        keys.sort();
        keys.dedup();
        let mut found = Vec::new();
        for key in keys {
            if glob(pattern, &key) {
                let info = self.inspect(&key).await?;
                if info.held {
                    found.push(info);
                }
            }
        }
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    /// Deletes a lock whoever holds it, and wakes its waiters; true when there was one.
    ///
    /// The holder is not told: it goes on until its next renewal finds the lock gone (its
    /// guard then reports it lost), and may write meanwhile. Fencing tokens still protect
    /// resources that check them: the next holder's token is larger.
    ///
    /// # Errors
    /// As [`inspect`](Self::inspect).
    pub async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        validate_key(key)?;
        let keys = LockKeys::new(&self.inner.prefix, key);
        self.inner.store.admin()?.force_release(&keys).await
    }
}
