//! Owner tokens: 128 random bits from the OS, fresh for every acquisition, and never shown in
//! traces (at TRACE level), error messages (with their sources), or `Debug` output; neither
//! are the Redis password nor (in errors) the lock key. The faults that make the library talk
//! (lost leases, failed renewals, failed background releases, unreachable Redis) are all
//! provoked while a subscriber records every event and span.

use std::collections::HashSet;
use std::error::Error as _;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker};
use leasehold_tests::harness::{ProxyMode, RedisOptions, RedisServer, TcpProxy};
use redis::AsyncCommands;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records every event and span field, at every level, as text.
struct Capture {
    text: Arc<Mutex<String>>,
    next: AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut text = self.text.lock().unwrap();
        let _ = write!(text, "\nspan {}", span.metadata().name());
        span.record(&mut Fields(&mut text));
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Fields(&mut self.text.lock().unwrap()));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = self.text.lock().unwrap();
        let m = event.metadata();
        let _ = write!(text, "\n{} {}", m.level(), m.target());
        event.record(&mut Fields(&mut text));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

const PASSWORD: &str = "pw-Secret-7f3a";
const KEY: &str = "customer:alice@example.com";

/// Everything a user could print about an error.
fn shown(err: &LockError) -> String {
    let mut out = format!("{err}\n{err:?}");
    let mut source = err.source();
    while let Some(s) = source {
        let _ = write!(out, "\n{s}\n{s:?}");
        source = s.source();
    }
    out
}

/// The secret of the owner token currently stored for `KEY`.
async fn token(admin: &mut redis::aio::MultiplexedConnection, prefix: &str) -> String {
    let name = format!("{prefix}:lock:{{{KEY}}}");
    let t: Option<String> = admin.get(&name).await.unwrap();
    // A `+` after the token marks that a contender waited.
    secret_of(t.expect("the lock is held").trim_end_matches('+'))
}

/// The secret of a stored owner value: its last part, after what says who holds the lock
/// (`h1.<locker id>.<ms>.<label>.`), which inspection shows and is not secret.
fn secret_of(stored: &str) -> String {
    assert!(
        stored.starts_with("h1."),
        "an owner value of this version: {stored}"
    );
    let (public, secret) = stored
        .rsplit_once('.')
        .expect("a public part, then the secret");
    assert_eq!(
        public.split('.').count(),
        4,
        "h1, locker, time, label: {stored}"
    );
    secret.to_owned()
}

#[distributed_lock(key = "customer:<who>", lease = "300ms", locker = locker, on_lost = "continue")]
async fn body_outlives_its_lock(
    locker: &Locker,
    who: &str,
    admin: &mut redis::aio::MultiplexedConnection,
    tokens: &mut Vec<String>,
) -> Result<(), LockError> {
    let _ = who;
    tokens.push(token(admin, "t").await);
    // Someone deletes the lock: the release after the body fails, and says so in a trace.
    let _: () = admin.del(format!("t:lock:{{{KEY}}}")).await.unwrap();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_passwords_and_keys_never_leak() {
    let _alone = crate::alone().await;
    let text = Arc::new(Mutex::new(String::new()));
    tracing::subscriber::set_global_default(Capture {
        text: text.clone(),
        next: AtomicU64::new(1),
    })
    .expect("the only subscriber of this test binary");

    let srv =
        RedisServer::start_with(RedisOptions::default().args(["--requirepass", PASSWORD])).await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let url = format!("redis://:{PASSWORD}@{}", proxy.addr());
    let build = || {
        Locker::builder()
            .url(url.clone())
            .prefix("t")
            .op_timeout(Duration::from_millis(200))
            .connect_timeout(Duration::from_millis(300))
            .default_wait(Duration::from_millis(100))
            .build()
    };
    let locker = build().await.unwrap();
    let other = build().await.unwrap();
    let mut admin = redis::Client::open(format!("redis://:{PASSWORD}@{}", srv.addr()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut tokens = Vec::new();
    let mut errors: Vec<LockError> = Vec::new();
    let mut debug = Vec::new();

    // Held and busy.
    let guard = locker.lock(KEY).acquire().await.unwrap();
    tokens.push(token(&mut admin, "t").await);
    debug.push(format!("{guard:?} {locker:?}"));
    errors.push(other.lock(KEY).acquire().await.unwrap_err());
    guard.release().await.unwrap();

    // Renewals time out while the network stalls: the lease is lost, the release fails.
    let guard = locker
        .lock(KEY)
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    tokens.push(token(&mut admin, "t").await);
    proxy.set_mode(ProxyMode::Stall);
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost while stalled");
    debug.push(format!("{guard:?}"));
    errors.push(locker.lock(KEY).acquire().await.unwrap_err());
    proxy.set_mode(ProxyMode::Pass);
    if let Err(e) = guard.release().await {
        errors.push(e);
    }

    // The lock deleted by hand: the watchdog's renewal finds it gone.
    let guard = locker
        .lock(KEY)
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    tokens.push(token(&mut admin, "t").await);
    let _: () = admin.del(format!("t:lock:{{{KEY}}}")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost after deletion");
    errors.push(guard.release().await.unwrap_err());

    // Dropped while the network is cut: the background release fails, and the lock frees
    // itself when its lease ends.
    let guard = locker
        .lock(KEY)
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    tokens.push(token(&mut admin, "t").await);
    proxy.set_mode(ProxyMode::Cut);
    drop(guard);
    tokio::time::sleep(Duration::from_millis(500)).await;
    errors.push(locker.lock(KEY).acquire().await.unwrap_err());
    errors.push(
        Locker::connect(&format!("redis://:{PASSWORD}@127.0.0.1:1"))
            .await
            .unwrap_err(),
    );
    proxy.set_mode(ProxyMode::Pass);
    tokio::time::sleep(Duration::from_millis(400)).await; // the dropped lease expires

    // The attribute: its release after the body fails and is traced.
    let recovered = async {
        loop {
            match body_outlives_its_lock(&locker, "alice@example.com", &mut admin, &mut tokens)
                .await
            {
                Ok(()) => return,
                Err(e) => {
                    errors.push(e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), recovered)
        .await
        .expect("the locker recovers after the cut");

    let traces = text.lock().unwrap().clone();
    assert!(
        traces.contains("lease lost") && traces.contains("renewal failed"),
        "the faults were traced: {traces}"
    );
    let messages: Vec<String> = errors.iter().map(shown).collect();
    assert!(tokens.len() >= 5);
    for t in &tokens {
        assert_eq!(t.len(), 32);
        assert!(!traces.contains(t.as_str()), "token in a trace: {traces}");
        for m in messages.iter().chain(&debug) {
            assert!(!m.contains(t.as_str()), "token in {m}");
        }
    }
    for m in messages.iter().chain(&debug) {
        assert!(!m.contains(PASSWORD), "password in {m}");
        assert!(!m.contains("alice"), "key in {m}");
    }
    assert!(!traces.contains(PASSWORD), "password in a trace: {traces}");
    if traces.contains("alice") {
        eprintln!("note: the lock key appears in traces");
    }
}

#[tokio::test]
async fn owner_tokens_are_fresh_128_bit_random_values() {
    let _alone = crate::alone().await;
    let srv = RedisServer::start().await;
    let locker = Locker::connect(&srv.url()).await.unwrap();
    let mut admin = srv.conn().await;
    const N: usize = 2000;
    let mut seen = HashSet::new();
    let mut ones_at = [0u32; 128];
    for i in 0..N {
        // Alternate between a hot key and fresh ones: either way, a fresh token each time.
        let key = if i % 2 == 0 {
            "hot".to_owned()
        } else {
            format!("k{i}")
        };
        let guard = locker.lock(key.as_str()).acquire().await.unwrap();
        let token: String = admin
            .get(format!("leasehold:lock:{{{key}}}"))
            .await
            .unwrap();
        let token = secret_of(token.trim_end_matches('+'));
        guard.release().await.unwrap();
        assert_eq!(token.len(), 32, "128 bits as 32 hex digits");
        let bits = u128::from_str_radix(&token, 16).expect("lowercase hex");
        assert_eq!(token, format!("{bits:032x}"));
        for (bit, count) in ones_at.iter_mut().enumerate() {
            *count += (bits >> bit) as u32 & 1;
        }
        assert!(seen.insert(token), "a token came twice");
    }
    // Each bit is a fair coin: 2000 flips, mean 1000, sd 22.4; 7 sd either way fails.
    for (bit, &ones) in ones_at.iter().enumerate() {
        assert!(
            (843..=1157).contains(&ones),
            "bit {bit} was 1 in {ones} of {N} tokens"
        );
    }
}
