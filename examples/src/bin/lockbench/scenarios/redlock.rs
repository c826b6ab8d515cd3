//! Scenario 4: RedLock with 3 and 5 nodes against leasehold on one node and rslock on the same
//! nodes; and, to show what the machine allows, the raw lock and unlock commands sent to N
//! nodes in parallel against to one node (the floor). The contenders over N nodes take turns
//! in short blocks, and each one's client CPU and the nodes' CPU per cycle are measured over
//! its own turns, so that a gap against rslock can be told apart into the client's work and
//! the servers'.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::baselines::{bounded, rslock_lock_unlock, token, Naive};
use crate::key_lock::{AllOf, KeysAtOnce};
use crate::measure::{percentile, CpuWindow, UNCONTENDED_ROUNDS};
use crate::report::Report;
use crate::versus::{several_keys_by_hand, ByHand};

/// p50 of `iterations` sequential calls of `op(i)`, in µs.
async fn latency_us<F, Fut>(iterations: usize, mut op: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let start = Instant::now();
        op(i).await;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    percentile(&samples, 0.5)
}

/// Runs futures concurrently on this task (no spawning) and waits for all of them.
async fn join_all<F: Future<Output = ()>>(futures: Vec<F>) {
    let mut futures: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in futures.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await
}

/// One lock of the floor over `nodes`: the raw commands of a lock and an unlock (`SET NX PX`,
/// then compare-and-delete) sent to every node in parallel by the same client, as a RedLock
/// without a library would.
async fn raw_fanout(nodes: &[Naive], i: usize) {
    let key = format!("raw-rl:{}", i % 64);
    let tok = token();
    join_all(
        nodes
            .iter()
            .map(|n| async { assert!(n.try_lock(&key, &tok).await, "raw key was taken") })
            .collect(),
    )
    .await;
    join_all(nodes.iter().map(|n| n.unlock(&key, &tok)).collect()).await;
}

/// The floor of `lock_all` on RedLock's nodes, by hand: every key with a restore-safe fence
/// taken in one script call on each node, the nodes in parallel (all or none on each node),
/// and every key compare-and-deleted in one script call on each. Uncontended cycles only.
#[derive(Clone)]
struct RedlockByHand {
    nodes: std::sync::Arc<[Naive]>,
}

/// Its name in the report.
const REDLOCK_KEYS_BY_HAND: &str =
    "by hand: one script takes every key with a restore-safe fence on each node in parallel, one \
     deletes them";

/// The same with one key.
const REDLOCK_KEY_BY_HAND: &str =
    "by hand: one script takes the key with a restore-safe fence on each node in parallel, one \
     deletes it";

impl KeysAtOnce for RedlockByHand {
    /// The owner token.
    type Held = String;

    async fn acquire_all<'a>(&'a self, keys: &'a [String]) -> String {
        let tok = token();
        let pairs: Vec<(String, String)> =
            keys.iter().map(|k| (k.clone(), format!("f{k}"))).collect();
        let (pairs, tok_ref) = (&pairs, &tok);
        join_all(
            self.nodes
                .iter()
                .map(|n| async move {
                    let taking = n.try_lock_all_safe_fenced(pairs, tok_ref);
                    let fences = bounded("the keys' script by hand", taking).await;
                    assert_eq!(
                        fences.map(|f| f.len()),
                        Some(pairs.len()),
                        "raw keys were taken"
                    );
                })
                .collect(),
        )
        .await;
        tok
    }

    async fn release_all<'a>(&'a self, keys: &'a [String], tok: String) {
        let tok = &tok;
        join_all(
            self.nodes
                .iter()
                .map(|n| async move {
                    assert_eq!(
                        bounded("the keys' deletion by hand", n.unlock_all(keys, tok)).await,
                        keys.len() as i64,
                        "raw keys went"
                    );
                })
                .collect(),
        )
        .await;
    }
}

/// p50 of [`raw_fanout`], in µs.
async fn raw_fanout_us(nodes: &[Naive], iterations: usize) -> f64 {
    latency_us(iterations, |i| raw_fanout(nodes, i)).await
}

/// p50 of one acquire and release with `locker`, in µs.
async fn lock_unlock_us(locker: &Locker, iterations: usize) -> f64 {
    latency_us(iterations, |i| async move {
        let g = locker
            .lock(format!("rl:{}", i % 64))
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
    })
    .await
}

/// One contender of [`latencies_in_turns`]: one sequential operation, given its index.
type Op<'a> = Box<dyn Fn(usize) -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a>;

/// What [`latencies_in_turns`] measured of one contender.
struct Latency {
    /// Every operation's time, in µs, sorted.
    samples: Vec<f64>,
    /// This process's CPU per operation, in µs (`getrusage`, over the contender's turns).
    client_us: f64,
    /// The nodes' CPU per operation, summed over the nodes, in µs (NaN without their PIDs).
    server_us: f64,
}

/// Runs `iterations` sequential operations of each contender of `ops`, taking turns in
/// [`UNCONTENDED_ROUNDS`] blocks (so that a change in the machine's speed during the run
/// falls on every contender alike), and measures each one's latency and the CPU that the
/// client and the server processes `servers` spent on it.
async fn latencies_in_turns(ops: &[Op<'_>], iterations: usize, servers: &[u32]) -> Vec<Latency> {
    let per_round = (iterations / UNCONTENDED_ROUNDS as usize).max(1);
    let mut out: Vec<(Vec<f64>, f64, f64)> = ops.iter().map(|_| (Vec::new(), 0.0, 0.0)).collect();
    for round in 0..UNCONTENDED_ROUNDS as usize {
        for (op, (samples, client, server)) in ops.iter().zip(out.iter_mut()) {
            let cpu = CpuWindow::open(servers);
            for i in 0..per_round {
                let start = Instant::now();
                op(round * per_round + i).await;
                samples.push(start.elapsed().as_secs_f64() * 1e6);
            }
            let (c, s) = cpu.close();
            *client += c;
            *server += s;
        }
    }
    out.into_iter()
        .map(|(mut samples, client, server)| {
            samples.sort_by(f64::total_cmp);
            let n = samples.len() as f64;
            Latency {
                samples,
                client_us: client * 1e6 / n,
                server_us: server * 1e6 / n,
            }
        })
        .collect()
}

/// Scenario 4: `single` is the one-node server, `nodes` (five) the RedLock's; `duration` is the
/// length of the `lock_all` rows' turns.
pub(crate) async fn scenario(
    report: &mut Report,
    single: &str,
    nodes: &[RedisServer],
    iterations: usize,
    duration: Duration,
) {
    let one = Locker::builder()
        .url(single)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let single_us = lock_unlock_us(&one, iterations).await;
    let mut naive = Vec::new();
    for node in nodes {
        naive.push(Naive::new(&node.url()).await);
    }
    let raw_one_us = raw_fanout_us(&naive[..1], iterations).await;
    for n in [3usize, 5] {
        let urls: Vec<String> = nodes[..n].iter().map(|s| s.url()).collect();
        let ours = Locker::builder()
            .redlock(urls.clone())
            .prefix("bench")
            .op_timeout(crate::engine::OP_TIMEOUT)
            .build()
            .await
            .expect("redlock");
        let scenario = format!("4 redlock, {n} nodes");
        crate::versus::several_keys(report, &scenario, &ours, duration).await;
        let by_hand = RedlockByHand {
            nodes: naive[..n].to_vec().into(),
        };
        let floor = ByHand {
            all: &by_hand,
            name: REDLOCK_KEYS_BY_HAND,
            one: &AllOf::one(by_hand.clone()),
            one_name: REDLOCK_KEY_BY_HAND,
            baseline_key: |t, k| format!("rlall:{t}:{k}"),
            metric: "",
        };
        // The nodes' CPU is not read here (one server process per row).
        several_keys_by_hand(report, &scenario, &ours, floor, duration, None).await;
        let rs = rslock::LockManager::new(urls);
        let (ours, rs, naive) = (&ours, &rs, &naive[..n]);
        let ops: [Op<'_>; 4] = [
            Box::new(move |i| {
                Box::pin(async move {
                    let g = ours.lock(format!("rl:{}", i % 64)).acquire().await;
                    g.expect("acquire").release().await.expect("release");
                })
            }),
            Box::new(move |i| {
                Box::pin(async move {
                    let g = ours
                        .lock(format!("rlu:{}", i % 64))
                        .unfenced()
                        .acquire()
                        .await;
                    g.expect("acquire").release().await.expect("release");
                })
            }),
            Box::new(move |i| {
                Box::pin(async move { rslock_lock_unlock(rs, &format!("rs-rl:{}", i % 64)).await })
            }),
            Box::new(move |i| Box::pin(raw_fanout(naive, i))),
        ];
        let pids: Vec<u32> = nodes[..n].iter().filter_map(RedisServer::pid).collect();
        let [fenced, unfenced, theirs, raw] =
            <[Latency; 4]>::try_from(latencies_in_turns(&ops, iterations, &pids).await)
                .unwrap_or_else(|_| unreachable!("one result per contender"));
        let p50 = |l: &Latency| percentile(&l.samples, 0.5);
        let (ours_us, unfenced_us, rs_us, raw_us) =
            (p50(&fenced), p50(&unfenced), p50(&theirs), p50(&raw));
        let rows = [
            (
                "raw commands, N nodes vs 1 (the floor)",
                raw_us,
                raw_one_us,
                "the same raw commands to one node",
            ),
            (
                "acquire+release p50",
                ours_us,
                single_us,
                "leasehold on one node",
            ),
            (
                "acquire+release p50 vs rslock",
                ours_us,
                rs_us,
                "rslock, same nodes",
            ),
            (
                "acquire+release p50 vs the floor",
                ours_us,
                raw_us,
                "raw commands fanned out to the N nodes",
            ),
            (
                "unfenced p50 vs rslock",
                unfenced_us,
                rs_us,
                "rslock, same nodes",
            ),
        ];
        for (metric, ours, baseline, name) in rows {
            report.add(&scenario, metric, ours, baseline, name, "us");
        }
        // Where a gap against rslock goes: the client's work or the nodes' (same turns).
        report.add(
            &scenario,
            "unfenced client CPU per cycle",
            unfenced.client_us,
            theirs.client_us,
            "rslock (getrusage, same turns)",
            "us",
        );
        report.add_if_measured(
            &scenario,
            "unfenced nodes' CPU per cycle",
            unfenced.server_us,
            theirs.server_us,
            "rslock (the N nodes' /proc schedstat, same turns)",
            "us",
        );
    }
}
