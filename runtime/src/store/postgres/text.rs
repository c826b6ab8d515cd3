//! How lock keys and owner tokens are written as PostgreSQL `text`, and read back.

use crate::error::LockError;
use crate::store::keys::unescape;
use crate::store::token::OwnerToken;

/// Checks a locker's prefix for this engine: no NUL. [`db_text`] writes NUL as `%00`, which a
/// key's escaped part never holds but a prefix may: the prefixes `a\0b` and `a%00b` would name
/// the same rows, each one's locks the other's.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), LockError> {
    if prefix.contains('\0') {
        return Err(LockError::config(
            "the lock prefix contains a NUL byte, which PostgreSQL text cannot hold: stored as \
             `%00`, its locks would be those of the prefix spelled with `%00`; remove it",
        ));
    }
    Ok(())
}

/// Text as PostgreSQL stores it: `text` cannot hold NUL, which lock keys may contain. Every
/// `%` of a stored key already starts an escape (`%25`, `%7B`, `%7D`), so `%00` is free; a
/// prefix has no NUL ([`check_prefix`]), so a `%00` of its own is never read as one.
pub(crate) fn db_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        text.replace('\0', "%00").into()
    } else {
        text.into()
    }
}

/// The user's key back from a stored lock key's escaped part.
fn from_db(escaped: &str) -> Option<String> {
    unescape(&escaped.replace("%00", "\0"))
}

/// The lock key of a stored row, if it is a lock of `prefix`: the user's key.
pub(super) fn user_key_of(stored: &str, lock_prefix: &str) -> Option<String> {
    let escaped = stored.strip_prefix(lock_prefix)?.strip_suffix('}')?;
    from_db(escaped)
}

pub(super) fn token_text(token: &OwnerToken) -> &str {
    // Printable ASCII: the public part, then 32 lowercase hex digits.
    std::str::from_utf8(token.as_bytes()).unwrap_or_default()
}
