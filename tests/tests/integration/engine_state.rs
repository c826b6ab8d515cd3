//! `Locker::state` against real servers: each engine starts connected, is suspended while its
//! server is frozen (SIGSTOP) and reconnected once it is back, and lost when it stayed away past
//! its session or the leases held over it; each change is a tracing event of target
//! `leasehold::engine` naming the engine. On Redis also a restart (the connection drops: lost)
//! and a lazily connected locker (suspended until its first connection, then connected).
//!
//! Every wait is for a state, bounded; none is a sleep that orders two things.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{EngineState, EngineStates, Locker};
use leasehold_tests::harness::{EtcdServer, MysqlServer, PgServer, RedisServer, ZkServer};
use tracing::field::{Field, Visit};

use crate::support::{tap, Tap};

use EngineState::{Connected, Lost, Reconnected, Suspended};

/// The fields of the `leasehold::engine` events about one engine, as they come.
#[derive(Clone, Default)]
struct EngineEvents(Arc<Mutex<Vec<HashMap<String, String>>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl EngineEvents {
    /// Records, until the tap is dropped, the events of target `leasehold::engine` whose
    /// `engine` field contains `engine` (the server's port: the tap sees every test's events).
    fn capture(engine: String) -> (EngineEvents, Tap) {
        let events = EngineEvents::default();
        let sink = events.0.clone();
        let tap = tap(move |event| {
            if event.metadata().target() != "leasehold::engine" {
                return;
            }
            let mut fields = HashMap::new();
            event.record(&mut Fields(&mut fields));
            if fields.get("engine").is_some_and(|e| e.contains(&engine)) {
                fields.insert("level".into(), event.metadata().level().to_string());
                sink.lock().unwrap().push(fields);
            }
        });
        (events, tap)
    }

    /// The (state, level) of each event so far.
    fn seen(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|f| (f["state"].clone(), f["level"].clone()))
            .collect()
    }

    /// Each of `states` was told at the level its kind calls for, with a reason.
    fn assert_told(&self, states: &[EngineState]) {
        let seen = self.seen();
        for state in states {
            let level = match state {
                Suspended => "WARN",
                Lost => "ERROR",
                _ => "INFO",
            };
            assert!(
                seen.contains(&(state.to_string(), level.to_owned())),
                "no {level} event for {state}: {seen:?}"
            );
        }
        for fields in self.0.lock().unwrap().iter() {
            assert!(fields.contains_key("reason") && fields.contains_key("previous"));
        }
    }
}

/// Waits (at most `bound`) until the locker's state becomes `wanted`, and returns the changes
/// seen on the way, `wanted` last.
async fn until(
    changes: &mut EngineStates,
    wanted: EngineState,
    bound: Duration,
) -> Vec<EngineState> {
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(bound, async {
        while let Some(state) = changes.next().await {
            seen.push(state);
            if state == wanted {
                return;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok() && seen.last() == Some(&wanted),
        "not {wanted} within {bound:?}; seen {seen:?}"
    );
    seen
}

/// Redis: frozen and a call fails: suspended; thawed: reconnected (a probe notices, with no
/// call); restarted: the lock connection dropped, so lost, then reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_suspended_while_frozen_and_lost_when_restarted() {
    let srv = RedisServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", srv.port()));
    let locker = Locker::builder()
        .url(srv.url())
        .op_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    assert_eq!(locker.state(), Connected);
    let mut changes = locker.state_changes();

    srv.pause();
    let err = locker.lock("k").try_acquire().await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert_eq!(
        locker.state(),
        Suspended,
        "read at once, after the failed call"
    );
    until(&mut changes, Suspended, Duration::from_secs(5)).await;
    srv.resume();
    until(&mut changes, Reconnected, Duration::from_secs(10)).await;

    srv.restart().await;
    let seen = until(&mut changes, Lost, Duration::from_secs(10)).await;
    assert!(seen.iter().all(|s| *s != Reconnected), "{seen:?}");
    until(&mut changes, Reconnected, Duration::from_secs(10)).await;
    let guard = locker.lock("k").try_acquire().await.unwrap();
    assert!(guard.is_some());
    events.assert_told(&[Suspended, Reconnected, Lost]);
}

/// Redis frozen past the lease of a held lock: the watchdog's renewals fail (suspended), the
/// lease runs out (lost), and once the server thaws the engine is reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_frozen_past_a_lease_is_lost() {
    let srv = RedisServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", srv.port()));
    let locker = Locker::builder()
        .url(srv.url())
        .op_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let mut changes = locker.state_changes();
    let guard = locker
        .lock("held")
        .lease(Duration::from_millis(1500))
        .acquire()
        .await
        .unwrap();
    srv.pause();
    let seen = until(&mut changes, Lost, Duration::from_secs(10)).await;
    assert_eq!(seen, [Suspended, Lost]);
    assert!(!guard.is_held());
    srv.resume();
    until(&mut changes, Reconnected, Duration::from_secs(10)).await;
    drop(guard);
    events.assert_told(&[Suspended, Lost, Reconnected]);
}

/// A lazily connected locker is suspended until the engine first answers, then connected (a
/// first connection, not a reconnection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_locker_is_suspended_until_its_first_connection() {
    let srv = RedisServer::start().await;
    srv.stop();
    let (events, _tap) = EngineEvents::capture(format!(":{}", srv.port()));
    let locker = Locker::builder()
        .url(srv.url())
        .lazy_connect(true)
        .op_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    assert_eq!(locker.state(), Suspended);
    let mut changes = locker.state_changes();
    srv.restart().await;
    let seen = until(&mut changes, Connected, Duration::from_secs(20)).await;
    assert_eq!(seen, [Connected]);
    assert!(locker.lock("k").try_acquire().await.unwrap().is_some());
    events.assert_told(&[Connected]);
}

/// ZooKeeper: the session disconnected while the server is frozen (suspended), connected again
/// once it thaws (reconnected); frozen past the session timeout, the session ends (lost), and
/// the next probe opens a new one (reconnected). No call is made: the session tells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_suspended_while_disconnected_and_lost_when_the_session_ends() {
    let zk = ZkServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", zk.port()));
    let session = Duration::from_secs(3);
    let locker = Locker::builder()
        .zookeeper(zk.connect_string())
        .session_timeout(session)
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let bounds = [session * 3, session * 3, session * 4, session * 5];
    suspended_reconnected_lost_reconnected(&locker, &events, || zk.pause(), || zk.resume(), bounds)
        .await;
}

/// etcd: keep-alives unacknowledged while the server is frozen (suspended, long before the
/// TTL), acknowledged again once it thaws (reconnected); frozen past the TTL, the lease is
/// given up (lost), and the next probe grants a new one (reconnected). No call is made: the
/// keep-alives tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_suspended_while_keep_alives_fail_and_lost_past_the_ttl() {
    let etcd = EtcdServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", etcd.addr().port()));
    let ttl = Duration::from_secs(4);
    let locker = Locker::builder()
        .etcd([etcd.endpoint()])
        .session_timeout(ttl)
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let bounds = [ttl, ttl * 3, ttl * 3, ttl * 4];
    suspended_reconnected_lost_reconnected(
        &locker,
        &events,
        || etcd.pause(),
        || etcd.resume(),
        bounds,
    )
    .await;
}

/// The course of an engine whose session tells (ZooKeeper, etcd): frozen briefly, suspended
/// and then reconnected; frozen past the session, suspended and then lost, and reconnected in
/// a new session once it thaws, where locks are taken again. Each step within its bound, in
/// order; each change told once.
async fn suspended_reconnected_lost_reconnected(
    locker: &Locker,
    events: &EngineEvents,
    pause: impl Fn(),
    resume: impl Fn(),
    bounds: [Duration; 4],
) {
    assert_eq!(locker.state(), Connected);
    let mut changes = locker.state_changes();

    pause();
    until(&mut changes, Suspended, bounds[0]).await;
    resume();
    until(&mut changes, Reconnected, bounds[1]).await;

    pause();
    let seen = until(&mut changes, Lost, bounds[2]).await;
    assert_eq!(seen, [Suspended, Lost]);
    resume();
    until(&mut changes, Reconnected, bounds[3]).await;
    assert!(locker.lock("k").try_acquire().await.unwrap().is_some());
    events.assert_told(&[Suspended, Reconnected, Lost]);
}

/// PostgreSQL: the listening connection's health check fails while the server is frozen
/// (suspended, with no call), and it listens again once it thaws (reconnected); frozen past
/// the lease of a held lock, the watchdog cannot renew it in time (lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_suspended_while_frozen_and_lost_past_a_lease() {
    let pg = PgServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", pg.port()));
    let locker = Locker::builder()
        .postgres(pg.url())
        .prefix("state")
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    assert_eq!(locker.state(), Connected);
    let mut changes = locker.state_changes();

    pg.pause();
    until(&mut changes, Suspended, Duration::from_secs(10)).await;
    pg.resume();
    until(&mut changes, Reconnected, Duration::from_secs(15)).await;

    let guard = locker
        .lock("held")
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    pg.pause();
    let seen = until(&mut changes, Lost, Duration::from_secs(15)).await;
    assert_eq!(seen, [Suspended, Lost]);
    assert!(!guard.is_held());
    pg.resume();
    until(&mut changes, Reconnected, Duration::from_secs(15)).await;
    drop(guard);
    events.assert_told(&[Suspended, Reconnected, Lost]);
}

/// MySQL: the wake log's reader asks the server on a schedule and fails while the server is
/// frozen (suspended, with no call), and succeeds again once it thaws (reconnected); frozen
/// past the lease of a held lock, the watchdog cannot renew it in time (lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_suspended_while_frozen_and_lost_past_a_lease() {
    let db = MysqlServer::start().await;
    let (events, _tap) = EngineEvents::capture(format!(":{}", db.port()));
    let locker = Locker::builder()
        .mysql(db.url())
        .prefix("state")
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    assert_eq!(locker.state(), Connected);
    let mut changes = locker.state_changes();

    db.pause();
    until(&mut changes, Suspended, Duration::from_secs(10)).await;
    db.resume();
    until(&mut changes, Reconnected, Duration::from_secs(15)).await;

    let guard = locker
        .lock("held")
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    db.pause();
    let seen = until(&mut changes, Lost, Duration::from_secs(15)).await;
    assert_eq!(seen, [Suspended, Lost]);
    assert!(!guard.is_held());
    db.resume();
    until(&mut changes, Reconnected, Duration::from_secs(15)).await;
    drop(guard);
    events.assert_told(&[Suspended, Reconnected, Lost]);
}
