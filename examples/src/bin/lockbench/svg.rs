//! `lockbench`'s picture, written next to the JSON report (`target/lockbench.svg`): the
//! ratios that have a target (issue 19) as bars against their targets, and the held-locks
//! curves (client memory and Redis CPU per held lock against the number held, ours and by
//! hand), drawn with plotters' SVG backend.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::Row;
use crate::scenarios::held;

/// One bar: a measured figure (a ratio, or a figure over its limit) and its target.
struct Bar {
    label: String,
    value: f64,
    target: f64,
    /// The target is a floor (`value ≥ target`), else a ceiling.
    at_least: bool,
}

impl Bar {
    fn met(&self) -> bool {
        if self.at_least {
            self.value >= self.target
        } else {
            self.value <= self.target
        }
    }
}

/// The targets on rows of the report: `(scenario prefix, metric, target, at least)`.
/// A scenario prefix ending in a task count matches that count alone.
const ROW_TARGETS: &[(&str, &str, f64, bool)] = &[
    (
        "1 uncontended, 1 tasks",
        "cycles/s vs raw with a fence",
        0.95,
        true,
    ),
    (
        "1 uncontended, 16 tasks",
        "cycles/s vs raw with a fence",
        0.9,
        true,
    ),
    (
        "1 uncontended, 64 tasks",
        "cycles/s vs raw with a fence",
        0.9,
        true,
    ),
    ("1 uncontended, 1 tasks", "unfenced cycles/s", 0.95, true),
    ("1 uncontended, 16 tasks", "unfenced cycles/s", 0.9, true),
    ("1 uncontended, 64 tasks", "unfenced cycles/s", 0.9, true),
    ("1 uncontended, 1 tasks", "client CPU per cycle", 1.2, false),
    (
        "1 uncontended, 1 tasks",
        "unfenced client CPU per cycle",
        1.2,
        false,
    ),
    (
        "1 uncontended, 16 tasks",
        "client CPU per cycle",
        1.2,
        false,
    ),
    (
        "1 uncontended, 16 tasks",
        "unfenced client CPU per cycle",
        1.2,
        false,
    ),
    (
        "1 uncontended, 64 tasks",
        "client CPU per cycle",
        1.2,
        false,
    ),
    (
        "1 uncontended, 64 tasks",
        "unfenced client CPU per cycle",
        1.2,
        false,
    ),
    (
        "4 redlock, 3 nodes",
        "acquire+release p50 vs the floor",
        1.1,
        false,
    ),
    ("4 redlock, 3 nodes", "unfenced p50 vs rslock", 1.0, false),
    (
        "4 redlock, 5 nodes",
        "acquire+release p50 vs the floor",
        1.1,
        false,
    ),
    ("4 redlock, 5 nodes", "unfenced p50 vs rslock", 1.0, false),
    ("6 zookeeper uncontended, 1 tasks", "cycles/s", 0.9, true),
    ("6 zookeeper uncontended, 16 tasks", "cycles/s", 0.9, true),
    ("7 etcd uncontended, 1 tasks", "cycles/s", 0.9, true),
    ("7 etcd uncontended, 16 tasks", "cycles/s", 0.9, true),
    ("8 postgres uncontended, 1 tasks", "cycles/s", 0.9, true),
    ("8 postgres uncontended, 16 tasks", "cycles/s", 0.9, true),
    // Issue 49: several free keys in about one round trip on every engine, and a reservation
    // at five times the rate of taking its locks one after another.
    ("1 uncontended, 1 tasks", LOCK_ALL, 0.8, true),
    ("1 uncontended, 16 tasks", LOCK_ALL, 0.8, true),
    (
        "4 redlock, 3 nodes uncontended, 1 tasks",
        LOCK_ALL,
        0.8,
        true,
    ),
    (
        "4 redlock, 3 nodes uncontended, 16 tasks",
        LOCK_ALL,
        0.8,
        true,
    ),
    (
        "4 redlock, 5 nodes uncontended, 1 tasks",
        LOCK_ALL,
        0.8,
        true,
    ),
    (
        "4 redlock, 5 nodes uncontended, 16 tasks",
        LOCK_ALL,
        0.8,
        true,
    ),
    ("6 zookeeper uncontended, 1 tasks", LOCK_ALL, 0.8, true),
    ("6 zookeeper uncontended, 16 tasks", LOCK_ALL, 0.8, true),
    ("7 etcd uncontended, 1 tasks", LOCK_ALL, 0.8, true),
    ("7 etcd uncontended, 16 tasks", LOCK_ALL, 0.8, true),
    ("8 postgres uncontended, 1 tasks", LOCK_ALL, 0.8, true),
    ("8 postgres uncontended, 16 tasks", LOCK_ALL, 0.8, true),
    ("13 mysql uncontended, 1 tasks", LOCK_ALL, 0.8, true),
    ("13 mysql uncontended, 16 tasks", LOCK_ALL, 0.8, true),
    ("7 etcd uncontended, 1 tasks", RESERVATION, 5.0, true),
    ("7 etcd uncontended, 16 tasks", RESERVATION, 5.0, true),
];

/// The metric of the `lock_all` rows (`versus::several_keys`).
const LOCK_ALL: &str = "lock_all of 4 free keys, cycles/s";

/// The metric of etcd's reservation rows (`scenarios/etcd.rs`).
const RESERVATION: &str = "reservation (1 read + 4 write locks), cycles/s";

/// The memory target of the held-locks scenario, bytes per held lock.
const MEMORY_PER_LOCK: f64 = 1024.0;

/// The Redis CPU target of the held-locks scenario, as a fraction of the by-hand renewal's.
const CPU_VS_BY_HAND: f64 = 0.5;

fn bars(rows: &[Row], held: Option<&held::Run>) -> Vec<Bar> {
    let mut bars = Vec::new();
    for &(scenario, metric, target, at_least) in ROW_TARGETS {
        for row in rows
            .iter()
            .filter(|r| r.scenario == scenario && r.metric == metric)
        {
            bars.push(Bar {
                label: format!("{}: {}", row.scenario, row.metric),
                value: row.ratio(),
                target,
                at_least,
            });
        }
    }
    if let Some(run) = held {
        for (n, ours, by_hand) in &run.points {
            bars.push(Bar {
                label: format!("10 held, {n} locks: Redis CPU per renewal vs by hand"),
                value: ours.cpu_per_renewal_us / by_hand.cpu_per_renewal_us,
                target: CPU_VS_BY_HAND,
                at_least: false,
            });
            bars.push(Bar {
                label: format!("10 held, {n} locks: client memory per lock / 1 KiB"),
                value: ours.memory_per_lock / MEMORY_PER_LOCK,
                target: 1.0,
                at_least: false,
            });
        }
        if let Some((n, ours, _)) = run.points.last() {
            let limit_ms = run.lease.as_secs_f64() * 1e3 / 10.0;
            bars.push(Bar {
                label: format!(
                    "10 held, {n} locks: renewal lag p99 / (lease/10 = {limit_ms:.0} ms)"
                ),
                value: ours.lag_p99_ms / limit_ms,
                target: 1.0,
                at_least: false,
            });
        }
    }
    bars.retain(|b| b.value.is_finite());
    bars
}

/// Writes the picture of `rows` (and of the held-locks run, when it ran) to `path`.
pub(crate) fn write(
    path: &Path,
    rows: &[Row],
    held: Option<&held::Run>,
) -> Result<(), Box<dyn Error>> {
    let bars = bars(rows, held);
    let bars_height = 120 + 28 * bars.len().max(1) as u32;
    let root = SVGBackend::new(path, (1100, bars_height + 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(bars_height);
    draw_bars(&top, &bars)?;
    let (left, right) = bottom.split_horizontally(550);
    match held {
        Some(run) if !run.points.is_empty() => {
            draw_curve(
                &left,
                run,
                "client memory per held lock",
                "bytes per lock",
                |p| p.memory_per_lock,
                Some(MEMORY_PER_LOCK),
            )?;
            draw_curve(
                &right,
                run,
                "Redis CPU per held lock",
                "Redis CPU, us per second per lock",
                |p| p.cpu_per_lock_us_s,
                None,
            )?;
        }
        _ => {
            bottom.draw(&Text::new(
                "scenario 10 (held) did not run: no held-locks curves",
                (20, 40),
                ("sans-serif", 16),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    bars: &[Bar],
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let caption =
        "ratios against their targets (bar: this run; black line: target; green: met, red: missed)";
    if bars.is_empty() {
        area.draw(&Text::new(caption, (20, 10), ("sans-serif", 16)))?;
        area.draw(&Text::new(
            "no row with a target in this run",
            (20, 50),
            ("sans-serif", 14),
        ))?;
        return Ok(());
    }
    // Room for the targets and a little more; a bar far beyond is cut at the edge (its label
    // says its value).
    let widest = bars
        .iter()
        .map(|b| b.value.max(b.target))
        .fold(0.0, f64::max)
        .min(4.0)
        * 1.15;
    let n = bars.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..widest, 0.0..n)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("ours / baseline (or figure / limit)")
        .draw()?;
    let label_style = TextStyle::from(("sans-serif", 13)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, bar) in bars.iter().enumerate() {
        // The first bar at the top.
        let y = n - 1.0 - i as f64;
        let colour = if bar.met() {
            RGBColor(120, 200, 120)
        } else {
            RGBColor(235, 120, 110)
        };
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, y + 0.15), (bar.value.min(widest), y + 0.85)],
            colour.filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(bar.target, y + 0.05), (bar.target, y + 0.95)],
            BLACK.stroke_width(2),
        )))?;
        let sign = if bar.at_least { ">=" } else { "<=" };
        chart.draw_series(std::iter::once(Text::new(
            format!(
                "{}: {:.2} (target {sign} {}){}",
                bar.label,
                bar.value,
                bar.target,
                if bar.met() { "" } else { ", missed" }
            ),
            (widest * 0.01, y + 0.5),
            label_style.clone(),
        )))?;
    }
    Ok(())
}

fn draw_curve<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    run: &held::Run,
    caption: &str,
    unit: &str,
    figure: fn(&held::Point) -> f64,
    limit: Option<f64>,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let counts: Vec<f64> = run.points.iter().map(|(n, _, _)| *n as f64).collect();
    let (lo, hi) = (counts[0], counts[counts.len() - 1]);
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let top = run
        .points
        .iter()
        .flat_map(|(_, o, b)| [figure(o), figure(b)])
        .chain(limit)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo * 0.8..hi * 1.25).log_scale(), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("locks held (log scale)")
        .y_desc(unit)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    type Side = fn(&(usize, held::Point, held::Point)) -> &held::Point;
    let sides: [(&str, RGBColor, Side); 2] = [
        ("ours", BLUE, |p| &p.1),
        ("by hand (task per guard)", RGBColor(220, 110, 0), |p| &p.2),
    ];
    for (name, colour, side) in sides {
        let data: Vec<(f64, f64)> = run
            .points
            .iter()
            .map(|p| (p.0 as f64, figure(side(p))))
            .filter(|(_, v)| v.is_finite())
            .collect();
        chart
            .draw_series(LineSeries::new(data.clone(), colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(
            data.iter()
                .map(|&(x, y)| Circle::new((x, y), 4, colour.filled())),
        )?;
    }
    if let Some(limit) = limit {
        chart
            .draw_series(LineSeries::new(
                vec![(lo * 0.8, limit), (hi * 1.25, limit)],
                BLACK.stroke_width(1),
            ))?
            .label("target")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()?;
    Ok(())
}
