//! `--profile ours|unfenced|raw|fenced|safe-fenced|all|raw-all TASKS SECONDS`: one contender of scenario 1
//! alone against a `redis-server` of its own, for `perf record` (its samples are then the
//! client's alone); prints the client's and Redis's CPU, commands and allocations per cycle.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::allocations::allocations;
use crate::baselines::Naive;
use crate::measure::cpu_seconds;
use crate::redis_info::Info;
use crate::scenarios::uncontended::Cycle;

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
