//! Scenario 6: leasehold on ZooKeeper against the ZooKeeper client's own lock recipe, on the
//! same throwaway server, in the same run: uncontended cycles with the requests each makes,
//! and one hot key in one process and in four.
//!
//! Both hold one session per process with the same timeout (leasehold's default, 10 s), and
//! both wait for the release's delete.

use std::time::Duration;

use leasehold_tests::harness::ZkServer;

use crate::baselines::{
    ZooKeeperFencedRecipe, ZooKeeperRecipe, ZOOKEEPER_FENCED_RECIPE, ZOOKEEPER_KEYS_BY_HAND,
    ZOOKEEPER_KEY_BY_HAND, ZOOKEEPER_RECIPE,
};
use crate::engine::Engine;
use crate::hot_key::{
    handover_p50, report_against, run_each, Contender, Meter, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
use crate::key_lock::AllOf;
use crate::report::Report;
use crate::versus::{self, Against, ByHand};

/// Cycles of one task for the request count: enough to drown the session's pings.
const MAX_COUNTED_CYCLES: usize = 500;

/// Requests the server has received from clients so far (`mntr`'s `zk_packets_received`).
async fn packets_received(zk: &ZkServer) -> u64 {
    let mntr = zk.four_letter_word("mntr").await.expect("mntr");
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_packets_received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr:\n{mntr}"))
}

/// Requests per acquisition, including each process's connect and close, and pings: a few per
/// process.
struct Packets<'a>(&'a ZkServer);

impl Meter for Packets<'_> {
    type Mark = u64;
    type PerAcquisition = f64;

    async fn before(&self) -> u64 {
        packets_received(self.0).await
    }

    async fn after(&self, before: u64, acquisitions: usize) -> f64 {
        let after = packets_received(self.0).await;
        after.saturating_sub(before) as f64 / acquisitions as f64
    }
}

/// Scenario 6: uncontended cycles at 1 and 16 tasks, then one hot key, in one process and in
/// four.
pub(crate) async fn scenario(
    report: &mut Report,
    zk: &ZkServer,
    duration: Duration,
    rounds: usize,
    iterations: usize,
) {
    uncontended(report, zk, duration, iterations).await;
    hot_key(report, zk, rounds).await;
}

async fn uncontended(report: &mut Report, zk: &ZkServer, duration: Duration, iterations: usize) {
    let hosts = &zk.connect_string();
    let locker = Engine::ZooKeeper.locker(hosts).await;
    let recipe = ZooKeeperRecipe::connect(hosts).await;
    versus::uncontended(
        report,
        "6 zookeeper",
        (&locker, &recipe),
        |t, k| format!("u-{t}-{k}"),
        ZOOKEEPER_RECIPE,
        duration,
        zk.pid(),
    )
    .await;
    fenced_recipe(report, zk, &locker, duration).await;
    versus::several_keys(report, "6 zookeeper", &locker, duration).await;
    let by_hand = ZooKeeperFencedRecipe::connect(hosts).await;
    let floor = ByHand {
        all: &by_hand,
        name: ZOOKEEPER_KEYS_BY_HAND,
        one: &AllOf::one(by_hand.clone()),
        one_name: ZOOKEEPER_KEY_BY_HAND,
        baseline_key: |t, k| format!("a-{t}-{k}"),
        metric: "",
    };
    let scenario = "6 zookeeper";
    versus::several_keys_by_hand(report, scenario, &locker, floor, duration, zk.pid()).await;
    // What one cycle asks of the server, counted over cycles of one task.
    let cycles = iterations.min(MAX_COUNTED_CYCLES);
    let before = packets_received(zk).await;
    for i in 0..cycles {
        versus::ours_cycle(locker.clone(), format!("c:{}", i % 16)).await;
    }
    let middle = packets_received(zk).await;
    for i in 0..cycles {
        versus::baseline_cycle(recipe.clone(), format!("c-{}", i % 16)).await;
    }
    let after = packets_received(zk).await;
    let per_cycle = |n: u64| n as f64 / cycles as f64;
    report.add(
        "6 zookeeper uncontended, 1 tasks",
        "zookeeper requests per cycle",
        per_cycle(middle.saturating_sub(before)),
        per_cycle(after.saturating_sub(middle)),
        ZOOKEEPER_RECIPE,
        "requests",
    );
}

/// Ours against the recipe written by hand with the fence record ours writes, at 1 and 16
/// tasks, taking turns: what of the gap to the recipe is the record (ZooKeeper's work), and
/// what is the library's.
async fn fenced_recipe(
    report: &mut Report,
    zk: &ZkServer,
    locker: &leasehold::Locker,
    duration: Duration,
) {
    let fenced = ZooKeeperFencedRecipe::connect(&zk.connect_string()).await;
    let against = Against {
        name: ZOOKEEPER_FENCED_RECIPE,
        metric: " vs the recipe with a fence record",
    };
    versus::uncontended_against(
        report,
        "6 zookeeper",
        (locker, &fenced),
        |t, k| format!("f-{t}-{k}"),
        against,
        duration,
        zk.pid(),
    )
    .await;
}

/// Scenario 6's hot key, in one process and in four, with the requests each acquisition made.
async fn hot_key(report: &mut Report, zk: &ZkServer, rounds: usize) {
    let rounds = ROUNDS_AT_16_TASKS * rounds;
    let hosts = zk.connect_string();
    let contenders = [
        Contender::Ours(Engine::ZooKeeper),
        Contender::ZooKeeperRecipe,
    ];
    for shape in ENGINE_SHAPES {
        let measured = run_each(&hosts, shape, rounds, &contenders, &Packets(zk)).await;
        let [(ours, ours_requests), (recipe, recipe_requests)] = &measured[..] else {
            unreachable!("two contenders")
        };
        let requests = (
            "zookeeper requests per acquisition",
            *ours_requests,
            *recipe_requests,
            "requests",
        );
        report_against(
            report,
            &format!("6 zookeeper hot key, {}", shape.label()),
            (ours, recipe),
            ZOOKEEPER_RECIPE,
            &[handover_p50(ours, recipe), requests],
        );
    }
}
