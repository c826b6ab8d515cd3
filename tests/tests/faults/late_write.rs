//! Issue 44's missing fault: a write delayed in the network past its holder's lease, on every
//! lock engine, with the resource on Redis and on PostgreSQL.
//!
//! Worker A (`w0`) reaches the lock servers and the resource through proxies of its own. A
//! takes the lock, reads the counter and writes it back; the test holds that write in the
//! network (the resource proxy's trap) and stalls A's lock connections, so A's lease runs out
//! with its write on the wire. B (`w1`) takes the lock and reads the counter (its claim); then
//! the test delivers A's write, in order, as a network delivers a delayed segment: it lands
//! while B computes ([`B_COMPUTE`]), before B's write.
//!
//! With claims (the default) no update is lost: on Redis, B's claim raised the record's fence,
//! so A's late write is refused; on PostgreSQL, B's claim waits for A's transaction, so A's
//! write commits before B reads it, or is rolled back. Written the old way
//! ([`Fencing::WriteOnly`]: a plain read, a write fenced alone), both writes are accepted, and
//! the checker reports the lost update. The order is the store's, not a stopwatch's: Redis's
//! slowlog (every command, numbered in the order it ran), PostgreSQL's numbered log of writes
//! and its view of B's claim waiting for A's transaction.
//!
//! The same window from a process pause ([`Delay::Pause`], one engine): A is frozen
//! (SIGSTOP) between its read and its write, and thawed once B has read. Under claims its
//! `Claim::write` sends nothing (its guard knows the lease is gone), or on PostgreSQL B's
//! claim waited for A's transaction.

use std::path::Path;
use std::time::Duration;

use leasehold::fenced;
use leasehold_tests::conformance::{Engine, EngineKind, ETCD_LEASE_TTL, ZK_SESSION_TIMEOUT};
use leasehold_tests::harness::{Held, PgServer, RedisServer, TcpProxy};
use leasehold_tests::history::{
    resource_key, write_id, Fencing, History, Report, ResourceStore, Rule, Run, StoredWrite,
};
use tokio::time::{sleep, Instant};

/// How long B computes between its read and its write: the window A's write is delivered
/// in. Long enough that a loaded machine delivers it there; the store's order confirms it.
const B_COMPUTE: Duration = Duration::from_millis(800);

/// How long A computes when the test freezes it between its read and its write: time for
/// the test to see its read and stop it there.
const A_COMPUTE: Duration = Duration::from_millis(300);

/// The key A and B lock and update.
const KEY: &str = "late";

/// The resource's server.
enum Resource {
    Redis(RedisServer),
    Postgres(PgServer),
}

impl Resource {
    async fn start(store: ResourceStore) -> Resource {
        match store {
            ResourceStore::Redis => {
                let server = RedisServer::start().await;
                // Every command into the slowlog, numbered in the order the server ran them.
                let mut conn = server.conn().await;
                let () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("slowlog-log-slower-than")
                    .arg(0)
                    .arg("slowlog-max-len")
                    .arg(100_000)
                    .query_async(&mut conn)
                    .await
                    .expect("CONFIG SET slowlog");
                // The library's scripts, loaded: A's held request is then the write itself, not
                // an EVALSHA refused with NOSCRIPT whose client, given up by then, would never
                // send the script.
                for script in [
                    fenced::CLAIM_LUA,
                    fenced::WRITE_IF_CLAIMED_LUA,
                    fenced::WRITE_IF_NEWER_LUA,
                ] {
                    let _: String = redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(script)
                        .query_async(&mut conn)
                        .await
                        .expect("SCRIPT LOAD");
                }
                Resource::Redis(server)
            }
            ResourceStore::Postgres => Resource::Postgres(PgServer::start().await),
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Resource::Redis(s) => s.addr(),
            Resource::Postgres(s) => s.addr(),
        }
    }

    /// The store's URL.
    fn url(&self) -> String {
        match self {
            Resource::Redis(s) => s.url(),
            Resource::Postgres(s) => s.url(),
        }
    }

    /// The store's URL through `proxy`.
    fn url_through(&self, proxy: &TcpProxy) -> String {
        match self {
            Resource::Redis(_) => proxy.url(),
            Resource::Postgres(_) => format!("postgres://postgres@{}/postgres", proxy.addr()),
        }
    }

    /// Whether a session of the store waits for a lock (B's claim, behind A's transaction).
    async fn a_claim_waits(&self) -> bool {
        let Resource::Postgres(pg) = self else {
            return false;
        };
        let rows = pg
            .execute(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND query LIKE '%leasehold_claims%'",
            )
            .await
            .expect("pg_stat_activity");
        rows.first()
            .and_then(|r| r.first().cloned().flatten())
            .is_some_and(|n| n != "0")
    }

    /// Redis's slowlog, oldest first: each command's number and arguments, and the client.
    async fn commands(&self) -> Vec<(i64, Vec<String>, String)> {
        let Resource::Redis(server) = self else {
            return Vec::new();
        };
        let mut conn = server.conn().await;
        let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(-1)
            .query_async(&mut conn)
            .await
            .expect("SLOWLOG GET");
        let text = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::Int(n) => n.to_string(),
            _ => String::new(),
        };
        let mut commands: Vec<(i64, Vec<String>, String)> = entries
            .iter()
            .filter_map(|entry| {
                let redis::Value::Array(fields) = entry else {
                    return None;
                };
                let (redis::Value::Int(id), redis::Value::Array(args)) = (&fields[0], &fields[3])
                else {
                    return None;
                };
                let client = fields.get(4).map(text).unwrap_or_default();
                Some((*id, args.iter().map(text).collect(), client))
            })
            .collect();
        commands.sort_by_key(|c| c.0);
        commands
    }
}

/// The lease of the workers: the engine's session for ZooKeeper and etcd (which bounds it),
/// 1 s elsewhere.
fn lease_of(kind: EngineKind) -> Duration {
    match kind {
        EngineKind::ZooKeeper => ZK_SESSION_TIMEOUT,
        EngineKind::Etcd | EngineKind::Etcd3 => ETCD_LEASE_TTL,
        _ => Duration::from_secs(1),
    }
}

/// Whether worker `w`'s log has an event `event` of hold `hold`.
fn logged(log: &Path, event: &str, hold: &str) -> bool {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().any(|line| {
        let mut fields = line.split(' ').skip(1);
        fields.next() == Some(event) && fields.next() == Some(hold)
    })
}

/// The first hold of the worker logging to `log` that invoked an update, once one did.
fn first_update(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(1) == Some(&"win")).then(|| fields[2].to_owned())
    })
}

/// What the scenario found.
struct Outcome {
    history: History,
    report: Report,
    /// A's first write, if the store has it.
    a_write: Option<StoredWrite>,
    /// B's first write (the store must have it).
    b_write: StoredWrite,
}

/// How A's write comes late.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delay {
    /// Held in the network by A's resource proxy, while A's lock connections stall.
    Network,
    /// A's process frozen (SIGSTOP) between its read and its write, as a GC pause or a
    /// stopped VM would, and thawed once B has read.
    Pause,
}

/// The scenario on `kind` with the resource on `store`, fenced as `fencing` says, A's write
/// delayed as `delay` says.
async fn late_write(
    kind: EngineKind,
    store: ResourceStore,
    fencing: Fencing,
    delay: Delay,
) -> Outcome {
    let what = match delay {
        Delay::Network => "late-write",
        Delay::Pause => "paused-write",
    };
    let name = format!("{what}-{kind}-{}-{fencing}", store.name());
    let engine = Engine::start(kind).await;
    let resource = Resource::start(store).await;
    // A's own way to the resource; the engine's proxies are A's way to the locks (B's is
    // direct), so that the engine's stall cuts off A alone.
    let a_resource = TcpProxy::start(resource.addr()).await;
    let lease = lease_of(kind);
    // The workers' parts are holds, not spans of time: a worker's duration counts from its
    // start, its connections included, and on a machine busy with other work fixed spans of
    // 1.5 to 6 s ended before A wrote or B read (CI, PostgreSQL). The durations below only
    // bound the workers; each ends after its holds, or is ended once it was granted the lock
    // after the fault.
    let a = match delay {
        Delay::Network => engine
            .worker_spec(&resource.url_through(&a_resource))
            .expect("a server engine")
            // One hold, which writes at once and then waits for its loss; then A ends.
            .hold(Duration::from_secs(60), 1)
            .wait(Duration::from_millis(200))
            .max_holds(1)
            .duration(Duration::from_secs(60)),
        Delay::Pause => engine
            .direct_worker_spec(&resource.url())
            .expect("an engine A reaches directly")
            // Long enough for the test to catch A between its read and its write; A goes on
            // after its thaw, and takes the lock again (the liveness rule wants it).
            .compute(A_COMPUTE)
            .hold(Duration::from_millis(20), 0)
            .duration(Duration::from_secs(120)),
    };
    let a = a.fencing(fencing).keys(&[KEY]).lease(lease);
    let b = engine
        .direct_worker_spec(&resource.url())
        .expect("an engine B reaches directly")
        .fencing(fencing)
        .keys(&[KEY])
        .lease(lease)
        .wait(lease * 3 + Duration::from_secs(5))
        .compute(B_COMPUTE)
        // B's first update waits for A's transaction under PostgreSQL claims, until the test
        // sees it wait and lets A go on: with both cores busy, that took 1.6 and 2.4 s of the
        // default 2 s (CI), and B gave its first write up.
        .update_limit(lease * 3 + Duration::from_secs(15))
        .hold(Duration::from_millis(20), 0);
    let b = match delay {
        // One hold (a read and a write around A's late write); then B ends.
        Delay::Network => b.max_holds(1).duration(Duration::from_secs(60)),
        // Holds in turns with A's, until each was granted the lock after A's thaw.
        Delay::Pause => b.duration(Duration::from_secs(120)),
    };
    let mut run = Run::new(&name);
    run.read_resource_at(&resource.url());
    let a_id = match delay {
        Delay::Network => {
            // Worker 0's first write (`w:0.0.1:0`: its reads and claims carry no write
            // name) is held in the network.
            a_resource.hold_next_sending(b"w:0.", Held::Requests);
            let a_id = run.spawn(&a);
            assert!(
                a_resource.wait_caught(1, Duration::from_secs(20)).await,
                "{name}: A never wrote"
            );
            run.fault("hold", "w0-write");
            run.fault("stall", "w0-locks");
            assert!(engine.stall());
            a_id
        }
        Delay::Pause => {
            let a_id = run.spawn(&a);
            let a_log = run.workers()[a_id].log.clone();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !logged(&a_log, "rd", "0.0.1") {
                assert!(Instant::now() < deadline, "{name}: A never read");
                sleep(Duration::from_millis(2)).await;
            }
            run.pause(a_id);
            a_id
        }
    };
    let b_id = run.spawn(&b);
    let b_log = run.workers()[b_id].log.clone();
    // B's first touch is done: its read (its claim) returned; or, on PostgreSQL under
    // claims, its claim waits for A's transaction, which is open until A's write arrives.
    let waits_for_a = store == ResourceStore::Postgres && fencing == Fencing::Claim;
    let deadline = Instant::now() + lease * 3 + Duration::from_secs(15);
    let b_hold = loop {
        if let Some(hold) = first_update(&b_log) {
            let touched = if waits_for_a {
                resource.a_claim_waits().await
            } else {
                logged(&b_log, "rd", &hold)
            };
            if touched {
                break hold;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{name}: B never read (nor its claim waited for A)"
        );
        sleep(Duration::from_millis(5)).await;
    };
    match delay {
        Delay::Network => {
            a_resource.release_held();
            run.heal("hold", "w0-write");
            // A's calls are bounded: it gives its hold up and ends by itself; B ends after
            // its write. The stall heals after both: no worker owes the liveness rule a
            // hold after it.
            let deadline = Instant::now() + Duration::from_secs(30);
            while run.is_running(a_id) || run.is_running(b_id) {
                assert!(Instant::now() < deadline, "{name}: A or B did not end");
                sleep(Duration::from_millis(20)).await;
            }
            engine.heal();
            run.heal("stall", "w0-locks");
        }
        Delay::Pause => {
            let thawed = run.resume(a_id);
            // The liveness rule judged by what the workers did: each is ended once it was
            // granted the lock after A's thaw (45 s at most), instead of at a fixed time.
            if let Err(granted) = run
                .run_until_each_granted_after(thawed, Duration::from_secs(45))
                .await
            {
                panic!("{name}: not every worker was granted the lock after A's thaw: {granted:?}");
            }
        }
    }
    run.wait_all(Duration::from_secs(30)).await;
    let known: &[Rule] = match fencing {
        Fencing::WriteOnly => &[Rule::LostUpdate],
        Fencing::Claim => &[],
    };
    let (history, report) = run.check_and_record_allowing(&name, known);
    let records = history
        .resource
        .clone()
        .expect("the run read the store")
        .expect("the store's records");
    let stored = |hold: &str| {
        records
            .writes
            .iter()
            .find(|w| w.hold == hold && w.n == 0)
            .cloned()
    };
    let a_write = stored("0.0.1");
    let b_write = stored(&b_hold)
        .unwrap_or_else(|| panic!("{name}: B's write is not in the store\n{report}"));
    for w in &records.writes {
        eprintln!(
            "{name}: the store kept w{}'s write {} (fence {}): {} from {}",
            w.hold, w.n, w.fence, w.new, w.read
        );
    }
    // The order the store ran them in: B's first touch, A's write, B's write.
    if let Resource::Redis(_) = resource {
        let commands = resource.commands().await;
        let position = |id: &str| {
            commands
                .iter()
                .rev()
                .find(|(_, args, _)| args.iter().any(|a| a == id))
                .map(|(n, _, client)| (*n, client.clone()))
        };
        let (b_at, b_client) = position(&write_id(&b_hold, 0)).expect("B's write in the slowlog");
        let record = resource_key(KEY);
        let b_read_at = commands
            .iter()
            .rev()
            .find(|(n, args, client)| *n < b_at && *client == b_client && args.contains(&record))
            .map(|(n, _, _)| *n)
            .expect("B's read in the slowlog");
        match position(&write_id("0.0.1", 0)) {
            Some((a_at, _)) => assert!(
                b_read_at < a_at && a_at < b_at,
                "{name}: A's write (command {a_at}) did not land between B's read ({b_read_at}) \
                 and B's write ({b_at}): the schedule did not happen"
            ),
            // A thawed past its lease knows it: `Claim::write` sends nothing.
            None => assert!(
                delay == Delay::Pause && fencing == Fencing::Claim,
                "{name}: A's write never reached the store"
            ),
        }
    }
    Outcome {
        history,
        report,
        a_write,
        b_write,
    }
}

/// With claims, the default: no update lost, A's late write refused (Redis) or ordered before
/// B's read (PostgreSQL). Under `LEASEHOLD_RESOURCE_FENCING=write-only` these fail: the lost
/// update the claims prevent.
async fn no_update_is_lost(kind: EngineKind, store: ResourceStore, delay: Delay) {
    let fencing = Fencing::from_env();
    let started = Instant::now();
    let out = late_write(kind, store, fencing, delay).await;
    eprintln!(
        "{delay:?}: late write, {kind}, resource on {}: {:.1} s",
        store.name(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(out.report.lost_updates, 0, "{}", out.report);
    match (store, &out.a_write) {
        (ResourceStore::Redis, Some(a)) => {
            panic!(
                "A's late write was accepted after B's claim: {a:?}\n{}",
                out.report
            )
        }
        // B's claim waited for A's transaction: B read what A's write left, or what a later
        // write of A's (its blind one, claimed before B's claim got the row) left.
        (ResourceStore::Postgres, Some(a)) => assert!(
            out.b_write.read >= a.new,
            "A's write committed, but B read past it: {a:?}, {:?}\n{}",
            out.b_write,
            out.report
        ),
        (_, None) => {}
    }
    if store == ResourceStore::Redis {
        let a = out.history.hold("0.0.1").expect("A's hold");
        let told = a
            .writes
            .first()
            .and_then(|w| w.outcome)
            .and_then(|(_, a)| a);
        assert_ne!(
            told,
            Some(true),
            "A was told its late write was accepted: {a:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_single_redis() {
    no_update_is_lost(EngineKind::Single, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_single_postgres() {
    no_update_is_lost(EngineKind::Single, ResourceStore::Postgres, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_redlock_redis() {
    no_update_is_lost(EngineKind::RedLock3, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_redlock_postgres() {
    no_update_is_lost(
        EngineKind::RedLock3,
        ResourceStore::Postgres,
        Delay::Network,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_zookeeper_redis() {
    no_update_is_lost(EngineKind::ZooKeeper, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_zookeeper_postgres() {
    no_update_is_lost(
        EngineKind::ZooKeeper,
        ResourceStore::Postgres,
        Delay::Network,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_etcd_redis() {
    no_update_is_lost(EngineKind::Etcd, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_etcd_postgres() {
    no_update_is_lost(EngineKind::Etcd, ResourceStore::Postgres, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_postgres_redis() {
    no_update_is_lost(EngineKind::Postgres, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_postgres_postgres() {
    no_update_is_lost(
        EngineKind::Postgres,
        ResourceStore::Postgres,
        Delay::Network,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_mysql_redis() {
    no_update_is_lost(EngineKind::Mysql, ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_loses_no_update_mysql_postgres() {
    no_update_is_lost(EngineKind::Mysql, ResourceStore::Postgres, Delay::Network).await;
}

/// The checker's own test: written the old way, A's late write and B's write, computed from
/// the value A had read, are both accepted, and the checker names the lost update.
async fn the_checker_catches_it(store: ResourceStore, delay: Delay) {
    let out = late_write(EngineKind::Single, store, Fencing::WriteOnly, delay).await;
    let a = out.a_write.as_ref().unwrap_or_else(|| {
        panic!(
            "A's late write was refused though fenced alone\n{}",
            out.report
        )
    });
    assert_eq!(
        a.read, out.b_write.read,
        "B read past A's write\n{}",
        out.report
    );
    if store == ResourceStore::Postgres {
        assert!(a.order < out.b_write.order, "{a:?} after {:?}", out.b_write);
    }
    let lost = out.report.violations_of(Rule::LostUpdate);
    let expected = format!(
        "lost update on `{KEY}`: w{} (fence {}) wrote {} computed from {}, as w0.0.1 (fence {}) had",
        out.b_write.hold, out.b_write.fence, out.b_write.new, out.b_write.read, a.fence
    );
    assert!(
        lost.iter().any(|v| v.what == expected),
        "the checker missed it: expected `{expected}`\n{}",
        out.report
    );
    assert!(out.report.lost_updates >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_the_update_a_late_write_loses_when_fenced_alone_redis() {
    the_checker_catches_it(ResourceStore::Redis, Delay::Network).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_the_update_a_late_write_loses_when_fenced_alone_postgres() {
    the_checker_catches_it(ResourceStore::Postgres, Delay::Network).await;
}

/// A holder frozen between its read and its write, thawed once the next holder has read:
/// its write comes late as a delayed packet's does, from a process that was not running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_between_its_read_and_its_write_loses_no_update_redis() {
    no_update_is_lost(EngineKind::Single, ResourceStore::Redis, Delay::Pause).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_between_its_read_and_its_write_loses_no_update_postgres() {
    no_update_is_lost(EngineKind::Single, ResourceStore::Postgres, Delay::Pause).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_the_update_a_paused_holder_loses_when_fenced_alone_redis() {
    the_checker_catches_it(ResourceStore::Redis, Delay::Pause).await;
}
