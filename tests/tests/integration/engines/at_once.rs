//! `lock_all` of free keys on etcd and ZooKeeper (issue 51 item 4): every contender of one
//! call, locks and readers' shares alike, is created by one write, as the store shows (one
//! create revision on etcd, one `czxid` on ZooKeeper); a batch that finds a key taken leaves
//! nothing; and a batch whose answer is lost, or that reaches the server only after its caller
//! gave up, leaves nothing behind once its tokens are given back, so the keys are free for
//! another locker.

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, EtcdServer, Held, TcpProxy, ZkServer};
use zookeeper_client as zk;

use super::zookeeper_creates::observer;

const SEATS: [&str; 3] = ["seat1", "seat2", "seat3"];
const VENUE: &str = "venue";
const OP_TIMEOUT: Duration = Duration::from_millis(1500);

/// The lock key of a user key under the default prefix.
fn lock_key(key: &str) -> String {
    format!("leasehold:lock:{{{key}}}")
}

/// The keys every check of a batch looks at: the seats it writes and the venue it reads.
fn batch_keys() -> Vec<&'static str> {
    SEATS.iter().copied().chain([VENUE]).collect()
}

// --- etcd -----------------------------------------------------------------------------------

/// A locker on etcd whose lease (60 s) far outlasts every test: what a test sees cleaned up
/// was deleted by the locker, not expired with its lease.
async fn etcd_locker(endpoint: String) -> Locker {
    Locker::builder()
        .etcd([endpoint])
        .session_timeout(Duration::from_secs(60))
        .op_timeout(OP_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("locker on etcd")
}

/// Every contender key of `keys`' locks now, with its create revision.
async fn etcd_contenders(raw: &mut etcd_client::Client, keys: &[&str]) -> Vec<(String, i64)> {
    let mut seen = Vec::new();
    for key in keys {
        let options = etcd_client::GetOptions::new().with_prefix();
        let got = raw
            .get(format!("{}/", lock_key(key)), Some(options))
            .await
            .expect("read the queue");
        for kv in got.kvs() {
            seen.push((kv.key_str().unwrap().to_owned(), kv.create_revision()));
        }
    }
    seen
}

async fn etcd_revision(raw: &mut etcd_client::Client) -> i64 {
    let got = raw
        .get("leasehold:", None)
        .await
        .expect("read the revision");
    got.header().expect("a header").revision()
}

/// Store-observed: the three seats and the venue's share of one `lock_all` are four keys with
/// one create revision, so one transaction put them all, and one revision deletes them all
/// when the guard is given back. Taken one by one (before issue 51's
/// item 4 was done on etcd), each key had a revision of its own. The fences stay above an
/// earlier holder's, the leases are real (a reader shares the venue, a writer is kept out),
/// and a batch that finds a seat taken puts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lock_all_puts_every_contender_in_one_transaction() {
    let etcd = EtcdServer::start().await;
    let a = etcd_locker(etcd.endpoint()).await;
    let b = etcd_locker(etcd.endpoint()).await;
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("raw client");
    let earlier = a.lock(SEATS[0]).acquire().await.unwrap();
    let earlier_fence = earlier.fence();
    earlier.release().await.unwrap();
    let venue_writer = b.write_lock(VENUE).acquire().await.unwrap();
    let venue_fence = venue_writer.fence();
    venue_writer.release().await.unwrap();

    let all = a
        .lock_all(SEATS)
        .read_keys([VENUE])
        .acquire()
        .await
        .unwrap();
    let seen = etcd_contenders(&mut raw, &batch_keys()).await;
    assert_eq!(seen.len(), 4, "one contender per key: {seen:?}");
    let revisions: BTreeSet<i64> = seen.iter().map(|(_, r)| *r).collect();
    assert_eq!(
        revisions.len(),
        1,
        "every contender of one lock_all is put by one transaction: {seen:?}"
    );
    let fence = all.fence(SEATS[0]).expect("a seat's fence");
    assert!(fence > earlier_fence, "{fence} after {earlier_fence}");
    let read_fence = all.fence(VENUE).expect("the venue's fence");
    assert!(
        read_fence >= venue_fence,
        "a reader's fence {read_fence} is at or above the last writer's {venue_fence}"
    );
    let share = b.read_lock(VENUE).try_acquire().await.unwrap();
    assert!(share.is_some(), "the venue's share is a reader's");
    drop(share);
    assert!(b.write_lock(VENUE).try_acquire().await.unwrap().is_none());
    assert!(b.lock(SEATS[1]).try_acquire().await.unwrap().is_none());
    // The guard's keys go back in one transaction: one revision for the four deletes (each
    // delete by itself is a revision of its own). First, b's keys are gone (its share's
    // release, and its tries' contenders deleted), so nothing else writes meanwhile.
    eventually("only a's contenders left", Duration::from_secs(10), || {
        let mut raw = raw.clone();
        async move { etcd_contenders(&mut raw, &batch_keys()).await.len() == 4 }
    })
    .await;
    let before = etcd_revision(&mut raw).await;
    all.release().await.unwrap();
    let after = etcd_revision(&mut raw).await;
    assert!(etcd_contenders(&mut raw, &batch_keys()).await.is_empty());
    assert_eq!(
        after - before,
        1,
        "one transaction deleted the guard's four contenders"
    );

    // A seat taken elsewhere: the transaction puts nothing (only the holder's key is there),
    // and the call, told not to wait, takes nothing.
    let held = b.lock(SEATS[2]).acquire().await.unwrap();
    let revision = etcd_revision(&mut raw).await;
    let none = a.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    assert!(none.unwrap().is_none());
    let seen = etcd_contenders(&mut raw, &batch_keys()).await;
    assert_eq!(seen.len(), 1, "the holder's key alone: {seen:?}");
    assert!(
        seen[0].1 <= revision,
        "nothing of the batch was put: {seen:?}"
    );
    held.release().await.unwrap();
}

/// etcd refuses a transaction of more than 128 operations in a branch (`--max-txn-ops`'s
/// default): 63 keys (two operations each, and one read) still go in one transaction, 64 are
/// taken key by key, and both calls hold every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lock_all_of_more_keys_than_one_transaction_takes_them_key_by_key() {
    let etcd = EtcdServer::start().await;
    let a = etcd_locker(etcd.endpoint()).await;
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("raw client");
    for (n, transactions) in [(63, 1), (64, 64)] {
        let keys: Vec<String> = (0..n).map(|i| format!("many{n}:{i:02}")).collect();
        let all = a.lock_all(keys.clone()).acquire().await.unwrap();
        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
        let seen = etcd_contenders(&mut raw, &names).await;
        assert_eq!(seen.len(), n, "one contender per key");
        let revisions: BTreeSet<i64> = seen.iter().map(|(_, r)| *r).collect();
        assert_eq!(revisions.len(), transactions, "{n} keys");
        all.release().await.unwrap();
    }
}

/// The batch is applied, its answer never comes (the proxy holds the replies of the locker's
/// connection past the op timeout, then cuts it): the call fails, and the give-back of each
/// token deletes the key its tag names. Nothing of the batch is left, long before the lease
/// (60 s) could have taken it. Then the same batch lands again, late (a write held up at
/// another member, say): the give-back's repeat and the sweep of the lease delete it too,
/// and another locker takes every key at once.
///
/// The late landing is written by the test, with the keys and the lease the batch put (read
/// while its answer was held): a gRPC call whose bytes are held reaches etcd together with
/// its client's cancel, and etcd drops it, so no proxy can deliver the batch itself late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_batch_whose_answer_is_lost_or_that_lands_late_leaves_nothing() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let a = etcd_locker(format!("http://{}", proxy.addr())).await;
    let b = etcd_locker(etcd.endpoint()).await;
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("raw client");
    a.lock("warm")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    let before = etcd_revision(&mut raw).await;
    // The transaction names the first seat's range; nothing of a's sent it before.
    proxy.hold_next_sending(format!("{}/", lock_key(SEATS[0])).as_bytes(), Held::Replies);
    let lost = a.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    assert!(
        matches!(lost, Err(LockError::Unavailable { .. })),
        "{lost:?}"
    );
    assert_eq!(proxy.caught(), 1, "the batch's connection was held");
    // What the batch put, from etcd's history (the give-back's deletes are under way).
    let applied = etcd_batch_since(&mut raw, before).await;
    assert_eq!(applied.len(), 4, "the batch was applied: {applied:?}");
    proxy.cut_held();
    let deleted = || {
        let endpoint = etcd.endpoint();
        async move {
            let mut raw = etcd_client::Client::connect([endpoint], None)
                .await
                .unwrap();
            etcd_contenders(&mut raw, &batch_keys()).await.is_empty()
        }
    };
    eventually(
        "every key of the lost batch is deleted",
        Duration::from_secs(15),
        deleted,
    )
    .await;

    // The batch lands again, late: its keys, on a's lease, in one transaction.
    let puts: Vec<_> = applied
        .iter()
        .map(|(key, lease)| {
            let on_lease = etcd_client::PutOptions::new().with_lease(*lease);
            etcd_client::TxnOp::put(key.clone(), "a batch that landed late", Some(on_lease))
        })
        .collect();
    raw.txn(etcd_client::Txn::new().and_then(puts))
        .await
        .expect("the late landing");
    eventually(
        "every key of the late batch is deleted",
        Duration::from_secs(15),
        deleted,
    )
    .await;
    let taken = b.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    taken
        .unwrap()
        .expect("every key is free for another locker")
        .release()
        .await
        .unwrap();
}

/// The contender keys of a batch that stood together, put by one transaction, at some
/// revision after `since` (etcd keeps its history until it is compacted), with the lease
/// each was attached to; empty when there was none.
async fn etcd_batch_since(raw: &mut etcd_client::Client, since: i64) -> Vec<(String, i64)> {
    let now = etcd_revision(raw).await;
    for revision in since + 1..=now {
        let mut seen = Vec::new();
        for key in batch_keys() {
            let options = etcd_client::GetOptions::new()
                .with_prefix()
                .with_revision(revision);
            let got = raw
                .get(format!("{}/", lock_key(key)), Some(options))
                .await
                .expect("read the history");
            for kv in got.kvs() {
                let kv = (
                    kv.key_str().unwrap().to_owned(),
                    kv.lease(),
                    kv.create_revision(),
                );
                seen.push(kv);
            }
        }
        let revisions: BTreeSet<i64> = seen.iter().map(|(_, _, r)| *r).collect();
        if seen.len() == 4 && revisions.len() == 1 {
            return seen.into_iter().map(|(k, l, _)| (k, l)).collect();
        }
    }
    Vec::new()
}

// --- ZooKeeper ------------------------------------------------------------------------------

/// A locker on ZooKeeper whose session (10 s) outlasts the hold of every test: its client does
/// not give up the held connection, and what a test sees cleaned up was deleted by the
/// locker, not ended with its session.
async fn zk_locker(hosts: &str) -> Locker {
    Locker::builder()
        .zookeeper(hosts)
        .session_timeout(Duration::from_secs(10))
        .op_timeout(OP_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .default_wait(Duration::from_secs(10))
        .build()
        .await
        .expect("locker on zookeeper")
}

/// The ZooKeeper container of a user key's lock (under the default prefix).
pub(super) fn container(key: &str) -> String {
    format!("/leasehold/{}", lock_key(key))
}

/// Every contender znode of `keys`' locks now, with its `czxid`.
async fn zk_contenders(raw: &zk::Client, keys: &[&str]) -> Vec<(String, i64)> {
    let mut seen = Vec::new();
    for key in keys {
        let parent = container(key);
        let children = match raw.list_children(&parent).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => continue,
            Err(e) => panic!("list {parent}: {e}"),
        };
        for child in children {
            let path = format!("{parent}/{child}");
            if let Ok((_, stat)) = raw.get_data(&path).await {
                seen.push((path, stat.czxid));
            }
        }
    }
    seen
}

/// The containers of every key of a batch, made persistent by the test: the server reaps an
/// empty container (every 500 ms under the harness), and a batch that finds one missing is
/// refused and sent again; the tests that hold the batch's connection need the first one to be
/// the batch that creates.
async fn zk_containers(raw: &zk::Client) {
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for path in
        std::iter::once("/leasehold".to_owned()).chain(batch_keys().into_iter().map(container))
    {
        match raw.create(&path, &[], &persistent).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => panic!("create {path}: {e}"),
        }
    }
}

/// The sum of the child versions of every container of a batch: each create and each delete
/// of a child adds one.
async fn zk_child_changes(raw: &zk::Client) -> i64 {
    let mut sum = 0;
    for key in batch_keys() {
        let (_, stat) = raw.get_data(&container(key)).await.expect("a container");
        sum += i64::from(stat.cversion);
    }
    sum
}

/// Store-observed: the three seats and the venue's share of one `lock_all` are four znodes
/// with one `czxid`, so one `multi` created them all, and their containers' children change
/// last at one zxid once the guard is given back, so one `multi` deleted them. Taken one by one (before issue 51's item
/// 4 was done on ZooKeeper), each had a zxid of its own. Fences stay above an earlier
/// holder's, the leases are real, and a batch that finds a seat taken leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_lock_all_creates_every_contender_in_one_multi() {
    let server = ZkServer::start().await;
    let raw = observer(&server).await;
    // Kept while empty, so that the release's changes can be read on them afterwards.
    zk_containers(&raw).await;
    let a = zk_locker(&server.connect_string()).await;
    let b = zk_locker(&server.connect_string()).await;
    let earlier = a.lock(SEATS[0]).acquire().await.unwrap();
    let earlier_fence = earlier.fence();
    earlier.release().await.unwrap();
    let venue_writer = b.write_lock(VENUE).acquire().await.unwrap();
    let venue_fence = venue_writer.fence();
    venue_writer.release().await.unwrap();

    let all = a
        .lock_all(SEATS)
        .read_keys([VENUE])
        .acquire()
        .await
        .unwrap();
    let seen = zk_contenders(&raw, &batch_keys()).await;
    assert_eq!(seen.len(), 4, "one contender per key: {seen:?}");
    let zxids: BTreeSet<i64> = seen.iter().map(|(_, z)| *z).collect();
    assert_eq!(
        zxids.len(),
        1,
        "every contender of one lock_all is created by one multi: {seen:?}"
    );
    let fence = all.fence(SEATS[0]).expect("a seat's fence");
    assert!(fence > earlier_fence, "{fence} after {earlier_fence}");
    let read_fence = all.fence(VENUE).expect("the venue's fence");
    assert!(
        read_fence >= venue_fence,
        "a reader's fence {read_fence} is at or above the last writer's {venue_fence}"
    );
    let share = b.read_lock(VENUE).try_acquire().await.unwrap();
    assert!(share.is_some(), "the venue's share is a reader's");
    drop(share);
    assert!(b.write_lock(VENUE).try_acquire().await.unwrap().is_none());
    assert!(b.lock(SEATS[1]).try_acquire().await.unwrap().is_none());
    // The guard's keys go back in one `multi`: the four containers' children last changed at
    // one zxid (each delete by itself has a zxid of its own). First, b's znodes are gone (its
    // share's release, and its tries' contenders deleted), so nothing else changes them.
    eventually(
        "only a's contenders left",
        Duration::from_secs(10),
        || async { zk_contenders(&raw, &batch_keys()).await.len() == 4 },
    )
    .await;
    all.release().await.unwrap();
    assert!(zk_contenders(&raw, &batch_keys()).await.is_empty());
    let mut changed = BTreeSet::new();
    for key in batch_keys() {
        let (_, stat) = raw.get_data(&container(key)).await.expect("a container");
        changed.insert(stat.pzxid);
    }
    assert_eq!(
        changed.len(),
        1,
        "one multi deleted the guard's four contenders: {changed:?}"
    );

    // A seat taken elsewhere: the batch's znodes are created and deleted again; only the
    // holder's is left.
    let held = b.lock(SEATS[2]).acquire().await.unwrap();
    let none = a.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    assert!(none.unwrap().is_none());
    let seen = zk_contenders(&raw, &batch_keys()).await;
    assert_eq!(seen.len(), 1, "the holder's znode alone: {seen:?}");
    held.release().await.unwrap();
}

/// The batch is applied, its answer never comes (the proxy holds the replies of the locker's
/// session connection past the op timeout, then cuts it; the client reconnects within the
/// session): the call fails, and the give-back of each token deletes the znodes its tag
/// names. Nothing of the batch is left while the session lives, and another locker takes
/// every key at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_batch_whose_answer_is_lost_leaves_nothing() {
    let server = ZkServer::start().await;
    let proxy = TcpProxy::start(server.addr()).await;
    let a = zk_locker(&proxy.addr().to_string()).await;
    let b = zk_locker(&server.connect_string()).await;
    let raw = observer(&server).await;
    zk_containers(&raw).await;
    a.lock("warm")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let before = zk_child_changes(&raw).await;

    proxy.hold_next_sending(container(SEATS[0]).as_bytes(), Held::Replies);
    let lost = a.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    assert!(
        matches!(lost, Err(LockError::Unavailable { .. })),
        "{lost:?}"
    );
    assert_eq!(proxy.caught(), 1, "the batch's connection was held");
    let applied = zk_contenders(&raw, &batch_keys()).await;
    assert_eq!(applied.len(), 4, "the batch was applied: {applied:?}");
    proxy.cut_held();
    eventually(
        "every znode of the lost batch is deleted",
        Duration::from_secs(8),
        || async { zk_contenders(&raw, &batch_keys()).await.is_empty() },
    )
    .await;
    assert!(
        zk_child_changes(&raw).await >= before + 8,
        "four znodes created and deleted"
    );
    let taken = b.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    taken
        .unwrap()
        .expect("every key is free for another locker")
        .release()
        .await
        .unwrap();
}

/// The batch reaches ZooKeeper only after its caller gave up (the proxy holds the session's
/// requests past the op timeout, then delivers them): ZooKeeper answers one session's
/// requests in order, so the give-back's listing, sent behind it, sees its znodes and deletes
/// them. Nothing is left, and another locker takes every key at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_batch_that_lands_late_leaves_nothing() {
    let server = ZkServer::start().await;
    let proxy = TcpProxy::start(server.addr()).await;
    let a = zk_locker(&proxy.addr().to_string()).await;
    let b = zk_locker(&server.connect_string()).await;
    let raw = observer(&server).await;
    zk_containers(&raw).await;
    a.lock("warm")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let before = zk_child_changes(&raw).await;

    proxy.hold_next_sending(container(SEATS[0]).as_bytes(), Held::Requests);
    let late = a.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    assert!(
        matches!(late, Err(LockError::Unavailable { .. })),
        "{late:?}"
    );
    assert_eq!(proxy.caught(), 1, "the batch's connection was held");
    assert_eq!(
        zk_child_changes(&raw).await,
        before,
        "held: nothing of the batch reached the server yet"
    );
    // The batch lands now, after the call failed and its tokens were given back.
    proxy.release_held();
    eventually(
        "the late batch landed and every znode of it is deleted",
        Duration::from_secs(8),
        || async {
            zk_child_changes(&raw).await >= before + 8
                && zk_contenders(&raw, &batch_keys()).await.is_empty()
        },
    )
    .await;
    let taken = b.lock_all(SEATS).read_keys([VENUE]).try_acquire().await;
    taken
        .unwrap()
        .expect("every key is free for another locker")
        .release()
        .await
        .unwrap();
}
