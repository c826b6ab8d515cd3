//! How lock keys and owner tokens are stored: as bytes (`VARBINARY`), exactly as given, so
//! that no collation folds case or trims spaces, and NUL needs no escape.

use crate::error::LockError;
use crate::store::keys::unescape;
use crate::store::token::OwnerToken;

/// Checks a locker's prefix for this engine: every prefix is stored apart, byte for byte.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), LockError> {
    let _ = prefix;
    Ok(())
}

/// A stored key as the routines take it: its bytes (`leasehold::mysql::check_fence` sends it).
#[allow(dead_code)]
pub(crate) fn key_text(text: &str) -> &[u8] {
    text.as_bytes()
}

/// The lock key of a stored row, if it is a lock of `prefix`: the user's key.
pub(crate) fn user_key_of(stored: &[u8], lock_prefix: &str) -> Option<String> {
    let stored = std::str::from_utf8(stored).ok()?;
    let escaped = stored.strip_prefix(lock_prefix)?.strip_suffix('}')?;
    unescape(escaped)
}

/// An owner token as stored: printable ASCII, the public part then 32 lowercase hex digits.
pub(crate) fn token_text(token: &OwnerToken) -> &str {
    std::str::from_utf8(token.as_bytes()).unwrap_or_default()
}

/// Bytes as lowercase hex digits (how a renewal batch carries keys and owners in JSON).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// The public part of a stored owner: what is before the secret of a token that has one
/// (`h1.` ...), else ''. Never the secret.
pub(crate) fn public_of(owner: &[u8]) -> &str {
    let owner = std::str::from_utf8(owner).unwrap_or_default();
    match owner.starts_with("h1.") && owner.len() > 32 {
        true => &owner[..owner.len() - 32],
        false => "",
    }
}
