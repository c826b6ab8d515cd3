//! Scenario 5, no process starved (issue 21): 1, 2 and 4 processes of 16 tasks each take one
//! hot key on Redis in a loop for a fixed time, holding it for a yield and for 1 ms, in turns
//! over three rounds; wait percentiles and acquisitions/s per process, against the one-process
//! run (median rounds).

use std::time::Duration;

use crate::engine::Engine;
use crate::hot_key::{hot_stats, in_processes, Contender, HotStats, Load, Sample};
use crate::report::Report;

/// Scenario 5's runs: one process (the baseline), then two and four on the same key.
const FAIRNESS_PROCESSES: [usize; 3] = [1, 2, 4];
const FAIRNESS_TASKS: usize = 16;

/// Scenario 5's critical sections: a yield (what the lock itself costs), and a 1 ms sleep, the
/// shop's payment (`PAYMENT_TIME`), with which issue 21's starvation shows in full.
const FAIRNESS_HOLDS: [(Duration, &str); 2] = [
    (Duration::ZERO, "yield held"),
    (Duration::from_millis(1), "1 ms held"),
];

/// Scenario 5's rounds: the runs take turns, so that a stall of the machine (another
/// build on a shared VM) falls on all of them alike, and most figures are the median round's;
/// one stall in the one-process run would otherwise set the baseline's wait max.
const FAIRNESS_ROUNDS: usize = 3;

/// One round of one process count: all its processes together, and each of them.
struct FairRound {
    all: HotStats,
    each: Vec<HotStats>,
}

impl FairRound {
    fn new(per_process: &[Vec<Sample>]) -> FairRound {
        let all = hot_stats(per_process.concat());
        let total = per_process.iter().map(Vec::len).sum::<usize>() as f64;
        // Each process's rate over the round's common window, so that they add up to the
        // total (a process's own window stretches when its last acquisition came late).
        let each = per_process
            .iter()
            .map(|samples| HotStats {
                per_sec: all.per_sec * samples.len() as f64 / total,
                ..hot_stats(samples.clone())
            })
            .collect();
        FairRound { all, each }
    }

    /// The slowest and the fastest process's acquisitions/s.
    fn slowest_fastest(&self) -> (f64, f64) {
        let rates = self.each.iter().map(|p| p.per_sec);
        (
            rates.clone().fold(f64::INFINITY, f64::min),
            rates.fold(0.0, f64::max),
        )
    }
}

/// One figure of a round.
type Figure = fn(&FairRound) -> f64;

/// The round whose `key` is the median (the upper one of an even count).
fn median_round(rounds: &[FairRound], key: impl Fn(&FairRound) -> f64) -> &FairRound {
    let mut sorted: Vec<&FairRound> = rounds.iter().collect();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    sorted[sorted.len() / 2]
}

fn median_of(rounds: &[FairRound], key: impl Fn(&FairRound) -> f64) -> f64 {
    key(median_round(rounds, &key))
}

/// Scenario 5: 1, 2 and 4 processes of 16 tasks each take one hot key in a loop, with each
/// critical section, in turns over a few rounds of `duration` in all per run; whether any
/// process is starved, against the one-process run (issue 21).
pub(crate) async fn scenario(report: &mut Report, url: &str, duration: Duration) {
    on(report, Engine::Redis, "5", url, duration).await;
}

/// Scenario 5's runs and rows on `engine` at `url`, its rows' scenario named from `label`
/// (MySQL's run is part of scenario 13).
pub(crate) async fn on(
    report: &mut Report,
    engine: Engine,
    label: &str,
    url: &str,
    duration: Duration,
) {
    let window = duration / FAIRNESS_ROUNDS as u32;
    // runs[hold][process count][round]
    let mut runs: Vec<Vec<Vec<FairRound>>> = FAIRNESS_HOLDS
        .iter()
        .map(|_| FAIRNESS_PROCESSES.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..FAIRNESS_ROUNDS {
        for (by_count, (hold, _)) in runs.iter_mut().zip(FAIRNESS_HOLDS) {
            for (run, processes) in by_count.iter_mut().zip(FAIRNESS_PROCESSES) {
                let key = format!("fair-{}-{processes}-{round}", hold.as_micros());
                let load = Load::Continuous { run: window, hold };
                let ours = Contender::Ours(engine);
                let per_process =
                    in_processes(ours, url, &key, processes, FAIRNESS_TASKS, load).await;
                run.push(FairRound::new(&per_process));
            }
        }
    }
    for (by_count, (_, held)) in runs.iter().zip(FAIRNESS_HOLDS) {
        report_fairness(report, label, held, by_count);
    }
}

/// Scenario 5's rows for one critical section: `runs[i]` are the rounds of
/// `FAIRNESS_PROCESSES[i]` processes.
fn report_fairness(report: &mut Report, label: &str, held: &str, runs: &[Vec<FairRound>]) {
    let one = &runs[0];
    let vs_one = format!("1 process x {FAIRNESS_TASKS} tasks, same run");
    let whole_run_max =
        |rounds: &[FairRound]| rounds.iter().map(|r| r.all.wait_max_ms).fold(0.0, f64::max);
    for (rounds, processes) in runs.iter().zip(FAIRNESS_PROCESSES).skip(1) {
        let scenario =
            format!("{label} no starving, {processes} processes x {FAIRNESS_TASKS} tasks, {held}");
        let s = scenario.as_str();
        let medians: [(&str, &str, Figure); 3] = [
            ("wait max", "ms", |r| r.all.wait_max_ms),
            ("wait p99", "ms", |r| r.all.wait_p99_ms),
            ("total acquisitions/s", "acq/s", |r| r.all.per_sec),
        ];
        for (metric, unit, key) in medians {
            let metric = format!("{metric} (median round)");
            report.add(
                s,
                &metric,
                median_of(rounds, key),
                median_of(one, key),
                &vs_one,
                unit,
            );
        }
        report.add(
            s,
            "wait max (whole run)",
            whole_run_max(rounds),
            whole_run_max(one),
            &vs_one,
            "ms",
        );
        let evenness = |r: &FairRound| {
            let (slowest, fastest) = r.slowest_fastest();
            slowest / fastest
        };
        let median = median_round(rounds, evenness);
        let (slowest, fastest) = median.slowest_fastest();
        report.add(
            s,
            "acq/s, slowest process (median round)",
            slowest,
            fastest,
            "fastest process",
            "acq/s",
        );
        // Each process of the round with the median evenness, against the one-process
        // run's median round.
        for (i, p) in median.each.iter().enumerate() {
            let metric = |m: &str| format!("process {}: {m}", i + 1);
            let rows: [(&str, f64, Figure, &str); 4] = [
                ("acquisitions/s", p.per_sec, |r| r.all.per_sec, "acq/s"),
                ("wait p50", p.wait_p50_ms, |r| r.all.wait_p50_ms, "ms"),
                ("wait p99", p.wait_p99_ms, |r| r.all.wait_p99_ms, "ms"),
                ("wait max", p.wait_max_ms, |r| r.all.wait_max_ms, "ms"),
            ];
            for (name, ours, key, unit) in rows {
                report.add(s, &metric(name), ours, median_of(one, key), &vs_one, unit);
            }
        }
    }
}
