//! Unit tests of the ZooKeeper engine's pure parts: znode names, queue order, and the fence
//! a reader takes from the container's record.

use zookeeper_client as zk;

use super::driver::reader_fence;
use super::names::{in_order, lock_key_of, parent_of};
use crate::store::keys::LockKeys;
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

#[test]
fn readers_take_the_last_earlier_writers_fence_or_a_floor_between_writers() {
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
    // The last writer before the reader (its znode and the record share a zxid).
    let record = Some((b"+3".to_vec(), stat(5, 40)));
    assert_eq!(reader_fence(record, 50), 40 * FENCE_SLOTS + 3);
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
