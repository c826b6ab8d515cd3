//! The end state: once the last lease and `hold_at_least` of a run is over, every key, semaphore
//! and election is free at once to a new process, and the engine keeps nothing it should not.

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::conformance::{Engine, EngineKind, OP_TIMEOUT};
use leasehold_tests::history::monotonic_ns;
use tokio::time::{sleep, Instant};

use super::fault::Window;
use super::judge::{free_by, hit_by, ns, Judged, RELEASE_SLACK, SETTLE};
use super::run::{Outcome, Record};
use super::schedule::{election, semaphore, Prim, Schedule, LIMIT};

/// After the schedule, once every lease and `hold_at_least` of it is over: every key,
/// semaphore and election is free at once to a new process.
pub async fn end_state(
    engine: &Engine,
    schedule: &Schedule,
    records: &[Record],
    windows: &[Window],
    prefix: &str,
    judged: &mut Judged,
) {
    // The latest moment anything of the run may keep something taken.
    let mut settle = monotonic_ns();
    for r in records {
        let op = &schedule.ops[r.op];
        let until = match r.outcome {
            Outcome::Granted => free_by(op, r).max(r.let_go.unwrap_or(0) + ns(RELEASE_SLACK)),
            Outcome::Cancelled | Outcome::Failed(_) => {
                r.answered + ns(OP_TIMEOUT) + ns(RELEASE_SLACK)
            }
            _ => 0,
        };
        settle = settle.max(until);
    }
    for w in windows {
        // Leases restored from a snapshot run out; sessions and leases of the old connections
        // (4 s on ZooKeeper and etcd) end. What a held connection carried is settled within
        // SETTLE of its release or of its caller's answer: a late call left to nobody for its
        // lease is still there.
        settle = settle.max(w.settled_by());
        for r in records.iter().filter(|r| hit_by(r, w)) {
            settle = settle.max(r.answered + ns(SETTLE));
        }
    }
    let now = monotonic_ns();
    if settle > now {
        sleep(Duration::from_nanos(settle - now)).await;
    }
    let fresh = engine.locker_with_prefix(prefix).await;
    let mut keys = BTreeSet::new();
    let mut semaphores = BTreeSet::new();
    let mut elections = BTreeSet::new();
    for op in &schedule.ops {
        match &op.prim {
            Prim::Permits(s, _) => {
                semaphores.insert(semaphore(*s));
            }
            Prim::Leader(e) => {
                elections.insert(election(*e));
            }
            prim => keys.extend(prim.keys()),
        }
    }
    let refused = |kind: &str| judged.figures.refused.contains(kind);
    let mut failures = Vec::new();
    for k in &keys {
        // A read lock takes the key's reader side too: a write lock is free only when both
        // sides are.
        match fresh.write_lock(k.clone()).try_acquire().await {
            Ok(Some(g)) => drop(g.release().await),
            Ok(None) => failures.push(format!("end state: lock `{k}` is still taken")),
            Err(e) => failures.push(format!("end state: lock `{k}`: {e}")),
        }
    }
    if !refused("semaphore") {
        for s in &semaphores {
            match fresh
                .semaphore(s.clone(), LIMIT)
                .try_acquire_many(LIMIT)
                .await
            {
                Ok(Some(g)) => drop(g.release().await),
                Ok(None) => failures.push(format!(
                    "end state: not all {LIMIT} permits of semaphore `{s}` are free"
                )),
                Err(e) => failures.push(format!("end state: semaphore `{s}`: {e}")),
            }
        }
    }
    if !refused("leader") {
        for e in &elections {
            match fresh
                .leader(e.clone())
                .identity("end-state")
                .wait(Duration::ZERO)
                .campaign()
                .await
            {
                Ok(l) => drop(l.resign().await),
                Err(err) => failures.push(format!("end state: election `{e}`: {err}")),
            }
        }
    }
    for k in &keys {
        // A writer's mark that outlived its writer shuts readers out, not writers.
        if refused("read") {
            break;
        }
        match fresh.read_lock(k.clone()).try_acquire().await {
            Ok(Some(g)) => drop(g.release().await),
            Ok(None) => failures.push(format!("end state: readers are shut out of `{k}`")),
            // An engine without read locks.
            Err(LockError::Config { .. }) => break,
            Err(e) => failures.push(format!("end state: read lock `{k}`: {e}")),
        }
    }
    drop(fresh);
    // Nothing left in the store but the records kept by design (fence counters). Records that
    // go away by themselves soon after (a handover mark, an empty ZooKeeper container) get
    // two seconds.
    let mut left = bounded_leftovers(engine, prefix).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    while !left.is_empty() && Instant::now() < deadline {
        sleep(Duration::from_millis(200)).await;
        left = bounded_leftovers(engine, prefix).await;
    }
    for record in left {
        failures.push(format!("end state: left in the store: {record}"));
    }
    judged.failures.extend(failures);
}

/// [`leftovers`], within 20 s (a server that accepts but never answers must fail the run,
/// not hang it).
pub async fn bounded_leftovers(engine: &Engine, prefix: &str) -> Vec<String> {
    tokio::time::timeout(Duration::from_secs(20), leftovers(engine, prefix))
        .await
        .unwrap_or_else(|_| vec!["the store did not answer the listing within 20 s".to_owned()])
}

/// What the engine still stores under `prefix` beyond the records it keeps by design: fence
/// counters (Redis `fence`, `semfence`, `leader:fence`, with their TTL; etcd's fence record,
/// on its writer's lease), the lockers' descriptions (Redis `locker`, with their TTL; etcd's
/// `session` key on its locker's lease; ZooKeeper's ephemeral znodes, without children),
/// ZooKeeper's root and the containers it removes by itself, PostgreSQL's fence sequence and
/// rows whose lease is over (its sweeper's), and MySQL's likewise. Memory keeps its state private: the end state's
/// acquisitions judge it.
pub async fn leftovers(engine: &Engine, prefix: &str) -> Vec<String> {
    let mut left = Vec::new();
    match engine.kind() {
        EngineKind::Memory => {}
        EngineKind::Single | EngineKind::RedLock3 | EngineKind::Cluster | EngineKind::Sentinel => {
            let kept =
                ["fence", "semfence", "leader:fence", "locker"].map(|k| format!("{prefix}:{k}:{{"));
            for addr in engine.server_addrs() {
                let Ok(client) = redis::Client::open(format!("redis://{addr}")) else {
                    continue;
                };
                let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
                    left.push(format!("redis {addr} did not answer"));
                    continue;
                };
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{prefix}:*"))
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                for k in keys {
                    let ttl: i64 = redis::cmd("PTTL")
                        .arg(&k)
                        .query_async(&mut conn)
                        .await
                        .unwrap_or(-2);
                    if ttl == -2 || (ttl > 0 && kept.iter().any(|p| k.starts_with(p.as_str()))) {
                        continue;
                    }
                    left.push(format!("redis {addr}: `{k}` (PTTL {ttl} ms)"));
                }
            }
        }
        EngineKind::ZooKeeper => {
            let addr = engine.server_addrs()[0];
            let client = zookeeper_client::Client::connector()
                .with_session_timeout(Duration::from_secs(4))
                .connect(&addr.to_string())
                .await;
            let Ok(client) = client else {
                return vec![format!("zookeeper {addr} did not answer")];
            };
            let locks = client.list_children("/leasehold").await.unwrap_or_default();
            for lock in locks
                .iter()
                .filter(|l| l.starts_with(&format!("{prefix}:")))
            {
                let path = format!("/leasehold/{lock}");
                let children = client.list_children(&path).await.unwrap_or_default();
                for child in children {
                    left.push(format!("zookeeper: {path}/{child}"));
                }
            }
        }
        EngineKind::Etcd | EngineKind::Etcd3 => {
            let endpoints: Vec<String> = engine
                .server_addrs()
                .iter()
                .map(|a| format!("http://{a}"))
                .collect();
            let Ok(mut client) = etcd_client::Client::connect(endpoints, None).await else {
                return vec!["etcd did not answer".to_owned()];
            };
            let got = client
                .get(
                    format!("{prefix}:"),
                    Some(etcd_client::GetOptions::new().with_prefix()),
                )
                .await;
            let Ok(got) = got else {
                return vec!["etcd did not answer the range".to_owned()];
            };
            for kv in got.kvs() {
                let k = String::from_utf8_lossy(kv.key()).into_owned();
                let kept = [format!("{prefix}:fence:"), format!("{prefix}:session:{{")];
                if !kept.iter().any(|p| k.starts_with(p.as_str())) {
                    left.push(format!("etcd: `{k}` (lease {:x})", kv.lease()));
                }
            }
        }
        EngineKind::Postgres => {
            let addr = engine.server_addrs()[0];
            let url = format!("postgres://postgres@{addr}/postgres");
            let Ok((client, connection)) =
                tokio_postgres::connect(&url, tokio_postgres::NoTls).await
            else {
                return vec![format!("postgres {addr} did not answer")];
            };
            tokio::spawn(connection);
            let like = format!("{prefix}:%");
            for (table, until) in [
                ("leasehold_locks", "expires"),
                ("leasehold_waiters", "waits_until"),
            ] {
                let sql = format!(
                    "SELECT key FROM {table} WHERE key LIKE $1 AND {until} > clock_timestamp()"
                );
                if let Ok(rows) = client.query(&sql, &[&like]).await {
                    for row in rows {
                        let k: String = row.get(0);
                        left.push(format!("postgres {table}: `{k}` (still live)"));
                    }
                }
            }
        }
        EngineKind::Mysql => left.extend(mysql_leftovers(engine, prefix).await),
        _ => {}
    }
    left
}

/// The MySQL engine's locks under `prefix` whose lease is not over on the server's clock
/// (microseconds since the epoch, as the engine stores them). Waiters are stored by the hash of
/// their key, so only their expiry (checked by the end state's acquisitions) judges them.
async fn mysql_leftovers(engine: &Engine, prefix: &str) -> Vec<String> {
    use leasehold_tests::harness::{MYSQL_DATABASE, MYSQL_PASSWORD, MYSQL_USER};
    use mysql_async::prelude::Queryable;
    let addr = engine.server_addrs()[0];
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(MYSQL_USER))
        .pass(Some(MYSQL_PASSWORD))
        .db_name(Some(MYSQL_DATABASE))
        .prefer_socket(false);
    let Ok(mut conn) = mysql_async::Conn::new(opts).await else {
        return vec![format!("mysql {addr} did not answer")];
    };
    let sql = "SELECT CAST(lock_key AS CHAR) FROM leasehold_locks WHERE lock_key LIKE ? \
               AND expires > CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";
    let rows: Vec<String> = conn
        .exec(sql, (format!("{prefix}:%"),))
        .await
        .unwrap_or_default();
    rows.into_iter()
        .map(|k| format!("mysql leasehold_locks: `{k}` (still live)"))
        .collect()
}
