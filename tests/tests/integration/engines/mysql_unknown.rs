//! MySQL's calls whose outcome is unknown, against a real MariaDB through the harness's proxy,
//! as `postgres_unknown.rs` does for PostgreSQL: an acquire whose request reaches the server
//! only after its client gave up on it (a `try_acquire` that timed out, an acquire whose caller
//! was cancelled) must not take the lock after its give-back ran. Each case has its control, a
//! hold shorter than the operation timeout, whose call is simply answered.
//!
//! Judged by what the store saw: another process's `try_acquire` (not through the proxy) gets
//! the lock within [`FREE_WITHIN`], a sixth of the [`LEASE`] that a stale acquire would keep
//! it for, and only once the held connection's session on the server has ended.

use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{eventually, Held, MysqlServer, TcpProxy};
use tokio::time::{sleep, timeout, Instant};

/// The lease of every lock here: what a stale acquire keeps the lock for.
const LEASE: Duration = Duration::from_secs(60);
/// Far below the lease, and far above what giving back takes on a loaded machine.
const FREE_WITHIN: Duration = Duration::from_secs(20);
/// Long enough that a call on a loaded machine is answered in time (as on PostgreSQL).
const OP_TIMEOUT: Duration = Duration::from_secs(2);
/// The lock's key as the engine sends it (a parameter of its `CALL leasehold_acquire`).
const KEY: &[u8] = b"myu:lock:{k}";

/// A server, a locker whose connections go through a proxy, and another process's locker
/// that connects straight.
struct Setup {
    db: MysqlServer,
    proxy: Arc<TcpProxy>,
    a: Locker,
    b: Locker,
}

impl Setup {
    async fn start() -> Self {
        Self::start_with(OP_TIMEOUT).await
    }

    /// `a`'s calls bounded by `op_timeout`.
    async fn start_with(op_timeout: Duration) -> Self {
        let db = MysqlServer::start().await;
        // The first locker of a fresh server makes the schema and warms each connection up:
        // 10 s to connect, as on PostgreSQL (postgres_unknown.rs), where the default 2 s
        // failed once beside the fault suites. The proxied `a` keeps the default.
        let b = builder(&db.url())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .await
            .expect("b's locker");
        let proxy = Arc::new(TcpProxy::start(db.addr()).await);
        let a = builder(&db.url_at(proxy.addr()))
            .op_timeout(op_timeout)
            .build()
            .await
            .expect("a's locker");
        // Connected and warm, as a service is when the fault comes.
        let warm = a.lock("warm").acquire().await.expect("a free lock");
        warm.release().await.expect("released");
        Setup { db, proxy, a, b }
    }

    /// The sessions of the lockers' user now.
    async fn sessions(&self) -> Vec<String> {
        let rows = self
            .db
            .execute(
                "SELECT id FROM information_schema.processlist \
                 WHERE user = 'leasehold' AND id <> CONNECTION_ID()",
            )
            .await
            .expect("sessions");
        rows.into_iter().flatten().flatten().collect()
    }

    /// Waits until one of the sessions `before` ended: the held connection's, which ends once
    /// it has run what the proxy delivered (its client closed it long ago), or was ended.
    async fn held_session_ended(&self, before: &[String]) {
        eventually(
            "the held connection's session ends",
            Duration::from_secs(20),
            || async {
                let now = self.sessions().await;
                before.iter().any(|id| !now.contains(id))
            },
        )
        .await;
    }

    /// Another process takes the lock within [`FREE_WITHIN`], and gives it back.
    async fn another_process_gets_the_lock(&self, after: &str) {
        let started = Instant::now();
        loop {
            match self.b.lock("k").try_acquire().await {
                Ok(Some(guard)) => {
                    guard.release().await.expect("released");
                    return;
                }
                Ok(None) | Err(_) if started.elapsed() < FREE_WITHIN => {
                    sleep(Duration::from_millis(50)).await;
                }
                other => panic!(
                    "{after}: another process could not take the lock within {FREE_WITHIN:?} \
                     ({other:?}); the store holds {:?}",
                    self.row().await
                ),
            }
        }
    }

    /// The lock's row: its owner and its expiry (microseconds since the epoch).
    async fn row(&self) -> Vec<Vec<Option<String>>> {
        self.db
            .execute(
                "SELECT CAST(owner AS CHAR), expires FROM leasehold_locks \
                 WHERE lock_key = 'myu:lock:{k}'",
            )
            .await
            .expect("the lock's row")
    }

    /// Holds the next request whose bytes hold `pattern`; the sessions before it.
    async fn hold_next(&self, pattern: &[u8]) -> Vec<String> {
        // Every pooled connection of `a` open (one ended by an earlier case opens again on its
        // next use): the held request goes out on one of them.
        for _ in 0..8 {
            let warm = self.a.lock("warm").try_acquire().await.expect("no fault");
            warm.expect("free").release().await.expect("released");
        }
        let before = self.sessions().await;
        self.proxy.hold_next_sending(pattern, Held::Requests);
        before
    }

    /// Holds the next request naming the lock, and delivers it after `after`.
    fn hold_then_deliver(&self, after: Duration) -> tokio::task::JoinHandle<()> {
        self.proxy.hold_next_sending(KEY, Held::Requests);
        let proxy = self.proxy.clone();
        tokio::spawn(async move {
            sleep(after).await;
            proxy.release_held();
        })
    }
}

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .mysql(url)
        .prefix("myu")
        .op_timeout(OP_TIMEOUT)
}

/// A `try_acquire` whose request is held past the operation timeout fails as unavailable; the
/// request then reaches the server. Nothing of it may hold the lock. Control: held for less
/// than the operation timeout, it is answered and its holder gives the lock back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_acquire_that_timed_out_takes_no_lock_when_its_request_runs_late() {
    let s = Setup::start().await;
    let delivered = s.hold_then_deliver(Duration::from_millis(100));
    let guard = s.a.lock("k").lease(LEASE).try_acquire().await;
    delivered.await.expect("delivered");
    let guard = guard.expect("answered in time").expect("a free lock");
    guard.release().await.expect("released");
    s.another_process_gets_the_lock("control").await;

    let before = s.hold_next(KEY).await;
    let err = s.a.lock("k").lease(LEASE).try_acquire().await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(
        s.proxy.caught(),
        2,
        "the try_acquire's request was not held"
    );
    // The give-back has had its chance by then; the request reaches the server after it.
    sleep(Duration::from_millis(1500)).await;
    s.proxy.release_held();
    s.held_session_ended(&before).await;
    s.another_process_gets_the_lock("a timed-out try_acquire")
        .await;
}

/// An acquire whose caller is cancelled while its request is held: the call goes on in the
/// background until the operation timeout, then gives back; the request reaches the server
/// after that. Control: delivered before the operation timeout, the call is answered in the
/// background and the lock it took given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_takes_no_lock_when_its_request_runs_late() {
    let s = Setup::start().await;
    let acquire = || {
        timeout(
            Duration::from_millis(200),
            s.a.lock("k").lease(LEASE).acquire(),
        )
    };
    let delivered = s.hold_then_deliver(Duration::from_millis(300));
    assert!(acquire().await.is_err(), "cancelled");
    assert_eq!(s.proxy.caught(), 1);
    delivered.await.expect("delivered");
    s.another_process_gets_the_lock("control").await;

    let before = s.hold_next(KEY).await;
    assert!(acquire().await.is_err(), "cancelled");
    assert_eq!(s.proxy.caught(), 2, "the acquire's request was not held");
    // Past the operation timeout of the call left in the background, and its clean-up.
    sleep(OP_TIMEOUT + Duration::from_millis(1500)).await;
    s.proxy.release_held();
    s.held_session_ended(&before).await;
    s.another_process_gets_the_lock("a cancelled acquire").await;
}

/// After an outage, on a network slow enough that opening a connection (its handshake, login
/// and session set-up: about seven round trips) takes longer than the operation timeout while
/// a call (one or two round trips) does not, calls go out again: a call that stopped waiting
/// for its connection leaves it opening for the next one. (Each call threw its opening away,
/// so no call went out until the network was fast again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_out_again_where_a_connection_opens_slower_than_a_call_may_wait() {
    let db = MysqlServer::start().await;
    let proxy = TcpProxy::start(db.addr()).await;
    super::calls_go_out_again_on_a_slow_network(&proxy, builder(&db.url_at(proxy.addr()))).await;
}

/// A call whose session the server ended under it (`KILL CONNECTION` by an operator, a
/// shutdown) is settled and sent again on a new connection, as one whose connection broke:
/// its acquire's request is held at the proxy while every session of `a` is killed, so that
/// the end of the session reaches `a` with the acquire pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_session_was_killed_under_it_is_sent_again() {
    // Long enough that the call is answered, not timed out, however loaded the machine.
    let s = Setup::start_with(Duration::from_secs(10)).await;
    let before = s.hold_next(KEY).await;
    let acquiring = tokio::spawn({
        let a = s.a.clone();
        async move { a.lock("k").lease(LEASE).try_acquire().await }
    });
    assert!(s.proxy.wait_caught(1, Duration::from_secs(10)).await);
    for id in &before {
        // The session may be gone already (b's and a's alike are the lockers' user's).
        let _ = s.db.execute(&format!("KILL CONNECTION {id}")).await;
    }
    let guard = timeout(Duration::from_secs(20), acquiring)
        .await
        .expect("answered")
        .expect("the task")
        .expect("sent again once the killed session was settled")
        .expect("granted: the lock is free");
    guard.release().await.expect("released");
    s.proxy.release_held();
    assert!(s.row().await.is_empty(), "the released lock's row is gone");
}
