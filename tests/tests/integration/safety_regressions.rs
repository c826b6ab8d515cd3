//! Regression tests for the bugs of the protocol review (RELIABILITY.md, findings 10 to 12),
//! against real `redis-server` processes. Each of them failed before its fix. (The hang after
//! a subscriber stall, finding 11, has its regression tests in the `faults` binary, scenario
//! 10: `scenarios::s10_a_waiter_returns_after_its_connections_were_cut_and_stalled` and the
//! subscription-only variant.)

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;

async fn locker(url: &str, op_timeout: Duration) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(op_timeout)
        .default_lease(Duration::from_secs(10))
        .build()
        .await
        .expect("connect")
}

/// The value of a fence counter, and an acquire's fence, as numbers.
async fn acquire_fence(locker: &Locker, key: &str) -> u64 {
    let guard = locker.lock(key).acquire().await.expect("acquire");
    let fence = guard.fence();
    guard.release().await.expect("release");
    fence
}

/// Finding 10: fence counters restored from a snapshot handed out tokens again. The counter
/// was re-seeded from the server clock only when it was missing; a restored one exists, with
/// an old value. Now every reservation lifts it to the server clock (µs) first.
#[tokio::test]
async fn fences_never_go_back_after_a_restore_from_a_snapshot() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url(), Duration::from_secs(1)).await;
    let mut conn = srv.conn().await;

    let at_save = acquire_fence(&locker, "restored").await;
    let _: () = redis::cmd("SAVE").query_async(&mut conn).await.unwrap();
    let mut last = at_save;
    for _ in 0..5 {
        let fence = acquire_fence(&locker, "restored").await;
        assert!(fence > last, "{fence} after {last}");
        last = fence;
    }
    // Back to the snapshot, as a restart from the RDB file (or a failover to a replica that
    // had only reached that point) would bring it back.
    let _: () = redis::cmd("DEBUG")
        .arg("RELOAD")
        .arg("NOSAVE")
        .query_async(&mut conn)
        .await
        .unwrap();
    let counter: u64 = conn.get("leasehold:fence:{restored}").await.unwrap();
    assert!(counter < last, "the snapshot holds the old counter");

    let after = acquire_fence(&locker, "restored").await;
    assert!(
        after > last,
        "fence {after} after the restore; {last} was handed out before it"
    );
    assert!(after < 1 << 53, "fences stay exact in doubles: {after}");
}

/// The same with a counter set back by hand, as a lagging replica's would be: the next
/// token is still above every earlier one.
#[tokio::test]
async fn fences_never_go_back_after_a_counter_is_set_back() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url(), Duration::from_secs(1)).await;
    let mut conn = srv.conn().await;
    let first = acquire_fence(&locker, "lagging").await;
    let _: () = conn.set("leasehold:fence:{lagging}", 7).await.unwrap();
    let second = acquire_fence(&locker, "lagging").await;
    assert!(second > first, "fence {second} after {first}");
}

/// Finding 12: re-entry outlived an in-process handover. A guard re-entered inside A's scope
/// stayed held after A handed the lease to B, so two guards of one key reported held, and a
/// scope future run after A's release re-entered a lock that B held.
#[tokio::test]
async fn a_reentered_guard_ends_with_its_outer_holding() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url(), Duration::from_secs(1)).await;

    let x = locker.lock("account").acquire().await.expect("x");
    let (a_queued, b_queued) = (locker.clone(), locker.clone());
    // One thread: a spawned acquire runs up to its place in the local queue (no await before
    // it) as soon as this task yields, so A queues before B.
    let a = tokio::spawn(async move { a_queued.lock("account").acquire().await });
    tokio::task::yield_now().await;
    let b = tokio::spawn(async move { b_queued.lock("account").acquire().await });
    tokio::task::yield_now().await;
    x.release().await.expect("x release");
    let a = a.await.unwrap().expect("a");

    let inner = a
        .scope(async { locker.lock("account").acquire().await })
        .await
        .expect("re-entry");
    assert!(inner.is_reentrant() && inner.is_held());

    // A scope future that will run after A is gone.
    let late = a.scope(async {
        locker
            .lock("account")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
    });
    a.release().await.expect("a release hands over to b");
    let b = b.await.unwrap().expect("b");
    assert!(b.is_held());
    assert!(
        !inner.is_held(),
        "a guard re-entered under A still reports held while B holds the lock"
    );
    tokio::time::timeout(Duration::from_secs(1), inner.lost())
        .await
        .expect("the re-entered guard's lost() resolves when its holding ends");
    match late.await {
        Err(LockError::Busy { .. }) => {}
        other => panic!("a scope outliving its holder must not re-enter: {other:?}"),
    }
    b.release().await.expect("b release");
}

/// Batched scripts: a command that fails for one lock (here a key of the wrong type under
/// the prefix) used to abort the whole script after it had applied the locks before it, and
/// every caller of the batch got `Unavailable`. Now each caller gets its own outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_lock_in_a_batch_fails_only_its_caller() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url(), Duration::from_secs(2)).await;
    let mut conn = srv.conn().await;
    let _: () = conn
        .hset("leasehold:lock:{wrong-type}", "f", "v")
        .await
        .unwrap();
    for round in 0..5 {
        // More concurrent acquires than calls in flight: they go in shared batches, the bad
        // one among them.
        let mut tasks = Vec::new();
        for i in 0..200 {
            let locker = locker.clone();
            let key = if i == 100 {
                "wrong-type".to_owned()
            } else {
                format!("good-{round}-{i}")
            };
            tasks.push(tokio::spawn(async move {
                let outcome = locker
                    .lock(key.clone())
                    .wait(Duration::ZERO)
                    .acquire()
                    .await;
                (key, outcome)
            }));
        }
        let mut guards = Vec::new();
        for task in tasks {
            let (key, outcome) = task.await.unwrap();
            match outcome {
                Ok(guard) => {
                    assert_ne!(key, "wrong-type");
                    guards.push(guard);
                }
                Err(e) if key == "wrong-type" => {
                    assert!(e.is_unavailable(), "{e}");
                    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
                }
                Err(e) => panic!("round {round}: a good lock failed with the bad one: {e}"),
            }
        }
        assert_eq!(guards.len(), 199);
        for guard in guards {
            guard.release().await.expect("release");
        }
    }
}

/// The Redis acquire script as the engine ships it (the files it is concatenated from).
fn shipped_acquire_script() -> redis::Script {
    redis::Script::new(concat!(
        include_str!("../../../runtime/src/store/redis/lua/clock.lua"),
        include_str!("../../../runtime/src/store/redis/lua/fence.lua"),
        include_str!("../../../runtime/src/store/redis/lua/acquire_lone.lua"),
        include_str!("../../../runtime/src/store/redis/lua/owner.lua"),
        include_str!("../../../runtime/src/store/redis/lua/acquire.lua")
    ))
}

/// One acquire of the lock `{k}` (prefix `t`) by the shipped script: `wait_ms` 0 does not
/// wait (and is not queued); `name`, when not empty, waits alone under that name (a fair
/// request).
fn acquire_invocation<'a>(
    script: &'a redis::Script,
    token: String,
    wait_ms: u64,
    name: &str,
) -> redis::ScriptInvocation<'a> {
    let mut invocation = script.prepare_invoke();
    invocation
        .key("t:lock:{k}")
        .key("t:fence:{k}")
        .key("t:queue:{k}")
        .key("t:interest:{k}")
        .arg(86_400_000) // fence counter's life
        .arg("process000000001")
        .arg(60_000) // queue keys' life
        .arg(token)
        .arg(30_000) // lease
        .arg(1) // fences reserved
        .arg(wait_ms)
        .arg(0) // not queued yet
        .arg(name);
    invocation
}

/// An acquire sent twice — the Cluster client re-sends a request whose connection dropped
/// after Redis ran it, the reply lost — is granted the second time too, with fences above the
/// first's: the lock holds its own token. Before (issue 45), the second answer was "held", the
/// request failed or waited, and the lock stayed taken by a token nobody held for its lease.
/// Another token is still refused.
#[tokio::test]
async fn an_acquire_sent_twice_is_granted_to_its_own_token() {
    let srv = RedisServer::start().await;
    let client = redis::Client::open(srv.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = shipped_acquire_script();
    let token = format!("h1.locker.1700000000000.resend.{}", "a".repeat(32));
    let other = format!("h1.other.1700000000000.resend.{}", "b".repeat(32));
    let send = |token: String| acquire_invocation(&script, token, 0, "");
    let first: (i64, i64) = send(token.clone()).invoke_async(&mut conn).await.unwrap();
    assert_eq!(first.0, 1, "the free lock is granted: {first:?}");
    let again: (i64, i64) = send(token.clone()).invoke_async(&mut conn).await.unwrap();
    assert_eq!(
        again.0, 1,
        "the same request sent again is granted: {again:?}"
    );
    assert!(
        again.1 > first.1,
        "fences increase: {again:?} after {first:?}"
    );
    let stored: String = conn.get("t:lock:{k}").await.unwrap();
    assert_eq!(stored, token);
    let refused: (i64, i64) = send(other).invoke_async(&mut conn).await.unwrap();
    assert_eq!(refused.0, 0, "another token is refused: {refused:?}");
}

/// A waiter that joins a lock's queue after another is behind it, even within one millisecond
/// of the server's clock: the queue is ordered by arrival score, and with equal scores Redis
/// orders by name, so two fair requests arriving in one millisecond were served in their
/// names' order (the fair-lock test judged by the server's own order: 158 to 333 waiters
/// overtaken in 4 of 4 runs). Shown here with the earlier waiter's score a little ahead of the
/// clock (as an arrival in the same millisecond, or before a small clock step back, leaves it).
#[tokio::test]
async fn a_later_waiter_queues_behind_an_earlier_one_in_the_same_millisecond() {
    let srv = RedisServer::start().await;
    let client = redis::Client::open(srv.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = shipped_acquire_script();
    let holder = format!("h1.holder.1700000000000.q.{}", "a".repeat(32));
    let _: () = conn.set("t:lock:{k}", &holder).await.unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now_ms = secs * 1000 + micros / 1000;
    let _: () = conn
        .zadd("t:queue:{k}", "zzz-earlier", now_ms + 5)
        .await
        .unwrap();
    let token = format!("h1.later.1700000000000.q.{}", "b".repeat(32));
    let answer: (i64, i64) = acquire_invocation(&script, token, 30_000, "aaa-later")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(answer.0, 0, "the lock is held: {answer:?}");
    let queue: Vec<String> = conn.zrange("t:queue:{k}", 0, -1).await.unwrap();
    assert_eq!(
        queue,
        ["zzz-earlier", "aaa-later"],
        "the later waiter went ahead of the earlier one"
    );
}
