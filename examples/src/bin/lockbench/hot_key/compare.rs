//! The hot-key comparison every engine's scenario runs: contenders in turn on one key each, in
//! one process or several, each run checked (every acquisition made, no two holders at once),
//! measured, and reported against a baseline of the same run.

use std::future::Future;

use super::{assert_exclusive, hot_stats, in_processes, Contender, HotStats, Load};
use crate::report::Report;

/// Scenario 2 runs 64 tasks on a key, scenarios 6 to 8 run 16: as many more acquisitions per
/// task, so that each run has as many (and lasts a second or so with the slower baselines).
pub(crate) const ROUNDS_AT_16_TASKS: usize = 4;

/// Scenarios 6 to 8's hot key: 16 tasks in one process (ours queues them locally and hands the
/// lease over without the server), and 4 processes x 4 tasks (a handover between processes goes
/// through the server).
pub(crate) const ENGINE_SHAPES: [Shape; 2] = [
    Shape {
        processes: 1,
        tasks: 16,
    },
    Shape {
        processes: 4,
        tasks: 4,
    },
];

/// How many processes take the key, and how many tasks in each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) processes: usize,
    pub(crate) tasks: usize,
}

impl Shape {
    /// `16 tasks x 1 process`, `4 tasks x 4 processes`: the scenario names' form.
    pub(crate) fn label(self) -> String {
        let (tasks, processes) = (self.tasks, self.processes);
        let noun = if processes == 1 {
            "process"
        } else {
            "processes"
        };
        format!("{tasks} tasks x {processes} {noun}")
    }
}

/// What a run counts on the server besides its samples, read before and after each
/// contender's run (requests, commands).
pub(crate) trait Meter {
    type Mark;
    /// What was counted, per acquisition.
    type PerAcquisition;

    fn before(&self) -> impl Future<Output = Self::Mark>;

    fn after(
        &self,
        mark: Self::Mark,
        acquisitions: usize,
    ) -> impl Future<Output = Self::PerAcquisition>;
}

/// Counts nothing: the run's samples are all there is.
impl Meter for () {
    type Mark = ();
    type PerAcquisition = ();

    async fn before(&self) {}

    async fn after(&self, (): (), _: usize) {}
}

/// Runs each of `contenders` in turn on a key of its own (`hot-<name>-<processes>`) at
/// `address`, `rounds` acquisitions per task, in this process when `shape` has one and in
/// worker processes otherwise; each one's figures, with what `meter` counted.
pub(crate) async fn run_each<M: Meter>(
    address: &str,
    shape: Shape,
    rounds: usize,
    contenders: &[Contender],
    meter: &M,
) -> Vec<(HotStats, M::PerAcquisition)> {
    let Shape { processes, tasks } = shape;
    let load = Load::Rounds(rounds);
    let mut measured = Vec::new();
    for &contender in contenders {
        let key = format!("hot-{}-{processes}", contender.name());
        let mark = meter.before().await;
        let samples = if processes == 1 {
            contender.contend(address, &key, tasks, load).await
        } else {
            in_processes(contender, address, &key, processes, tasks, load)
                .await
                .concat()
        };
        let counted = meter.after(mark, samples.len()).await;
        assert_eq!(samples.len(), processes * tasks * rounds, "lost samples");
        assert_exclusive(contender.name(), &samples);
        measured.push((hot_stats(samples), counted));
    }
    measured
}

/// One row's figures: `(metric, ours, theirs, unit)`.
pub(crate) type Figures<'a> = (&'a str, f64, f64, &'a str);

/// Adds `scenario`'s rows of ours against `theirs` (named `baseline`): acquisitions/s, wait
/// p50, p99 and max, then `more`.
pub(crate) fn report_against(
    report: &mut Report,
    scenario: &str,
    (ours, theirs): (&HotStats, &HotStats),
    baseline: &str,
    more: &[Figures],
) {
    let figures: [Figures; 4] = [
        ("acquisitions/s", ours.per_sec, theirs.per_sec, "acq/s"),
        ("wait p50", ours.wait_p50_ms, theirs.wait_p50_ms, "ms"),
        ("wait p99", ours.wait_p99_ms, theirs.wait_p99_ms, "ms"),
        ("wait max", ours.wait_max_ms, theirs.wait_max_ms, "ms"),
    ];
    for (metric, ours, theirs, unit) in figures.iter().chain(more) {
        report.add(scenario, metric, *ours, *theirs, baseline, unit);
    }
}

/// The handover p50 row's figures, which scenarios 6 to 8 report against their baselines'.
pub(crate) fn handover_p50(ours: &HotStats, theirs: &HotStats) -> Figures<'static> {
    (
        "handover p50",
        ours.handoff_p50_us,
        theirs.handoff_p50_us,
        "us",
    )
}
