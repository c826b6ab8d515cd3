//! What etcd's keys are called: one lock's range of contenders, a writer's and a reader's
//! key in it, and the reads that find its first ones by create revision.

use etcd_client as etcd;

use crate::store::keys::LockKeys;
use crate::store::sequenced::tag;
use crate::store::token::OwnerToken;

/// The range of one lock's contenders: `P:lock:{K}/`. The escaped key has no braces, so no
/// other lock's range starts with this one.
pub(super) fn range_of(keys: &LockKeys) -> String {
    format!("{}/", keys.lock())
}

/// The key of one writer's attempt: its tag names it (see [`tag`]).
pub(super) fn key_of(keys: &LockKeys, token: &OwnerToken) -> String {
    format!("{}{}", range_of(keys), tag(token))
}

/// The name prefix of readers' keys in a lock's range: `~` sorts after every hex digit.
pub(super) const READER: &str = "~r-";

/// The key of one reader's attempt.
pub(super) fn reader_key_of(keys: &LockKeys, token: &OwnerToken) -> String {
    format!("{}{READER}{}", range_of(keys), tag(token))
}

/// The end (exclusive) of the writers' keys of a lock's range: readers' keys start here.
pub(super) fn writers_end(keys: &LockKeys) -> String {
    format!("{}~", range_of(keys))
}

/// The first writer's key of a lock by create revision.
pub(super) fn first_writer(keys: &LockKeys) -> etcd::GetOptions {
    etcd::GetOptions::new()
        .with_range(writers_end(keys))
        .with_keys_only()
        .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Ascend)
        .with_limit(1)
}

/// The first key of a range by create revision.
pub(super) fn first_by_creation() -> etcd::GetOptions {
    etcd::GetOptions::new()
        .with_prefix()
        .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Ascend)
        .with_limit(1)
}

/// Whether a key of a lock's range is a reader's (`P:lock:{K}/~r-<tag>`).
pub(super) fn is_reader_key(key: &[u8]) -> bool {
    std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.rsplit_once('/'))
        .is_some_and(|(_, tag)| tag.starts_with(READER))
}

/// The lock key of one contender's key (`P:lock:{K}/<tag>`), if it is one.
pub(super) fn lock_of(key: &str) -> Option<&str> {
    let (lock, tag) = key.rsplit_once('/')?;
    (lock.ends_with('}') && !tag.is_empty()).then_some(lock)
}
