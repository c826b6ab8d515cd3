//! Looking at locks from outside: which are held, for how much longer, with which fence, and
//! releasing one by force. For operators and tools (the `leasehold` CLI); applications take
//! and release locks through [`Locker::lock`](crate::Locker::lock) and never need these.

use std::time::{Duration, SystemTime};

/// What the store holds for one lock. Owner tokens are never shown: not here, not in `Debug`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's key, as given to [`Locker::lock`](crate::Locker::lock).
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
    /// Who holds it: one holder for the lock, every reader while readers share it; empty
    /// when it is free. See [`Holder`] for what each engine can tell.
    pub holders: Vec<Holder>,
    /// Who waits for it, in the order they came, where the engine keeps its waiters: the
    /// processes (lockers) queued on Redis and PostgreSQL, the contenders behind the holders
    /// on ZooKeeper and etcd. At most [`MAX_LISTED_WAITERS`] are listed;
    /// [`waiting_processes`](Self::waiting_processes) counts them all.
    pub waiting: Vec<Waiter>,
}

impl LockInfo {
    /// The holder, or the first of its readers; `None` when it is free.
    pub fn holder(&self) -> Option<&Holder> {
        self.holders.first()
    }

    /// How long the waiter that has waited longest has waited so far, where the engine can
    /// tell.
    pub fn longest_wait(&self) -> Option<Duration> {
        self.waiting.iter().filter_map(|w| w.waited).max()
    }
}

/// The most waiters [`LockInfo::waiting`] lists.
pub const MAX_LISTED_WAITERS: usize = 32;

/// One holder of a lock, a reader's share or a semaphore's permits, as inspection shows it:
/// the locker that took it (through the locker id its owner token carries, or on ZooKeeper
/// and etcd the session or lease it lives on) with that locker's description, since when,
/// and the acquisition's label. Never its owner token.
///
/// What each engine can tell: the locker id, the time and the label come from the public
/// part of the owner token, on every engine that keeps the token with the lock (Redis, its
/// readers and permits, PostgreSQL, ZooKeeper's znodes, etcd's writers and readers); an etcd
/// semaphore's permits and an election's lock whose data is its leader record (ZooKeeper,
/// etcd) show the locker through their session or lease, without label (on ZooKeeper with
/// the znode's creation time). A lock taken by a version of leasehold that wrote no identity
/// shows `locker: None`. RedLock and in-memory lockers have no inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's locker id (16 hex digits), when its token or session tells.
    pub locker: Option<String>,
    /// The holder's locker as it described itself, while that description is stored: it
    /// goes with the locker's session (ZooKeeper, etcd) or 30 s after the locker stopped
    /// refreshing it (Redis, PostgreSQL).
    pub description: Option<LockerDescription>,
    /// When the acquisition was sent, on the holder's clock. A lease handed to another task
    /// of the same process without a round trip keeps the first one's time (and label); on
    /// ZooKeeper and etcd, whose contenders are created when they start to wait, it is when
    /// the holder started waiting for the lock.
    pub since: Option<SystemTime>,
    /// The label the acquisition was given ([`LockRequest::label`](crate::LockRequest::label)).
    pub label: Option<String>,
}

/// One waiter for a lock, as inspection shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// The waiting locker's id, when its name in the queue tells (versions before this one
    /// wait under random names).
    pub locker: Option<String>,
    /// The waiting locker as it described itself, while that description is stored.
    pub description: Option<LockerDescription>,
    /// How long it has waited so far: on the server's clock on Redis and PostgreSQL, from the
    /// waiter's own clock (its token's time) on ZooKeeper and etcd.
    pub waited: Option<Duration>,
    /// The label of the waiting acquisition, where the engine keeps its token while it waits
    /// (ZooKeeper, etcd).
    pub label: Option<String>,
}

/// How a locker described itself in the engine, once, when it started (see
/// [`LockerBuilder::service_name`](crate::LockerBuilder::service_name)). Visible to anyone
/// who can read the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockerDescription {
    /// The locker id: 16 hex digits, random, new for every locker.
    pub locker: String,
    /// The service name it was given, or the name of its binary.
    pub service: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When the locker was built, on its own clock.
    pub started: SystemTime,
    /// The version of leasehold it runs.
    pub version: String,
}

/// `*` matches any run of characters, `?` any one character, everything else itself.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
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
