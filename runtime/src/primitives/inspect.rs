//! Looking at locks from outside: which are held, for how much longer, with which fence, and
//! releasing one by force. For operators and tools (the `leasehold` CLI); applications take
//! and release locks through [`Locker::lock`] and never need these.

use std::time::Duration;

use crate::error::LockError;
use crate::locker::Locker;
use crate::store::keys::{validate_key, LockKeys};

/// What the store holds for one lock. Owner tokens are never shown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's key, as given to [`Locker::lock`].
    pub key: String,
    /// Whether someone holds the lock now.
    pub held: bool,
    /// The holder's remaining lease, when held and the key expires.
    pub remaining: Option<Duration>,
    /// Whether someone waited for the lock during the current hold (or the last release
    /// left it to the next process in line).
    pub waiters: bool,
    /// How many processes wait for the lock in its queue (each stands for all the waiters of
    /// one locker).
    pub waiting_processes: u64,
    /// The highest fencing token handed out (or reserved) for this key so far, if the
    /// counter exists.
    pub last_fence: Option<u64>,
}

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

/// `*` matches any run of characters, `?` any one character, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                backtrack = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match backtrack {
                Some((bp, bt)) => {
                    pi = bp + 1;
                    ti = bt + 1;
                    backtrack = Some((bp, bt + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("*", "stock:sku-7"));
        assert!(glob("stock:*", "stock:sku-7"));
        assert!(!glob("stock:*", "order:1"));
        assert!(glob("stock:sku-?", "stock:sku-7"));
        assert!(glob("*:sku-*", "stock:sku-7"));
        assert!(!glob("stock:sku-??", "stock:sku-7"));
        assert!(glob("a*b*c", "aXbYbZc"));
    }
}
