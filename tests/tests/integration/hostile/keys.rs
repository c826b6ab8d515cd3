//! Hostile keys and prefixes against a real `redis-server`, through the public API only:
//! braces, strings that imitate internal keys, NUL bytes, 1 MB keys, empty ones. Property
//! test: bad input is an error, never a panic (that no two primitives share a name, under any
//! prefixes, is `names`).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker, MAX_KEY_LEN, MAX_PREFIX_LEN};
use leasehold_tests::harness::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// CRC16/XMODEM, the checksum of Redis Cluster's key slots.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of a key, hash tags included (Redis Cluster specification).
pub(super) fn slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % 16384
}

#[test]
fn slot_matches_the_specification_examples() {
    // From the Redis Cluster specification and `CLUSTER KEYSLOT`.
    assert_eq!(crc16(b"123456789"), 0x31C3);
    assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
    assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
    assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
    assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
}

pub(super) async fn locker(srv: &RedisServer, prefix: &str) -> Locker {
    Locker::builder()
        .url(srv.url())
        .prefix(prefix)
        .op_timeout(Duration::from_secs(2))
        .default_wait(Duration::ZERO)
        .build()
        .await
        .expect("connect")
}

/// Every key under `prefix:`, as raw bytes.
async fn names(srv: &RedisServer, prefix: &str) -> BTreeSet<Vec<u8>> {
    let mut conn = srv.conn().await;
    let mut out = BTreeSet::new();
    let mut cursor = 0u64;
    // MATCH treats `*?[\` specially; the tests' prefixes avoid them.
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .expect("SCAN");
        out.extend(batch);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// The names of one lock that Redis holds while it is taken: its lock key and fence key, and
/// the channel its release publishes on (caught with PSUBSCRIBE; a release publishes when a
/// contender tried while the lock was held).
async fn names_of_one_lock(
    srv: &RedisServer,
    locker: &Locker,
    prefix: &str,
    key: &str,
) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let before = names(srv, prefix).await;
    // A blocking subscriber on a thread of its own catches the channel the release uses.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let client = srv.client();
    let pattern = format!("{prefix}:wake:*");
    let listener = tokio::task::spawn_blocking(move || -> Vec<u8> {
        let mut conn = client.get_connection().expect("connect");
        let mut pubsub = conn.as_pubsub();
        pubsub.psubscribe(&pattern).expect("PSUBSCRIBE");
        pubsub
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        ready_tx.send(()).unwrap();
        let message = pubsub.get_message().expect("the release published");
        message.get_channel_name().as_bytes().to_vec()
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("subscribed");
    let guard = locker
        .lock(key)
        .try_acquire()
        .await
        .expect("a hostile key is still a key")
        .expect("free");
    let during = names(srv, prefix).await;
    // A contender that tried makes the release publish a wake-up (only then does it).
    let contender = self::locker(srv, prefix).await;
    assert!(contender.lock(key).try_acquire().await.unwrap().is_none());
    guard.release().await.expect("release");
    let channel = listener.await.expect("listener");
    let new: Vec<Vec<u8>> = during.difference(&before).cloned().collect();
    let lock = new
        .iter()
        .find(|n| n.starts_with(format!("{prefix}:lock:").as_bytes()))
        .cloned()
        .unwrap_or_else(|| panic!("no lock key for {key:?}: {new:?}"));
    let fence = during
        .iter()
        .find(|n| {
            n.starts_with(format!("{prefix}:fence:").as_bytes())
                && n[prefix.len() + 7..] == lock[prefix.len() + 6..]
        })
        .cloned()
        .unwrap_or_else(|| panic!("no fence key for {key:?}: {during:?}"));
    (lock, fence, channel)
}

const HOSTILE: &[&str] = &[
    "x:fence",
    "lock:{y}",
    "{y}",
    "y",
    "{",
    "}",
    "{}",
    "}{",
    "{{}}",
    "%",
    "%7B",
    "%7D",
    "%25",
    "a}:lock:{b",
    "b",
    "leasehold:lock:{x}",
    "x",
    "h:lock:{x}",
    "h:fence:{x}",
    ":",
    "::",
    "x\0y",
    "\0",
    " ",
    "\n",
    "\r\n",
    "é",
    "🔒",
    "*",
    "?",
    "[a]",
    "\\",
    "\u{feff}",
];

#[tokio::test]
async fn hostile_keys_each_get_their_own_lock_in_one_slot() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv, "h").await;
    let longest = "k".repeat(MAX_KEY_LEN);
    let mut owner: HashMap<Vec<u8>, &str> = HashMap::new();
    for &key in HOSTILE.iter().chain([longest.as_str()].iter()) {
        let (lock, fence, wake) = names_of_one_lock(&srv, &locker, "h", key).await;
        assert_eq!(slot(&lock), slot(&fence), "{key:?}");
        assert_eq!(slot(&lock), slot(&wake), "{key:?}");
        for name in [lock, fence, wake] {
            if let Some(other) = owner.insert(name.clone(), key) {
                panic!(
                    "{key:?} and {other:?} share {:?}",
                    String::from_utf8_lossy(&name)
                );
            }
        }
    }
    // All of them at once: each is a lock of its own.
    let mut guards = Vec::new();
    for &key in HOSTILE {
        guards.push(
            locker
                .lock(key)
                .try_acquire()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{key:?} collided with another hostile key")),
        );
    }
    let locks = names(&srv, "h:lock").await;
    assert_eq!(locks.len(), HOSTILE.len());
    for g in guards {
        g.release().await.unwrap();
    }
    assert!(
        names(&srv, "h:lock").await.is_empty(),
        "nothing left behind"
    );
}

#[tokio::test]
async fn bad_keys_are_errors_without_a_round_trip_and_never_echoed() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv, "h").await;
    let megabyte = "m".repeat(1 << 20);
    let just_over = "o".repeat(MAX_KEY_LEN + 1);
    let before = srv.info_stat("total_commands_processed").await;
    for key in ["", megabyte.as_str(), just_over.as_str()] {
        for err in [
            locker.lock(key).acquire().await.unwrap_err(),
            locker.lock(key).try_acquire().await.unwrap_err(),
        ] {
            assert!(matches!(err, LockError::InvalidKey { .. }), "{err:?}");
            let shown = format!("{err} {err:?}");
            assert!(
                shown.len() < 500,
                "the message stays short: {}",
                shown.len()
            );
            if !key.is_empty() {
                assert!(!shown.contains(&key[..64]), "the key is never echoed");
            }
        }
    }
    // INFO itself counts once.
    assert_eq!(
        srv.info_stat("total_commands_processed").await - before,
        1,
        "bad keys never reach Redis"
    );
}

/// Non-UTF-8 bytes cannot be a key: keys are `String`s, so bytes have to be made text first,
/// and a lossy conversion makes different byte strings one lock (safe, never the reverse).
#[tokio::test]
async fn bytes_become_keys_only_through_text() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv, "h").await;
    let a = String::from_utf8_lossy(&[0xff, 0xfe, b'x']).into_owned();
    let b = String::from_utf8_lossy(&[0xc0, 0xc1, b'x']).into_owned();
    assert_eq!(a, b, "lossy conversion merges them");
    let held = locker.lock(a).try_acquire().await.unwrap().unwrap();
    assert!(
        locker.lock(b).try_acquire().await.unwrap().is_none(),
        "merged keys are one lock, never two locks for one resource"
    );
    held.release().await.unwrap();
}

#[distributed_lock(key = "tenant:<tenant>:<id>", lease = "1s", wait = "0s", locker = locker)]
async fn by_template(locker: &Locker, tenant: &str, id: &str) -> Result<u64, LockError> {
    let _ = (tenant, id);
    Ok(0)
}

#[tokio::test]
async fn the_attribute_passes_hostile_values_as_plain_keys() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv, "h").await;
    // Values that imitate the template's own syntax or another lock's names.
    for (tenant, id) in [
        ("<id>", "1"),
        ("{x}", "}"),
        ("a:lock:{b}", "c"),
        ("\0", "\u{202e}"),
    ] {
        by_template(&locker, tenant, id).await.unwrap();
    }
    // Empty placeholders are fine: the key is not empty. An oversized value is an error.
    by_template(&locker, "", "").await.unwrap();
    let huge = "z".repeat(MAX_KEY_LEN);
    let err = by_template(&locker, &huge, "1").await.unwrap_err();
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err:?}");
    assert!(names(&srv, "h:lock").await.is_empty());
}

#[tokio::test]
async fn bad_prefixes_are_config_errors() {
    let srv = RedisServer::start().await;
    let long = "p".repeat(MAX_PREFIX_LEN + 1);
    // `svc:leader` is where the elections of `svc` live (issue 46).
    for prefix in [
        "",
        "a{b",
        "}",
        "{x}",
        long.as_str(),
        "svc:leader",
        "a::leader",
    ] {
        let err = Locker::builder()
            .url(srv.url())
            .prefix(prefix)
            .build()
            .await
            .unwrap_err();
        assert!(
            matches!(err, LockError::Config { .. }),
            "{prefix:?}: {err:?}"
        );
    }
    // Prefixes that imitate internal names are fine, and stay apart (see the property test).
    for prefix in [
        "x:lock",
        "x:fence:",
        "%7B",
        "h:lock:",
        "🔒",
        "leader",
        "svc:leaders",
        "svc:leader:",
    ] {
        let l = locker(&srv, prefix).await;
        l.lock("k")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// `PROPTEST_CASES` if set (`scripts/reliability` raises it), else `default`.
pub(super) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Keys made mostly of the characters that matter: braces, `%`, `:`, NUL, multi-byte.
pub(super) fn hostile_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[{}%:a-c\\x00 é🔒*]{1,16}",
        any::<String>().prop_filter("non-empty", |k| !k.is_empty()),
        prop::sample::select(HOSTILE).prop_map(str::to_owned),
    ]
}

#[test]
fn property_any_key_or_prefix_is_a_lock_or_an_error_never_a_panic() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let srv = rt.block_on(RedisServer::start());
    let locker = rt.block_on(locker(&srv, "q"));
    let mut runner = TestRunner::new(Config {
        cases: cases(128),
        ..Config::default()
    });
    let key = prop_oneof![
        any::<String>(),
        ".{1000,1100}",
        Just(String::new()),
        hostile_key()
    ];
    let prefix = prop_oneof![4 => any::<String>(), 1 => "[a-c:]{1,3}:leader(s)?"];
    runner
        .run(&(key, prefix), |(key, prefix)| {
            rt.block_on(async {
                let valid = !key.is_empty() && key.len() <= MAX_KEY_LEN;
                match locker.lock(key.as_str()).try_acquire().await {
                    Ok(Some(guard)) => {
                        prop_assert!(valid);
                        guard.release().await.unwrap();
                    }
                    Ok(None) => prop_assert!(false, "nobody else holds {key:?}"),
                    Err(LockError::InvalidKey { .. }) => prop_assert!(!valid),
                    Err(e) => prop_assert!(false, "{e}"),
                }
                let valid_prefix = !prefix.is_empty()
                    && prefix.len() <= MAX_PREFIX_LEN
                    && !prefix.contains(['{', '}'])
                    && prefix.strip_suffix(":leader").is_none_or(str::is_empty);
                let built = Locker::builder()
                    .url(srv.url())
                    .prefix(prefix.as_str())
                    .build()
                    .await;
                match built {
                    Ok(_) => prop_assert!(valid_prefix),
                    Err(LockError::Config { .. }) => prop_assert!(!valid_prefix),
                    Err(e) => prop_assert!(false, "{e}"),
                }
                Ok(())
            })
        })
        .unwrap();
}
