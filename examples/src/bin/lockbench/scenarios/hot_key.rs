//! Scenario 2: one hot key on Redis, 64 tasks in one process and 16 tasks in each of 4
//! processes, against the polling loop users write by hand and rslock, then `fair(true)`
//! against the default: throughput, wait percentiles, Redis commands per acquisition, and
//! handover latency against a raw PING round trip.

use std::time::Instant;

use leasehold_tests::harness::RedisServer;

use crate::engine::Engine;
use crate::hot_key::{report_against, run_each, Contender, HotStats, Meter, Shape};
use crate::measure::percentile;
use crate::report::Report;

/// Redis's counts per acquisition: `(commands, script calls)`. Commands include those scripts
/// run; script calls are the lock requests clients sent.
struct RedisCommands<'a>(&'a RedisServer);

impl Meter for RedisCommands<'_> {
    type Mark = (u64, u64);
    type PerAcquisition = (f64, f64);

    async fn before(&self) -> (u64, u64) {
        let scripts = script_calls(self.0).await;
        let commands = self.0.info_stat("total_commands_processed").await;
        (scripts, commands)
    }

    async fn after(&self, (scripts, commands): (u64, u64), acquisitions: usize) -> (f64, f64) {
        let commands_now = self.0.info_stat("total_commands_processed").await;
        let scripts = (script_calls(self.0).await - scripts) as f64;
        let n = acquisitions as f64;
        // Both INFO calls count as commands too.
        let commands = (commands_now - commands).saturating_sub(2) as f64 / n;
        (commands, scripts / n)
    }
}

/// Script calls `srv` has run (acquires, releases, renewals, withdrawals): the lock requests
/// clients sent, without the commands the scripts run inside.
async fn script_calls(srv: &RedisServer) -> u64 {
    srv.info_stat("cmdstat_evalsha").await + srv.info_stat("cmdstat_eval").await
}

async fn ping_rtt_us(url: &str) -> f64 {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut rtts = Vec::new();
    for _ in 0..2000 {
        let start = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .expect("PING");
        rtts.push(start.elapsed().as_secs_f64() * 1e6);
    }
    rtts.sort_by(f64::total_cmp);
    percentile(&rtts, 0.5)
}

/// Scenario 2 on `srv`, `rounds` acquisitions per task.
pub(crate) async fn scenario(report: &mut Report, srv: &RedisServer, rounds: usize) {
    let url = srv.url();
    let rtt = ping_rtt_us(&url).await;
    println!("PING round trip p50: {rtt:.0} us");
    // The one-process run's wait max, which the fair lock's is measured against.
    let mut one_process_wait_max = f64::NAN;
    let contenders = [
        Contender::Ours(Engine::Redis),
        Contender::PollingLoop,
        Contender::Rslock,
        Contender::OursFair,
    ];
    for shape in [
        Shape {
            processes: 1,
            tasks: 64,
        },
        Shape {
            processes: 4,
            tasks: 16,
        },
    ] {
        let label = shape.label();
        let mut measured = run_each(&url, shape, rounds, &contenders, &RedisCommands(srv)).await;
        let scenario = format!("2 hot key, {label}");
        let (fair, (fair_cmds, fair_scripts)) = measured.pop().expect("the fair run");
        let (ours, (ours_cmds, ours_scripts)) = &measured[0];
        if shape.processes == 1 {
            one_process_wait_max = ours.wait_max_ms;
        } else {
            report_fair(
                report,
                &label,
                (&fair, fair_cmds, fair_scripts),
                (ours, *ours_cmds, *ours_scripts),
                one_process_wait_max,
            );
        }
        let baselines = ["polling loop (SET NX PX, 1 ms sleep)", "rslock"];
        for ((theirs, (their_cmds, _)), name) in measured[1..].iter().zip(baselines) {
            let commands = (
                "redis commands per acquisition",
                *ours_cmds,
                *their_cmds,
                "commands",
            );
            report_against(report, &scenario, (ours, theirs), name, &[commands]);
        }
        let handovers = [
            ("handover p50", ours.handoff_p50_us),
            ("handover p99", ours.handoff_p99_us),
        ];
        for (metric, ours) in handovers {
            report.add(&scenario, metric, ours, rtt, "PING round trip p50", "us");
        }
    }
}

/// Scenario 2's fair rows: `fair(true)` against the default in the same run, and its wait max
/// against the one-process run's (the target: at most 3 times it, at no more than 1.5 times
/// the default's commands per acquisition).
fn report_fair(
    report: &mut Report,
    label: &str,
    (fair, fair_cmds, fair_scripts): (&HotStats, f64, f64),
    (ours, ours_cmds, ours_scripts): (&HotStats, f64, f64),
    one_process_wait_max: f64,
) {
    let scenario = format!("2 hot key, {label}, fair(true)");
    let default = "default (handover in the process), same run";
    let commands = (
        "redis commands per acquisition",
        fair_cmds,
        ours_cmds,
        "commands",
    );
    // Commands run inside scripts count above; these are the requests clients sent.
    let scripts = (
        "lock script calls per acquisition",
        fair_scripts,
        ours_scripts,
        "calls",
    );
    report_against(
        report,
        &scenario,
        (fair, ours),
        default,
        &[commands, scripts],
    );
    report.add(
        &scenario,
        "wait max vs one process",
        fair.wait_max_ms,
        one_process_wait_max,
        "64 tasks x 1 process (default), same run",
        "ms",
    );
}
