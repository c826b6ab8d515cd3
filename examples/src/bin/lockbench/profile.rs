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
use crate::key_lock::KeyLock;
use crate::measure::{cpu_seconds, cycles_per_sec, CpuWindow};
use crate::redis_info::Info;
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
/// rows alone against a server of its own, for `perf record`: `zookeeper ours|recipe|fenced`,
/// `etcd ours|fenced|service`. Prints cycles/s and the client's and the server's CPU per cycle.
pub(crate) async fn profile_engine(args: &[String]) {
    let engine = args.first().map_or("zookeeper", String::as_str).to_owned();
    let which = args.get(1).map_or("ours", String::as_str).to_owned();
    let tasks: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let secs: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10);
    let duration = Duration::from_secs(secs);
    let usage = || -> ! {
        eprintln!(
            "--profile-engine takes zookeeper ours|recipe|fenced or etcd ours|fenced|service, then \
             TASKS SECONDS"
        );
        std::process::exit(2)
    };
    let (rate, cpu, server_cpu) = match (engine.as_str(), which.as_str()) {
        ("zookeeper", "ours") => {
            let zk = ZkServer::start().await;
            let locker = Engine::ZooKeeper.locker(&zk.connect_string()).await;
            measured(zk.pid(), run_ours(locker, tasks, duration)).await
        }
        ("zookeeper", "recipe") => {
            let zk = ZkServer::start().await;
            let recipe = ZooKeeperRecipe::connect(&zk.connect_string()).await;
            measured(zk.pid(), run_theirs(recipe, tasks, duration)).await
        }
        ("zookeeper", "fenced") => {
            let zk = ZkServer::start().await;
            let recipe = ZooKeeperFencedRecipe::connect(&zk.connect_string()).await;
            measured(zk.pid(), run_theirs(recipe, tasks, duration)).await
        }
        ("etcd", "ours") => {
            let etcd = EtcdServer::start().await;
            let locker = Engine::Etcd.locker(&etcd.endpoint()).await;
            measured(etcd.pid(), run_ours(locker, tasks, duration)).await
        }
        ("etcd", "fenced") => {
            let etcd = EtcdServer::start().await;
            let by_hand = EtcdFencedTxn::connect(&etcd.endpoint()).await;
            measured(etcd.pid(), run_theirs(by_hand, tasks, duration)).await
        }
        ("etcd", "service") => {
            let etcd = EtcdServer::start().await;
            let service = EtcdLockService::connect(&etcd.endpoint()).await;
            measured(etcd.pid(), run_theirs(service, tasks, duration)).await
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

async fn run_ours(locker: Locker, tasks: usize, duration: Duration) -> f64 {
    cycles_per_sec(tasks, duration, move |t, i| {
        versus::ours_cycle(locker.clone(), format!("u:{t}:{}", i % 16))
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
