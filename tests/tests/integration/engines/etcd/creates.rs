//! Concurrent acquires' creates sent together (issue 49): one etcd transaction carries the
//! creates of many attempts, each nested with its own comparisons, so each attempt gets its own
//! answer; and a shared create that etcd applies after its callers gave up leaves nothing.

use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{EtcdServer, TcpProxy};

use super::super::grouped_creates::{
    attempts_over_a_slow_link, cycles_alone, refused_behind_then_above, seats_at_once,
};
use super::{grpc_count, locker};

/// The transactions etcd has answered, from its `/metrics` (a create, a look and a delete are
/// each one).
async fn txns(etcd: &EtcdServer) -> u64 {
    grpc_count(etcd, "grpc_server_handled_total", "Txn").await
}

async fn warm_up(locker: &Locker) {
    let g = locker.lock("warm-up").acquire().await.unwrap();
    g.release().await.unwrap();
}

/// Sixteen tasks acquire sixteen keys at once, one of them held by another locker: the free
/// ones are granted in fewer transactions than acquires (each create would be one), the held
/// one waits in its queue without holding up the others and is granted after the release,
/// with a fence above the holder's, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_share_their_creates_each_with_its_own_answer() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let (a, b) = (locker(&at, ttl).await, locker(&at, ttl).await);
    warm_up(&a).await;
    let held = b.lock("seat:3").acquire().await.unwrap();
    let before = txns(&etcd).await;
    let creates = seats_at_once(&a, &b, held, || txns(&etcd)).await - before;
    assert!(
        creates < 15,
        "{creates} transactions for 15 free seats' creates: none were shared"
    );
}

/// Attempts whose creates, alone and shared, go over a link that takes a second each way
/// ([`attempts_over_a_slow_link`]): etcd applies them, and each attempt fails as unavailable with
/// its outcome unknown. What they made belongs to nobody: each attempt's give-back finds its
/// contender by its name (the shared call's failure fails every attempt in it, each unanswered), so
/// etcd's own listing ends with no contender of theirs. Judged by etcd's keys and revision, read
/// beside the link; rounds go on until one saw the creates land (a revision past the one before),
/// at most five, and every round must end with none left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_creates_applied_after_their_callers_gave_up_leave_nothing() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let ttl = Duration::from_secs(9);
    let a = locker(&[format!("http://{}", proxy.addr())], ttl).await;
    warm_up(&a).await;
    let mut landed = 0;
    for round in 0..5 {
        let (before, _) = listing(&etcd).await;
        attempts_over_a_slow_link(&a, &proxy).await;
        let contenders = |keys: &[String]| {
            keys.iter()
                .filter(|k| k.contains(":lock:") && k.contains("late:"))
                .count()
        };
        let mut left = usize::MAX;
        let mut revision = before;
        // Five seconds to settle: a create that lands later still counts in the next
        // round's listing, which sees every round's keys.
        for _ in 0..50 {
            let (now, keys) = listing(&etcd).await;
            (revision, left) = (now, contenders(&keys));
            // Settled: the late creates (if any) were applied and their contenders deleted.
            if left == 0 && revision > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            left, 0,
            "round {round}: contenders of attempts that gave up are left"
        );
        if revision > before {
            landed += 1;
            break;
        }
    }
    assert!(
        landed > 0,
        "in five rounds no late create landed: the premise never held"
    );
}

/// etcd's revision and every key it holds now (read through its JSON gateway).
async fn listing(etcd: &EtcdServer) -> (u64, Vec<String>) {
    // The whole key space: from "\0" to the end ("\0" as range end).
    let body = r#"{"key":"AA==","range_end":"AA==","keys_only":true}"#;
    let answer = etcd
        .http("POST", "/v3/kv/range", body)
        .await
        .expect("etcd range");
    // The gateway may answer in one HTTP chunk (its size in front): the JSON object itself.
    let object = answer
        .find('{')
        .zip(answer.rfind('}'))
        .map_or("", |(start, end)| &answer[start..=end]);
    let json: serde_json::Value = serde_json::from_str(object)
        .unwrap_or_else(|e| panic!("etcd's answer is not JSON ({e}): {answer:?}"));
    let revision = json["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .expect("a revision");
    let keys = json["kvs"]
        .as_array()
        .map(|kvs| {
            kvs.iter()
                .filter_map(|kv| kv["key"].as_str())
                .map(|k| String::from_utf8_lossy(&from_base64(k)).into_owned())
                .collect()
        })
        .unwrap_or_default();
    (revision, keys)
}

/// Standard base64 (with padding), as etcd's gateway writes keys.
fn from_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &d)| acc | u32::from(d) << (18 - 6 * i));
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((bits >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// `lock_all` of free keys (one transaction comparing that every lock is free) rides in the
/// same transactions as single acquires, nested beside them: twelve guards of two keys and
/// four single locks at once cost fewer transactions than the guards alone would (one each),
/// every key is granted; a guard with a held key, sent beside guards of free keys, holds up
/// none of them and is granted after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_alls_ride_with_single_acquires_and_stay_all_or_nothing() {
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let (a, b) = (locker(&at, ttl).await, locker(&at, ttl).await);
    warm_up(&a).await;
    let two = a.lock_all(["warm:1", "warm:2"]).acquire().await.unwrap();
    two.release().await.unwrap();
    let held = b.lock("busy:2").acquire().await.unwrap();
    const GUARDS: usize = 12;
    const SINGLES: usize = 4;
    let before = txns(&etcd).await;
    let start = Arc::new(tokio::sync::Barrier::new(GUARDS + SINGLES));
    let granted = Arc::new(tokio::sync::Barrier::new(GUARDS + SINGLES + 1));
    let mut tasks = Vec::new();
    for i in 0..GUARDS {
        let (l, s, done) = (a.clone(), start.clone(), granted.clone());
        tasks.push(tokio::spawn(async move {
            s.wait().await;
            let g = l
                .lock_all([format!("pair:{i}:x"), format!("pair:{i}:y")])
                .acquire()
                .await
                .unwrap();
            assert_eq!(g.guards().len(), 2);
            done.wait().await;
            g.release().await.unwrap();
        }));
    }
    for i in 0..SINGLES {
        let (l, s, done) = (a.clone(), start.clone(), granted.clone());
        tasks.push(tokio::spawn(async move {
            s.wait().await;
            let g = l.lock(format!("single:{i}")).acquire().await.unwrap();
            done.wait().await;
            g.release().await.unwrap();
        }));
    }
    granted.wait().await;
    let creates = txns(&etcd).await - before;
    assert!(
        creates < GUARDS as u64,
        "{creates} transactions for {GUARDS} guards' and {SINGLES} locks' creates: the guards' \
         were not shared"
    );
    for t in tasks {
        t.await.unwrap();
    }
    // A guard with a held key among guards of free keys, sent together: its nested
    // transaction finds `busy:2` taken and puts nothing, the others' are granted in the same
    // round; it then waits for the key in the global order and holds both after the release.
    const MORE: usize = 6;
    let start = Arc::new(tokio::sync::Barrier::new(MORE + 1));
    let granted = Arc::new(tokio::sync::Barrier::new(MORE + 1));
    let busy = {
        let (l, s) = (a.clone(), start.clone());
        tokio::spawn(async move {
            s.wait().await;
            let g = l.lock_all(["busy:1", "busy:2"]).acquire().await.unwrap();
            let fence = g.guards()[1].fence();
            g.release().await.unwrap();
            fence
        })
    };
    let more: Vec<_> = (0..MORE)
        .map(|i| {
            let (l, s, done) = (a.clone(), start.clone(), granted.clone());
            tokio::spawn(async move {
                s.wait().await;
                let keys = [format!("more:{i}:x"), format!("more:{i}:y")];
                let g = l.lock_all(keys).acquire().await.unwrap();
                done.wait().await;
                g.release().await.unwrap();
            })
        })
        .collect();
    // The free guards are granted while `busy:2` is still held.
    granted.wait().await;
    for t in more {
        t.await.unwrap();
    }
    assert!(!busy.is_finished(), "granted a guard with a held key");
    let holders_fence = held.fence();
    held.release().await.unwrap();
    let fence = busy.await.unwrap();
    assert!(
        fence > holders_fence,
        "busy:2's fence {fence} after its holder's {holders_fence}"
    );
    for key in ["busy:1", "busy:2"]
        .into_iter()
        .map(str::to_owned)
        .chain((0..GUARDS).flat_map(|i| [format!("pair:{i}:x"), format!("pair:{i}:y")]))
        .chain((0..SINGLES).map(|i| format!("single:{i}")))
        .chain((0..MORE).flat_map(|i| [format!("more:{i}:x"), format!("more:{i}:y")]))
    {
        let g = b.lock(key.clone()).try_acquire().await.unwrap();
        assert!(g.is_some(), "{key} was left taken");
        g.unwrap().release().await.unwrap();
    }
}

/// A counter of etcd's own `/metrics` without labels (its sum over the lines that start with
/// `name`).
async fn counter(etcd: &EtcdServer, name: &str) -> u64 {
    let metrics = etcd
        .http("GET", "/metrics", "")
        .await
        .expect("etcd metrics");
    let found: Vec<f64> = metrics
        .lines()
        .filter(|l| l.split([' ', '{']).next() == Some(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    assert!(!found.is_empty(), "no {name} in etcd's metrics");
    found.iter().sum::<f64>() as u64
}

/// Uncontended cycles of one locker, alone on the server.
const CYCLES: u64 = 100;

/// An etcd with two lockers on it, and the ranges etcd counted (`etcd_mvcc_range_total`)
/// while `cycles` ran on the first one, warmed up before.
async fn ranges_during<F, Fut>(cycles: F) -> (EtcdServer, Locker, Locker, u64)
where
    F: FnOnce(Locker) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let etcd = EtcdServer::start().await;
    let at = [etcd.endpoint()];
    let ttl = Duration::from_secs(9);
    let (a, b) = (locker(&at, ttl).await, locker(&at, ttl).await);
    warm_up(&a).await;
    let before = counter(&etcd, "etcd_mvcc_range_total").await;
    cycles(a.clone()).await;
    let ranges = counter(&etcd, "etcd_mvcc_range_total").await - before;
    (etcd, a, b, ranges)
}

/// A writer that finds its lock's range empty holds from its transaction's answer alone: the
/// comparisons held, so its key is the only one, on its lease, created at the transaction's
/// revision, and nothing is read back. Judged by etcd's own count of the ranges it served,
/// which counts each comparison it evaluates as one: an uncontended cycle is three (the
/// create's two comparisons, the delete's one), and was five with the key and the lock's first
/// key read back. The answer's place is a holder's only when the range was empty: a writer behind a
/// held write or a held read is refused at once, and holds after them with a higher fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_writer_holds_from_its_transactions_answer_without_reading_back() {
    let (_etcd, a, b, ranges) =
        ranges_during(|a| async move { cycles_alone(&a, CYCLES).await }).await;
    assert!(
        ranges < 4 * CYCLES,
        "{ranges} ranges for {CYCLES} uncontended cycles: the create reads its key back"
    );
    refused_behind_then_above(&a, &b, "ahead", false).await;
    refused_behind_then_above(&a, &b, "shared", true).await;
}

/// A reader whose put went through holds or waits from its transaction's answer without
/// reading its own key back (the put says it is there, on its lease, created at the
/// transaction's revision): an uncontended read cycle is four ranges by etcd's count (the
/// create's comparison, its reads of the lock's first writer and of the fence record, the
/// delete's comparison), and was five with the key read back. Its place still comes from those
/// reads: behind a held write it is refused, and after the writer's release it holds with a
/// fence at or above the writer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_reader_stands_from_its_transactions_answer_without_reading_its_key_back() {
    let (_etcd, a, b, ranges) = ranges_during(|a| async move {
        for _ in 0..CYCLES {
            let guard = a.read_lock("alone").acquire().await.unwrap();
            guard.release().await.unwrap();
        }
    })
    .await;
    assert!(
        ranges * 2 < 9 * CYCLES,
        "{ranges} ranges for {CYCLES} uncontended read cycles: the create reads its key back"
    );
    let held = b.lock("written").acquire().await.unwrap();
    assert!(
        a.read_lock("written")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a reader was granted a lock another locker held for writing"
    );
    let written = held.fence();
    held.release().await.unwrap();
    let read = a.read_lock("written").acquire().await.unwrap();
    assert!(
        read.fence() >= written,
        "the reader's fence {} is below the last writer's {written}",
        read.fence()
    );
    read.release().await.unwrap();
}
