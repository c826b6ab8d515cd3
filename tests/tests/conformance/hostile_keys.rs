//! 9. Any valid key is a lock of its own; invalid ones are refused.

use leasehold::{LockError, MAX_KEY_LEN};
use leasehold_tests::conformance::Engine;

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
