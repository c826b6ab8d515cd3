//! The engine's health (`kernel::health`) on the scripted store and Tokio's paused clock:
//! what moves a locker's state where, the order of outcomes (by send time), the monitor's
//! probes and the engine's own reports, losses, and closing.

use std::time::Duration;

use tokio::time::Instant;

use crate::kernel::health::EngineState::{self, *};
use crate::kernel::health::EngineStates;
use crate::store::scripted::ScriptedStore;
use crate::Locker;

/// The probe's pace (`health::monitor::PROBE_EVERY`).
const PROBE: Duration = Duration::from_secs(1);

/// A locker on a scripted store, with its background (watchdog and health monitor) running.
fn locker() -> (ScriptedStore, Locker, EngineStates) {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    locker.inner.start_background();
    let changes = locker.state_changes();
    (store, locker, changes)
}

/// The next change, within a bound far above anything these tests wait for.
async fn next(changes: &mut EngineStates) -> Option<EngineState> {
    tokio::time::timeout(Duration::from_secs(60), changes.next())
        .await
        .expect("no change of state within 60 s")
}

/// No change comes within `d`.
async fn quiet_for(changes: &mut EngineStates, d: Duration) {
    if let Ok(change) = tokio::time::timeout(d, changes.next()).await {
        panic!("unexpected change: {change:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_call_suspends_and_a_probe_reconnects() {
    let (store, locker, mut changes) = locker();
    assert_eq!(locker.state(), Connected);
    // The attempt, and the give-back of what it may have taken (a call too).
    store.fail_next(2);
    let err = locker.lock("k").try_acquire().await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    // Read at once, with no round trip: the failed call moved it.
    assert_eq!(locker.state(), Suspended);
    assert_eq!(next(&mut changes).await, Some(Suspended));
    let suspended = Instant::now();
    // Nothing else is sent: the monitor's probe finds the engine back.
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert_eq!(suspended.elapsed(), PROBE);
    assert!(locker.state().is_connected());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn probes_go_on_while_they_fail() {
    let (store, locker, mut changes) = locker();
    store.fail_next(4); // the attempt and its give-back, then two probes
    assert!(locker.lock("k").try_acquire().await.is_err());
    assert_eq!(next(&mut changes).await, Some(Suspended));
    let suspended = Instant::now();
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert_eq!(suspended.elapsed(), PROBE * 3);
}

/// Any call answered after the failure ends the suspension, without waiting for a probe:
/// here the give-back of the failed attempt, which the engine answers.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_answered_call_ends_a_suspension_before_the_probe() {
    let (store, locker, mut changes) = locker();
    store.fail_next(1);
    assert!(locker.lock("a").try_acquire().await.is_err());
    assert_eq!(next(&mut changes).await, Some(Suspended));
    let suspended = Instant::now();
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert!(suspended.elapsed() < PROBE);
}

/// A call sent before the failure that suspended the engine, and answered after it, does
/// not count as the engine answering again.
/// Issue 46: only the server's answer reconnects. While every call is answered by the store
/// alone (etcd and ZooKeeper: the give-back of an attempt that held nothing, whose clean-up
/// goes on in the background; renewals over a session that is gone), the locker stays
/// suspended, probes and all; the first answer of the server reconnects it. (The give-back
/// reconnected it at once, the server frozen.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn answers_the_store_gave_alone_do_not_reconnect() {
    let (store, locker, mut changes) = locker();
    store.fail_next(1);
    store.answer_alone(u32::MAX);
    assert!(locker.lock("a").try_acquire().await.is_err());
    assert_eq!(next(&mut changes).await, Some(Suspended));
    quiet_for(&mut changes, PROBE * 5).await;
    store.heal();
    let healed = Instant::now();
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert!(healed.elapsed() <= PROBE);
}

/// The same on a lost session: probes answered by the store alone leave it lost (etcd: it
/// answered its renewals "not renewed" without a call once the session was gone, and the
/// state went from lost back to reconnected, etcd still frozen).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn answers_the_store_gave_alone_leave_a_lost_session_lost() {
    let (store, locker, mut changes) = locker();
    store.keep_locks_for_the_session();
    let guard = locker.lock("a").acquire().await.unwrap();
    store.answer_alone(u32::MAX);
    store.drop_connection();
    assert_eq!(next(&mut changes).await, Some(Lost));
    quiet_for(&mut changes, PROBE * 5).await;
    assert!(!guard.is_held());
    store.heal();
    let healed = Instant::now();
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert!(healed.elapsed() <= PROBE);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_slow_answer_sent_before_the_failure_does_not_reconnect() {
    let (store, locker, mut changes) = locker();
    store.delay_next(1, Duration::from_millis(500));
    let slow = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("slow").try_acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    store.fail_next(2);
    assert!(locker.lock("fails").try_acquire().await.is_err());
    assert_eq!(next(&mut changes).await, Some(Suspended));
    let answered = slow.await.unwrap().unwrap();
    assert!(answered.is_some(), "the slow call was answered");
    assert_eq!(locker.state(), Suspended, "a straggler reconnected it");
    // The probe (a second after the failure) does.
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    drop(answered);
}

/// A call that times out after one sent later was answered does not suspend the engine.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_slow_failure_sent_before_an_answer_does_not_suspend() {
    let (store, locker, mut changes) = locker();
    store.delay_next(1, Duration::from_millis(500));
    store.fail_next(1);
    let slow = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.lock("slow").try_acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let guard = locker.lock("fast").try_acquire().await.unwrap().unwrap();
    assert!(slow.await.unwrap().unwrap_err().is_unavailable());
    assert_eq!(locker.state(), Connected);
    quiet_for(&mut changes, PROBE * 3).await;
    guard.release().await.unwrap();
}

/// The connection a lease was granted over dropped (a Redis server that restarted): lost, and
/// reconnected once the engine answers, with nobody calling it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_dropped_session_is_lost_then_reconnected() {
    let (store, locker, mut changes) = locker();
    let guard = locker.lock("k").acquire().await.unwrap();
    store.drop_connection();
    assert_eq!(next(&mut changes).await, Some(Lost));
    assert!(!guard.is_held());
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    drop(guard);
}

/// Renewals that fail suspend the engine; once a lease runs out without one, it is lost;
/// once calls are answered again, reconnected.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn renewals_failing_until_a_lease_ends_make_it_lost() {
    let (store, locker, mut changes) = locker();
    let lease = Duration::from_secs(3);
    let guard = locker.lock("k").lease(lease).acquire().await.unwrap();
    let taken = Instant::now();
    store.fail_next(10_000);
    assert_eq!(next(&mut changes).await, Some(Suspended));
    // The first renewal, a third of the lease in.
    assert_eq!(taken.elapsed(), lease / 3);
    assert_eq!(next(&mut changes).await, Some(Lost));
    assert!(taken.elapsed() < lease, "lost while the lease ran out");
    guard.lost().await;
    store.heal();
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    drop(guard);
}

/// What the engine says of its own connection (ZooKeeper's session events, etcd's
/// keep-alives, PostgreSQL's listening connection) moves the state without any call.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_engines_own_reports_suspend_and_reconnect() {
    let (store, locker, mut changes) = locker();
    store.fail_next(2); // the probes of the first two seconds
    store.report_link(false);
    assert_eq!(next(&mut changes).await, Some(Suspended));
    let suspended = Instant::now();
    quiet_for(&mut changes, PROBE * 2 + PROBE / 2).await;
    store.report_link(true);
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    assert_eq!(
        suspended.elapsed(),
        PROBE * 2 + PROBE / 2,
        "the report reconnected it"
    );
    assert!(locker.state().is_connected());
}

/// A subscriber that was busy sees each change, in order, not only the latest.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_change_reaches_a_subscriber_in_order() {
    let (store, locker, mut changes) = locker();
    let mut late = locker.state_changes();
    store.fail_next(2);
    assert!(locker.lock("k").try_acquire().await.is_err());
    store.drop_connection();
    assert_eq!(next(&mut changes).await, Some(Suspended));
    assert_eq!(next(&mut changes).await, Some(Lost));
    assert_eq!(next(&mut changes).await, Some(Reconnected));
    // `late` was not polled meanwhile: it still gets all three.
    assert_eq!(late.current(), Reconnected);
    for expected in [Suspended, Lost, Reconnected] {
        assert_eq!(next(&mut late).await, Some(expected));
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_closed_locker_stays_closed() {
    let (store, locker, mut changes) = locker();
    locker.close().await;
    assert_eq!(locker.state(), Closed);
    assert_eq!(next(&mut changes).await, Some(Closed));
    assert_eq!(next(&mut changes).await, None);
    store.drop_connection();
    store.report_link(false);
    tokio::time::sleep(PROBE * 3).await;
    assert_eq!(locker.state(), Closed);
    assert_eq!(locker.state_changes().next().await, None);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn in_memory_is_connected_until_closed() {
    let locker = Locker::in_memory();
    let guard = locker.lock("k").acquire().await.unwrap();
    assert_eq!(locker.state(), Connected);
    guard.release().await.unwrap();
    let mut changes = locker.state_changes();
    locker.close().await;
    assert_eq!(next(&mut changes).await, Some(Closed));
}

/// A locker that connects lazily is suspended until its first connection.
#[tokio::test(flavor = "current_thread")]
async fn a_lazy_locker_is_suspended_until_connected() {
    // Nothing listens on port 1: the background connection keeps failing.
    let locker = Locker::builder()
        .url("redis://127.0.0.1:1")
        .lazy_connect(true)
        .build()
        .await
        .unwrap();
    assert_eq!(locker.state(), Suspended);
    assert!(locker.lock("k").try_acquire().await.is_err());
    assert_eq!(locker.state(), Suspended);
}
