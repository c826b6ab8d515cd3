//! The report: one row per figure, printed as a table while the scenarios run, and written at
//! the end as JSON (`target/lockbench.json`); every row is ours against a baseline of the same run.

use std::path::Path;

/// One row of the report.
pub(crate) struct Row {
    pub(crate) scenario: String,
    pub(crate) metric: String,
    pub(crate) ours: f64,
    pub(crate) baseline: f64,
    pub(crate) baseline_name: String,
    pub(crate) unit: String,
}

impl Row {
    /// Ours over the baseline; NaN when the baseline is zero.
    pub(crate) fn ratio(&self) -> f64 {
        if self.baseline == 0.0 {
            f64::NAN
        } else {
            self.ours / self.baseline
        }
    }
}

/// The rows so far; each is printed as it is added.
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
}

impl Report {
    /// An empty report, its table's header printed.
    pub(crate) fn begin() -> Report {
        println!(
            "{:<28} {:<34} {:>12} {:>12} {:>7}  unit (baseline)",
            "scenario", "metric", "ours", "baseline", "ratio"
        );
        Report { rows: Vec::new() }
    }

    /// Adds a row and prints it.
    pub(crate) fn add(
        &mut self,
        scenario: &str,
        metric: &str,
        ours: f64,
        baseline: f64,
        name: &str,
        unit: &str,
    ) {
        let row = Row {
            scenario: scenario.into(),
            metric: metric.into(),
            ours,
            baseline,
            baseline_name: name.into(),
            unit: unit.into(),
        };
        println!(
            "{:<28} {:<34} {:>12.1} {:>12.1} {:>7.2}  {} (vs {})",
            row.scenario,
            row.metric,
            row.ours,
            row.baseline,
            row.ratio(),
            row.unit,
            row.baseline_name
        );
        self.rows.push(row);
    }

    /// [`add`](Self::add) for a figure that may not have been measurable (a server's CPU when
    /// its process cannot be read: NaN): such a row is printed as not measured and left out
    /// of the report, whose rows all carry numbers.
    pub(crate) fn add_if_measured(
        &mut self,
        scenario: &str,
        metric: &str,
        ours: f64,
        baseline: f64,
        name: &str,
        unit: &str,
    ) {
        if ours.is_finite() && baseline.is_finite() {
            self.add(scenario, metric, ours, baseline, name, unit);
        } else {
            println!("{scenario:<28} {metric:<34} not measured (vs {name})");
        }
    }

    /// Prints a row of a baseline whose engine does not offer ours yet (it refuses the
    /// primitive with `LockError::Config`). Not a row of the JSON report, where every row is
    /// ours against a baseline.
    pub(crate) fn baseline_only(
        &self,
        scenario: &str,
        metric: &str,
        baseline: f64,
        name: &str,
        unit: &str,
    ) {
        println!(
            "{scenario:<28} {metric:<34} {:>12} {baseline:>12.1} {:>7}  {unit} (vs {name})",
            "n/a", "-"
        );
    }

    /// Writes the rows to `path` as a JSON list of
    /// `{"scenario", "metric", "ours", "baseline", "baseline_name", "ratio", "unit"}`, making
    /// its folder if missing.
    pub(crate) fn write_json(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(path, self.json())
    }

    fn json(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let num = |v: f64| {
            if v.is_finite() {
                format!("{v:.4}")
            } else {
                "null".to_owned()
            }
        };
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"scenario\": \"{}\", \"metric\": \"{}\", \"ours\": {}, \"baseline\": {}, \
                     \"baseline_name\": \"{}\", \"ratio\": {}, \"unit\": \"{}\"}}",
                    esc(&r.scenario),
                    esc(&r.metric),
                    num(r.ours),
                    num(r.baseline),
                    esc(&r.baseline_name),
                    num(r.ratio()),
                    esc(&r.unit)
                )
            })
            .collect();
        format!("[\n{}\n]\n", rows.join(",\n"))
    }
}
