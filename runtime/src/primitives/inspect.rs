//! Looking at locks from outside: which are held, for how much longer, with which fence, and
//! releasing one by force. For operators and tools (the `leasehold` CLI); applications take
//! and release locks through [`Locker::lock`](crate::Locker::lock) and never need these.

use std::time::Duration;

/// What the store holds for one lock. Owner tokens are never shown.
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
