//! Property 25, inspection tells who holds a lock and who waits for it: a locker with a
//! service name holds a lock under a label; another locker's `inspect` shows the holder's
//! description (service, host, pid, start, version, locker id), the label and since when,
//! the waiting locker with its description and how long it has waited, and never an owner
//! token. After a handover the new holder shows, without the old label.

use std::time::{Duration, SystemTime};

use leasehold::{LockInfo, Locker};
use leasehold_tests::conformance::Engine;
use leasehold_tests::harness::eventually;

use super::support::{bounded, CONTENDER_WAIT, HANDOVER, LONG_LEASE, SLACK};

/// How long a new locker's description may take to appear: a background task writes it, in
/// one call, when the locker first tries to take a lock.
const DESCRIBED: Duration = Duration::from_secs(5);

pub async fn shown(engine: &Engine) {
    let holder = named(engine, "conformance-holder").await;
    let waiter = named(engine, "conformance-waiter").await;
    let operator = engine.locker().await;
    let key = "holders";
    let before = SystemTime::now() - Duration::from_secs(1);
    let guard = holder
        .lock(key)
        .label("req-7f3a")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");

    let info = inspect_until(&operator, key, "the holder's description", |info| {
        info.holder().is_some_and(|h| h.description.is_some())
    })
    .await;
    assert!(info.held, "{info:?}");
    assert_eq!(info.holders.len(), 1, "{info:?}");
    let shown = info.holder().expect("a holder");
    assert_eq!(shown.locker.as_deref(), Some(&*holder.description().locker));
    assert_eq!(shown.description.as_ref(), Some(holder.description()));
    let described = holder.description();
    assert_eq!(described.service, "conformance-holder");
    assert_eq!(described.pid, std::process::id());
    assert!(!described.host.is_empty() && !described.version.is_empty());
    assert_eq!(shown.label.as_deref(), Some("req-7f3a"));
    let since = shown.since.expect("since when it holds the lock");
    assert!(
        since >= before && since <= SystemTime::now() + Duration::from_secs(1),
        "{since:?}"
    );
    assert_no_token(&info);

    // A waiter of another locker shows, described.
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            waiter
                .lock(key)
                .lease(LONG_LEASE)
                .wait(CONTENDER_WAIT)
                .acquire()
                .await
        })
    };
    let waiter_id = waiter.description().locker.clone();
    let info = inspect_until(&operator, key, "the waiter", |info| {
        info.waiting
            .iter()
            .any(|w| w.locker.as_deref() == Some(&*waiter_id) && w.description.is_some())
    })
    .await;
    let seen = info
        .waiting
        .iter()
        .find(|w| w.locker.as_deref() == Some(&*waiter_id))
        .expect("the waiter");
    assert_eq!(seen.description.as_ref(), Some(waiter.description()));
    let waited = seen.waited.expect("how long it waited");
    assert!(waited < CONTENDER_WAIT + SLACK, "{waited:?}");
    assert!(info.longest_wait().is_some());
    assert!(info.waiting_processes >= 1, "{info:?}");
    assert_eq!(
        info.holder().and_then(|h| h.label.as_deref()),
        Some("req-7f3a")
    );
    assert_no_token(&info);

    // Released: the waiter holds it now, and shows as the holder.
    guard.release().await.expect("release");
    let next = bounded("the waiter's acquire", CONTENDER_WAIT + SLACK, waiting)
        .await
        .expect("the waiting task")
        .expect("the waiter got the lock");
    let info = inspect_until(&operator, key, "the new holder", |info| {
        info.holder()
            .is_some_and(|h| h.locker.as_deref() == Some(&*waiter_id))
    })
    .await;
    let shown = info.holder().expect("a holder");
    assert_eq!(shown.description.as_ref(), Some(waiter.description()));
    assert_eq!(shown.label, None, "{info:?}");
    assert!(info.waiting.is_empty(), "{info:?}");
    bounded("release", HANDOVER, next.release())
        .await
        .expect("release");
    let info = operator.inspect(key).await.expect("inspect");
    assert!(info.holders.is_empty() && !info.held, "{info:?}");
}

/// Engines without inspection (memory: its locks live in one process; RedLock: each node is
/// inspected with a locker of its own) still take labels, check them, and refuse inspection
/// clearly.
pub async fn refused_clearly(engine: &Engine) {
    let locker = engine.locker().await;
    let guard = locker
        .lock("holders")
        .label("req-7f3a")
        .acquire()
        .await
        .expect("a labelled lock");
    let err = locker.inspect("holders").await.expect_err("no inspection");
    assert!(
        matches!(err, leasehold::LockError::Config { .. }),
        "{err:?}"
    );
    let bad = locker
        .lock("holders:bad")
        .label("line\nbreak")
        .acquire()
        .await
        .expect_err("a label with a line break");
    assert!(
        matches!(bad, leasehold::LockError::InvalidKey { .. }),
        "{bad:?}"
    );
    guard.release().await.expect("release");
}

async fn named(engine: &Engine, service: &str) -> Locker {
    engine
        .builder()
        .service_name(service)
        .build()
        .await
        .unwrap_or_else(|e| panic!("cannot build a locker on {}: {e}", engine.kind()))
}

/// Inspects `key` until `done` says so, within [`DESCRIBED`] plus slack; the last answer.
async fn inspect_until(
    operator: &Locker,
    key: &str,
    what: &str,
    done: impl Fn(&LockInfo) -> bool,
) -> LockInfo {
    let last = std::sync::Mutex::new(None);
    let (seen, done) = (&last, &done);
    eventually(what, DESCRIBED + SLACK, move || async move {
        let info = operator.inspect(key).await.expect("inspect");
        let ok = done(&info);
        *seen.lock().unwrap() = Some(info);
        ok
    })
    .await;
    last.into_inner().unwrap().expect("an answer")
}

/// No owner token in what inspection shows: no run of 32 hex digits in its `Debug` (locker
/// ids are 16).
fn assert_no_token(info: &LockInfo) {
    let shown = format!("{info:?}");
    let mut run = 0;
    for c in shown.chars() {
        run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
        assert!(run < 32, "an owner token in {shown}");
    }
}
