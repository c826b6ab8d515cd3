//! Unit tests of the ZooKeeper engine's pure parts: znode names, queue order, the fence a
//! reader takes from the container's record, and the connect string taken apart.

use zookeeper_client as zk;

use super::driver::reader_fence;
use super::ensemble::{AuthScheme, Ensemble};
use super::names::{in_order, lock_key_of, parent_of, role_of, sequence};
use crate::store::keys::LockKeys;
use crate::store::sequenced::Role;
use crate::store::sequenced::FENCE_SLOTS;

#[test]
fn lock_names_round_trip_and_stay_one_segment() {
    for key in [
        "order:42",
        "a/b",
        "..",
        ".",
        "%41",
        "ünï/cødé",
        "x\ny",
        "{tag}",
    ] {
        let keys = LockKeys::new("leasehold", key);
        let parent = parent_of(&keys);
        let name = parent.strip_prefix("/leasehold/").unwrap();
        assert!(!name.contains('/') && name != "." && name != "..", "{name}");
        assert_eq!(lock_key_of(name).as_deref(), Some(keys.lock()));
    }
}

#[test]
fn queue_order_is_by_sequence_not_by_name() {
    let q = in_order(vec![
        "n-aa-0000000010".into(),
        "n-ff-0000000002".into(),
        "stray".into(),
        "n-00-0000000009".into(),
    ]);
    assert_eq!(q, ["n-ff-0000000002", "n-00-0000000009", "n-aa-0000000010"]);
    let q = in_order(vec![
        "r-aa-0000000007".into(),
        "n-ff-0000000003".into(),
        "r-00-0000000001".into(),
    ]);
    assert_eq!(q, ["r-00-0000000001", "n-ff-0000000003", "r-aa-0000000007"]);
}

/// A sequence suffix as ZooKeeper writes it: `String.format("%010d", cversion)`, the sign
/// counted in the width.
fn suffix(cversion: i32) -> String {
    if cversion < 0 {
        format!("-{:09}", cversion.unsigned_abs())
    } else {
        format!("{cversion:010}")
    }
}

#[test]
fn sequence_numbers_parse_on_both_sides_of_the_wrap() {
    assert_eq!(suffix(7), "0000000007");
    assert_eq!(suffix(-7), "-000000007");
    assert_eq!(suffix(i32::MIN), "-2147483648");
    for n in [
        0,
        1,
        42,
        i32::MAX - 1,
        i32::MAX,
        i32::MIN,
        i32::MIN + 1,
        -2,
        -1,
    ] {
        for name in [
            format!("n-00c0ffee00c0ffee-{}", suffix(n)),
            format!("r-00c0ffee00c0ffee-{}", suffix(n)),
            format!("p-00c0ffee00c0ffee-3-2-{}", suffix(n)),
        ] {
            assert_eq!(sequence(&name), Some(n), "{name}");
        }
        // A permits name still tells its limit and count past the wrap.
        let permits = format!("p-00c0ffee00c0ffee-3-2-{}", suffix(n));
        assert_eq!(role_of(&permits), Role::Permits { limit: 3, count: 2 });
    }
    assert_eq!(sequence("stray"), None);
    assert_eq!(sequence("n-00c0ffee00c0ffee-"), None);
}

/// Issue 45, risk: the queue order broke after 2^31 changes of one container. The contenders
/// created after the wrap (negative numbers) come after those created before it, and the order
/// holds the same way at the wrap back to 0 after 2^32 changes; far from either wrap it is the
/// plain order.
#[test]
fn queue_order_holds_across_the_wrap_of_the_sequence_numbers() {
    let names = |seqs: &[i32]| -> Vec<String> {
        seqs.iter()
            .enumerate()
            .map(|(i, &n)| {
                let kind = ["n-", "r-", "p-"][i % 3];
                let mid = if kind == "p-" { "-2-1" } else { "" };
                format!("{kind}{i:016x}{mid}-{}", suffix(n))
            })
            .collect()
    };
    for created in [
        // Far from a wrap, and across 0 from below (the wrap back, after 2^32 changes).
        vec![5, 9, 1_000_000],
        vec![-3, -2, -1, 0, 1, 2],
        // Across the wrap to negative numbers.
        vec![i32::MAX - 2, i32::MAX, i32::MIN, i32::MIN + 5],
        vec![i32::MAX, i32::MIN],
        vec![i32::MIN, i32::MIN + 1],
        // Contenders that span much of the range, as long as less than half of it.
        vec![i32::MAX - 1_000_000_000, i32::MAX, i32::MIN + 1_000_000_000],
        vec![7],
    ] {
        let in_creation = names(&created);
        let mut shuffled = in_creation.clone();
        shuffled.reverse();
        shuffled.rotate_left(1);
        shuffled.push("stray".into());
        assert_eq!(in_order(shuffled), in_creation, "{created:?}");
    }
    assert!(in_order(Vec::new()).is_empty());
}

#[test]
fn readers_take_the_top_of_the_last_earlier_writers_slots_or_a_floor_between_writers() {
    let stat = |czxid, mzxid| zk::Stat {
        czxid,
        mzxid,
        pzxid: mzxid,
        ctime: 0,
        mtime: 0,
        version: 1,
        cversion: 1,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: 2,
        num_children: 1,
    };
    // The last writer before the reader (its znode and the record share a zxid): the top of
    // its slots, whatever its creating attempt reserved. It queued with one fence (`+1`) and
    // was granted by a later attempt that reserved three for its process's waiters (issue
    // 46: the reader got `40 × 32 + 1`, below the fences +2 and +3 handed over before it).
    let record = Some((b"+1".to_vec(), stat(5, 40)));
    assert_eq!(reader_fence(record, 50), 40 * FENCE_SLOTS + 31);
    assert!(reader_fence(Some((b"+1".to_vec(), stat(5, 40))), 50) >= 40 * FENCE_SLOTS + 3);
    assert!(reader_fence(Some((b"+1".to_vec(), stat(5, 40))), 50) < 41 * FENCE_SLOTS);
    // A writer that came after the reader overwrote it: the reader's own floor.
    let record = Some((b"+1".to_vec(), stat(5, 60)));
    assert_eq!(reader_fence(record, 50), 50 * FENCE_SLOTS);
    // No writer since the container was made: the container's floor.
    assert_eq!(
        reader_fence(Some((Vec::new(), stat(5, 5))), 50),
        5 * FENCE_SLOTS
    );
    assert_eq!(reader_fence(None, 0), 1);
}

#[test]
fn a_plain_connect_string_is_the_servers_as_they_are() {
    let e = Ensemble::parse(" zk1:2181,zk2:2181/app ").unwrap();
    assert_eq!(e.servers, "zk1:2181,zk2:2181/app");
    assert_eq!(e.shown, "zk1:2181,zk2:2181/app");
    assert!(e.credentials.is_none() && e.tls.is_none());
    assert!(!e.authenticated());
}

#[test]
fn credentials_come_before_the_servers_and_never_show() {
    let e = Ensemble::parse("alice:s%40cr%3At@zk1:2181,zk2:2181").unwrap();
    let c = e.credentials.as_ref().unwrap();
    assert_eq!((c.user.as_str(), c.password.as_str()), ("alice", "s@cr:t"));
    assert_eq!(c.scheme, AuthScheme::Digest);
    assert_eq!(e.servers, "zk1:2181,zk2:2181");
    assert!(e.authenticated());
    let shown = format!("{e:?} {}", e.shown);
    assert!(
        !shown.contains("s@cr") && !shown.contains("alice"),
        "{shown}"
    );
    // A raw `@` in the password: the last `@` ends the credentials.
    let e = Ensemble::parse("alice:p@ss@zk1:2181?auth=sasl").unwrap();
    let c = e.credentials.as_ref().unwrap();
    assert_eq!((c.password.as_str(), c.scheme), ("p@ss", AuthScheme::Sasl));
}

#[test]
fn bad_connect_strings_say_what_is_wrong_without_the_password() {
    for (given, said) in [
        ("", "needs its servers"),
        ("zookeeper://zk1:2181", "no scheme"),
        ("zk1:2181,,zk2:2181", "needs its servers"),
        ("alice:s3cret@", "needs its servers"),
        (
            "alice:s3cret@zk1:2181?tsl",
            "\"tsl\" is no zookeeper option",
        ),
        ("alice:s3cret@zk1:2181?auth=kerberos", "auth=digest"),
        ("zk1:2181?auth=sasl", "needs credentials"),
        ("s3cret@zk1:2181", "user:password@"),
        (":s3cret@zk1:2181", "user name"),
        ("alice:s3cret%zz@zk1:2181", "%XX"),
        ("zk1:2181?cert=/c.pem", "both cert"),
        ("zk1:2181?tls=false&ca=/ca.pem", "need TLS"),
        ("zk1:2181?tls=maybe", "tls=true"),
        ("zk1:2181?ca=", "needs a file"),
    ] {
        let e = Ensemble::parse(given)
            .err()
            .unwrap_or_else(|| panic!("{given:?} passed"));
        assert!(e.contains(said), "{given:?}: {e}");
        assert!(!e.contains("s3cret"), "{given:?}: {e}");
    }
}

#[test]
fn tls_is_asked_for_or_implied_by_its_files() {
    let parsed = Ensemble::parse("zk1:2281?ca=/etc/zk/ca%26.pem&cert=/c.pem&key=/c.key");
    if !cfg!(feature = "tls") {
        assert!(parsed.err().unwrap().contains("`tls` feature"));
        return;
    }
    let e = parsed.unwrap();
    let tls = e.tls.as_ref().unwrap();
    assert_eq!(
        tls.ca.as_deref(),
        Some(std::path::Path::new("/etc/zk/ca&.pem"))
    );
    assert!(tls.identity.is_some());
    assert_eq!(e.servers, "zk1:2281");
    assert_eq!(e.shown, "zk1:2281 (TLS)");
    let e = Ensemble::parse("zk1:2281?tls").unwrap();
    assert!(e.tls.as_ref().is_some_and(|t| t.ca.is_none()));
    assert!(Ensemble::parse("zk1:2281?tls=false").unwrap().tls.is_none());
}
