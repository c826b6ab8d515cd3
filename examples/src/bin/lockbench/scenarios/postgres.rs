//! Scenario 8: leasehold on PostgreSQL against the same statements sent raw by the same driver
//! (tokio-postgres), on connections of their own, to the same throwaway server, in the same
//! run: uncontended cycles, and one hot key across four processes, where the raw side polls
//! every 1 ms on a busy lock (it has no wake-ups).

use std::time::Duration;

use leasehold_tests::harness::PgServer;

use crate::baselines::{
    PostgresGrouped, PostgresRaw, POSTGRES_GROUPED, POSTGRES_KEYS_RAW, POSTGRES_RAW,
    POSTGRES_RAW_POLLING,
};
use crate::engine::Engine;
use crate::hot_key::{
    handover_p50, report_against, run_each, Contender, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
use crate::measure::in_turns_costs;
use crate::report::Report;
use crate::versus::{self, baseline_cycle, ByHand};

/// Scenario 8: uncontended cycles at 1 and 16 tasks, then one hot key across four processes.
pub(crate) async fn scenario(
    report: &mut Report,
    postgres: &PgServer,
    duration: Duration,
    rounds: usize,
) {
    let url = postgres.url();
    // Ours first: connecting creates the lock table the raw side uses too.
    let locker = Engine::Postgres.locker(&url).await;
    let raw = PostgresRaw::connect(&url).await;
    versus::uncontended(
        report,
        "8 postgres",
        (&locker, &raw),
        |t, k| format!("raw-u:{t}:{k}"),
        POSTGRES_RAW,
        duration,
        postgres.pid(),
    )
    .await;
    let grouped = PostgresGrouped::connect(&url).await;
    grouped_by_hand(report, (&grouped, &raw), duration, postgres.pid()).await;
    versus::several_keys(report, "8 postgres", &locker, duration).await;
    let floor = ByHand {
        all: &raw,
        name: POSTGRES_KEYS_RAW,
        one: &raw,
        one_name: POSTGRES_RAW,
        baseline_key: |t, k| format!("raw-a:{t}:{k}"),
        metric: "",
    };
    let scenario = "8 postgres";
    versus::several_keys_by_hand(report, scenario, &locker, floor, duration, postgres.pid()).await;
    hot_key(report, &url, rounds).await;
}

/// Issue 49's item 1 on PostgreSQL, its ceiling: the same statements with the calls of 16
/// tasks grouped into one statement by hand ([`PostgresGrouped`]) against one statement per
/// call ([`PostgresRaw`]), taking turns, with the client's and the server's CPU per cycle over
/// the same windows: what one statement for many acquires and releases saves at most.
async fn grouped_by_hand(
    report: &mut Report,
    (grouped, raw): (&PostgresGrouped, &PostgresRaw),
    duration: Duration,
    server: Option<u32>,
) {
    let tasks = 16;
    let grouped = grouped.clone();
    let grouped = move |t, i| baseline_cycle(grouped.clone(), format!("raw-g:{t}:{}", i % 16));
    let raw = raw.clone();
    let raw = move |t, i| baseline_cycle(raw.clone(), format!("raw-u:{t}:{}", i % 16));
    let (grouped, raw) = in_turns_costs(tasks, duration, grouped, raw, server).await;
    let scenario = format!("8 postgres uncontended, {tasks} tasks");
    let metric = |what: &str| format!("{POSTGRES_GROUPED}, {what}");
    let costs = (grouped, raw);
    versus::add_costs(report, &scenario, costs, POSTGRES_RAW, (&metric, "server"));
}

/// One hot key, 4 processes x 4 tasks: a handover between processes goes through the server
/// (ours wakes the next process by `NOTIFY`; the raw side finds the lock free on a poll).
async fn hot_key(report: &mut Report, url: &str, rounds: usize) {
    let rounds = ROUNDS_AT_16_TASKS * rounds;
    let shape = ENGINE_SHAPES[1];
    let contenders = [Contender::Ours(Engine::Postgres), Contender::PostgresRaw];
    let measured = run_each(url, shape, rounds, &contenders, &()).await;
    let [(ours, ()), (raw, ())] = &measured[..] else {
        unreachable!("two contenders")
    };
    report_against(
        report,
        &format!("8 postgres hot key, {}", shape.label()),
        (ours, raw),
        POSTGRES_RAW_POLLING,
        &[handover_p50(ours, raw)],
    );
}
