//! `--profile ours|unfenced|raw|fenced|safe-fenced|all|raw-all TASKS SECONDS`: one contender of scenario 1
//! alone against a `redis-server` of its own, for `perf record` (its samples are then the
//! client's alone); prints the client's and Redis's CPU, commands and allocations per cycle.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{EtcdServer, RedisServer, ZkServer};

use crate::allocations::allocations;
use crate::baselines::{
    EtcdFencedTxn, EtcdLockService, Naive, ZooKeeperFencedRecipe, ZooKeeperRecipe,
};
use crate::engine::Engine;
use crate::key_lock::{AllOf, KeyLock};
use crate::measure::{cpu_seconds, cycles_per_sec, CpuWindow};
use crate::redis_info::Info;
use crate::scenarios::etcd::compacting;
use crate::scenarios::uncontended::Cycle;
use crate::versus;

pub(crate) async fn profile(args: &[String]) {
    let which = args.first().map_or("ours", String::as_str).to_owned();
    // Before any server starts: an unknown name exits at once.
    let cycle = Cycle::parse(&which);
    let tasks: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(16);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let server = RedisServer::start().await;
    let url = server.url();
    let naive = Naive::new(&url).await;
    let locker = Locker::builder()
        .url(url.as_str())
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let duration = Duration::from_secs(secs);
    let mut info = Info::connect(&url).await;
    let (server_cpu, commands, _) = info.read().await;
    let cpu = cpu_seconds();
    let allocations_before = allocations();
    let rate = cycle.run(&naive, &locker, tasks, duration).await;
    let cycles = rate * secs as f64;
    let cpu_us = (cpu_seconds() - cpu) * 1e6 / cycles;
    let allocs = (allocations() - allocations_before) as f64 / cycles;
    let (server_cpu_now, commands_now, _) = info.read().await;
    println!(
        "{which}, {tasks} tasks: {rate:.0} cycles/s, client CPU {cpu_us:.1} us/cycle, redis CPU \
         {:.1} us/cycle, {:.2} commands/cycle, {allocs:.1} allocations/cycle",
        (server_cpu_now - server_cpu) * 1e6 / cycles,
        (commands_now - commands) as f64 / cycles
    );
}

/// `--profile-engine ENGINE CONTENDER TASKS SECONDS`: one contender of an engine's uncontended
/// rows alone against a server of its own, for `perf record`: `zookeeper
/// ours|recipe|fenced|ours-all|fenced-all`, `etcd ours|fenced|service|ours-all|fenced-all`
/// (`-all`: [`SEVERAL`](versus::SEVERAL) keys at once, our `lock_all` or by hand). On etcd, also the gRPC
/// messages the server received and sent per cycle, by method; and a fifth argument, `MS`,
/// compacts etcd's history every `MS` milliseconds meanwhile, as a server with
/// auto-compaction would (each of our acquisitions puts a key of its own, and until a
/// compaction each one's deletion stays in etcd's index, where every later check that a
/// lock's range is empty walks over it). Prints cycles/s and the client's and the server's CPU per cycle.
pub(crate) async fn profile_engine(args: &[String]) {
    let engine = args.first().map_or("zookeeper", String::as_str).to_owned();
    let which = args.get(1).map_or("ours", String::as_str).to_owned();
    let tasks: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let secs: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let compact_every: Option<u64> = args.get(4).and_then(|a| a.parse().ok());
    let duration = Duration::from_secs(secs);
    let usage = || -> ! {
        eprintln!(
            "--profile-engine takes zookeeper ours|recipe|fenced|ours-all|fenced-all or etcd \
             ours|fenced|service|ours-all|fenced-all, then TASKS SECONDS (and, on etcd, \
             the milliseconds between compactions)"
        );
        std::process::exit(2)
    };
    let (rate, cpu, server_cpu) = match (engine.as_str(), which.as_str()) {
        ("zookeeper", "ours" | "recipe" | "fenced" | "ours-all" | "fenced-all") => {
            let zk = ZkServer::start().await;
            let hosts = zk.connect_string();
            // Connected before the measured window opens.
            let run: Run = match which.as_str() {
                "ours" => Box::pin(run_ours(
                    Engine::ZooKeeper.locker(&hosts).await,
                    tasks,
                    duration,
                )),
                "ours-all" => Box::pin(run_ours_all(
                    Engine::ZooKeeper.locker(&hosts).await,
                    tasks,
                    duration,
                )),
                "recipe" => Box::pin(run_theirs(
                    ZooKeeperRecipe::connect(&hosts).await,
                    tasks,
                    duration,
                )),
                "fenced" => Box::pin(run_theirs(
                    ZooKeeperFencedRecipe::connect(&hosts).await,
                    tasks,
                    duration,
                )),
                _ => Box::pin(run_theirs(
                    AllOf::several(ZooKeeperFencedRecipe::connect(&hosts).await),
                    tasks,
                    duration,
                )),
            };
            measured(zk.pid(), run).await
        }
        ("etcd", "ours" | "fenced" | "service" | "ours-all" | "fenced-all") => {
            let etcd = EtcdServer::start().await;
            let _compacting = match compact_every {
                Some(ms) => Some(compacting(&etcd, Duration::from_millis(ms)).await),
                None => None,
            };
            let endpoint = etcd.endpoint();
            // Connected before the measured window opens.
            let run: Run = match which.as_str() {
                "ours" => Box::pin(run_ours(
                    Engine::Etcd.locker(&endpoint).await,
                    tasks,
                    duration,
                )),
                "ours-all" => Box::pin(run_ours_all(
                    Engine::Etcd.locker(&endpoint).await,
                    tasks,
                    duration,
                )),
                "fenced" => Box::pin(run_theirs(
                    EtcdFencedTxn::connect(&endpoint).await,
                    tasks,
                    duration,
                )),
                "fenced-all" => Box::pin(run_theirs(
                    AllOf::several(EtcdFencedTxn::connect(&endpoint).await),
                    tasks,
                    duration,
                )),
                _ => Box::pin(run_theirs(
                    EtcdLockService::connect(&endpoint).await,
                    tasks,
                    duration,
                )),
            };
            with_rpcs(&etcd, measured(etcd.pid(), run), secs).await
        }
        _ => usage(),
    };
    let cycles = rate * secs as f64;
    println!(
        "{engine} {which}, {tasks} tasks: {rate:.0} cycles/s, client CPU {:.1} us/cycle, server \
         CPU {:.1} us/cycle",
        cpu * 1e6 / cycles,
        server_cpu * 1e6 / cycles
    );
}

/// One contender's run, connected, not yet started: its cycles/s.
type Run = std::pin::Pin<Box<dyn std::future::Future<Output = f64>>>;

async fn run_ours(locker: Locker, tasks: usize, duration: Duration) -> f64 {
    cycles_per_sec(tasks, duration, move |t, i| {
        versus::ours_cycle(locker.clone(), format!("u:{t}:{}", i % 16))
    })
    .await
}

async fn run_ours_all(locker: Locker, tasks: usize, duration: Duration) -> f64 {
    cycles_per_sec(tasks, duration, move |t, i| {
        versus::ours_all_cycle(locker.clone(), t, i)
    })
    .await
}

async fn run_theirs<L: KeyLock>(lock: L, tasks: usize, duration: Duration) -> f64 {
    cycles_per_sec(tasks, duration, move |t, i| {
        versus::baseline_cycle(lock.clone(), format!("u-{t}-{}", i % 16))
    })
    .await
}

/// `run`'s cycles/s, with this process's and the `server` process's CPU seconds over it.
async fn measured(
    server: Option<u32>,
    run: impl std::future::Future<Output = f64>,
) -> (f64, f64, f64) {
    let servers: Vec<u32> = server.into_iter().collect();
    let window = CpuWindow::open(&servers);
    let rate = run.await;
    let (cpu, server) = window.close();
    (rate, cpu, server)
}

/// `run`'s result, after printing the gRPC messages etcd received per cycle over it, by method
/// (from its `/metrics`): what a cycle asks of the server, beside what it costs.
async fn with_rpcs(
    etcd: &EtcdServer,
    run: impl std::future::Future<Output = (f64, f64, f64)>,
    secs: u64,
) -> (f64, f64, f64) {
    let before = grpc_messages(etcd).await;
    let result = run.await;
    let after = grpc_messages(etcd).await;
    let cycles = result.0 * secs as f64;
    for (method, count) in &after {
        let delta = count - before.get(method).copied().unwrap_or(0.0);
        if delta > 0.0 {
            println!("  etcd {method}: {:.3} messages/cycle", delta / cycles);
        }
    }
    result
}

/// `grpc_server_msg_received_total` and `grpc_server_msg_sent_total` by method, from etcd's
/// `/metrics`.
async fn grpc_messages(etcd: &EtcdServer) -> std::collections::BTreeMap<String, f64> {
    let metrics = etcd
        .http("GET", "/metrics", "")
        .await
        .expect("etcd's /metrics");
    let mut by_method = std::collections::BTreeMap::new();
    for line in metrics.lines() {
        let (kind, rest) = if let Some(rest) = line.strip_prefix("grpc_server_msg_received_total{")
        {
            ("received", rest)
        } else if let Some(rest) = line.strip_prefix("grpc_server_msg_sent_total{") {
            ("sent", rest)
        } else {
            continue;
        };
        let method = rest
            .split("grpc_method=\"")
            .nth(1)
            .and_then(|m| m.split('"').next())
            .unwrap_or("?");
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_method.entry(format!("{method} {kind}")).or_insert(0.0) += value;
    }
    by_method
}
