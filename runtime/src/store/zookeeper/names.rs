//! What ZooKeeper's znodes are called: the lock's container, its contenders' children,
//! and the order of a queue read from their names.

use crate::store::keys::LockKeys;
use crate::store::sequenced::{Creation, Role};

/// The parent of every lock znode.
pub(super) const ROOT: &str = "/leasehold";

/// The name prefix of writers' znodes: `n-<tag>-<sequence>`, the tag being the attempt's
/// ([`tag`](crate::store::sequenced::tag)), so that an attempt cancelled before its answer
/// arrived can still find and delete its znode.
pub(super) const CHILD: &str = "n-";

/// The name prefix of readers' znodes: `r-<tag>-<sequence>`, in the same queue.
pub(super) const READER: &str = "r-";

/// The name prefix of semaphore permits' znodes: `p-<tag>-<limit>-<count>-<sequence>`, so that
/// a listing of the queue tells every contender's permits and limit without reading them.
pub(super) const PERMITS: &str = "p-";

/// The lock's container znode: the lock key with every byte that ZooKeeper paths do not take
/// as they are percent-encoded (so the name is one path segment, and never `.` or `..`).
pub(super) fn parent_of(keys: &LockKeys) -> String {
    node_of(keys.lock())
}

/// The path a contender's znode is created at: its name, and a permits contender's limit and
/// count after it (the server appends the sequence number).
pub(super) fn path_of<V>(one: &Creation<V>) -> String {
    match one.role {
        Role::Permits { limit, count } => format!("{}{limit}-{count}-", one.name),
        _ => one.name.clone(),
    }
}

/// The znode under [`ROOT`] for a store name (a lock key, a locker's description): every byte
/// that ZooKeeper paths do not take as they are percent-encoded.
pub(super) fn node_of(stored: &str) -> String {
    let mut name = String::with_capacity(stored.len() + 8);
    for b in stored.bytes() {
        if b.is_ascii_alphanumeric() || b"-_:{}".contains(&b) {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{ROOT}/{name}")
}

/// The lock key of a container znode's name (the inverse of [`parent_of`]).
pub(super) fn lock_key_of(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The sequence number the server appended to a child's name: the container's `cversion`
/// (its count of child creations and deletions) formatted as `%010d`, a signed 32-bit number.
/// After 2^31 changes of one container it goes negative and the name ends in `--2147483648`
/// (the `-` of our name, then the sign), and counts up from there. `None` for a name that
/// does not end in one.
pub(super) fn sequence(child: &str) -> Option<i32> {
    let digits = child.len() - child.bytes().rev().take_while(u8::is_ascii_digit).count();
    let magnitude: i64 = child
        .get(digits..)
        .filter(|d| !d.is_empty())?
        .parse()
        .ok()?;
    let signed = if child[..digits].ends_with("--") {
        -magnitude
    } else {
        magnitude
    };
    i32::try_from(signed).ok()
}

/// Where the order of a queue's sequence numbers starts, read as serial numbers (RFC 1982)
/// on the circle of 2^32: at the one just after the widest gap between two of them. A
/// container's live contenders span far less than 2^31 of its changes (one would have to stay
/// in the queue while 2^31 others came and went), so that gap is the only one wider than
/// 2^31, and the order is the order of creation, across the wrap to negative numbers and the
/// wrap back (after 2^32 changes) alike.
fn serial_start(sequences: &mut [u32]) -> u32 {
    sequences.sort_unstable();
    let (Some(&first), Some(&last)) = (sequences.first(), sequences.last()) else {
        return 0;
    };
    // The gap from the last back round to the first.
    let (mut start, mut widest) = (first, (1u64 << 32) - u64::from(last - first));
    for pair in sequences.windows(2) {
        let gap = u64::from(pair[1] - pair[0]);
        if gap > widest {
            (start, widest) = (pair[1], gap);
        }
    }
    start
}

pub(super) fn child_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What a child of a queue contends for, from its name. A permits name that does not parse
/// (nothing of ours makes one) counts as a writer: as holding the whole limit.
pub(super) fn role_of(child: &str) -> Role {
    let permits = child.strip_prefix(PERMITS).and_then(|rest| {
        let mut parts = rest.split('-').skip(1);
        let limit = parts.next()?.parse().ok()?;
        let count = parts.next()?.parse().ok()?;
        Some(Role::Permits { limit, count })
    });
    match permits {
        Some(role) => role,
        None if child.starts_with(READER) => Role::Reader,
        None => Role::Writer,
    }
}

/// Children in queue order, writers', readers' and permits' alike: by the sequence number the
/// server appended, in serial-number order (see [`serial_start`]), so that the order holds
/// after the container's 2^31st change, when the numbers go negative. A name without a
/// sequence number (nothing of ours makes one) comes last.
pub(super) fn in_order(mut children: Vec<String>) -> Vec<String> {
    children.retain(|c| c.starts_with(CHILD) || c.starts_with(READER) || c.starts_with(PERMITS));
    let mut sequences: Vec<u32> = children
        .iter()
        .filter_map(|c| sequence(c))
        .map(|n| n as u32)
        .collect();
    let start = serial_start(&mut sequences);
    children.sort_by_cached_key(|c| match sequence(c) {
        Some(n) => (false, (n as u32).wrapping_sub(start)),
        None => (true, 0),
    });
    children
}

/// Every stored name of every primitive is its own on ZooKeeper (issue 46): the property of
/// `store::apart` over this engine's names.
#[cfg(test)]
mod apart {
    use proptest::prelude::*;

    use super::{node_of, parent_of, ROOT};
    use crate::store::apart::{check_apart, owners, Clash, Owner};
    use crate::store::identity::session_key;

    /// ZooKeeper's names of an owner: a primitive's container znode (its contenders are its
    /// children, an election's leader record the data of its holder's), a locker's session
    /// znode. Fences are creation orders, with no name of their own.
    fn zookeeper_names(owner: &Owner) -> Vec<String> {
        match owner {
            Owner::Locker {
                prefix, session, ..
            } => vec![node_of(&session_key(prefix, *session))],
            _ => vec![parent_of(&owner.keys().expect("a primitive"))],
        }
    }

    proptest! {
        #[test]
        fn zookeeper_names_are_apart(owners in owners()) {
            for owner in &owners {
                for name in zookeeper_names(owner) {
                    let segment = name.strip_prefix(&format!("{ROOT}/"));
                    prop_assert!(
                        segment.is_some_and(|s| !s.contains('/') && s != "." && s != ".."),
                        "{name:?} is not one znode under the root"
                    );
                }
            }
            check_apart(&owners, zookeeper_names, Clash::Equal, Owner::accepted)?;
        }
    }
}
