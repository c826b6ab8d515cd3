//! The engine against a real `redis-server` that these tests start (one for the test binary,
//! on a free port; it ends with the test process). The conformance suite of the test crate
//! covers every property of every primitive through the locker; these check what only the
//! store's batch does: readers' shares taken beside locks in one script call, all or none.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::RedisStore;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Ended, Ending, Settings, Store};

/// The server's port, started on first use. It runs under a shell that ends it when the test
/// process ends (the shell's standard input, a pipe this process holds, then reaches its end).
fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no \
             >/dev/null 2>&1 & pid=$!; read _; kill -9 $pid"
        );
        let mut shell = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        // Held until the process ends: its end closes the pipe, which ends the server.
        std::mem::forget(shell.stdin.take().expect("piped"));
        std::mem::forget(shell);
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        port
    })
}

/// Held by each test for its whole run: the script count of one is not another's.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn store() -> RedisStore {
    let settings = Settings {
        op_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        locker_id: "0123456789abcdef".into(),
    };
    let url = format!("redis://127.0.0.1:{}", port());
    RedisStore::connect(&url, &settings, false).await.unwrap()
}

/// How many scripts the server ran so far.
async fn script_calls() -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", port())).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .filter_map(|stat| {
            let line = info.lines().find(|l| l.starts_with(stat))?;
            let calls = line.split("calls=").nth(1)?.split(',').next()?;
            calls.parse::<u64>().ok()
        })
        .sum()
}

fn request<'a>(keys: &'a LockKeys, token: &'a OwnerToken, kind: LeaseKind) -> AcquireRequest<'a> {
    AcquireRequest {
        keys,
        token,
        lease: Duration::from_secs(10),
        validity: Duration::from_secs(10),
        sent: tokio::time::Instant::now(),
        fence_ttl: Duration::from_secs(60),
        fences: 1,
        interest: Duration::ZERO,
        queued: false,
        contender: None,
        fenced: true,
        kind,
        waiter: None,
    }
}

/// One lease of `kind` on `keys` for a new token, taken alone: its attempt and the token.
async fn one(store: &dyn Store, keys: &LockKeys, kind: LeaseKind) -> (Attempt, OwnerToken) {
    let token = OwnerToken::generate();
    let attempt = store
        .acquire_one(&request(keys, &token, kind))
        .await
        .unwrap();
    (attempt, token)
}

fn granted(attempt: &Attempt) -> Option<u64> {
    match attempt {
        Attempt::Granted { top, .. } => Some(*top),
        Attempt::Held { .. } => None,
    }
}

/// A lock and a reader's share go in one script call, both granted; each then excludes
/// what it must (a writer from the read key, a reader from the locked key), and the reader's
/// fence is below the next writer's of its key, as a reader's taken alone is.
#[tokio::test]
async fn a_batch_takes_a_readers_share_beside_a_lock_in_one_script_call() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let redis = store().await;
    let store: &dyn Store = &redis;
    let (w, r) = (LockKeys::new("rb1", "w"), LockKeys::new("rb1", "r"));
    let kinds = [(&w, LeaseKind::Exclusive), (&r, LeaseKind::Read)];
    assert!(
        store.info().at_once.covers(&kinds),
        "one server takes both at once"
    );
    let permits = LeaseKind::Permits { limit: 2, count: 1 };
    assert!(!store
        .info()
        .at_once
        .covers(&[(&w, LeaseKind::Exclusive), (&r, permits)]));
    // The script loaded once.
    let warm = [LockKeys::new("rb1", "warm1"), LockKeys::new("rb1", "warm2")];
    let tokens = [OwnerToken::generate(), OwnerToken::generate()];
    let batch = [
        request(&warm[0], &tokens[0], LeaseKind::Exclusive),
        request(&warm[1], &tokens[1], LeaseKind::Read),
    ];
    store.acquire(&batch).await.unwrap();

    let before = script_calls().await;
    let tokens = [OwnerToken::generate(), OwnerToken::generate()];
    let batch = [
        request(&w, &tokens[0], LeaseKind::Exclusive),
        request(&r, &tokens[1], LeaseKind::Read),
    ];
    let attempts = store.acquire(&batch).await.unwrap();
    assert_eq!(script_calls().await - before, 1, "one script call for both");
    let tops: Vec<u64> = attempts.iter().filter_map(granted).collect();
    assert_eq!(tops.len(), 2, "{attempts:?}");
    assert!(tops[1] >= 1, "a reader's fence is at least 1");

    // The lock excludes a reader; the reader's share excludes a writer, not another reader.
    assert_eq!(granted(&one(store, &w, LeaseKind::Read).await.0), None);
    assert_eq!(granted(&one(store, &r, LeaseKind::Exclusive).await.0), None);
    let (other, other_token) = one(store, &r, LeaseKind::Read).await;
    assert!(granted(&other).is_some(), "readers share");

    // Once both readers are gone, the next writer's fence is above the batch reader's.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    for token in [&tokens[1], &other_token] {
        let ending = Ending::Release {
            kind: LeaseKind::Read,
            valid_until: until,
        };
        let ended = store.release(&r, token, ending).await.unwrap();
        assert_eq!(ended, Ended::Released(true));
    }
    let (writer, _) = one(store, &r, LeaseKind::Exclusive).await;
    let writer_fence = granted(&writer).expect("free once the readers left");
    assert!(
        writer_fence > tops[1],
        "{writer_fence} after reader {}",
        tops[1]
    );
}

/// A batch in which one lease is not free takes nothing: a read key held by a writer, or
/// free but awaited by a writer (its interest is live); a lock held by readers. The other
/// keys of the batch stay free.
#[tokio::test]
async fn a_batch_with_a_busy_lease_takes_nothing() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let redis = store().await;
    let store: &dyn Store = &redis;
    let free = LockKeys::new("rb2", "free");
    let tokens = [OwnerToken::generate(), OwnerToken::generate()];

    // A writer holds the read key.
    let written = LockKeys::new("rb2", "written");
    assert!(granted(&one(store, &written, LeaseKind::Exclusive).await.0).is_some());
    // Readers hold the write key.
    let read = LockKeys::new("rb2", "read");
    assert!(granted(&one(store, &read, LeaseKind::Read).await.0).is_some());
    // Nobody holds the key, but a writer waits for it: its interest is live.
    let awaited = LockKeys::new("rb2", "awaited");
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}", port()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let far = i64::MAX / 2;
    let _: i64 = redis::cmd("ZADD")
        .arg(awaited.interest())
        .arg(far)
        .arg("a-waiting-writer")
        .query_async(&mut conn)
        .await
        .unwrap();

    for (busy, kind) in [
        (&written, LeaseKind::Read),
        (&read, LeaseKind::Exclusive),
        (&awaited, LeaseKind::Read),
    ] {
        let batch = [
            request(&free, &tokens[0], LeaseKind::Exclusive),
            request(busy, &tokens[1], kind),
        ];
        let attempts = store.acquire(&batch).await.unwrap();
        assert!(
            attempts.iter().all(|a| granted(a).is_none()),
            "{busy:?} {kind:?}: {attempts:?}"
        );
        assert_eq!(attempts.len(), 2);
        // Nothing of the batch was taken.
        let (alone, token) = one(store, &free, LeaseKind::Exclusive).await;
        assert!(
            granted(&alone).is_some(),
            "{busy:?}: the free key stayed free"
        );
        let ending = Ending::Release {
            kind: LeaseKind::Exclusive,
            valid_until: tokio::time::Instant::now() + Duration::from_secs(10),
        };
        store.release(&free, &token, ending).await.unwrap();
    }
    // A reader alone is refused at the awaited key too, as in the batch.
    assert_eq!(
        granted(&one(store, &awaited, LeaseKind::Read).await.0),
        None
    );
}

/// Through the locker's kernel: a lock and a read lock taken at once are guards like those
/// taken one by one (the read guard shares its key with other readers and keeps writers out;
/// the lock keeps everyone out), from one script call, and their releases free both keys.
#[tokio::test]
async fn the_kernel_takes_a_read_lock_beside_a_lock_at_once() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let url = format!("redis://127.0.0.1:{}", port());
    let build = || {
        crate::Locker::builder()
            .url(url.clone())
            .prefix("rb3")
            .build()
    };
    let (a, b) = (build().await.unwrap(), build().await.unwrap());
    // The script loaded once.
    let opts = a.lock("warm").options().unwrap();
    let warm = [
        ("warm1".to_owned(), LeaseKind::Exclusive),
        ("warm2".to_owned(), LeaseKind::Read),
    ];
    let warmed = a.inner.acquire_at_once(&warm, opts).await.unwrap();
    drop(warmed.expect("free keys at once"));

    let before = script_calls().await;
    let batch = [
        ("books".to_owned(), LeaseKind::Exclusive),
        ("prices".to_owned(), LeaseKind::Read),
    ];
    let holds = a.inner.acquire_at_once(&batch, opts).await.unwrap();
    assert_eq!(script_calls().await - before, 1, "one script call for both");
    let guards: Vec<crate::LockGuard> = holds
        .expect("free keys at once")
        .into_iter()
        .map(crate::LockGuard::from)
        .collect();
    assert!(guards.iter().all(|g| g.is_held() && g.fence() > 0));

    assert!(b.read_lock("books").try_acquire().await.unwrap().is_none());
    assert!(b.lock("prices").try_acquire().await.unwrap().is_none());
    let reader = b.read_lock("prices").try_acquire().await.unwrap();
    assert!(reader.is_some(), "a read lock shares its key with readers");
    drop(reader);

    for guard in guards {
        guard.release().await.unwrap();
    }
    let writer = b
        .lock("prices")
        .wait(Duration::from_secs(5))
        .acquire()
        .await;
    assert!(writer.is_ok(), "the read lock was released: {writer:?}");
    assert!(b.lock("books").try_acquire().await.unwrap().is_some());
}

/// How many times the server ran `command` so far.
async fn command_calls(command: &str) -> u64 {
    let mut conn = raw().await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    let stat = format!("cmdstat_{command}:");
    info.lines()
        .find(|l| l.starts_with(&stat))
        .and_then(|l| l.split("calls=").nth(1)?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// A plain connection to the tests' server.
async fn raw() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", port())).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// A lone release goes the script's short way when its lock was plainly ours (or plainly
/// not), and the long way otherwise: every case answers as before, as the server shows.
#[tokio::test]
async fn a_lone_release_answers_every_case_of_the_script() {
    let _one = ONE_AT_A_TIME.lock().await;
    let store = store().await;
    let mut conn = raw().await;
    let keys = LockKeys::new("lone", "k");
    let token = OwnerToken::generate();
    let set = |value: Vec<u8>| redis::cmd("SET").arg(keys.lock()).arg(value).clone();
    let exists = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        let key = keys.lock().to_owned();
        async move {
            redis::cmd("EXISTS")
                .arg(key)
                .query_async::<bool>(&mut conn)
                .await
                .unwrap()
        }
    };
    // Ours, nobody waited: deleted, no wake-up.
    let published = command_calls("publish").await;
    let () = set(token.as_bytes().to_vec())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(store.release(&keys, &token).await.unwrap());
    assert!(!exists(&mut conn).await);
    assert_eq!(command_calls("publish").await, published);
    // Free, or another holder's: nothing changes.
    assert!(!store.release(&keys, &token).await.unwrap());
    let other = OwnerToken::generate();
    let () = set(other.as_bytes().to_vec())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!store.release(&keys, &token).await.unwrap());
    assert!(exists(&mut conn).await, "another holder's lock stays");
    // Ours, and someone waited (the `+` mark): released, and the waiters hear it.
    let mut marked = token.as_bytes().to_vec();
    marked.push(b'+');
    let () = set(marked).query_async(&mut conn).await.unwrap();
    assert!(store.release(&keys, &token).await.unwrap());
    assert!(!exists(&mut conn).await);
    assert_eq!(command_calls("publish").await, published + 1);
    // A key of another type: this caller's error, naming the refusal.
    let () = redis::cmd("HSET")
        .arg(keys.lock())
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
    let refused = store.release(&keys, &token).await.unwrap_err();
    assert!(refused.to_string().contains("refused"), "{refused}");
    let () = redis::cmd("DEL")
        .arg(keys.lock())
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
}

/// Group commit, as the server sees it: acquires that meet on their way go in one script
/// call, and so do their releases. 32 acquires of free locks, started together: the first goes
/// out alone, and the rest, which find it on its way, share the next call.
#[tokio::test]
async fn concurrent_acquires_and_releases_share_script_calls() {
    let _one = ONE_AT_A_TIME.lock().await;
    let store = store().await;
    let keys: Vec<LockKeys> = (0..32)
        .map(|i| LockKeys::new("group", &format!("k{i}")))
        .collect();
    let tokens: Vec<OwnerToken> = keys.iter().map(|_| OwnerToken::generate()).collect();
    let requests: Vec<AcquireRequest<'_>> = keys
        .iter()
        .zip(&tokens)
        .map(|(k, t)| request(k, t, LeaseKind::Exclusive))
        .collect();
    let before = script_calls().await;
    let attempts = crate::store::join_all(requests.iter().map(|r| store.acquire(r))).await;
    let acquired = script_calls().await - before;
    assert!(
        attempts
            .iter()
            .all(|a| a.as_ref().is_ok_and(|a| granted(a).is_some())),
        "{attempts:?}"
    );
    assert!(acquired <= 2, "32 acquires took {acquired} script calls");
    let before = script_calls().await;
    let released =
        crate::store::join_all(keys.iter().zip(&tokens).map(|(k, t)| store.release(k, t))).await;
    let calls = script_calls().await - before;
    assert!(
        released.iter().all(|r| matches!(r, Ok(true))),
        "{released:?}"
    );
    assert!(calls <= 2, "32 releases took {calls} script calls");
}

/// A `lock_all` guard gives its keys back together: the releases meet on their way and share
/// script calls (one at a time, four keys took four).
#[tokio::test]
async fn a_multi_guard_releases_its_keys_together() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let url = format!("redis://127.0.0.1:{}", port());
    let locker = crate::Locker::builder()
        .url(url)
        .prefix("rb4")
        .build()
        .await
        .unwrap();
    let keys = ["w1", "w2", "w3", "w4"];
    // The scripts loaded once.
    let warm = locker.lock_all(keys).acquire().await.unwrap();
    warm.release().await.unwrap();
    let guard = locker.lock_all(keys).acquire().await.unwrap();
    let before = script_calls().await;
    guard.release().await.unwrap();
    let calls = script_calls().await - before;
    assert!(calls <= 2, "4 releases took {calls} script calls");
    let again = locker.lock_all(keys).try_acquire().await.unwrap();
    assert!(again.is_some(), "every key is free again");
}

/// The server's clock (`TIME`) in microseconds.
/// Deletes `keys` (a test's clean-up between its cases).
async fn del(conn: &mut redis::aio::MultiplexedConnection, keys: &[&str]) {
    let _deleted: i64 = redis::cmd("DEL").arg(keys).query_async(conn).await.unwrap();
}

async fn server_us(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1_000_000 + micros
}

/// How many times the server ran each command the acquire script may send, so far (commands
/// run inside a script count).
async fn acquire_commands() -> [u64; 5] {
    let mut counts = [0; 5];
    for (count, command) in counts
        .iter_mut()
        .zip(["set", "get", "time", "incrby", "pexpire"])
    {
        *count = command_calls(command).await;
    }
    counts
}

/// The commands run since `before` (from [`acquire_commands`]): `SET`, `GET`, `TIME`,
/// `INCRBY`, `PEXPIRE`.
async fn acquire_commands_since(before: [u64; 5]) -> [u64; 5] {
    let now = acquire_commands().await;
    std::array::from_fn(|i| now[i] - before[i])
}

/// The request of a lock on `keys` for `token` that reserves `fences` fencing tokens.
fn reserving<'a>(keys: &'a LockKeys, token: &'a OwnerToken, fences: u64) -> AcquireRequest<'a> {
    AcquireRequest {
        fences,
        ..request(keys, token, LeaseKind::Exclusive)
    }
}

/// A lone acquire of a free lock by a contender that is not queued goes the acquire script's
/// short way (acquire_lone.lua), and the fence it hands out follows fence.lua's rule: above the
/// server clock in microseconds at the time, above a counter set ahead by hand (whose expiry
/// is pushed back when the count crosses a multiple of 64), increasing. A taken lock, or a
/// contender that may be queued, goes the full way, which queues a waiter.
///
/// Which way the script went, as the server saw it (its count of each command, scripts'
/// commands included): when the lock is taken, the short way's `SET NX` fails and the full
/// script does not send it again, so a lone acquire of a taken lock runs `SET` once. A free
/// lock's acquire runs one `GET` (the counter) and no `PEXPIRE` of the lock: had the full
/// script run after the short way's `SET NX` took the lock, it would have read the lock back
/// (`GET`) and renewed it (`PEXPIRE`), as it does for a request sent twice. No count tells
/// the short way from the full script on a free lock (both run the same commands): this test
/// checks the rule, and the paired measurement in BENCHMARKS.md the gain. Failures (a counter of another type, or not a number)
/// leave the short way and are answered for this caller by the full script, as before.
#[tokio::test]
async fn a_lone_free_acquire_takes_the_short_way_with_the_fence_rule() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let store = store().await;
    let mut conn = raw().await;
    let keys = LockKeys::new("lone-acquire", "k");
    let fences = 3;
    let release = |token: OwnerToken| {
        let store = &store;
        let keys = &keys;
        async move { assert!(store.release(keys, &token).await.unwrap()) }
    };
    let set = |key: &str, value: u64| redis::cmd("SET").arg(key).arg(value).clone();
    let pttl = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        let key = keys.fence().to_owned();
        async move {
            redis::cmd("PTTL")
                .arg(key)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap()
        }
    };
    // The script loaded once.
    let warm = OwnerToken::generate();
    store
        .acquire(&reserving(&keys, &warm, fences))
        .await
        .unwrap();
    release(warm).await;
    let () = redis::cmd("DEL")
        .arg(keys.fence())
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();

    // Free, the counter missing, then behind the clock: the clock's microseconds plus the
    // count, written with `SET ... PX`; the short way's commands and nothing else.
    let mut tops = Vec::new();
    for _ in 0..2 {
        let token = OwnerToken::generate();
        let (clock, before) = (server_us(&mut conn).await, acquire_commands().await);
        let attempt = store
            .acquire(&reserving(&keys, &token, fences))
            .await
            .unwrap();
        let ran = acquire_commands_since(before).await;
        let clock_after = server_us(&mut conn).await;
        let top = granted(&attempt).expect("the lock was free");
        assert!(
            top - fences + 1 > clock,
            "fences from {top} at clock {clock}"
        );
        assert!(
            top <= clock_after + fences,
            "{top} from the clock, not beyond {clock_after}"
        );
        assert_eq!(ran, [2, 1, 1, 0, 0], "SET, GET, TIME, INCRBY, PEXPIRE");
        let counter: u64 = redis::cmd("GET")
            .arg(keys.fence())
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(counter, top);
        assert!(pttl(&mut conn).await > 0, "the counter expires when unused");
        tops.push(top);
        release(token).await;
    }

    // A counter ahead of the clock (set by hand, without expiry): raised by the count, its
    // expiry set only when the count crosses a multiple of 64.
    let ahead = (server_us(&mut conn).await + 1_000_000_000) / 64 * 64;
    for (counter, expires) in [(ahead + 10, false), (ahead + 63, true)] {
        let () = set(keys.fence(), counter)
            .query_async(&mut conn)
            .await
            .unwrap();
        let token = OwnerToken::generate();
        let before = acquire_commands().await;
        let attempt = store
            .acquire(&reserving(&keys, &token, fences))
            .await
            .unwrap();
        let ran = acquire_commands_since(before).await;
        assert_eq!(granted(&attempt), Some(counter + fences));
        let pexpire = u64::from(expires);
        assert_eq!(
            ran,
            [1, 1, 1, 1, pexpire],
            "SET, GET, TIME, INCRBY, PEXPIRE"
        );
        assert_eq!(pttl(&mut conn).await > 0, expires, "counter {counter}");
        tops.push(counter + fences);
        release(token).await;
    }
    assert!(tops.windows(2).all(|w| w[0] < w[1]), "{tops:?}");

    // Taken: the full way marks the lock waited for and queues this process.
    let holder = OwnerToken::generate();
    assert!(granted(
        &store
            .acquire(&reserving(&keys, &holder, fences))
            .await
            .unwrap()
    )
    .is_some());
    let waiter = OwnerToken::generate();
    let waits = AcquireRequest {
        interest: Duration::from_secs(1),
        ..reserving(&keys, &waiter, fences)
    };
    let before = acquire_commands().await;
    let attempt = store.acquire(&waits).await.unwrap();
    let ran = acquire_commands_since(before).await;
    assert!(matches!(attempt, Attempt::Held { .. }), "{attempt:?}");
    assert_eq!(ran[0], 1, "the short way's SET NX alone, not sent again");
    let zcard = |key: &str| redis::cmd("ZCARD").arg(key).clone();
    let queued: u64 = zcard(keys.queue()).query_async(&mut conn).await.unwrap();
    let interested: u64 = zcard(keys.interest()).query_async(&mut conn).await.unwrap();
    assert_eq!((queued, interested), (1, 1), "one waiting process");
    let value: Vec<u8> = redis::cmd("GET")
        .arg(keys.lock())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value.last(), Some(&b'+'), "the lock is marked waited for");
    // A contender that may be queued already goes the full way at once.
    let again = AcquireRequest {
        queued: true,
        ..waits
    };
    let before = acquire_commands().await;
    let attempt = store.acquire(&again).await.unwrap();
    assert!(matches!(attempt, Attempt::Held { .. }), "{attempt:?}");
    assert_eq!(acquire_commands_since(before).await[0], 1, "one SET NX");
    release(holder).await;
    // The release left the lock to the waiting process for a moment: free it.
    del(
        &mut conn,
        &[keys.lock(), keys.fence(), keys.queue(), keys.interest()],
    )
    .await;

    // A counter of another type, or not a number: this caller's error, from the full script.
    let () = redis::cmd("HSET")
        .arg(keys.fence())
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
    let refused = store
        .acquire(&reserving(&keys, &OwnerToken::generate(), fences))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("refused"), "{refused}");
    del(&mut conn, &[keys.lock(), keys.fence()]).await;
    let () = redis::cmd("SET")
        .arg(keys.fence())
        .arg("ahead")
        .query_async(&mut conn)
        .await
        .unwrap();
    let refused = store
        .acquire(&reserving(&keys, &OwnerToken::generate(), fences))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("refused"), "{refused}");
    del(
        &mut conn,
        &[keys.lock(), keys.fence(), keys.queue(), keys.interest()],
    )
    .await;
}
