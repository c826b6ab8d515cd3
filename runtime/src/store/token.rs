//! Owner tokens: 128 random bits from the operating system, fresh for every acquisition, so
//! that only the acquisition that set a lock can renew, hand over or delete it.

use std::fmt;

/// The secret that proves ownership of one acquisition. Its `Debug` output is redacted, so
/// it cannot leak through logs, traces or error messages.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct OwnerToken([u8; 32]);

impl OwnerToken {
    /// A fresh token: 16 bytes from the OS random source, as 32 lowercase hex digits.
    ///
    /// # Panics
    /// If the operating system's random source fails, which on supported platforms means the
    /// process cannot safely continue anyway.
    pub(crate) fn generate() -> Self {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).expect("the OS random source failed");
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, b) in raw.iter().enumerate() {
            out[2 * i] = HEX[(b >> 4) as usize];
            out[2 * i + 1] = HEX[(b & 0xf) as usize];
        }
        OwnerToken(out)
    }

    /// The token as it is stored in Redis.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A locker's name in the store's queue of waiting processes: 64 random bits as 16 hex digits
/// (not a secret: it grants nothing but a place in line).
pub(crate) fn contender_name() -> String {
    let token = OwnerToken::generate();
    String::from_utf8_lossy(&token.as_bytes()[..16]).into_owned()
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnerToken(<redacted>)")
    }
}

/// A random name for a waiter's place in a semaphore's queue.
pub(crate) fn waiter_name() -> u128 {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).expect("the OS random source failed");
    u128::from_le_bytes(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex_and_redacted() {
        let a = OwnerToken::generate();
        let b = OwnerToken::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_bytes().len(), 32);
        assert!(a.as_bytes().iter().all(|c| c.is_ascii_hexdigit()));
        let shown = format!("{a:?}");
        assert!(!shown.contains(std::str::from_utf8(a.as_bytes()).unwrap()));
    }
}
