//! The library under a Redis ACL user limited to its key prefix, its channels and the
//! commands it uses (the ACL documented in RELIABILITY.md, "Running with a Redis ACL"):
//! everything works, `ACL LOG` records no denial, and the user can touch nothing else. And
//! the warning on connect when `maxmemory-policy` could evict live locks.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{RedisOptions, RedisServer};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The documented ACL for prefix `leasehold`, one rule per line (RELIABILITY.md has the
/// same lines, with the reason for each). Each one is needed: without it the workload below
/// fails or `ACL LOG` records a denial (`+info|memory` only feeds the maxmemory warning).
const ACL: &[&str] = &[
    "resetkeys",
    "resetchannels",
    "-@all",
    "~leasehold:*",
    "&leasehold:*",
    "+evalsha",
    "+script|load",
    "+get",
    "+mget",
    "+set",
    "+del",
    "+exists",
    "+pexpire",
    "+pttl",
    "+append",
    "+incrby",
    "+time",
    "+zadd",
    "+zrem",
    "+zrange",
    "+zrangebyscore",
    "+zremrangebyscore",
    "+zcard",
    "+zcount",
    "+zscore",
    "+hget",
    "+hmget",
    "+hset",
    "+publish",
    "+subscribe",
    "+unsubscribe",
    "+ping",
    "+info|memory",
];

const PASSWORD: &str = "acl-test-password";

async fn create_user(srv: &RedisServer, rules: &[&str]) {
    let mut admin = srv.conn().await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg("locks")
        .arg("on")
        .arg(format!(">{PASSWORD}"));
    for r in rules {
        cmd.arg(*r);
    }
    let _: () = cmd.query_async(&mut admin).await.expect("ACL SETUSER");
}

async fn acl_log(srv: &RedisServer) -> Vec<String> {
    let mut admin = srv.conn().await;
    let entries: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    entries.iter().map(|e| format!("{e:?}")).collect()
}

fn user_url(srv: &RedisServer) -> String {
    format!("redis://locks:{PASSWORD}@{}", srv.addr())
}

async fn locker(url: &str) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_secs(1))
        .default_wait(Duration::from_secs(5))
        .build()
        .await
        .expect("connect as the ACL user")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_is_enough_and_confines_the_library() {
    let srv = RedisServer::start().await;
    create_user(&srv, ACL).await;
    let a = locker(&user_url(&srv)).await;
    let b = locker(&user_url(&srv)).await;

    // Uncontended (fenced, and unfenced: a native SET), contended with a wake-up, renewed by
    // the watchdog, handed over locally.
    a.lock("k")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    a.lock("k")
        .unfenced()
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let held = a
        .lock("k")
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("k").acquire().await.unwrap().release().await })
    };
    let local = {
        let a = a.clone();
        tokio::spawn(async move {
            a.lock("k")
                .lease(Duration::from_millis(300))
                .acquire()
                .await
                .unwrap()
                .release()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await; // two renewals
    assert!(held.is_held());
    assert!(b.lock("k").try_acquire().await.unwrap().is_none());
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    local.await.unwrap().unwrap();

    // The scripts flushed (as after a restart): they are loaded again with the user's rights.
    let mut admin = srv.conn().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    a.lock("k")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // Idle wake channels are unsubscribed after a linger of 2 s.
    tokio::time::sleep(Duration::from_millis(4500)).await;

    let denied = acl_log(&srv).await;
    assert!(denied.is_empty(), "the library was denied: {denied:#?}");

    // The user can touch nothing but the library's keys and channels.
    let mut user = redis::Client::open(user_url(&srv))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let refused = [
        redis::cmd("GET").arg("other:key").clone(),
        redis::cmd("SET").arg("other:key").arg("1").clone(),
        redis::cmd("PUBLISH").arg("other:channel").arg("x").clone(),
        redis::cmd("EVAL")
            .arg("return redis.call('GET', KEYS[1])")
            .arg(1)
            .arg("other:key")
            .clone(),
        redis::cmd("EVAL")
            .arg("return redis.call('FLUSHALL')")
            .arg(0)
            .clone(),
        redis::cmd("KEYS").arg("*").clone(),
        redis::cmd("FLUSHALL").clone(),
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("1")
            .clone(),
    ];
    for cmd in refused {
        let answer = cmd.query_async::<redis::Value>(&mut user).await;
        let err = answer.expect_err("the ACL let it through").to_string();
        assert!(
            ["NOPERM", "permission", "can't run this command"]
                .iter()
                .any(|m| err.contains(m)),
            "{err}"
        );
    }
}

/// Every primitive under the documented ACL, not only the plain lock: multi-key locks, read
/// locks (and a writer waiting for readers), fair locks, a waiter that gives up, a hold that
/// outlives its release, semaphores (their own wake channels), leader election and its
/// observers (the election's wake channel), and a connection that drops and comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_runs_under_the_documented_acl() {
    let srv = RedisServer::start().await;
    create_user(&srv, ACL).await;
    let a = locker(&user_url(&srv)).await;
    let b = locker(&user_url(&srv)).await;

    // Several keys at once, free (one script) and with one of them taken.
    let all = a.lock_all(["x", "y"]).acquire().await.unwrap();
    assert!(b.lock("x").try_acquire().await.unwrap().is_none());
    all.release().await.unwrap();
    let y = b.lock("y").acquire().await.unwrap();
    let taking = {
        let a = a.clone();
        tokio::spawn(async move {
            a.lock_all(["x", "y"])
                .acquire()
                .await
                .unwrap()
                .release()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    y.release().await.unwrap();
    taking.await.unwrap().unwrap();

    // A waiter that gives up leaves the queue.
    let held = a.lock("k").acquire().await.unwrap();
    let busy = b.lock("k").wait(Duration::from_millis(300)).acquire().await;
    assert!(
        matches!(busy, Err(leasehold::LockError::Busy { .. })),
        "{busy:?}"
    );
    held.release().await.unwrap();

    // Fair requests of two processes, one after the other.
    let first = a.lock("f").fair(true).acquire().await.unwrap();
    let second = {
        let b = b.clone();
        tokio::spawn(async move {
            b.lock("f")
                .fair(true)
                .acquire()
                .await
                .unwrap()
                .release()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.release().await.unwrap();
    second.await.unwrap().unwrap();

    // A hold that outlives its release.
    let job = a
        .lock("job")
        .hold_at_least(Duration::from_millis(500))
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    job.release().await.unwrap();
    assert!(b.lock("job").try_acquire().await.unwrap().is_none());

    // Readers share, renew, and let a waiting writer in when they leave.
    let r1 = a
        .read_lock("doc")
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    let r2 = b.read_lock("doc").acquire().await.unwrap();
    // A writer that gives up while readers hold the lock takes its wait back.
    let gave_up = b
        .write_lock("doc")
        .wait(Duration::from_millis(200))
        .acquire()
        .await;
    assert!(
        matches!(gave_up, Err(leasehold::LockError::Busy { .. })),
        "{gave_up:?}"
    );
    let writer = {
        let b = b.clone();
        tokio::spawn(async move { b.write_lock("doc").acquire().await.unwrap().release().await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await; // renewals of r1
    assert!(r1.is_held());
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    writer.await.unwrap().unwrap();

    // Semaphores: permits with leases, a waiter woken by a release, inspection of holders.
    let p1 = a.semaphore("api", 2).acquire().await.unwrap();
    let p2 = a.semaphore("api", 2).acquire().await.unwrap();
    assert!(b.semaphore("api", 2).try_acquire().await.unwrap().is_none());
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move {
            b.semaphore("api", 2)
                .acquire()
                .await
                .unwrap()
                .release()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    p1.release().await.unwrap();
    waiting.await.unwrap().unwrap();
    let many = {
        let b = b.clone();
        tokio::spawn(async move {
            b.semaphore("api", 2)
                .acquire_many(2)
                .await
                .unwrap()
                .release()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    p2.release().await.unwrap();
    many.await.unwrap().unwrap();

    // Leader election: a leader, an observer that sees it come and go, a successor.
    let mut seen = b.observe_leader("scheduler").unwrap();
    let leader = a
        .leader("scheduler")
        .identity("a")
        .campaign()
        .await
        .unwrap();
    let observed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(l) = seen.next().await.unwrap() {
                return l;
            }
        }
    })
    .await
    .expect("the observer sees the leader");
    assert_eq!(observed.identity(), "a");
    let successor = {
        let b = b.clone();
        tokio::spawn(async move {
            b.leader("scheduler")
                .identity("b")
                .campaign()
                .await
                .unwrap()
                .resign()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    leader.resign().await.unwrap();
    successor.await.unwrap().unwrap();

    // The connections drop (as when the server restarts) and come back.
    let mut admin = srv.conn().await;
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("locks")
        .query_async(&mut admin)
        .await
        .unwrap();
    let back = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(g) = a.lock("k").acquire().await {
                return g;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the locker works again after its connections dropped");
    back.release().await.unwrap();
    // Idle wake channels are unsubscribed after a linger of 2 s.
    tokio::time::sleep(Duration::from_millis(4500)).await;

    let denied = acl_log(&srv).await;
    assert!(denied.is_empty(), "the library was denied: {denied:#?}");
}

/// The ACL documented before renewals used `MGET` (the same rules without `+mget`): the
/// watchdog still renews, by a GET per key, so an upgrade does not lose every held lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_without_mget_still_renews() {
    let srv = RedisServer::start().await;
    let older: Vec<&str> = ACL.iter().copied().filter(|r| *r != "+mget").collect();
    create_user(&srv, &older).await;
    let a = locker(&user_url(&srv)).await;
    let held = a
        .lock("k")
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await; // several renewals
    assert!(held.is_held(), "renewals stopped without +mget");
    assert!(a.lock("k").try_acquire().await.unwrap().is_none());
    held.release().await.unwrap();
    let denied = acl_log(&srv).await;
    assert!(
        denied.iter().all(|d| d.contains("mget")),
        "only MGET was denied: {denied:#?}"
    );
    assert!(!denied.is_empty(), "MGET is denied under this ACL");
}

#[tokio::test]
async fn without_info_memory_the_library_still_works() {
    // The maxmemory check is optional: a user without `+info|memory` loses only the warning.
    let srv = RedisServer::start().await;
    let rules: Vec<&str> = ACL
        .iter()
        .copied()
        .filter(|r| *r != "+info|memory")
        .collect();
    create_user(&srv, &rules).await;
    let l = locker(&user_url(&srv)).await;
    l.lock("k")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let denied = acl_log(&srv).await;
    assert!(
        !denied.is_empty(),
        "the library no longer reads INFO memory on connect: drop `+info|memory` from the ACL"
    );
    assert!(
        denied.iter().all(|d| d.contains("info")),
        "only the optional INFO memory may be denied: {denied:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The maxmemory-policy warning on connect
// ---------------------------------------------------------------------------------------------

/// Records the warnings, as text.
struct Warnings(Arc<Mutex<String>>, AtomicU64);

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        *m.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.1.fetch_add(1, Ordering::Relaxed))
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut text = self.0.lock().unwrap();
        text.push('\n');
        event.record(&mut Fields(&mut text));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn a_server_that_may_evict_locks_is_reported_on_connect() {
    let text = Arc::new(Mutex::new(String::new()));
    // The warning is logged while `build` runs, on this thread (a current-thread runtime).
    let _warnings = crate::support::scoped(Warnings(text.clone(), AtomicU64::new(1)));
    let cases: &[(&[&str], bool)] = &[
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
            true,
        ),
        // Locks have a TTL: the volatile policies pick exactly them.
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"],
            true,
        ),
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"],
            false,
        ),
        // No memory limit, no eviction.
        (
            &["--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"],
            false,
        ),
    ];
    for (args, warns) in cases {
        let srv = RedisServer::start_with(RedisOptions::default().args(*args)).await;
        text.lock().unwrap().clear();
        let _locker = locker(&srv.url()).await;
        let warned = text.lock().unwrap().contains("maxmemory-policy");
        assert_eq!(warned, *warns, "{args:?}: {}", text.lock().unwrap());
    }
}
