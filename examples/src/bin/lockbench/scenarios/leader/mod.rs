//! Scenario 11: leader handover on every engine, ours against each engine's own election in
//! the same run (`handover.rs` measures, `ours.rs` is leasehold's side, the baselines are in
//! `baselines/leader/`).

pub(crate) mod handover;
mod ours;

use std::sync::Arc;

use handover::{handovers, Election, Samples, StepDown};
use ours::OursElection;

use crate::baselines::leader as raw;
use crate::engine::{Place, Target};
use crate::measure::percentile;
use crate::report::Report;

/// Windows per row: the two sides take turns, so that a stall of the machine hits both.
const WINDOWS: usize = 4;

/// Scenario 11 on `target` at `place`: `count` handovers per side and row.
pub(crate) async fn scenario(report: &mut Report, target: Target, place: &Place, count: usize) {
    let scenario = format!("11 leader handover, {}", target.name());
    let ours = OursElection::available(place).await;
    if !ours {
        println!("{scenario}: ours not available on this engine yet (the baseline still runs)");
    }
    let rows = Rows {
        report,
        scenario: &scenario,
        place,
        ours,
        count,
    };
    match place {
        Place::Redis(url) => {
            let url = url.clone();
            let side = move |name| raw::RedisElection::new(&url, name);
            rows.compare(side, raw::REDIS_ELECTION).await
        }
        Place::Memory(_) => {
            rows.compare(raw::TokioElection::new, raw::TOKIO_ELECTION)
                .await
        }
        Place::RedLock(urls) => {
            let one = Place::Redis(urls[0].clone());
            let side = move |name| OursElection::new(&one, name);
            rows.compare(side, "leasehold on one Redis node (the first)")
                .await
        }
        Place::ZooKeeper(hosts) => {
            let hosts = hosts.clone();
            let side = move |name| raw::ZooKeeperElection::new(&hosts, name);
            rows.compare(side, raw::ZOOKEEPER_ELECTION).await
        }
        Place::Etcd(endpoint) => {
            let endpoint = endpoint.clone();
            let side = move |name| raw::EtcdElection::new(&endpoint, name);
            rows.compare(side, raw::ETCD_ELECTION).await
        }
        Place::Postgres(url) => {
            raw::PostgresElection::prepare(url).await;
            let url = url.clone();
            let side = move |name| raw::PostgresElection::new(&url, name);
            rows.compare(side, raw::POSTGRES_ELECTION).await
        }
    }
}

/// One engine's rows.
struct Rows<'a> {
    report: &'a mut Report,
    scenario: &'a str,
    place: &'a Place,
    /// Whether our side runs (the engine offers leader election).
    ours: bool,
    count: usize,
}

impl Rows<'_> {
    /// Both step-downs, ours against the baseline `side(name)` makes, taking turns over
    /// [`WINDOWS`] windows of a fresh election each.
    async fn compare<B: Election>(self, side: impl Fn(String) -> B, name: &str) {
        let per_window = self.count.div_ceil(WINDOWS);
        for (how, label) in [
            (StepDown::Resign, "resign"),
            (StepDown::EndSession, "session end"),
        ] {
            let (mut ours, mut theirs) = (Samples::default(), Samples::default());
            for w in 0..WINDOWS {
                let election = format!("handover-{label}-{w}").replace(' ', "-");
                if self.ours {
                    let us = Arc::new(OursElection::new(self.place, format!("{election}-ours")));
                    handovers(us, how, per_window, &mut ours).await;
                }
                let them = Arc::new(side(format!("{election}-raw")));
                handovers(them, how, per_window, &mut theirs).await;
            }
            for (who, samples) in [("ours", &ours), ("baseline", &theirs)] {
                if let Some(why) = &samples.gave_up {
                    println!("{}: {label}: {who} stopped early: {why}", self.scenario);
                }
            }
            let figures = |s: &Samples| {
                let sorted = |v: &[f64]| {
                    let mut v = v.to_vec();
                    v.sort_by(f64::total_cmp);
                    v
                };
                let (elected, observed) = (sorted(&s.elected_us), sorted(&s.observed_us));
                [
                    percentile(&elected, 0.5),
                    percentile(&elected, 0.99),
                    percentile(&observed, 0.5),
                    percentile(&observed, 0.99),
                ]
            };
            let metrics = ["elected p50", "elected p99", "observed p50", "observed p99"];
            let theirs_figures = figures(&theirs);
            for (i, metric) in metrics.iter().enumerate() {
                let metric = format!("{label}: {metric}");
                let them = theirs_figures[i];
                match self.ours {
                    true => {
                        let us = figures(&ours)[i];
                        self.report
                            .add(self.scenario, &metric, us, them, name, "us");
                    }
                    false => self
                        .report
                        .baseline_only(self.scenario, &metric, them, name, "us"),
                }
            }
            println!(
                "{}: {label}: {} handovers ours, {} baseline",
                self.scenario,
                ours.elected_us.len(),
                theirs.elected_us.len()
            );
        }
    }
}
