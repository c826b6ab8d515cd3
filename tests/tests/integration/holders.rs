//! Who holds a lock, engine by engine, beyond what the conformance suite's `holders` property
//! checks on all of them: the owner token stored with a lock never shows (compared with the
//! value read from the engine itself), readers and permit holders are all shown with their
//! lockers, a token of an earlier version (the secret alone) still works and shows an unknown
//! holder, and a crashed locker's description goes with its session (ZooKeeper, etcd) or is
//! bounded by its TTL (Redis, PostgreSQL).

use std::time::Duration;

use leasehold::{LockError, LockInfo, Locker, LockerDescription};
use leasehold_tests::harness::{
    eventually, EtcdServer, MysqlServer, PgServer, ProxyMode, RedisServer, TcpProxy, ZkServer,
};

/// How long a new locker's description may take to be stored (one call of a background task
/// the locker starts at its first attempt to take a lock), with slack for a loaded machine.
const DESCRIBED: Duration = Duration::from_secs(5);

/// The bound on a description's life where it expires (Redis, PostgreSQL) once its locker
/// stopped refreshing it.
const DESCRIPTION_TTL: Duration = Duration::from_secs(30);

async fn redis_locker(url: &str, service: &str) -> Locker {
    Locker::builder()
        .url(url)
        .service_name(service)
        .build()
        .await
        .expect("locker on redis")
}

/// Inspects `key` until `done` holds, within [`DESCRIBED`]; the last answer.
async fn inspect_until(locker: &Locker, key: &str, done: impl Fn(&LockInfo) -> bool) -> LockInfo {
    let last = std::sync::Mutex::new(None);
    let (seen, done) = (&last, &done);
    eventually(key, DESCRIBED, move || async move {
        let info = locker.inspect(key).await.expect("inspect");
        let ok = done(&info);
        *seen.lock().unwrap() = Some(info);
        ok
    })
    .await;
    last.into_inner().unwrap().expect("an answer")
}

fn described_by(info: &LockInfo, who: &LockerDescription) -> bool {
    info.holders
        .iter()
        .any(|h| h.description.as_ref() == Some(who))
}

/// The stored value `stored` (a whole owner token) is not in anything inspection returned.
fn assert_token_not_shown(shown: &impl std::fmt::Debug, stored: &str) {
    let stored = stored.trim_end_matches('+');
    assert!(stored.len() >= 32, "not a token: {stored:?}");
    let secret = &stored[stored.len() - 32..];
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{stored:?}");
    let text = format!("{shown:?}");
    assert!(
        !text.contains(secret),
        "the secret {secret} shows in {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_shows_every_holder_never_a_token_and_old_tokens_still_work() {
    let srv = RedisServer::start().await;
    let app = redis_locker(&srv.url(), "checkout").await;
    let other = redis_locker(&srv.url(), "billing").await;
    let ops = Locker::connect(&srv.url()).await.unwrap();
    let mut raw = srv.conn().await;

    // The lock: its stored value is the token (public part, then the secret), never shown.
    let guard = app
        .lock("order:42")
        .label("req-7f3a")
        .acquire()
        .await
        .unwrap();
    let info = inspect_until(&ops, "order:42", |i| described_by(i, app.description())).await;
    let stored: String = redis::cmd("GET")
        .arg("leasehold:lock:{order:42}")
        .query_async(&mut raw)
        .await
        .unwrap();
    let id = &app.description().locker;
    assert!(stored.starts_with(&format!("h1.{id}.")), "{stored}");
    assert!(stored.contains(".req-7f3a."), "{stored}");
    assert_token_not_shown(&info, &stored);
    assert_eq!(info.holders[0].label.as_deref(), Some("req-7f3a"));
    let listed = ops.list_held("order:*").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].holders, info.holders);
    assert_token_not_shown(&listed, &stored);
    guard.release().await.unwrap();

    // The description: a key of its own that expires unless refreshed.
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("leasehold:locker:{{{id}}}"))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(
        ttl > 0 && ttl <= DESCRIPTION_TTL.as_millis() as i64,
        "{ttl}"
    );
    // A locker that only inspects stores nothing.
    let stored = srv.keys("leasehold:locker:*").await;
    assert_eq!(stored, [format!("leasehold:locker:{{{id}}}")]);

    // Readers: every one shows, with its locker.
    readers_show_with_their_lockers(&ops, &app, &other, "reader-a").await;

    // Permits: every holder shows, with its locker and label.
    let p1 = app
        .semaphore("pool", 3)
        .label("job-1")
        .acquire()
        .await
        .unwrap();
    let p2 = other.semaphore("pool", 3).acquire_many(2).await.unwrap();
    let sem = ops.inspect_semaphore("pool").await.unwrap();
    assert_eq!(sem.in_use(), 3);
    let ours = sem
        .holders
        .iter()
        .find(|h| h.holder.locker.as_deref() == Some(&*app.description().locker))
        .expect("our permit");
    assert_eq!(ours.permits, 1);
    assert_eq!(ours.holder.label.as_deref(), Some("job-1"));
    assert_eq!(ours.holder.description.as_ref(), Some(app.description()));
    let theirs = sem.holders.iter().find(|h| h.permits == 2).expect("theirs");
    assert_eq!(
        theirs.holder.description.as_ref(),
        Some(other.description())
    );
    p1.release().await.unwrap();
    p2.release().await.unwrap();

    // A lock an earlier version holds (its token the secret alone): an unknown holder, and a
    // waiter still marks it, so that its release wakes the waiter.
    let old = "0123456789abcdef0123456789abcdef";
    let _: () = redis::cmd("SET")
        .arg("leasehold:lock:{legacy}")
        .arg(old)
        .arg("PX")
        .arg(10_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let info = ops.inspect("legacy").await.unwrap();
    assert!(info.held);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].locker, None);
    assert_eq!(info.holders[0].description, None);
    assert_token_not_shown(&info, old);
    let busy = app
        .lock("legacy")
        .wait(Duration::from_millis(300))
        .acquire()
        .await;
    assert!(matches!(busy, Err(LockError::Busy { .. })), "{busy:?}");
    let marked: String = redis::cmd("GET")
        .arg("leasehold:lock:{legacy}")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(marked, format!("{old}+"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_crashed_holders_description_expires_by_its_ttl() {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let crashed = redis_locker(&proxy.url(), "crashed").await;
    let ops = Locker::connect(&srv.url()).await.unwrap();
    let guard = crashed
        .lock("job")
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    inspect_until(&ops, "job", |i| described_by(i, crashed.description())).await;
    // The holder's process stops answering: the lock ends with its lease, the description
    // with its TTL, counted from its last refresh.
    proxy.set_mode(ProxyMode::Stall);
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the cut-off holder never noticed");
    eventually("the lease's end", Duration::from_secs(5), || async {
        !ops.inspect("job").await.unwrap().held
    })
    .await;
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!(
            "leasehold:locker:{{{}}}",
            crashed.description().locker
        ))
        .query_async(&mut srv.conn().await)
        .await
        .unwrap();
    assert!(
        ttl <= DESCRIPTION_TTL.as_millis() as i64,
        "the description outlives its TTL: {ttl} ms"
    );
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_shows_holders_readers_permits_never_a_token() {
    let pg = PgServer::start().await;
    let build = |service: &'static str| {
        Locker::builder()
            .postgres(pg.url())
            .service_name(service)
            .build()
    };
    let app = build("checkout").await.unwrap();
    let other = build("billing").await.unwrap();
    let ops = Locker::builder().postgres(pg.url()).build().await.unwrap();
    let guard = app
        .lock("order:42")
        .label("req-7f3a")
        .acquire()
        .await
        .unwrap();
    let info = inspect_until(&ops, "order:42", |i| described_by(i, app.description())).await;
    let client = pg.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT owner FROM leasehold_locks WHERE key = 'leasehold:lock:{order:42}'",
            &[],
        )
        .await
        .unwrap();
    let stored: String = row.get(0);
    assert_token_not_shown(&info, &stored);
    assert_eq!(info.holders[0].label.as_deref(), Some("req-7f3a"));
    // The description's row counts for its TTL at most.
    let row = client
        .query_one(
            "SELECT (expires - clock_timestamp()) <= interval '30 seconds', \
             expires > clock_timestamp() FROM leasehold_lockers WHERE id = $1",
            &[&app.description().locker],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0) && row.get::<_, bool>(1));

    // A waiter of another locker, in line with how long it waited.
    let waiting = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .lock("order:42")
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    let info = inspect_until(&ops, "order:42", |i| {
        i.waiting
            .iter()
            .any(|w| w.description.as_ref() == Some(other.description()))
    })
    .await;
    assert!(info.waiting[0].waited.is_some(), "{info:?}");
    guard.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();

    readers_show_with_their_lockers(&ops, &other, &app, "reader-b").await;

    let p = app
        .semaphore("pool", 2)
        .label("job-1")
        .acquire()
        .await
        .unwrap();
    let sem = ops.inspect_semaphore("pool").await.unwrap();
    assert_eq!(sem.holders.len(), 1);
    assert_eq!(sem.holders[0].holder.label.as_deref(), Some("job-1"));
    assert_eq!(
        sem.holders[0].holder.description.as_ref(),
        Some(app.description())
    );
    p.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_shows_holders_readers_permits_never_a_token() {
    let db = MysqlServer::start().await;
    let build = |service: &'static str| {
        Locker::builder()
            .mysql(db.url())
            .service_name(service)
            .build()
    };
    let app = build("checkout").await.unwrap();
    let other = build("billing").await.unwrap();
    let ops = Locker::builder().mysql(db.url()).build().await.unwrap();
    let guard = app
        .lock("order:42")
        .label("req-7f3a")
        .acquire()
        .await
        .unwrap();
    let info = inspect_until(&ops, "order:42", |i| described_by(i, app.description())).await;
    let rows = db
        .execute(
            "SELECT CAST(owner AS CHAR) FROM leasehold_locks \
             WHERE lock_key = 'leasehold:lock:{order:42}'",
        )
        .await
        .unwrap();
    let stored = rows[0][0].clone().expect("the holder's token is stored");
    assert_token_not_shown(&info, &stored);
    assert_eq!(info.holders[0].label.as_deref(), Some("req-7f3a"));

    // A waiter of another locker, in line with how long it waited.
    let waiting = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .lock("order:42")
                .wait(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    let info = inspect_until(&ops, "order:42", |i| {
        i.waiting
            .iter()
            .any(|w| w.description.as_ref() == Some(other.description()))
    })
    .await;
    assert!(info.waiting[0].waited.is_some(), "{info:?}");
    guard.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();

    readers_show_with_their_lockers(&ops, &other, &app, "reader-b").await;

    let p = app
        .semaphore("pool", 2)
        .label("job-1")
        .acquire()
        .await
        .unwrap();
    let sem = ops.inspect_semaphore("pool").await.unwrap();
    assert_eq!(sem.holders.len(), 1);
    assert_eq!(sem.holders[0].holder.label.as_deref(), Some("job-1"));
    assert_eq!(
        sem.holders[0].holder.description.as_ref(),
        Some(app.description())
    );
    p.release().await.unwrap();
}

/// The descriptions stored in ZooKeeper under the root, by their data.
async fn zk_descriptions(zk: &ZkServer) -> Vec<String> {
    let client = zookeeper_client::Client::connect(&zk.connect_string())
        .await
        .expect("a zookeeper client");
    let children = client.list_children("/leasehold").await.unwrap_or_default();
    let mut found = Vec::new();
    for child in children
        .iter()
        .filter(|c| c.starts_with("leasehold:session:"))
    {
        if let Ok((data, _)) = client.get_data(&format!("/leasehold/{child}")).await {
            found.push(String::from_utf8_lossy(&data).into_owned());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_crashed_holders_description_goes_with_its_session() {
    let zk = ZkServer::start().await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let session = Duration::from_secs(2);
    let build = |hosts: String, service: &'static str| {
        Locker::builder()
            .zookeeper(hosts)
            .session_timeout(session)
            .service_name(service)
            .build()
    };
    let crashed = build(proxy.addr().to_string(), "crashed").await.unwrap();
    let other = build(zk.connect_string(), "other").await.unwrap();
    let ops = build(zk.connect_string(), "ops").await.unwrap();
    let guard = crashed.lock("job").label("run-9").acquire().await.unwrap();
    let info = inspect_until(&ops, "job", |i| described_by(i, crashed.description())).await;
    assert_eq!(info.holders[0].label.as_deref(), Some("run-9"));
    assert!(info.holders[0].since.is_some());
    let id = format!("locker={}", crashed.description().locker);
    assert!(zk_descriptions(&zk).await.iter().any(|d| d.contains(&id)));

    // Permits: the holder shows with its label (its znode's data is its token).
    let p = other
        .semaphore("pool", 2)
        .label("job-1")
        .acquire()
        .await
        .unwrap();
    let sem = ops.inspect_semaphore("pool").await.unwrap();
    assert_eq!(sem.holders[0].holder.label.as_deref(), Some("job-1"));
    assert_eq!(
        sem.holders[0].holder.description.as_ref(),
        Some(other.description())
    );
    p.release().await.unwrap();

    // The holder's process stops answering: its session ends, and its lock and its
    // description go with it.
    proxy.set_mode(ProxyMode::Stall);
    eventually("the session's end", Duration::from_secs(15), || async {
        let gone = !zk_descriptions(&zk).await.iter().any(|d| d.contains(&id));
        gone && !ops.inspect("job").await.unwrap().held
    })
    .await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_crashed_holders_description_goes_with_its_lease() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let ttl = Duration::from_secs(2);
    let build = |endpoint: String, service: &'static str| {
        Locker::builder()
            .etcd([endpoint])
            .session_timeout(ttl)
            .service_name(service)
            .build()
    };
    let crashed = build(format!("http://{}", proxy.addr()), "crashed")
        .await
        .unwrap();
    let other = build(etcd.endpoint(), "other").await.unwrap();
    let ops = build(etcd.endpoint(), "ops").await.unwrap();
    let guard = crashed.lock("job").label("run-9").acquire().await.unwrap();
    let info = inspect_until(&ops, "job", |i| described_by(i, crashed.description())).await;
    assert_eq!(info.holders[0].label.as_deref(), Some("run-9"));

    // Permits on etcd carry their count, not their token: the holder shows through its lease.
    let p = other
        .semaphore("pool", 2)
        .label("job-1")
        .acquire()
        .await
        .unwrap();
    let sem = ops.inspect_semaphore("pool").await.unwrap();
    assert_eq!(
        sem.holders[0].holder.description.as_ref(),
        Some(other.description())
    );
    p.release().await.unwrap();

    let mut client = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("an etcd client");
    let id = format!("locker={}", crashed.description().locker);
    let described = |found: etcd_client::GetResponse| {
        found
            .kvs()
            .iter()
            .any(|kv| kv.value_str().is_ok_and(|v| v.contains(&id)))
    };
    let options = etcd_client::GetOptions::new().with_prefix();
    let found = client
        .get("leasehold:session:{", Some(options.clone()))
        .await
        .unwrap();
    assert!(described(found));
    proxy.set_mode(ProxyMode::Stall);
    let ops = &ops;
    eventually("the lease's end", Duration::from_secs(15), || {
        let (mut client, options) = (client.clone(), options.clone());
        async move {
            let found = client
                .get("leasehold:session:{", Some(options))
                .await
                .unwrap();
            !described(found) && !ops.inspect("job").await.unwrap().held
        }
    })
    .await;
    drop(guard);
}

#[tokio::test]
async fn labels_are_checked_whatever_the_primitive() {
    let locker = Locker::builder()
        .service_name("labels")
        .build_in_memory()
        .unwrap();
    assert_eq!(locker.description().service, "labels");
    for bad in ["", "line\nbreak", "\u{1b}[2J", "café", &"x".repeat(65)] {
        let lock = locker.lock("k").label(bad).acquire().await;
        assert!(matches!(lock, Err(LockError::InvalidKey { .. })), "{bad:?}");
        let permits = locker.semaphore("s", 2).label(bad).acquire().await;
        assert!(
            matches!(permits, Err(LockError::InvalidKey { .. })),
            "{bad:?}"
        );
        let many = locker.lock_all(["a", "b"]).label(bad).acquire().await;
        assert!(matches!(many, Err(LockError::InvalidKey { .. })), "{bad:?}");
    }
    let good = "x".repeat(leasehold::MAX_LABEL_LEN);
    let guard = locker.lock("k").label(good).acquire().await.unwrap();
    guard.release().await.unwrap();
    let service = Locker::builder().service_name("").build_in_memory();
    assert!(matches!(service, Err(LockError::Config { .. })));
}

/// Two readers of `doc`, one of `labelled` with `label` and one of `plain`: inspection shows
/// both, each described by its locker, and the label.
async fn readers_show_with_their_lockers(
    ops: &Locker,
    labelled: &Locker,
    plain: &Locker,
    label: &str,
) {
    let r1 = labelled
        .read_lock("doc")
        .label(label)
        .acquire()
        .await
        .unwrap();
    let r2 = plain.read_lock("doc").acquire().await.unwrap();
    let info = inspect_until(ops, "doc", |i| {
        described_by(i, labelled.description()) && described_by(i, plain.description())
    })
    .await;
    assert_eq!(info.holders.len(), 2, "{info:?}");
    assert!(
        info.holders
            .iter()
            .any(|h| h.label.as_deref() == Some(label)),
        "{info:?}"
    );
    r1.release().await.unwrap();
    r2.release().await.unwrap();
}
