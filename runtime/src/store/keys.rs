//! How a user's lock key becomes Redis keys: `P:lock:{K}`, `P:fence:{K}`, the queue of waiting
//! processes `P:queue:{K}` and `P:interest:{K}`, and the channel `P:wake:{K}`, with `K` escaped
//! so that every key of one lock shares one cluster slot.

use crate::error::LockError;

/// The longest user key accepted, in bytes (before escaping). Longer keys are
/// [`LockError::InvalidKey`]: a lock key names a resource, it is not a place for payloads.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest prefix accepted, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// The Redis names that belong to one lock, shared: a lease, a queued request and a batch
/// item each keep the names of their lock, and a clone is a reference count, not seven strings
/// (an uncontended acquire and release cloned them twice: 12 of its allocations). The names
/// themselves are one buffer ([`KeyNames`]): one allocation per lock, not six.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LockKeys(std::sync::Arc<KeyNames>);

impl std::ops::Deref for LockKeys {
    type Target = KeyNames;

    fn deref(&self) -> &KeyNames {
        &self.0
    }
}

/// The names themselves (see [`LockKeys`]), one after the other in one buffer: a held lock
/// keeps one allocation for them, not seven.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeyNames {
    text: Box<str>,
    /// Where each name ends in `text`, in the order of [`Name`].
    ends: [u16; NAMES],
}

/// The names of one lock, in their order in [`KeyNames`].
#[derive(Clone, Copy)]
enum Name {
    Lock,
    Fence,
    Wake,
    Queue,
    Interest,
    Readers,
    Limit,
}

const NAMES: usize = 7;

impl KeyNames {
    /// Lays out the names `{prefix}:{kind}:{{{escaped}}}` for the kinds given in the order of
    /// [`Name`] (an empty kind: a name this lock does not use, left empty). The longest prefix
    /// and key make about 23 KB of names, well below `u16::MAX`.
    fn new(prefix: &str, escaped: &str, kinds: [&str; NAMES]) -> Self {
        let used = kinds.iter().filter(|k| !k.is_empty()).count();
        let mut text = String::with_capacity(
            used * (prefix.len() + escaped.len() + 4)
                + kinds.iter().map(|k| k.len()).sum::<usize>(),
        );
        let mut ends = [0u16; NAMES];
        for (end, kind) in ends.iter_mut().zip(kinds) {
            if !kind.is_empty() {
                for part in [prefix, ":", kind, ":{", escaped, "}"] {
                    text.push_str(part);
                }
            }
            *end = u16::try_from(text.len()).expect("key names fit in 64 KB");
        }
        KeyNames {
            text: text.into_boxed_str(),
            ends,
        }
    }

    fn name(&self, which: Name) -> &str {
        let i = which as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[usize::from(start)..usize::from(self.ends[i])]
    }

    /// `P:lock:{K}`: holds the owner token, expires with the lease.
    pub(crate) fn lock(&self) -> &str {
        self.name(Name::Lock)
    }

    /// `P`: the prefix these names were made with.
    pub(crate) fn prefix(&self) -> &str {
        // `P:kind:{K}`: the first `{` follows the kind (a prefix has none), and a kind has no
        // colon.
        let lock = self.lock();
        let head = lock.find('{').map_or(lock, |at| &lock[..at]);
        let head = head.strip_suffix(':').unwrap_or(head);
        head.rfind(':').map_or(head, |at| &head[..at])
    }

    /// `P:fence:{K}`: the last fencing token handed out.
    pub(crate) fn fence(&self) -> &str {
        self.name(Name::Fence)
    }

    /// `P:wake:{K}`: the channel a release publishes on.
    pub(crate) fn wake(&self) -> &str {
        self.name(Name::Wake)
    }

    /// `P:queue:{K}`: the processes waiting for the lock, by arrival.
    pub(crate) fn queue(&self) -> &str {
        self.name(Name::Queue)
    }

    /// `P:interest:{K}`: until when each waiting process still waits.
    pub(crate) fn interest(&self) -> &str {
        self.name(Name::Interest)
    }

    /// `P:readers:{K}`: the read holders of the lock, each with the end of its lease.
    pub(crate) fn readers(&self) -> &str {
        self.name(Name::Readers)
    }

    /// A semaphore's agreed number of permits, `P:semlimit:{K}` (see [`LockKeys::semaphore`]);
    /// empty for a lock.
    pub(crate) fn limit(&self) -> &str {
        self.name(Name::Limit)
    }
}

/// The segment that elections add to their locker's prefix: the election `N` under the
/// prefix `P` is the lock `N` of the prefix `P:leader` (`P:leader:lock:{N}`, its fence
/// counter, wake channel, queue) with its record `P:leader:record:{N}` ([`LockKeys::election`],
/// [`leader_record`]). So no user prefix may end in `:leader` ([`validate_prefix`]): its locks
/// would be the elections of the shorter prefix.
pub(crate) const ELECTIONS: &str = "leader";

/// Checks a prefix: non-empty, at most [`MAX_PREFIX_LEN`] bytes, without `{` or `}` (a brace
/// in the prefix would move the cluster hash tag away from the key), and not ending in
/// `:leader` (the elections' part of the shorter prefix, see [`ELECTIONS`]).
///
/// Every name of every primitive is then `{prefix}:{kind}:{{escaped}}` with a prefix that has
/// no brace, a kind that has no colon and an escaped name that has no brace, so the name
/// tells all three back (the first `{` ends the kind, the last colon before it starts it): two
/// primitives share a name only if they share prefix, kind and name, and the kinds of
/// locks, semaphores, elections and lockers' descriptions differ, or their prefixes do (an
/// election's is its locker's with `:leader` added, which no locker's prefix is). Engines
/// that store the names in other forms keep them apart their own way (ZooKeeper's paths,
/// PostgreSQL's text, see their `names` and `text` modules).
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), LockError> {
    if prefix.is_empty() {
        return Err(LockError::config(
            "the lock prefix is empty; use a short name such as \"leasehold\" or your service's name",
        ));
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(LockError::config(format!(
            "the lock prefix is {} bytes long; the limit is {MAX_PREFIX_LEN}",
            prefix.len()
        )));
    }
    if prefix.contains(['{', '}']) {
        return Err(LockError::config(
            "the lock prefix contains `{` or `}`; braces would break the Redis Cluster hash tag \
             that keeps all keys of one lock in one slot, so remove them",
        ));
    }
    if let Some(base) = prefix
        .strip_suffix(ELECTIONS)
        .and_then(|head| head.strip_suffix(':'))
        .filter(|base| !base.is_empty())
    {
        return Err(LockError::config(format!(
            "the lock prefix ends in `:{ELECTIONS}`, where the leader elections of the prefix \
             {base:?} are stored: its locks would be those elections (the lock \"jobs\" would \
             be the election \"jobs\", with one fence counter), so use another, e.g. {:?}",
            format!("{prefix}s")
        )));
    }
    Ok(())
}

/// Checks a user key: non-empty and at most [`MAX_KEY_LEN`] bytes. Any other byte is fine,
/// including braces, colons and NUL: [`LockKeys::new`] escapes what needs it.
pub(crate) fn validate_key(key: &str) -> Result<(), LockError> {
    if key.is_empty() {
        return Err(LockError::invalid_key(
            "the key is empty; name the resource you lock, e.g. \"order:42\"",
        ));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(LockError::invalid_key(format!(
            "the key is {} bytes long; the limit is {MAX_KEY_LEN} bytes (lock a short id of the \
             resource, or a hash of it)",
            key.len()
        )));
    }
    Ok(())
}

/// Escapes `%`, `{` and `}` as `%25`, `%7B`, `%7D`. The mapping is injective, and the result
/// has no braces, so `{escaped}` is exactly the cluster hash tag.
pub(crate) fn escape(key: &str) -> std::borrow::Cow<'_, str> {
    if !key.contains(['%', '{', '}']) {
        return std::borrow::Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(key.len() + 8);
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Reverses [`escape`]; `None` when the text is not a valid escape of any key.
pub(crate) fn unescape(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(i) = rest.find(['%', '{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let decoded = match tail.get(..3) {
            Some("%25") => '%',
            Some("%7B") => '{',
            Some("%7D") => '}',
            _ => return None,
        };
        out.push(decoded);
        rest = &tail[3..];
    }
    out.push_str(rest);
    Some(out)
}

impl LockKeys {
    /// The Redis names of the lock `key` under `prefix`. Both must have been validated.
    pub(crate) fn new(prefix: &str, key: &str) -> Self {
        let k = escape(key);
        LockKeys::from(KeyNames::new(
            prefix,
            &k,
            ["lock", "fence", "wake", "queue", "interest", "readers", ""],
        ))
    }

    /// The Redis names of the semaphore `key` under `prefix` (both validated): `lock` is
    /// `P:sem:{K}`, its permit holders (each permit an owner token with the end of its
    /// lease), `limit` is `P:semlimit:{K}`, the number of permits its holders agreed on,
    /// `fence` is `P:semfence:{K}`, the counter its holders' fencing tokens come from (by the
    /// writers' rule, fence.lua), and `wake` is `P:semwake:{K}`, where releases are
    /// published. `queue` (`P:semqueue:{K}`) and `interest` (`P:seminterest:{K}`) are its
    /// waiters for several permits, by arrival and by how long each still waits (see
    /// `Store::acquire` of permits). The fixed segments differ from a lock's, so a semaphore and
    /// a lock of the same name are independent, and no key can name another one's data. The
    /// reader name is not used (left empty).
    pub(crate) fn semaphore(prefix: &str, key: &str) -> Self {
        let k = escape(key);
        LockKeys::from(KeyNames::new(
            prefix,
            &k,
            [
                "sem",
                "semfence",
                "semwake",
                "semqueue",
                "seminterest",
                "",
                "semlimit",
            ],
        ))
    }
}

impl LockKeys {
    /// The names of the election `name` under `prefix` (both validated): the lock `name` of
    /// the prefix `P:leader` ([`ELECTIONS`]), `P:leader:lock:{N}`, `P:leader:fence:{N}` and
    /// the rest, which no locker's prefix can name ([`validate_prefix`]).
    pub(crate) fn election(prefix: &str, name: &str) -> Self {
        LockKeys::new(&format!("{prefix}:{ELECTIONS}"), name)
    }
}

/// Where the leader of the election `name` under `prefix` is recorded (Redis, PostgreSQL):
/// `P:leader:record:{N}`, beside the election's lock ([`LockKeys::election`]); no kind of any
/// other primitive is `record`.
pub(crate) fn leader_record(prefix: &str, name: &str) -> String {
    format!("{prefix}:{ELECTIONS}:record:{{{}}}", escape(name))
}

impl From<KeyNames> for LockKeys {
    fn from(names: KeyNames) -> Self {
        LockKeys(std::sync::Arc::new(names))
    }
}

/// The Redis Cluster hash tag of a key: the text between the first `{` and the next `}`, if
/// non-empty; otherwise the whole key. (Redis Cluster specification, "hash tags".)
pub(crate) fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(close) = key[open + 1..].find('}') {
            if close > 0 {
                return &key[open + 1..open + 1 + close];
            }
        }
    }
    key
}

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag, modulo 16384.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn slot(key: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in hash_tag(key).as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slots_match_the_cluster_specification() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        let k = LockKeys::new("p", "order:42");
        assert_eq!(slot(k.lock()), slot(k.fence()));
    }

    #[test]
    fn layout_is_as_documented() {
        let k = LockKeys::new("shop", "order:42");
        assert_eq!(k.lock(), "shop:lock:{order:42}");
        assert_eq!(k.fence(), "shop:fence:{order:42}");
        assert_eq!(k.wake(), "shop:wake:{order:42}");
        assert_eq!(k.queue(), "shop:queue:{order:42}");
        assert_eq!(k.interest(), "shop:interest:{order:42}");
        assert_eq!(k.readers(), "shop:readers:{order:42}");
        assert_eq!(k.limit(), "", "a lock has no permit limit");
        let s = LockKeys::semaphore("shop", "partner-api");
        assert_eq!(s.lock(), "shop:sem:{partner-api}");
        assert_eq!(s.limit(), "shop:semlimit:{partner-api}");
        assert_eq!(s.wake(), "shop:semwake:{partner-api}");
        assert_eq!(s.fence(), "shop:semfence:{partner-api}");
        assert_eq!(s.queue(), "shop:semqueue:{partner-api}");
        assert_eq!(s.interest(), "shop:seminterest:{partner-api}");
        assert_eq!(s.readers(), "", "a semaphore has no readers");
        // The longest prefix and key fit.
        let long = LockKeys::new(&"p".repeat(MAX_PREFIX_LEN), &"{".repeat(MAX_KEY_LEN));
        assert_eq!(long.limit(), "");
        assert!(long
            .readers()
            .ends_with(&format!("{}}}", "%7B".repeat(MAX_KEY_LEN))));
    }

    #[test]
    fn the_prefix_comes_back_from_the_names() {
        for prefix in ["leasehold", "a:b", "shop:lock:x", "p"] {
            for key in ["k", "{odd}", "a:lock:{b}", "x:sem:y"] {
                assert_eq!(
                    LockKeys::new(prefix, key).prefix(),
                    prefix,
                    "{prefix} {key}"
                );
                assert_eq!(LockKeys::semaphore(prefix, key).prefix(), prefix);
            }
        }
    }

    #[test]
    fn semaphore_names_never_meet_lock_names() {
        // A semaphore and a lock of one name are independent; names that imitate internal
        // keys stay inside their braces.
        let lock = LockKeys::new("p", "x");
        let sem = LockKeys::semaphore("p", "x");
        assert_ne!(lock.lock(), sem.lock());
        assert_ne!(lock.wake(), sem.wake());
        let imitation = LockKeys::semaphore("p", "y}:semlimit:{x");
        assert_ne!(imitation.lock(), sem.limit());
        assert_eq!(hash_tag(sem.lock()), hash_tag(sem.limit()));
        assert_eq!(hash_tag(sem.lock()), hash_tag(sem.wake()));
        assert_eq!(hash_tag(sem.lock()), hash_tag(sem.fence()));
        assert_ne!(lock.fence(), sem.fence());
    }

    #[test]
    fn hostile_keys_are_escaped_not_interpreted() {
        let k = LockKeys::new("p", "}x{y}");
        assert_eq!(k.lock(), "p:lock:{%7Dx%7By%7D}");
        assert_eq!(hash_tag(k.lock()), hash_tag(k.fence()));
        // A key that imitates an internal key stays inside its own braces.
        let imitation = LockKeys::new("p", "x}:fence:{y");
        assert_ne!(imitation.lock(), LockKeys::new("p", "y").fence());
    }

    #[test]
    fn bad_keys_and_prefixes_are_errors() {
        assert!(validate_key("").unwrap_err().to_string().contains("empty"));
        assert!(validate_key(&"x".repeat(MAX_KEY_LEN)).is_ok());
        let long = validate_key(&"x".repeat(MAX_KEY_LEN + 1)).unwrap_err();
        assert!(long.to_string().contains("limit"));
        assert!(!long.to_string().contains("xxxx"), "never echo the key");
        assert!(validate_key("nul\0byte").is_ok());
        assert!(validate_prefix("").is_err());
        assert!(validate_prefix("a{b").is_err());
        assert!(validate_prefix("a}b").is_err());
        assert!(validate_prefix("svc:locks").is_ok());
        // Where the elections of `svc` live (issue 46).
        let election = validate_prefix("svc:leader").unwrap_err();
        assert!(election.to_string().contains("elections"), "{election}");
        assert!(validate_prefix("svc:leaders").is_ok());
    }

    fn prefix_strategy() -> impl Strategy<Value = String> {
        "[a-z:._-]{1,12}"
    }

    proptest! {
        #[test]
        fn all_keys_of_a_lock_share_a_slot(prefix in prefix_strategy(), key in any::<String>()) {
            prop_assume!(validate_key(&key).is_ok());
            let k = LockKeys::new(&prefix, &key);
            let tag = hash_tag(k.lock());
            prop_assert_eq!(tag, hash_tag(k.fence()));
            prop_assert_eq!(tag, hash_tag(k.wake()));
            prop_assert_eq!(tag, hash_tag(k.queue()));
            prop_assert_eq!(tag, hash_tag(k.interest()));
            let escaped = escape(&key);
            prop_assert_eq!(tag, escaped.as_ref());
            let s = LockKeys::semaphore(&prefix, &key);
            prop_assert_eq!(tag, hash_tag(s.lock()));
            prop_assert_eq!(tag, hash_tag(s.limit()));
            prop_assert_eq!(tag, hash_tag(s.wake()));
            prop_assert_eq!(tag, hash_tag(s.fence()));
            prop_assert_eq!(tag, hash_tag(s.queue()));
            prop_assert_eq!(tag, hash_tag(s.interest()));
        }

        #[test]
        fn distinct_keys_never_share_an_internal_key(
            prefix in prefix_strategy(), a in any::<String>(), b in any::<String>()
        ) {
            prop_assume!(validate_key(&a).is_ok() && validate_key(&b).is_ok() && a != b);
            let ka = LockKeys::new(&prefix, &a);
            let kb = LockKeys::new(&prefix, &b);
            let names_a = [ka.lock(), ka.fence(), ka.wake(), ka.queue(), ka.interest()];
            for name in [kb.lock(), kb.fence(), kb.wake(), kb.queue(), kb.interest()] {
                prop_assert!(!names_a.contains(&name));
            }
        }

        #[test]
        fn escape_round_trips(key in any::<String>()) {
            prop_assert_eq!(unescape(&escape(&key)), Some(key.clone()));
        }

        #[test]
        fn validation_never_panics(key in any::<String>(), prefix in any::<String>()) {
            let _ = validate_key(&key);
            let _ = validate_prefix(&prefix);
        }
    }
}
