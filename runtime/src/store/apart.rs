//! Tests: every stored name of every primitive is its own, per engine. The owners of names
//! (locks with their readers, queue, interest and fence counter; semaphores; elections with
//! their leader records; lockers' descriptions), hostile prefixes and names to make them from,
//! and the check that no two owners share a name, which each engine's folder runs over its
//! own naming (Redis and memory here; ZooKeeper, etcd and PostgreSQL beside their names).

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::keys::{leader_record, validate_key, validate_prefix, LockKeys, ELECTIONS};

/// Who stored names belong to: one primitive of a locker's prefix, or the locker itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// The lock `key` (exclusive, read-write, fair, unfenced, a singleton job, an item of
    /// `lock_all`: all of them are this lock), with its fence counter, wake channel, queue
    /// and interest of waiting processes, and its readers.
    Lock { prefix: String, key: String },
    /// The semaphore `key`: its permit holders, limit, fence counter, wake channel, queue and
    /// interest.
    Semaphore { prefix: String, key: String },
    /// The election `name`: its lock (with all the lock's names) and its leader record.
    Election { prefix: String, name: String },
    /// A locker's description, by locker id (16 hex digits) where the engine keys it so
    /// (Redis), or by session (ZooKeeper's session, etcd's lease) where it lives with one.
    Locker {
        prefix: String,
        id: String,
        session: i64,
    },
}

impl Owner {
    /// The locker's prefix the names are made under.
    pub(crate) fn prefix(&self) -> &str {
        match self {
            Owner::Lock { prefix, .. }
            | Owner::Semaphore { prefix, .. }
            | Owner::Election { prefix, .. }
            | Owner::Locker { prefix, .. } => prefix,
        }
    }

    /// The names of the shared layout that the primitive's engine calls are given
    /// ([`LockKeys`]); `None` for a locker.
    pub(crate) fn keys(&self) -> Option<LockKeys> {
        match self {
            Owner::Lock { prefix, key } => Some(LockKeys::new(prefix, key)),
            Owner::Semaphore { prefix, key } => Some(LockKeys::semaphore(prefix, key)),
            Owner::Election { prefix, name } => Some(LockKeys::election(prefix, name)),
            Owner::Locker { .. } => None,
        }
    }

    /// The election's leader record name (the store boundary's `record`).
    pub(crate) fn record(&self) -> Option<String> {
        match self {
            Owner::Election { prefix, name } => Some(leader_record(prefix, name)),
            _ => None,
        }
    }

    /// Whether the library accepts this owner (on every engine): a valid prefix, and a valid
    /// key or name. An engine may refuse more prefixes (PostgreSQL's NUL).
    pub(crate) fn accepted(&self) -> bool {
        let name_ok = match self {
            Owner::Lock { key, .. } | Owner::Semaphore { key, .. } => validate_key(key).is_ok(),
            Owner::Election { name, .. } => validate_key(name).is_ok(),
            Owner::Locker { .. } => true,
        };
        name_ok && validate_prefix(self.prefix()).is_ok()
    }
}

/// Every non-empty name of a lock's layout, in [`LockKeys`]' order.
pub(crate) fn layout(keys: &LockKeys) -> Vec<String> {
    [
        keys.lock(),
        keys.fence(),
        keys.wake(),
        keys.queue(),
        keys.interest(),
        keys.readers(),
        keys.limit(),
    ]
    .into_iter()
    .filter(|n| !n.is_empty())
    .map(str::to_owned)
    .collect()
}

/// What an owner's names clash with: another owner's equal name, or (`prefixes`) also one
/// that starts with it or that it starts with (etcd reads a lock's contenders as a range of
/// keys by their common start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clash {
    Equal,
    Prefixes,
}

/// Checks that no two distinct owners among `owners` that `accepts` (the library's rules,
/// [`Owner::accepted`], and an engine's own) share a stored name as `names` makes them.
pub(crate) fn check_apart(
    owners: &[Owner],
    names: impl Fn(&Owner) -> Vec<String>,
    clash: Clash,
    accepts: impl Fn(&Owner) -> bool,
) -> Result<(), TestCaseError> {
    let mut seen: HashMap<String, &Owner> = HashMap::new();
    for owner in owners.iter().filter(|o| accepts(o)) {
        let mine = names(owner);
        prop_assert!(!mine.is_empty(), "{owner:?} has no names");
        for name in mine {
            let other = match clash {
                Clash::Equal => seen.get(&name).copied(),
                Clash::Prefixes => seen
                    .iter()
                    .find(|(n, _)| n.starts_with(&name) || name.starts_with(n.as_str()))
                    .map(|(_, o)| *o),
            };
            if let Some(other) = other {
                prop_assert_eq!(
                    other,
                    owner,
                    "{:?} and {:?} share the stored name {:?}",
                    other,
                    owner,
                    name
                );
            }
            seen.insert(name, owner);
        }
    }
    Ok(())
}

/// Prefixes and names made to meet: a few bases, each with the suffixes that imitate the
/// internal segments of every engine (`:leader` of elections, the kinds, Redis's hash-tag
/// braces, `%` escapes and PostgreSQL's `%00` for NUL, etcd's `/` and `~r-`, ZooKeeper's
/// percent-encoding), so that a case's owners often differ only by one of them.
const BASES: &[&str] = &[
    "svc", "p:q", "%", "a%00b", "a\0b", ":", "leader", "x/y", "é",
];

const SUFFIXES: &[&str] = &[
    "",
    ":leader",
    ":leader:leader",
    ":leaders",
    ":lock",
    ":sem",
    ":record",
    ":session",
    ":locker",
    ":lock:{x}",
    "\0",
    "%00",
    "%25",
    "%7B",
    "/",
    "~",
    "{",
    "}",
];

const NAMES: &[&str] = &[
    "jobs",
    "x",
    "%",
    "%00",
    "\0",
    "{",
    "}",
    "{}",
    "x}:lock:{y",
    "x}:leader:lock:{y",
    ":leader",
    "jobs}/",
    "/",
    "~r-",
    "n-",
    "leader:lock:{jobs}",
];

fn prefix() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (prop::sample::select(BASES), prop::sample::select(SUFFIXES))
            .prop_map(|(b, s)| format!("{b}{s}")),
        1 => "[a-c:%0{}/~\\x00]{1,10}",
        1 => any::<String>(),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(NAMES).prop_map(str::to_owned),
        1 => "[a-c:%0{}/~\\x00]{1,8}",
        1 => any::<String>(),
    ]
}

/// Spellings that an engine's encoding could take for one another: NUL and PostgreSQL's `%00`,
/// `%` and its escape, `/` and ZooKeeper's `%2F`, braces and their escapes, and an election's
/// `:leader` and nothing.
const RESPELLINGS: &[(&str, &str)] = &[
    ("\0", "%00"),
    ("%00", "\0"),
    ("%", "%25"),
    ("%25", "%"),
    ("/", "%2F"),
    ("{", "%7B"),
    (":leader", ""),
    ("", ":leader"),
];

/// `text` with the first `from` of a respelling written as its `to` (`""` as `from`: `to`
/// appended).
fn respell(text: &str, (from, to): (&str, &str)) -> String {
    if from.is_empty() {
        format!("{text}{to}")
    } else {
        text.replacen(from, to, 1)
    }
}

/// One owner of one case: its kind, and its prefix and name, each the case's shared one, a
/// variant of it, or a fresh one.
fn owner(shared_prefix: String, shared_name: String) -> impl Strategy<Value = Owner> {
    let (suffixed, respelled) = (shared_prefix.clone(), shared_prefix.clone());
    let prefix = prop_oneof![
        2 => Just(shared_prefix),
        2 => prop::sample::select(SUFFIXES).prop_map(move |s| format!("{suffixed}{s}")),
        2 => prop::sample::select(RESPELLINGS).prop_map(move |r| respell(&respelled, r)),
        1 => prefix(),
    ];
    let respelled = shared_name.clone();
    let name = prop_oneof![
        3 => Just(shared_name),
        1 => prop::sample::select(RESPELLINGS).prop_map(move |r| respell(&respelled, r)),
        1 => name(),
    ];
    (0..4u8, prefix, name, "[0-9a-f]{16}", any::<i64>()).prop_map(
        |(kind, prefix, name, id, session)| match kind {
            0 => Owner::Lock { prefix, key: name },
            1 => Owner::Semaphore { prefix, key: name },
            2 => Owner::Election { prefix, name },
            _ => Owner::Locker {
                prefix,
                id,
                session,
            },
        },
    )
}

/// The owners of one case: up to 12, most of them made from one prefix and one name, so that
/// a case holds the pairs that could meet (the lock `jobs` of `svc:leader` and the election
/// `jobs` of `svc`, a prefix with NUL and one with `%00`) far more often than chance would.
pub(crate) fn owners() -> impl Strategy<Value = Vec<Owner>> {
    (prefix(), name()).prop_flat_map(|(p, n)| prop::collection::vec(owner(p, n), 2..12))
}

/// The names of `owner` as Redis stores them (one server, Sentinel, Cluster, each RedLock
/// master): its keys and channels, and a locker's description key `P:locker:{ID}`. The
/// in-memory store keys its maps (locks, fences, channels, readers, leaders, semaphores) by
/// the same names, and stores no description.
pub(crate) fn redis_names(owner: &Owner) -> Vec<String> {
    match owner {
        Owner::Locker { prefix, id, .. } => {
            vec![super::identity::description_key(prefix, id)]
        }
        _ => {
            let keys = owner.keys().expect("a primitive");
            let mut names = layout(&keys);
            names.extend(owner.record());
            names
        }
    }
}

mod tests {
    use super::*;

    /// The case (issue 46): the lock `jobs` of a locker whose prefix is `svc:leader`
    /// was the election `jobs` of the prefix `svc`, fence counter and all. Such a prefix is
    /// refused now, and the prefix next to it (`svc:leaders`) shares nothing with the
    /// election.
    #[test]
    fn an_election_is_no_lock_of_any_prefix() {
        let election = Owner::Election {
            prefix: "svc".into(),
            name: "jobs".into(),
        };
        let imitation = Owner::Lock {
            prefix: format!("svc:{ELECTIONS}"),
            key: "jobs".into(),
        };
        assert!(!imitation.accepted(), "the prefix svc:leader is refused");
        let err = validate_prefix("svc:leader").unwrap_err().to_string();
        assert!(err.contains("svc:leaders"), "{err}");
        let control = Owner::Lock {
            prefix: "svc:leaders".into(),
            key: "jobs".into(),
        };
        let names = redis_names(&election);
        assert!(names.contains(&"svc:leader:fence:{jobs}".to_owned()));
        assert!(names.contains(&"svc:leader:record:{jobs}".to_owned()));
        for name in redis_names(&control) {
            assert!(!names.contains(&name), "{name}");
        }
        check_apart(
            &[election, imitation, control],
            redis_names,
            Clash::Equal,
            Owner::accepted,
        )
        .unwrap();
        // Only a prefix that an election's could be is refused.
        for fine in [
            "leader",
            ":leader",
            "svc:leaders",
            "svc:leader:x",
            "svcleader",
        ] {
            assert!(validate_prefix(fine).is_ok(), "{fine}");
        }
        for refused in ["svc:leader", "a:b:leader", "::leader", "leader:leader"] {
            assert!(validate_prefix(refused).is_err(), "{refused}");
        }
    }

    /// The check finds a shared name, else the properties prove nothing: with every owner
    /// accepted (the prefix `svc:leader` too, as before issue 46) it fails on the case.
    #[test]
    fn the_check_finds_a_shared_name() {
        let owners = [
            Owner::Election {
                prefix: "svc".into(),
                name: "jobs".into(),
            },
            Owner::Lock {
                prefix: "svc:leader".into(),
                key: "jobs".into(),
            },
        ];
        let found = check_apart(&owners, redis_names, Clash::Equal, |_| true).unwrap_err();
        assert!(
            found.to_string().contains("svc:leader:lock:{jobs}"),
            "{found}"
        );
        let found = check_apart(&owners, redis_names, Clash::Prefixes, |_| true).unwrap_err();
        assert!(found.to_string().contains("share"), "{found}");
    }

    proptest! {
        /// Redis (every deployment) and memory: no two owners share a key or a channel.
        #[test]
        fn redis_and_memory_names_are_apart(owners in owners()) {
            check_apart(&owners, redis_names, Clash::Equal, Owner::accepted)?;
        }
    }
}
