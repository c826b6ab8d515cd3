//! The Grafana dashboard (`ops/grafana/leasehold.json`) queries only metrics the library
//! emits, and every metric the library emits is on it.
//!
//! What the library emits is recorded, not listed by hand: a scenario on a real Redis takes
//! every path that records a metric (acquired, busy, waited, unavailable, held, renewed, a
//! renewal failed, a lease lost, the engine suspended, lost and reconnected) under
//! `metrics-util`'s debugging recorder. The names the runtime's `observe.rs` declares are read
//! from its source, so that a metric added there but not taken by the scenario fails here
//! too. The dashboard's metric names are read from its PromQL: every identifier that is not a
//! function, an aggregation, a keyword, a label (inside `{...}` or `by (...)`), a range
//! (`[...]`), a string or a Grafana variable; a histogram's `_bucket`, `_sum` and `_count`
//! series count as the histogram.

use std::collections::BTreeSet;
use std::time::Duration;

use leasehold::{EngineState, LockError, Locker};
use leasehold_tests::harness::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ops/grafana/leasehold.json");
const OBSERVE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../runtime/src/kernel/observe.rs"
);

/// PromQL's functions are told by the `(` after them; these come without one, or with
/// `by (...)` between them and their `(`.
const AGGREGATIONS: [&str; 14] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Followed by a list of labels in parentheses.
const GROUPINGS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: [&str; 6] = ["bool", "and", "or", "unless", "offset", "atan2"];

/// The metric names a PromQL expression reads.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    // Skips to just after the `close` matching the opener at `chars[i]`, over strings.
    let skip_group = |mut i: usize, open: char, close: char| -> usize {
        let mut depth = 0;
        while i < chars.len() {
            match chars[i] {
                '"' | '\'' | '`' => i = skip_string(&chars, i),
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        i
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i) + 1;
        } else if c == '{' {
            i = skip_group(i, '{', '}'); // label matchers
        } else if c == '[' {
            i = skip_group(i, '[', ']'); // ranges, subqueries
        } else if c == '$' || c.is_ascii_digit() || c == '.' {
            // A Grafana variable, or a number (1e-9 included).
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_.-+".contains(chars[i]))
            {
                if "-+".contains(chars[i]) && !matches!(chars[i - 1], 'e' | 'E') {
                    break;
                }
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
            if GROUPINGS.contains(&word.as_str()) {
                // Skip its list of labels.
                let open = i + chars[i..].iter().position(|c| *c == '(').unwrap_or(0);
                i = skip_group(open, '(', ')');
            } else if next == Some('(')
                || AGGREGATIONS.contains(&word.as_str())
                || KEYWORDS.contains(&word.as_str())
            {
                // A function, an aggregation or a keyword.
            } else {
                names.push(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The index of the quote that ends the string starting at `chars[start]`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' && quote != '`' {
            i += 1;
        }
        i += 1;
    }
    i
}

/// Every PromQL expression of the dashboard: its panels' targets (rows' nested panels too)
/// and its variables' `label_values(<selector>, <label>)` selectors.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<String> {
    fn panels(list: &serde_json::Value, out: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push(expr.to_owned());
                }
            }
            panels(&panel["panels"], out);
        }
    }
    let mut queries = Vec::new();
    panels(&dashboard["panels"], &mut queries);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = match &variable["query"] {
            serde_json::Value::String(q) => q.clone(),
            q => q["query"].as_str().unwrap_or_default().to_owned(),
        };
        if let Some(args) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            // The selector; the label after the last comma is not a metric.
            let selector = args.rsplit_once(',').map_or(args, |(sel, _)| sel);
            queries.push(selector.to_owned());
        }
    }
    queries
}

/// The metrics that the dashboard's queries read and the library does not emit; a
/// histogram's `_bucket`, `_sum` and `_count` count as the histogram.
fn unknown_metrics(
    queries: &[String],
    emitted: &BTreeSet<String>,
    histograms: &BTreeSet<String>,
) -> BTreeSet<String> {
    let known = |name: &str| {
        emitted.contains(name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| histograms.contains(base))
            })
    };
    queries
        .iter()
        .flat_map(|q| metric_names(q))
        .filter(|name| !known(name))
        .collect()
}

/// The names `observe.rs` records metrics under: each `metrics::counter!`, `gauge!` or
/// `histogram!` call's first argument.
fn declared_metrics() -> BTreeSet<String> {
    let source = std::fs::read_to_string(OBSERVE).expect("the runtime's observe.rs");
    let mut names = BTreeSet::new();
    for macro_call in [
        "metrics::counter!(",
        "metrics::gauge!(",
        "metrics::histogram!(",
    ] {
        for (at, _) in source.match_indices(macro_call) {
            let rest = source[at + macro_call.len()..].trim_start();
            let name = rest
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
                .expect("a metric named by a literal");
            names.insert(name.to_owned());
        }
    }
    names
}

/// Waits (bounded) until the recorder has seen `name`.
async fn until_recorded(snapshotter: &Snapshotter, name: &str) {
    let seen = || {
        snapshotter
            .snapshot()
            .into_vec()
            .iter()
            .any(|(key, ..)| key.key().name() == name)
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} was not recorded within 10 s"));
}

/// Takes every path that records a metric, on a real Redis.
async fn exercise_every_metric(snapshotter: &Snapshotter) {
    let srv = RedisServer::start().await;
    let locker = Locker::builder()
        .url(srv.url())
        .op_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let mut states = locker.state_changes();

    // Acquired, held, renewed (a 300 ms lease renews every 100 ms), waited for, busy.
    let held = locker
        .lock("a")
        .lease(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let guard = locker
                .lock("a")
                .wait(Duration::from_secs(10))
                .acquire()
                .await?;
            guard.release().await
        })
    };
    let busy = locker.lock("a").wait(Duration::ZERO).acquire().await;
    assert!(matches!(busy, Err(LockError::Busy { .. })), "{busy:?}");
    until_recorded(snapshotter, "leasehold_renewals_total").await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap();

    // Renewals fail while the server is frozen; the lease runs out: lost, and the engine
    // suspended, then lost, then reconnected once it thaws.
    let doomed = locker
        .lock("b")
        .lease(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    srv.pause();
    tokio::time::timeout(Duration::from_secs(10), doomed.lost())
        .await
        .expect("the lease ran out");
    srv.resume();
    tokio::time::timeout(Duration::from_secs(10), async {
        while states.next().await != Some(EngineState::Reconnected) {}
    })
    .await
    .expect("reconnected");
    drop(doomed);

    // Unavailable.
    srv.kill9();
    let down = locker.lock("c").try_acquire().await;
    assert!(
        matches!(down, Err(LockError::Unavailable { .. })),
        "{down:?}"
    );
}

/// The names the recorder saw, and which of them are histograms.
fn recorded(snapshotter: &Snapshotter) -> (BTreeSet<String>, BTreeSet<String>) {
    let snapshot = snapshotter.snapshot().into_vec();
    let names = snapshot
        .iter()
        .map(|(key, ..)| key.key().name().to_owned())
        .collect();
    let histograms = snapshot
        .iter()
        .filter(|(key, _, _, value)| {
            key.kind() == MetricKind::Histogram || matches!(value, DebugValue::Histogram(_))
        })
        .map(|(key, ..)| key.key().name().to_owned())
        .collect();
    (names, histograms)
}

#[test]
fn the_dashboard_queries_exactly_the_metrics_the_library_emits() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(exercise_every_metric(&snapshotter))
    });
    let (emitted, histograms) = recorded(&snapshotter);

    let declared = declared_metrics();
    assert!(
        declared.len() >= 13,
        "observe.rs was not read: {declared:?}"
    );
    let untaken: Vec<_> = declared.difference(&emitted).collect();
    assert!(
        untaken.is_empty(),
        "metrics declared in observe.rs that the scenario did not record (take their path \
         in exercise_every_metric): {untaken:?}"
    );

    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(DASHBOARD).expect("the dashboard"))
            .expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() > 10, "{queries:?}");
    let unknown = unknown_metrics(&queries, &emitted, &histograms);
    assert!(
        unknown.is_empty(),
        "the dashboard queries metrics the library does not emit: {unknown:?}"
    );

    let queried: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| metric_names(q))
        .map(|name| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| histograms.contains(*b)))
                .map_or(name.clone(), str::to_owned)
        })
        .collect();
    let missing: Vec<_> = emitted.difference(&queried).collect();
    assert!(
        missing.is_empty(),
        "metrics the library emits that the dashboard does not show: {missing:?}"
    );
}

/// The check itself: a misspelt metric, or a histogram's series of a counter, is caught;
/// functions, labels, ranges, strings, numbers and variables are not taken for metrics.
#[test]
fn the_check_catches_a_metric_that_does_not_exist() {
    let emitted: BTreeSet<String> = ["leasehold_acquired_total", "leasehold_wait_seconds"]
        .map(String::from)
        .into();
    let histograms: BTreeSet<String> = ["leasehold_wait_seconds".to_owned()].into();
    let ok = [
        r#"sum by (instance) (rate(leasehold_acquired_total{job=~"$job", outcome!="x"}[$__rate_interval]))"#,
        r#"histogram_quantile(0.99, sum by (le) (rate(leasehold_wait_seconds_bucket[5m]))) / clamp_min(sum(rate(leasehold_wait_seconds_count[1m])), 1e-9)"#,
        r#"sum(leasehold_acquired_total) or vector(0)"#,
    ]
    .map(String::from);
    assert_eq!(unknown_metrics(&ok, &emitted, &histograms), BTreeSet::new());
    let bad = [
        r#"sum(rate(leasehold_acquird_total[5m]))"#,
        r#"histogram_quantile(0.9, rate(leasehold_acquired_total_bucket[5m]))"#,
        r#"leasehold_wait_seconds_total offset 5m"#,
    ]
    .map(String::from);
    assert_eq!(
        unknown_metrics(&bad, &emitted, &histograms),
        [
            "leasehold_acquird_total",
            "leasehold_acquired_total_bucket",
            "leasehold_wait_seconds_total"
        ]
        .map(String::from)
        .into()
    );
}
