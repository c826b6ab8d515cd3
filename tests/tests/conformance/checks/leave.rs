//! Property 19, every way a waiter leaves, for every primitive the engine has: a waiter that gets
//! `Busy`, is cancelled (its task aborted), or panics (its acquire dropped while the task
//! unwinds) leaves nothing behind that delays anyone else: the next owner gets in within
//! [`HANDOVER`] of the holder's release, and a waiting writer that left lets new readers in
//! at once. A waiter in a process of its own killed with SIGKILL delays the next owner at most
//! what the engine keeps of it until nothing renews it ([`KILLED_WAITER`]).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::conformance::Engine;
use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::Run;
use tokio::time::{sleep, Instant};

use super::support::{CONTENDER_WAIT, HANDOVER, LONG_LEASE};

/// A hold of any primitive: dropped, it gives the hold back.
type Hold = Box<dyn Any + Send>;
type Acquire = Pin<Box<dyn Future<Output = Result<Hold, LockError>> + Send>>;

/// How a waiter leaves.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// Its wait runs out.
    Busy,
    /// Its task is aborted mid-wait.
    Cancelled,
    /// Its task panics mid-wait (the acquire is dropped while the task unwinds).
    Panicked,
}

const WAYS: [Way; 3] = [Way::Busy, Way::Cancelled, Way::Panicked];

/// How long a waiter waits before it leaves (its wait, for `Busy`).
const BEFORE_LEAVING: Duration = Duration::from_millis(300);

/// The primitives of this property, each as the hold that makes the waiter wait, the waiter,
/// and the one that must not be delayed once the waiter left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// An exclusive lock behind an exclusive holder.
    Exclusive,
    /// A read lock behind a writer.
    Read,
    /// A writer behind a reader: once it left, new readers get in while the reader holds.
    Write,
    /// A semaphore's permit behind the one holder of a limit of one.
    Permits,
    /// Two keys with `lock_all`, one of them held.
    Multi,
    /// A leader campaign behind the leader.
    Leader,
}

/// Every primitive.
pub async fn all(engine: &Engine) {
    use Primitive::*;
    check(engine, &[Exclusive, Read, Write, Permits, Multi, Leader]).await;
}

/// Engines with read-write locks and leader election but no semaphores (RedLock: they would
/// overshoot their limit under majorities).
pub async fn without_semaphores(engine: &Engine) {
    use Primitive::*;
    check(engine, &[Exclusive, Read, Write, Multi, Leader]).await;
}

async fn check(engine: &Engine, primitives: &[Primitive]) {
    let holder = engine.locker().await;
    let waiter = engine.locker().await;
    let next = engine.locker().await;
    for &primitive in primitives {
        for way in WAYS {
            let key = format!("leave:{primitive:?}:{way:?}");
            one(primitive, way, &key, &holder, &waiter, &next).await;
        }
    }
    if engine.kind().spans_processes() {
        let resource = RedisServer::start().await;
        for &primitive in primitives {
            killed(engine, &resource, primitive, &holder, &next).await;
        }
    }
}

/// How long a killed waiter may delay the next owner, beyond a handover: what the engine keeps
/// of a waiter until nothing renews it. Redis: its place in the queue lapses at most 2 s after
/// its last attempt (a release meanwhile leaves it the lock for a 200 ms window); ZooKeeper and
/// etcd: its znode or key goes with its session (the suite's 4 s); PostgreSQL: nothing.
const KILLED_WAITER: Duration = Duration::from_secs(4);

/// A waiter in a process of its own (a history worker) is killed with SIGKILL mid-wait: nothing
/// of it reaches the engine again, and it still delays the next owner at most
/// [`KILLED_WAITER`] beyond a handover.
async fn killed(
    engine: &Engine,
    resource: &RedisServer,
    primitive: Primitive,
    holder: &Locker,
    next: &Locker,
) {
    let what = format!("{primitive:?} waiter killed mid-wait");
    let key = format!("leave:{primitive:?}:killed");
    let mut spec = engine
        .worker_spec(&resource.url())
        .expect("a server engine runs workers")
        .tasks(1)
        .duration(Duration::from_secs(60))
        .lease(Duration::from_secs(2))
        .wait(Duration::from_secs(30))
        .hold(Duration::from_millis(1), 1);
    spec.prefix = leasehold_tests::conformance::PREFIX.to_owned();
    spec = match primitive {
        Primitive::Exclusive => spec.keys(&[key.as_str()]),
        Primitive::Read => spec.keys(&[key.as_str()]).read_write(100),
        Primitive::Write => spec.keys(&[key.as_str()]).read_write(0),
        Primitive::Permits => spec.keys(&[key.as_str()]).semaphore(1),
        Primitive::Multi => spec
            .keys(&[format!("{key}:a"), format!("{key}:b")])
            .multi(2),
        Primitive::Leader => spec.keys(&[key.as_str()]).leader(),
    };
    let held = hold(primitive, holder, &key)
        .await
        .unwrap_or_else(|e| panic!("{what}: the holder: {e}"));
    let mut run = Run::new(&format!(
        "conformance-leave-{}-{primitive:?}",
        engine.kind()
    ));
    let worker = run.spawn(&spec);
    // Until its first acquire was invoked, and a moment more for it to reach the engine.
    let until = Instant::now() + Duration::from_secs(20);
    while run.history().holds_of(worker).next().is_none() {
        assert!(Instant::now() < until, "{what}: the worker never tried");
        sleep(Duration::from_millis(20)).await;
    }
    sleep(BEFORE_LEAVING).await;
    assert!(
        run.history().holds_of(worker).all(|h| h.ok.is_none()),
        "{what}: the worker got a held lock"
    );
    run.kill9(worker);
    let bound = KILLED_WAITER + HANDOVER;
    let wait = bound + Duration::from_secs(4);
    if primitive == Primitive::Write {
        // The reader still holds: a new reader gets in once the killed writer stops counting.
        let start = Instant::now();
        let reader = contend(Primitive::Read, next, &key, wait)
            .await
            .unwrap_or_else(|e| panic!("{what}: a new reader was kept out: {e}"));
        let took = start.elapsed();
        assert!(took < bound, "{what}: a new reader waited {took:?}");
        drop(reader);
        drop(held);
        return;
    }
    drop(held);
    let released = Instant::now();
    let got = contend(primitive, next, &key, wait)
        .await
        .unwrap_or_else(|e| panic!("{what}: the next owner did not get in: {e}"));
    let took = released.elapsed();
    assert!(
        took < bound,
        "{what}: the next owner got in {took:?} after the release (bound {bound:?})"
    );
    drop(got);
    sleep(Duration::from_millis(50)).await;
}

/// The hold the waiter waits behind.
fn hold(primitive: Primitive, locker: &Locker, key: &str) -> Acquire {
    let (locker, key) = (locker.clone(), key.to_owned());
    Box::pin(async move {
        let hold: Hold = match primitive {
            Primitive::Exclusive | Primitive::Multi => {
                // Multi: the second of the waiter's keys is the one held.
                let key = if primitive == Primitive::Multi {
                    format!("{key}:b")
                } else {
                    key
                };
                Box::new(locker.lock(key).lease(LONG_LEASE).acquire().await?)
            }
            Primitive::Read => Box::new(locker.write_lock(key).lease(LONG_LEASE).acquire().await?),
            Primitive::Write => Box::new(locker.read_lock(key).lease(LONG_LEASE).acquire().await?),
            Primitive::Permits => {
                Box::new(locker.semaphore(key, 1).lease(LONG_LEASE).acquire().await?)
            }
            Primitive::Leader => Box::new(
                locker
                    .leader(key)
                    .identity("holder")
                    .lease(LONG_LEASE)
                    .campaign()
                    .await?,
            ),
        };
        Ok(hold)
    })
}

/// The waiter's acquire (and the next owner's, for every primitive but `Write`).
fn contend(primitive: Primitive, locker: &Locker, key: &str, wait: Duration) -> Acquire {
    let (locker, key) = (locker.clone(), key.to_owned());
    Box::pin(async move {
        let hold: Hold = match primitive {
            Primitive::Exclusive => Box::new(
                locker
                    .lock(key)
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .acquire()
                    .await?,
            ),
            Primitive::Read => Box::new(
                locker
                    .read_lock(key)
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .acquire()
                    .await?,
            ),
            Primitive::Write => Box::new(
                locker
                    .write_lock(key)
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .acquire()
                    .await?,
            ),
            Primitive::Permits => Box::new(
                locker
                    .semaphore(key, 1)
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .acquire()
                    .await?,
            ),
            Primitive::Multi => Box::new(
                locker
                    .lock_all([format!("{key}:a"), format!("{key}:b")])
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .acquire()
                    .await?,
            ),
            Primitive::Leader => Box::new(
                locker
                    .leader(key)
                    .identity("contender")
                    .lease(LONG_LEASE)
                    .wait(wait)
                    .campaign()
                    .await?,
            ),
        };
        Ok(hold)
    })
}

/// The waiter leaves `way`; then nobody is delayed by it.
async fn one(
    primitive: Primitive,
    way: Way,
    key: &str,
    holder: &Locker,
    waiter: &Locker,
    next: &Locker,
) {
    let what = format!("{primitive:?} waiter that left by {way:?}");
    let held = hold(primitive, holder, key)
        .await
        .unwrap_or_else(|e| panic!("{what}: the holder: {e}"));
    leave(way, |wait| contend(primitive, waiter, key, wait), &what).await;

    match primitive {
        Primitive::Write => {
            // The reader still holds: a new reader gets in at once, no writer waits.
            let start = Instant::now();
            let reader = contend(Primitive::Read, next, key, CONTENDER_WAIT)
                .await
                .unwrap_or_else(|e| panic!("{what}: a new reader was kept out: {e}"));
            let took = start.elapsed();
            assert!(took < HANDOVER, "{what}: a new reader waited {took:?}");
            drop(reader);
            drop(held);
        }
        Primitive::Multi => {
            // The free key is free at once: the waiter holds nothing of it any more.
            let start = Instant::now();
            let a = next
                .lock(format!("{key}:a"))
                .lease(LONG_LEASE)
                .wait(CONTENDER_WAIT)
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("{what}: its free key stayed taken: {e}"));
            let took = start.elapsed();
            assert!(took < HANDOVER, "{what}: its free key came after {took:?}");
            a.release().await.expect("release");
            after_release(primitive, held, next, key, &what).await;
        }
        _ => after_release(primitive, held, next, key, &what).await,
    }
}

/// The holder releases (drops its hold); the next owner gets in within [`HANDOVER`].
async fn after_release(primitive: Primitive, held: Hold, next: &Locker, key: &str, what: &str) {
    drop(held);
    let released = Instant::now();
    let got = contend(primitive, next, key, CONTENDER_WAIT)
        .await
        .unwrap_or_else(|e| panic!("{what}: the next owner did not get in: {e}"));
    let took = released.elapsed();
    assert!(
        took < HANDOVER,
        "{what}: the next owner got in {took:?} after the release"
    );
    drop(got);
    // Dropped holds go back in the background: give them time before the next case.
    sleep(Duration::from_millis(50)).await;
}

async fn leave(way: Way, contend: impl Fn(Duration) -> Acquire, what: &str) {
    match way {
        Way::Busy => match contend(BEFORE_LEAVING).await {
            Err(LockError::Busy { .. }) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: got a held lock"),
        },
        Way::Cancelled => {
            let task = tokio::spawn(contend(CONTENDER_WAIT));
            sleep(BEFORE_LEAVING).await;
            assert!(!task.is_finished(), "{what}: returned while held");
            task.abort();
            assert!(task.await.expect_err("aborted").is_cancelled());
        }
        Way::Panicked => {
            let acquire = contend(CONTENDER_WAIT);
            let task = tokio::spawn(async move {
                tokio::select! {
                    out = acquire => out.map(|_| ()),
                    () = sleep(BEFORE_LEAVING) => panic!("the waiter panics (on purpose)"),
                }
            });
            let out = task.await;
            assert!(
                out.as_ref().is_err_and(|e| e.is_panic()),
                "{what}: {:?}",
                out.map(|r| r.map_err(|e| e.to_string()))
            );
        }
    }
}
