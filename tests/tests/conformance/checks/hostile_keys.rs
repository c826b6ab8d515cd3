//! Conformance 9, any valid key is a lock of its own and invalid ones are refused; and 26, no
//! prefix makes a lock of an election.

use std::time::Duration;

use leasehold::{LockError, Locker, MAX_KEY_LEN};
use leasehold_tests::conformance::{Engine, EngineKind, PREFIX};

use super::support::LONG_LEASE;

/// Keys that a careless engine could confuse with each other, with its own internal names,
/// with patterns, or break on; `conf` is the suite's prefix.
const HOSTILE: &[&str] = &[
    "x",
    "{",
    "}",
    "{}",
    "}{",
    "{x}",
    "a{b}c",
    "%",
    "%7B",
    "%7D",
    "leasehold:lock:{x}",
    "leasehold:fence:x",
    "conf:lock:{x}",
    "conf:fence:{x}",
    "conf:wake:{x}",
    "conf:queue:{x}",
    ":",
    "*",
    "?",
    "[a]",
    "\\",
    "/",
    "..",
    " ",
    "\n",
    "\r\n",
    "x\0y",
    "é",
    "🔒",
    "\u{feff}",
];

/// Every [`HOSTILE`] key and the longest valid one are held at once (no two collide), each
/// excludes another locker and is free again after its release; an empty and a too-long key
/// are `InvalidKey`, without echoing the key.
pub async fn lock_and_exclude(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let longest = "k".repeat(MAX_KEY_LEN);
    let keys: Vec<&str> = HOSTILE.iter().copied().chain([longest.as_str()]).collect();
    // All held at once: each is a lock of its own, and each excludes.
    let mut guards = Vec::new();
    for &key in &keys {
        let guard = a
            .lock(key)
            .lease(LONG_LEASE)
            .try_acquire()
            .await
            .unwrap_or_else(|e| panic!("{key:?}: {e}"))
            .unwrap_or_else(|| panic!("{key:?} collided with a key locked before it"));
        let other = b.lock(key).try_acquire().await;
        assert!(
            matches!(other, Ok(None)),
            "{key:?} held, yet another locker got {other:?}"
        );
        guards.push(guard);
    }
    for (key, guard) in keys.iter().zip(guards) {
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("release of {key:?}: {e}"));
    }
    for &key in &keys {
        let guard = b
            .lock(key)
            .try_acquire()
            .await
            .unwrap_or_else(|e| panic!("{key:?}: {e}"))
            .unwrap_or_else(|| panic!("{key:?} stayed taken after its release"));
        guard.release().await.expect("release");
    }
    let just_over = "o".repeat(MAX_KEY_LEN + 1);
    for key in ["", just_over.as_str()] {
        let err = a.lock(key).try_acquire().await.expect_err("a bad key");
        assert!(matches!(err, LockError::InvalidKey { .. }), "{err:?}");
        if !key.is_empty() {
            assert!(
                !err.to_string().contains(&key[..64]),
                "the key is never echoed"
            );
        }
    }
}

/// Conformance 26 (issue 46): the election `N` of the prefix `P` was stored as the lock `N` of the prefix
/// `P:leader`, which a locker could take: while `svc` held its election `jobs`, the lock `jobs`
/// of a locker with the prefix `svc:leader` was busy, and they shared one fence counter. A
/// prefix an election's could be is refused now (`Config`), on every engine; an engine that
/// accepted one would have to keep its lock apart from the election (checked as for the
/// prefix next to it, `svc:leaders`): the lock is free while the election is held, the
/// campaign wins while the lock is held, and the store's record of the lock's fences
/// (inspection, where the engine has it) holds none of the election's terms.
///
/// Memory: every locker of another prefix has a store of its own here, where no two prefixes
/// can meet, so the refusal itself is the property (an accepted `svc:leader` fails the cell);
/// one store under several prefixes is the runtime's unit test
/// (`kernel::tests::leader::an_election_and_a_lock_of_any_prefix_stay_apart`).
pub async fn elections_and_locks_stay_apart(engine: &Engine) {
    let kind = engine.kind();
    let memory = kind == EngineKind::Memory;
    // The memory engine's one store is its one locker's, of the suite's prefix.
    let base = if memory { PREFIX } else { "svc" };
    let elections = if memory {
        engine.locker().await
    } else {
        engine.locker_with_prefix(base).await
    };
    let imitation = format!("{base}:leader");
    match locker_of_prefix(engine, &imitation).await {
        Err(e @ LockError::Config { .. }) => {
            assert!(e.to_string().contains(":leader"), "{kind}: {e}");
        }
        Ok(_) if memory => panic!(
            "{kind}: the prefix {imitation:?} was accepted, where the elections of {base:?} \
             live (lockers of other prefixes have stores of their own here: only the refusal \
             is checked)"
        ),
        Ok(locker) => apart(engine, &elections, &locker).await,
        Err(e) => panic!("{kind}: the prefix {imitation:?}: {e}"),
    }
    let next_to_it = locker_of_prefix(engine, &format!("{base}:leaders"))
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    apart(engine, &elections, &next_to_it).await;
}

/// A new locker of this engine with `prefix`, or why it was refused.
async fn locker_of_prefix(engine: &Engine, prefix: &str) -> Result<Locker, LockError> {
    let builder = engine.builder().prefix(prefix);
    if engine.kind() == EngineKind::Memory {
        builder.build_in_memory()
    } else {
        builder.build().await
    }
}

/// The election `jobs` of `elections` and the lock `jobs` of `other` do not exclude each
/// other either way, and the lock's fences are not the election's terms.
async fn apart(engine: &Engine, elections: &Locker, other: &Locker) {
    let kind = engine.kind();
    let (prefix, name) = (other.prefix(), "jobs");
    let first = elections
        .leader(name)
        .wait(Duration::ZERO)
        .lease(LONG_LEASE)
        .campaign()
        .await
        .unwrap_or_else(|e| panic!("{kind}: the first campaign: {e}"));
    let inspects = other.capabilities().inspection;
    if inspects {
        let info = other.inspect(name).await.expect("inspect");
        assert!(
            !info.held,
            "{kind}: the lock {name:?} of {prefix:?} is held while the election {name:?} of \
             {:?} is: they are one",
            elections.prefix()
        );
        assert_ne!(
            info.last_fence,
            Some(first.term()),
            "{kind}: the lock {name:?} of {prefix:?} counts its fences with the election's \
             terms"
        );
    }
    let lock = other
        .lock(name)
        .lease(LONG_LEASE)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"))
        .unwrap_or_else(|| {
            panic!(
                "{kind}: the lock {name:?} of {prefix:?} is busy while the election {name:?} \
                 of {:?} is held: they are one lock",
                elections.prefix()
            )
        });
    first.resign().await.expect("resign");
    let second = elections
        .leader(name)
        .wait(Duration::ZERO)
        .lease(LONG_LEASE)
        .campaign()
        .await
        .unwrap_or_else(|e| {
            panic!("{kind}: the campaign while the lock {name:?} of {prefix:?} is held: {e}")
        });
    if inspects {
        let info = other.inspect(name).await.expect("inspect");
        assert!(info.held, "{kind}: the lock is held");
        assert_ne!(
            info.last_fence,
            Some(second.term()),
            "{kind}: the election's new term is the lock's last fence: one counter"
        );
    }
    second.resign().await.expect("resign");
    lock.release().await.expect("release");
}
