//! Scenario 10's runs: every point (1k, 10k, 100k locks), ours then by hand, each in a worker
//! process of its own against the scenario's own Redis; its rows, and how each figure grows.

use std::process::{Command, Stdio};
use std::time::Duration;

use leasehold_tests::harness::RedisServer;

use super::point::{Point, Side};
use crate::cli::RunLength;
use crate::report::Report;

/// A per-lock figure that grows by more than this between the fewest and the most locks
/// held is said to grow faster than linear (its total does).
const LINEAR_SLACK: f64 = 1.5;

/// How many locks, how long, for one run of the scenario.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The numbers of locks held at once, smallest first.
    pub(crate) points: Vec<usize>,
    /// The lease of every lock; renewed every third of it.
    pub(crate) lease: Duration,
    /// How long the locks are held before the measured window (memory is read at its end).
    settle: Duration,
    /// The measured window.
    hold: Duration,
}

impl Plan {
    /// The plan (15 s per point), a shorter `--quick` one, or a tiny `--smoke` one
    /// with a short lease so that renewals happen within it.
    pub(crate) fn new(length: RunLength) -> Plan {
        let lease = Duration::from_secs(3);
        match length {
            RunLength::Smoke => {
                let lease = Duration::from_millis(600);
                Plan {
                    points: vec![50, 100, 200],
                    lease,
                    settle: lease / 2,
                    hold: Duration::from_millis(800),
                }
            }
            RunLength::Quick => Plan {
                points: vec![1_000, 10_000, 100_000],
                lease,
                settle: lease / 2,
                hold: Duration::from_secs(5),
            },
            RunLength::Full => Plan {
                points: vec![1_000, 10_000, 100_000],
                lease,
                settle: lease / 2,
                hold: Duration::from_secs(15),
            },
        }
    }
}

/// The scenario's figures, for the picture.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    /// The lease every lock had.
    pub(crate) lease: Duration,
    /// `(locks held, ours, by hand)`, fewest locks first.
    pub(crate) points: Vec<(usize, Point, Point)>,
}

/// Runs the scenario: every point, ours then by hand, each in a worker process of its own.
pub(crate) async fn scenario(report: &mut Report, plan: Plan) -> Run {
    let server = RedisServer::start().await;
    let url = server.url();
    let mut run = Run {
        lease: plan.lease,
        points: Vec::new(),
    };
    for &n in &plan.points {
        let mut sides = Vec::new();
        for side in [Side::Ours, Side::ByHand] {
            flush(&url).await;
            let (url, plan) = (url.clone(), plan.clone());
            let point = tokio::task::spawn_blocking(move || run_worker(side, &url, n, &plan))
                .await
                .expect("held worker");
            sides.push(point);
        }
        let (ours, by_hand) = (sides[0], sides[1]);
        add_rows(report, n, &ours, &by_hand);
        run.points.push((n, ours, by_hand));
    }
    flush(&url).await;
    say_how_it_grows(&run);
    run
}

/// Empties the scenario's own server, so that a run's Redis CPU is spent on its own keys.
async fn flush(url: &str) {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL");
}

fn run_worker(side: Side, url: &str, n: usize, plan: &Plan) -> Point {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--held-worker", side.name(), url])
        .arg(n.to_string())
        .arg(plan.lease.as_millis().to_string())
        .arg(plan.settle.as_millis().to_string())
        .arg(plan.hold.as_millis().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn held worker");
    assert!(out.status.success(), "held worker failed: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(Point::parse)
        .unwrap_or_else(|| panic!("held worker said {text:?}"))
}

fn add_rows(report: &mut Report, n: usize, ours: &Point, by_hand: &Point) {
    let scenario = format!("10 held, {n} locks");
    let s = scenario.as_str();
    let base = "by hand: a task per guard, compare-and-PEXPIRE script";
    report.add(
        s,
        "client memory per held lock",
        ours.memory_per_lock,
        by_hand.memory_per_lock,
        base,
        "B",
    );
    report.add(
        s,
        "Redis CPU per renewal",
        ours.cpu_per_renewal_us,
        by_hand.cpu_per_renewal_us,
        base,
        "us",
    );
    report.add(
        s,
        "Redis CPU per held lock",
        ours.cpu_per_lock_us_s,
        by_hand.cpu_per_lock_us_s,
        base,
        "us/s",
    );
    report.add(
        s,
        "renewal lag p99",
        ours.lag_p99_ms,
        by_hand.lag_p99_ms,
        base,
        "ms",
    );
    report.add(
        s,
        "commands per renewal (in scripts)",
        ours.commands_per_renewal,
        by_hand.commands_per_renewal,
        base,
        "cmds",
    );
    report.add(
        s,
        "script calls per renewal",
        ours.scripts_per_renewal,
        by_hand.scripts_per_renewal,
        base,
        "calls",
    );
    report.add(
        s,
        "acquisitions/s (512 tasks)",
        ours.acquired_per_s,
        by_hand.acquired_per_s,
        base,
        "acq/s",
    );
    if ours.lost + ours.failed + by_hand.lost + by_hand.failed > 0 {
        println!(
            "10 held, {n} locks: lost at the end: ours {}, by hand {}; failed renewals in the \
             window: ours {}, by hand {}",
            ours.lost, by_hand.lost, ours.failed, by_hand.failed
        );
    }
}

/// Prints, for each per-lock figure, whether it stays flat from the fewest to the most locks
/// (the total grows linearly) or grows (the total grows faster than linear).
fn say_how_it_grows(run: &Run) {
    let (Some(first), Some(last)) = (run.points.first(), run.points.last()) else {
        return;
    };
    if first.0 == last.0 {
        return;
    }
    type Figure = fn(&Point) -> f64;
    type Side = fn(&(usize, Point, Point)) -> &Point;
    let figures: [(&str, Figure); 5] = [
        ("client memory per held lock", |p| p.memory_per_lock),
        ("Redis CPU per renewal", |p| p.cpu_per_renewal_us),
        ("Redis commands per renewal", |p| p.commands_per_renewal),
        ("script calls per renewal", |p| p.scripts_per_renewal),
        ("renewal lag p99", |p| p.lag_p99_ms),
    ];
    println!(
        "10 held: how each figure grows from {} to {} locks held (a per-lock figure that grows \
         by more than {LINEAR_SLACK}x means its total grows faster than linear):",
        first.0, last.0
    );
    for (name, figure) in figures {
        let sides: [(&str, Side); 2] = [("ours", |p| &p.1), ("by hand", |p| &p.2)];
        for (side, pick) in sides {
            let (a, b) = (figure(pick(first)), figure(pick(last)));
            let growth = b / a;
            let verdict = if name == "renewal lag p99" {
                // Not a per-lock figure: a lag that grows with the locks held means the
                // renewals queue up behind each other.
                format!("{a:.2} -> {b:.2} ms ({growth:.2}x)")
            } else if !growth.is_finite() {
                "not measurable (a zero figure)".to_owned()
            } else if growth > LINEAR_SLACK {
                format!("per lock {growth:.2}x: the total grows FASTER than linear")
            } else {
                format!("per lock {growth:.2}x: linear (or better)")
            };
            println!("  {name:<30} {side:<8} {verdict}");
        }
    }
}
