//! Multi-key locks (`Locker::lock_all`) on a real `redis-server`: free keys taken in one
//! round trip, all or nothing, and nothing left locked by an acquire cancelled in flight.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer, TcpProxy};

use crate::lock_core::{lock_keys, locker, script_calls};

/// Free keys of a multi-key lock on one server are taken in one script call, one round trip,
/// not one per key, and given back in one; a busy key falls back to taking them in order, and the whole guard is
/// still all or nothing.
#[tokio::test]
async fn lock_all_takes_free_keys_in_one_round_trip() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    load_scripts(&a).await;
    let before = script_calls(&srv).await;
    let all = a
        .lock_all(["wallet:3", "wallet:1", "wallet:2"])
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        script_calls(&srv).await - before,
        1,
        "three free keys, one script call"
    );
    assert_eq!(lock_keys(&srv).await.len(), 3);
    let fences: Vec<u64> = all.guards().iter().map(|g| g.fence()).collect();
    assert!(fences.iter().all(|&f| f > 0), "{fences:?}");
    // Given back together too: no key's release goes out alone ahead of the others.
    let before = script_calls(&srv).await;
    all.release().await.unwrap();
    assert_eq!(
        script_calls(&srv).await - before,
        1,
        "three keys given back, one script call"
    );
    assert!(lock_keys(&srv).await.is_empty());

    // A key held elsewhere: nothing is taken at once, the call waits for it, then holds all.
    let b = locker(&srv.url()).await;
    let held = b.lock("wallet:2").acquire().await.unwrap();
    let waiting = tokio::spawn(async move {
        let all = a
            .lock_all(["wallet:1", "wallet:2", "wallet:3"])
            .acquire()
            .await
            .unwrap();
        let keys: Vec<String> = all.keys().map(str::to_owned).collect();
        all.release().await.unwrap();
        keys
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.release().await.unwrap();
    let keys = waiting.await.unwrap();
    assert_eq!(keys, ["wallet:1", "wallet:2", "wallet:3"]);
    assert!(lock_keys(&srv).await.is_empty());
}

/// A multi-key acquire cancelled while its one script call is on its way leaves no key locked:
/// the store may have granted them all, and they are given back in the background.
#[tokio::test]
async fn a_multi_key_acquire_cancelled_in_flight_leaves_no_key_locked() {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let a = locker(&proxy.url()).await;
    load_scripts(&a).await;
    // Every byte takes 300 ms each way: the call is cancelled before the script even runs.
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(300)));
    let before = script_calls(&srv).await;
    let pending = a
        .lock_all(["m:1", "m:2", "m:3"])
        .lease(Duration::from_secs(30))
        .acquire();
    let cancelled = tokio::time::timeout(Duration::from_millis(100), pending).await;
    assert!(cancelled.is_err(), "the reply was still on its way");
    // The script ran (and granted the keys), then the background releases did.
    eventually(
        "the script and the releases ran",
        Duration::from_secs(5),
        || async { script_calls(&srv).await - before >= 2 },
    )
    .await;
    eventually(
        "the granted keys are given back",
        Duration::from_secs(5),
        || async { lock_keys(&srv).await.is_empty() },
    )
    .await;
}

/// Takes and gives back two keys together, so that the scripts are loaded (a first call may be
/// a failed EVALSHA and then an EVAL) before script calls are counted or delayed.
async fn load_scripts(locker: &Locker) {
    let both = locker
        .lock_all(["warm:1", "warm:2"])
        .acquire()
        .await
        .unwrap();
    both.release().await.unwrap();
}

/// Issue 51: read keys beside written ones ("read the venue, write these seats") are taken
/// in the same one script call on one server, and the readers' shares are real: another
/// locker's reader shares the venue, its writer waits; a busy key falls back to taking them
/// in order, still all or nothing.
#[tokio::test]
async fn lock_all_takes_read_and_write_keys_in_one_round_trip() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    load_scripts(&a).await;
    let before = script_calls(&srv).await;
    let booking = a
        .lock_all(["seat:14B", "seat:14A"])
        .read_keys(["venue:9"])
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        script_calls(&srv).await - before,
        1,
        "two seats written and a venue read, one script call"
    );
    let fences: Vec<(String, u64)> = booking
        .fences()
        .map(|(key, fence)| (key.to_owned(), fence))
        .collect();
    assert_eq!(fences.len(), 3);
    assert!(fences.iter().all(|(_, f)| *f > 0), "{fences:?}");
    let reader = b.read_lock("venue:9").try_acquire().await.unwrap();
    assert!(reader.is_some(), "another locker's reader shares the venue");
    drop(reader);
    assert!(b
        .write_lock("venue:9")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(b
        .read_lock("seat:14A")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    booking.release().await.unwrap();
    eventually("everything given back", Duration::from_secs(5), || async {
        lock_keys(&srv).await.is_empty()
    })
    .await;

    // The venue being written elsewhere: nothing at once, the call waits, then holds all.
    let writer = b.write_lock("venue:9").acquire().await.unwrap();
    let waiting = tokio::spawn(async move {
        let all = a
            .lock_all(["seat:14A"])
            .read_keys(["venue:9"])
            .acquire()
            .await
            .unwrap();
        let keys: Vec<String> = all.keys().map(str::to_owned).collect();
        all.release().await.unwrap();
        keys
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    writer.release().await.unwrap();
    assert_eq!(waiting.await.unwrap(), ["seat:14A", "venue:9"]);
}
