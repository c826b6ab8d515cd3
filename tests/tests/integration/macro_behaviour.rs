//! `#[distributed_lock]` on real handlers against real `redis-server` processes: exclusion,
//! parallelism of distinct keys, re-entrancy, release on every exit path, busy locks, and
//! cancellation of a body whose lease was lost.
//!
//! No test of this binary installs a global default Locker: `no_default_locker_is_a_config_error`
//! depends on there being none in this process.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker};
use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;
use tokio::sync::{Barrier, Notify};
use tokio::time::{timeout, Instant};

async fn locker(srv: &RedisServer) -> Locker {
    Locker::connect(&srv.url()).await.expect("connect")
}

/// Whether `key` is free right now: an acquire that does not wait succeeds.
async fn is_free(locker: &Locker, key: &str) -> bool {
    match locker.lock(key).wait(Duration::ZERO).acquire().await {
        Ok(guard) => {
            guard.release().await.expect("release");
            true
        }
        Err(e) if e.is_busy() => false,
        Err(e) => panic!("probing {key}: {e}"),
    }
}

/// Waits up to `within` for `key` to be free (a release sent from a `Drop` is asynchronous).
async fn freed_within(locker: &Locker, key: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if is_free(locker, key).await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    Invalid(std::num::ParseIntError),
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(e: std::num::ParseIntError) -> Self {
        AppError::Invalid(e)
    }
}

// ---------------------------------------------------------------------------------------
// Exclusion and parallelism

struct Counter {
    conn: redis::aio::MultiplexedConnection,
    in_body: AtomicUsize,
    max_in_body: AtomicUsize,
}

#[distributed_lock(key = "counter:<name>", locker = locker, wait = "60s")]
async fn increment(locker: Locker, name: String, counter: Arc<Counter>) -> Result<(), LockError> {
    let now = counter.in_body.fetch_add(1, Ordering::SeqCst) + 1;
    counter.max_in_body.fetch_max(now, Ordering::SeqCst);
    let mut conn = counter.conn.clone();
    let n: i64 = conn.get(&name).await.unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(2)).await;
    let _: () = conn.set(&name, n + 1).await.expect("SET");
    counter.in_body.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_one_key_never_overlap() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let counter = Arc::new(Counter {
        conn: srv.conn().await,
        in_body: AtomicUsize::new(0),
        max_in_body: AtomicUsize::new(0),
    });
    // `tokio::spawn` also proves the locked future is `Send + 'static`.
    let calls: Vec<_> = (0..50)
        .map(|_| tokio::spawn(increment(locker.clone(), "orders".into(), counter.clone())))
        .collect();
    for call in calls {
        call.await.expect("no panic").expect("locked call");
    }
    let n: i64 = srv.conn().await.get("orders").await.expect("GET");
    assert_eq!(n, 50, "lost increments: two bodies overlapped");
    assert_eq!(counter.max_in_body.load(Ordering::SeqCst), 1);
    assert!(
        srv.keys("leasehold:lock:*").await.is_empty(),
        "a lock was left behind"
    );
}

#[distributed_lock(key = "parallel:<id>", locker = locker, wait = "0s")]
async fn meet(locker: &Locker, id: usize, barrier: &Barrier) -> Result<usize, LockError> {
    // Only returns once all callers are inside their bodies at the same time.
    barrier.wait().await;
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_keys_run_in_parallel() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let barrier = Barrier::new(5);
    let all = async {
        tokio::join!(
            meet(&locker, 0, &barrier),
            meet(&locker, 1, &barrier),
            meet(&locker, 2, &barrier),
            meet(&locker, 3, &barrier),
            meet(&locker, 4, &barrier),
        )
    };
    let ids = timeout(Duration::from_secs(10), all)
        .await
        .expect("bodies of distinct keys did not run at the same time");
    assert_eq!(
        [ids.0, ids.1, ids.2, ids.3, ids.4].map(Result::unwrap),
        [0, 1, 2, 3, 4]
    );
}

// ---------------------------------------------------------------------------------------
// Re-entrancy

#[distributed_lock(key = "nest:<id>", locker = locker, wait = "1s", guard = lock)]
async fn outer(locker: &Locker, srv: &RedisServer, id: u32) -> Result<(u64, u64, bool), LockError> {
    let inner_fence = inner(locker, id).await?;
    // The inner call's end must not have released the outer lock.
    let still_locked = !srv.keys("leasehold:lock:*").await.is_empty() && lock.is_held();
    Ok((lock.fence(), inner_fence, still_locked))
}

#[distributed_lock(key = "nest:<id>", locker = locker, wait = "1s", guard = lock)]
async fn inner(locker: &Locker, id: u32) -> Result<u64, LockError> {
    assert!(
        lock.is_reentrant(),
        "the nested call took a lock of its own"
    );
    Ok(lock.fence())
}

#[tokio::test]
async fn nested_call_on_the_same_key_reenters() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let (outer_fence, inner_fence, still_locked) =
        timeout(Duration::from_secs(5), outer(&locker, &srv, 7))
            .await
            .expect("the nested call deadlocked on its own lock")
            .expect("locked call");
    assert_eq!(outer_fence, inner_fence);
    assert!(
        still_locked,
        "leaving the nested call released the outer lock"
    );
    assert!(is_free(&locker, "nest:7").await);
}

// ---------------------------------------------------------------------------------------
// Release on every exit path

#[distributed_lock(key = "paths", locker = locker, lease = "30s")]
async fn exits(locker: &Locker, how: &str) -> Result<u8, AppError> {
    match how {
        "ok" => Ok(1),
        "return" => return Ok(2),
        "question-mark" => Ok(how.parse::<u8>()?),
        "panic" => panic!("the body panicked"),
        "hang" => std::future::pending().await,
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn ok_early_return_and_question_mark_release_before_returning() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    assert_eq!(exits(&locker, "ok").await.unwrap(), 1);
    assert!(is_free(&locker, "paths").await);
    assert_eq!(exits(&locker, "return").await.unwrap(), 2);
    assert!(is_free(&locker, "paths").await);
    match exits(&locker, "question-mark").await {
        Err(AppError::Invalid(e)) => assert!(e.to_string().contains("invalid digit")),
        other => panic!("expected the `?` error, got {other:?}"),
    }
    assert!(is_free(&locker, "paths").await, "`?` left the lock held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_releases_the_lock() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let task_locker = locker.clone();
    let joined = tokio::spawn(async move { exits(&task_locker, "panic").await }).await;
    assert!(joined.unwrap_err().is_panic());
    // Well within the 30 s lease: released, not expired.
    assert!(freed_within(&locker, "paths", Duration::from_secs(2)).await);
}

#[tokio::test]
async fn a_dropped_future_releases_the_lock() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let hung = timeout(Duration::from_millis(300), exits(&locker, "hang")).await;
    assert!(hung.is_err(), "the body should still be running");
    assert!(freed_within(&locker, "paths", Duration::from_secs(2)).await);
}

// ---------------------------------------------------------------------------------------
// Busy locks and missing configuration

#[distributed_lock(key = "busy:<id>", locker = locker, wait = "0s")]
async fn fail_fast(locker: &Locker, id: u8, ran: &AtomicBool) -> Result<(), AppError> {
    ran.store(true, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock(key = "busy:<id>", locker = locker, wait = "300ms")]
async fn wait_a_little(locker: &Locker, id: u8, ran: &AtomicBool) -> Result<(), AppError> {
    ran.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test]
async fn a_busy_lock_returns_busy_without_running_the_body() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let other = Locker::connect(&srv.url()).await.expect("connect");
    let held = other.lock("busy:1").acquire().await.expect("acquire");
    let ran = AtomicBool::new(false);

    let started = Instant::now();
    let out = fail_fast(&locker, 1, &ran).await;
    assert!(
        matches!(out, Err(AppError::Lock(ref e)) if e.is_busy()),
        "{out:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(250));

    let started = Instant::now();
    let out = wait_a_little(&locker, 1, &ran).await;
    assert!(
        matches!(out, Err(AppError::Lock(ref e)) if e.is_busy()),
        "{out:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(!ran.load(Ordering::SeqCst), "a body ran without the lock");

    held.release().await.expect("release");
    fail_fast(&locker, 1, &ran).await.expect("free now");
    assert!(ran.load(Ordering::SeqCst));
}

#[distributed_lock(key = "no-locker")]
async fn uses_the_default_locker() -> Result<(), LockError> {
    panic!("ran without a locker")
}

#[tokio::test]
async fn no_default_locker_is_a_config_error() {
    let err = uses_the_default_locker().await.unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    assert!(err.to_string().contains("set_global_default"), "{err}");
}

#[test]
fn the_attribute_and_the_runtime_agree_on_the_shortest_lease() {
    // macros/src/args.rs refuses `lease`s below this at compile time.
    assert_eq!(leasehold::MIN_LEASE, Duration::from_millis(10));
}

// ---------------------------------------------------------------------------------------
// Lost leases

#[distributed_lock(key = "lost:<id>", locker = locker, lease = "300ms", watchdog = true)]
async fn renewed_body(
    locker: &Locker,
    id: u8,
    started: &Notify,
    finished: &AtomicBool,
) -> Result<(), LockError> {
    started.notify_one();
    tokio::time::sleep(Duration::from_secs(5)).await;
    finished.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test]
async fn a_lease_taken_away_cancels_the_body() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let (started, finished) = (Notify::new(), AtomicBool::new(false));
    let call = renewed_body(&locker, 1, &started, &finished);
    tokio::pin!(call);
    tokio::select! {
        _ = &mut call => panic!("the body ended on its own"),
        () = started.notified() => {}
    }
    // Outlive a few lease periods first: the watchdog keeps the lock.
    tokio::select! {
        out = &mut call => panic!("the body ended while the watchdog renewed it: {out:?}"),
        () = tokio::time::sleep(Duration::from_millis(700)) => {}
    }
    let keys = srv.keys("leasehold:lock:*").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let _: () = srv.conn().await.del(&keys[0]).await.expect("DEL");

    let deleted = Instant::now();
    let out = timeout(Duration::from_secs(2), call)
        .await
        .expect("the body went on after its lease was taken away");
    assert!(matches!(out, Err(LockError::Lost { .. })), "{out:?}");
    assert!(deleted.elapsed() < Duration::from_secs(1));
    assert!(!finished.load(Ordering::SeqCst));
}

#[distributed_lock(key = "hard-max", locker = locker, lease = "200ms", watchdog = false, guard = lock)]
async fn too_slow(locker: &Locker, finished: &AtomicBool) -> Result<(), LockError> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    finished.store(true, Ordering::SeqCst);
    assert!(!lock.is_held());
    Ok(())
}

#[tokio::test]
async fn without_the_watchdog_the_lease_is_a_hard_maximum() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let finished = AtomicBool::new(false);
    let started = Instant::now();
    let out = too_slow(&locker, &finished).await;
    assert!(matches!(out, Err(LockError::Lost { .. })), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "cancelled only after {:?}",
        started.elapsed()
    );
    assert!(!finished.load(Ordering::SeqCst));
}

#[distributed_lock(key = "run-on", locker = locker, lease = "200ms", watchdog = false, on_lost = "continue", guard = lock)]
async fn runs_on(locker: &Locker) -> Result<bool, LockError> {
    tokio::time::sleep(Duration::from_millis(600)).await;
    Ok(lock.is_held())
}

#[tokio::test]
async fn on_lost_continue_lets_the_body_finish() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv).await;
    let held_at_end = runs_on(&locker).await.expect("the body ran to its end");
    assert!(!held_at_end, "the lease should have run out under the body");
}

// ---------------------------------------------------------------------------------------
// Keys built from arguments

struct Order {
    id: u64,
    lines: (String, u32),
}

struct Tenant {
    name: String,
    locker: Locker,
    calls: u32,
}

impl Tenant {
    #[distributed_lock(key = "tenant:<self.name>:<order.id>:<order.lines.0>", locker = self.locker, guard = lock)]
    async fn place(&mut self, order: Order) -> Result<String, LockError> {
        self.calls += order.lines.1;
        Ok(lock.key().to_owned())
    }
}

#[distributed_lock(key = "a{b}}c:<<x>>:<n>", locker = locker, guard = lock)]
async fn escaped(locker: &Locker, n: i32) -> Result<String, LockError> {
    Ok(lock.key().to_owned())
}

#[tokio::test]
async fn keys_are_built_from_arguments_fields_and_self() {
    let srv = RedisServer::start().await;
    let mut tenant = Tenant {
        name: "north".into(),
        locker: locker(&srv).await,
        calls: 0,
    };
    let order = Order {
        id: 9,
        lines: ("sku-1".into(), 3),
    };
    assert_eq!(tenant.place(order).await.unwrap(), "tenant:north:9:sku-1");
    assert_eq!(
        tenant.calls, 3,
        "the body saw `self` and its arguments as before"
    );
    assert_eq!(escaped(&tenant.locker, -7).await.unwrap(), "a{b}}c:<x>:-7");
}

/// A body whose next step and the lease's end come due at the same instant: the body must not
/// take that step (RELIABILITY.md, finding 14: the attribute's `select!` was biased towards the
/// body). 100 ms leases count as held for 97 ms (1% + 2 ms of margin).
#[distributed_lock(key = "same-instant", locker = locker, lease = "100ms", watchdog = false)]
async fn steps_at_the_lease_end(locker: &Locker, stepped: &AtomicBool) -> Result<(), LockError> {
    tokio::time::sleep(Duration::from_millis(97)).await;
    stepped.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_body_takes_no_step_once_the_lease_is_lost() {
    let locker = Locker::in_memory();
    let stepped = AtomicBool::new(false);
    let out = steps_at_the_lease_end(&locker, &stepped).await;
    assert!(matches!(out, Err(LockError::Lost { .. })), "{out:?}");
    assert!(
        !stepped.load(Ordering::SeqCst),
        "the body ran a step after its lease was lost"
    );
}
