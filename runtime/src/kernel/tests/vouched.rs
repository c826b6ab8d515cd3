//! Grants a store vouches for from before their request was sent ([`Attempt::Granted`]'s
//! `valid_from`, etcd's rule of counting a lock from its lease's last acknowledged
//! keep-alive), on the scripted store and Tokio's paused clock: the guard's validity counts
//! from there, a grant that arrives after it is given back, and the watchdog renews in time.
//!
//! [`Attempt::Granted`]: crate::store::Attempt::Granted

use std::time::Duration;

use tokio::time::Instant;

use crate::kernel::lease::{validity, DEFAULT_DRIFT};
use crate::store::keys::LockKeys;
use crate::store::scripted::ScriptedStore;
use crate::{LockError, Locker};

const KEY: &str = "vouched";
const LEASE: Duration = Duration::from_secs(10);
/// Less than any margin the assertions leave on either side of an instant.
const TICK: Duration = Duration::from_millis(5);

/// A store whose locks live with its session (as etcd's do), and one locker on it.
fn etcd_like() -> (ScriptedStore, Locker) {
    let store = ScriptedStore::new();
    store.keep_locks_for_the_session();
    let locker = Locker::scripted(store.clone());
    (store, locker)
}

/// A lease nobody renews ends `validity` after the store's earlier instant, not after the
/// request's send time.
#[tokio::test(start_paused = true)]
async fn a_grant_vouched_from_earlier_ends_that_much_sooner() {
    let (store, locker) = etcd_like();
    let earlier = Duration::from_secs(4);
    store.vouch_from_earlier(earlier);
    let sent = Instant::now();
    let guard = locker
        .lock(KEY)
        .lease(LEASE)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let ends = sent - earlier + validity(LEASE, DEFAULT_DRIFT);
    tokio::time::sleep_until(ends - TICK).await;
    assert!(guard.is_held(), "ended before its validity");
    tokio::time::sleep_until(ends + TICK).await;
    assert!(
        !guard.is_held(),
        "trusted past the validity counted from the store's instant"
    );
    tokio::time::timeout(TICK, guard.lost())
        .await
        .expect("lost() resolves at the end of the validity");
}

/// A grant whose validity, counted from the store's earlier instant, is over by the time it
/// arrives is given back, though counted from its send time it would still be good.
#[tokio::test(start_paused = true)]
async fn a_grant_arriving_after_its_vouched_validity_is_given_back() {
    let (store, locker) = etcd_like();
    let validity = validity(LEASE, DEFAULT_DRIFT);
    // Good for 1 s from the send time; the answer takes 2 s.
    store.vouch_from_earlier(validity - Duration::from_secs(1));
    store.delay_next(1, Duration::from_secs(2));
    let err = locker
        .lock(KEY)
        .lease(LEASE)
        .try_acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("after its validity"), "{err}");
    let lock = LockKeys::new(&locker.inner.prefix, KEY);
    assert!(!store.is_locked(lock.lock()), "the late grant was kept");
}

/// The watchdog renews a lease vouched for from earlier a third of the lease after that
/// instant (at once when that is past), so it never lapses while held.
#[tokio::test(start_paused = true)]
async fn a_grant_vouched_from_earlier_is_renewed_in_time() {
    let (store, locker) = etcd_like();
    // Half the validity gone at the grant: the renewal is due at once.
    store.vouch_from_earlier(validity(LEASE, DEFAULT_DRIFT) / 2);
    let guard = locker.lock(KEY).lease(LEASE).acquire().await.unwrap();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(guard.is_held(), "lapsed while held");
    }
    guard.release().await.unwrap();
}
