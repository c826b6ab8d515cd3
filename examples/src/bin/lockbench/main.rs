//! `lockbench`: leasehold against Redis itself and against what users write by hand, all in
//! one run, reported as ratios.
//!
//! ```text
//! cargo run --release -p leasehold-examples --bin lockbench [-- --quick | --smoke] [--out FILE]
//!     [--only uncontended,hot-key,attribute,redlock,fairness,zookeeper,etcd,postgres,semaphore,held,
//!             leader,semaphores,mysql]
//!     [--engines redis,memory,redlock,zookeeper,etcd,postgres]
//! ```
//!
//! Starts its own `redis-server`s and, for scenario 6, a throwaway ZooKeeper server, for
//! scenario 7 a throwaway etcd, for scenario 8 a throwaway PostgreSQL and for scenario 13 a
//! throwaway MariaDB (the tests' harness; each scenario is skipped, saying why, when its server
//! cannot start: `scripts/ensure-zookeeper`, `scripts/ensure-etcd`, `scripts/ensure-postgres`
//! and `scripts/ensure-mysql` install them), prints a table and writes `target/lockbench.json`: a list of
//! `{"scenario", "metric", "ours", "baseline", "baseline_name", "ratio", "unit"}`, and next to
//! it `target/lockbench.svg` (the same name as `--out`, with `.svg`): the ratios against their
//! targets and scenario 10's curves (see `svg.rs`).
//!
//! Scenarios (`scenarios/`, one file each):
//! 1. uncontended lock/unlock cycles (1, 16, 64 tasks), fenced and unfenced, with the client CPU
//!    per cycle (`getrusage`), vs the same two commands sent raw by
//!    the same client (`SET NX PX` + compare-and-delete script), and vs `rslock`, taking
//!    turns in five short windows each; and `lock_all` of two keys (1, 16 tasks) vs taking
//!    them by hand, one fenced `SET NX PX` each in sorted order, then deleting each;
//! 2. one hot key, 64 tasks x 20 acquisitions in one process and 4 processes x 16 tasks, vs a
//!    hand-written polling loop and `rslock`: throughput, wait percentiles, Redis commands
//!    per acquisition, handover latency (vs a raw PING round trip);
//! 3. the attribute's overhead vs a hand-written guard;
//! 4. RedLock with 3 and 5 nodes vs one node, and vs `rslock` with the same nodes; and, to
//!    show what the machine allows, the raw lock and unlock commands sent to N nodes in
//!    parallel vs to one node;
//! 5. no process starved (issue 21): 1, 2 and 4 processes x 16 tasks, each task taking one
//!    hot key in a loop for a fixed time (holding it for a yield, and for 1 ms), in turns over
//!    three rounds; wait percentiles and acquisitions/s per process, against the one-process
//!    run (median rounds);
//! 6. leasehold on ZooKeeper vs the ZooKeeper client's own lock recipe (`Client::lock`), on the
//!    same server: uncontended cycles (1, 16 tasks), and one hot key, 16 tasks x 1 process and
//!    4 processes x 4 tasks: throughput, wait percentiles, handover, requests per acquisition;
//! 7. leasehold on etcd vs etcd's own Lock service (`Client::lock`, `unlock`), on the same
//!    server: uncontended cycles (1, 16 tasks), also against ours' transactions written by
//!    hand with the same fence record, and one hot key, 16 tasks x 1 process and 4 processes
//!    x 4 tasks: throughput, wait percentiles, handover;
//! 8. leasehold on PostgreSQL vs the same statements sent raw by the same driver
//!    (tokio-postgres; `leasehold_acquire(...)`, then the engine's `DELETE ... pg_notify`), on
//!    connections of their own to the same server: uncontended cycles (1, 16 tasks), and one
//!    hot key, 4 processes x 4 tasks: throughput, wait percentiles, handover, where the raw
//!    side polls every 1 ms on a busy lock (it has no wake-ups);
//! 9. a semaphore of 8 permits, 64 tasks each taking one permit for 1 ms in a loop, vs a
//!    hand-written sorted set of expiring holders in Lua with 1 ms polling: throughput and
//!    wait percentiles.
//! 10. many held locks (issue 19's "scenario 5"): 1k, 10k and 100k locks held at once with the
//!     watchdog on (lease 3 s), each point in a worker process of its own, vs one task per
//!     guard renewing with a compare-and-PEXPIRE script: client memory per held lock, Redis CPU
//!     and commands per renewal, renewal lag p99, and whether each grows linearly (`held/`);
//! 11. leader handover on every engine `--engines` names (`leader/`): three candidates, each
//!     on a locker (session, connection) of its own, and an observer; the leader resigns (a
//!     row) or its locker and session end (another row), and the time until the next
//!     candidate leads and until the observer sees it, p50/p99, against each engine's own
//!     election in the same run, taking turns in windows (`baselines/leader/`);
//! 12. a semaphore of 8 permits, 64 tasks each taking one permit for 1 ms in a loop, as 9, on
//!     every engine `--engines` names (`permits/`), against the same operations done by hand
//!     on each (`baselines/permits/`). Our side on an engine that refuses the primitive
//!     (`LockError::Config`) is printed as "not available on this engine yet"; the baseline
//!     still runs.
//! 13. leasehold on MySQL (MariaDB) vs the same procedure calls sent raw by the same driver
//!     (mysql_async; `CALL leasehold_acquire(...)`, then `CALL leasehold_release(...)`), on
//!     connections of their own to the same server: uncontended cycles (1, 16 tasks), and one
//!     hot key, 4 processes x 4 tasks, where the raw side polls every 1 ms on a busy lock.
//!
//! Scenarios 1, 4 (per N), 6, 7, 8 and 13 also have `lock_all` of four free keys against a
//! single lock, both ours on the engine (1, 16 tasks, taking turns: `versus::several_keys`), and
//! scenario 7 a reservation (one read lock and four seat locks in one `lock_all`) against the
//! same locks taken one after another.
//!
//! Scenarios 2, 5 to 8 and 13 share one hot-key harness (`hot_key/`): every engine's contenders,
//! ours and the baselines (`baselines/`), run the same loop, in this process or in workers.

mod allocations;
mod baselines;
mod cli;
mod engine;
mod hot_key;
mod key_lock;
mod measure;
mod profile;
mod redis_info;
mod report;
mod scenarios;
mod servers;
mod svg;
mod versus;

use cli::{Command, Options, Scenario};
use report::Report;
use scenarios::held;
use servers::Servers;

#[tokio::main]
async fn main() {
    match cli::parse(std::env::args().skip(1).collect()) {
        Command::Worker(args) => hot_key::worker(&args).await,
        Command::HeldWorker(args) => held::worker(&args).await,
        Command::Profile(args) => profile::profile(&args).await,
        Command::ProfileEngine(args) => profile::profile_engine(&args).await,
        Command::Bench(options) => bench(options).await,
    }
}

/// Runs the chosen scenarios in their order, then writes the JSON report and the picture.
async fn bench(options: Options) {
    let Options {
        scenarios: chosen,
        length,
        targets,
        out,
    } = options;
    let (duration, rounds, iterations) = (length.duration(), length.rounds(), length.iterations());
    let mut servers = Servers::start(&chosen, &targets).await;
    let url = servers.redis.url();
    let mut report = Report::begin();
    let mut held_run = None;
    for scenario in Scenario::ALL.into_iter().filter(|s| chosen.contains(s)) {
        let report = &mut report;
        match scenario {
            Scenario::Uncontended => {
                let redis = servers.redis.pid();
                scenarios::uncontended::scenario(report, &url, redis, duration).await
            }
            Scenario::HotKey => scenarios::hot_key::scenario(report, &servers.redis, rounds).await,
            Scenario::Attribute => scenarios::attribute::scenario(report, &url, duration).await,
            Scenario::Redlock => {
                let nodes = &servers.redlock_nodes;
                scenarios::redlock::scenario(report, &url, nodes, iterations, duration).await
            }
            Scenario::Fairness => scenarios::fairness::scenario(report, &url, duration).await,
            Scenario::ZooKeeper => {
                if let Some(zk) = servers.zookeeper().await {
                    scenarios::zookeeper::scenario(report, zk, duration, rounds, iterations).await
                }
            }
            Scenario::Etcd => {
                if let Some(etcd) = servers.etcd().await {
                    scenarios::etcd::scenario(report, etcd, duration, rounds).await
                }
            }
            Scenario::Postgres => {
                if let Some(postgres) = servers.postgres().await {
                    scenarios::postgres::scenario(report, postgres, duration, rounds).await
                }
            }
            Scenario::Semaphore => scenarios::semaphore::scenario(report, &url, duration).await,
            Scenario::Mysql => {
                if let Some(mysql) = servers.mysql().await {
                    scenarios::mysql::scenario(report, mysql, duration, rounds).await
                }
            }
            Scenario::Held => {
                held_run = Some(held::scenario(report, held::Plan::new(length)).await);
            }
            Scenario::Leader => {
                for &target in &targets {
                    if let Some(place) = servers.place(target).await {
                        let handovers = length.handovers();
                        scenarios::leader::scenario(report, target, &place, handovers).await;
                    }
                }
            }
            Scenario::Permits => {
                for &target in &targets {
                    if let Some(place) = servers.place(target).await {
                        scenarios::permits::scenario(report, target, &place, duration).await;
                    }
                }
            }
        }
    }
    report.write_json(&out).expect("write the JSON report");
    eprintln!("wrote {}", out.display());
    let picture = out.with_extension("svg");
    svg::write(&picture, &report.rows, held_run.as_ref()).expect("write the SVG picture");
    eprintln!("wrote {}", picture.display());
}
