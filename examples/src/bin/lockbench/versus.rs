//! The uncontended half of every other engine's scenario (6 to 8, 13): leasehold on the engine
//! against the engine's own baseline, lock/unlock cycles at 1 and 16 tasks, taking turns; and
//! on every engine, `lock_all` of several free keys against a single lock.

use std::time::Duration;

use leasehold::Locker;

use crate::key_lock::KeyLock;
use crate::measure::{in_turns, in_turns_costs, Costs};
use crate::report::Report;

/// One uncontended cycle of ours: `key` (handed over as it is) taken and released.
pub(crate) async fn ours_cycle(locker: Locker, key: String) {
    let guard = locker.lock(key).acquire().await.expect("acquire");
    guard.release().await.expect("release");
}

/// One uncontended cycle of a baseline: `key` taken and given back.
pub(crate) async fn baseline_cycle<L: KeyLock>(lock: L, key: String) {
    let held = lock.acquire(&key).await;
    lock.release(&key, held).await;
}

/// Adds `{scenario} uncontended, {tasks} tasks` cycles/s rows, ours against `baseline` (named
/// `name`), and the client's CPU per cycle (and, given the `server` process, the server's)
/// over the same windows: where a gap in cycles/s goes. Each task cycles over 16 keys of its
/// own: ours are `u:{task}:{k}`, the baseline's `baseline_key(task, k)`.
pub(crate) async fn uncontended<L: KeyLock>(
    report: &mut Report,
    scenario: &str,
    pair: (&Locker, &L),
    baseline_key: fn(usize, u64) -> String,
    name: &str,
    duration: Duration,
    server: Option<u32>,
) {
    let rows = Against { name, metric: "" };
    uncontended_against(report, scenario, pair, baseline_key, rows, duration, server).await;
}

/// A baseline's name in the report, and what its rows' metrics end with (`""` for an engine's
/// main baseline; `" vs …"` for another on the same rows).
#[derive(Clone, Copy)]
pub(crate) struct Against<'a> {
    pub(crate) name: &'a str,
    pub(crate) metric: &'a str,
}

/// [`uncontended`] against a baseline whose rows' metrics end with `against.metric`
/// (`cycles/s vs …`, `client CPU per cycle vs …`, `server CPU per cycle vs …`).
pub(crate) async fn uncontended_against<L: KeyLock>(
    report: &mut Report,
    scenario: &str,
    (ours, baseline): (&Locker, &L),
    baseline_key: fn(usize, u64) -> String,
    against: Against<'_>,
    duration: Duration,
    server: Option<u32>,
) {
    for tasks in [1usize, 16] {
        let ours = ours.clone();
        let ours = move |t, i| ours_cycle(ours.clone(), format!("u:{t}:{}", i % 16));
        let baseline = baseline.clone();
        let baseline = move |t, i| baseline_cycle(baseline.clone(), baseline_key(t, i % 16));
        let costs = in_turns_costs(tasks, duration, ours, baseline, server).await;
        let scenario = format!("{scenario} uncontended, {tasks} tasks");
        let metric = |what: &str| format!("{what}{}", against.metric);
        add_costs(report, &scenario, costs, against.name, (&metric, "server"));
    }
}

/// Adds the rows of one comparison measured by [`in_turns_costs`] against the baseline
/// `name`: cycles/s, the client's CPU per cycle, and (where measured) the server's, named
/// `{server} CPU per cycle`; each row's metric is `metric` of those words.
pub(crate) fn add_costs(
    report: &mut Report,
    scenario: &str,
    (ours, theirs): (Costs, Costs),
    name: &str,
    (metric, server): (&dyn Fn(&str) -> String, &str),
) {
    report.add(
        scenario,
        &metric("cycles/s"),
        ours.rate,
        theirs.rate,
        name,
        "cycles/s",
    );
    let client = metric("client CPU per cycle");
    report.add(
        scenario,
        &client,
        ours.client_us,
        theirs.client_us,
        name,
        "us",
    );
    let server = metric(&format!("{server} CPU per cycle"));
    report.add_if_measured(
        scenario,
        &server,
        ours.server_us,
        theirs.server_us,
        name,
        "us",
    );
}

/// How many free keys a `lock_all` row takes at once.
pub(crate) const SEVERAL: usize = 4;

/// Adds `{scenario} uncontended, {tasks} tasks` rows of `lock_all` of [`SEVERAL`] free keys
/// against a single lock, both ours on `locker`, taking turns at 1 and 16 tasks: what a cycle
/// of several keys costs against a cycle of one (issue 49: at least 0.8 on every engine, so
/// several keys go in about one round trip).
pub(crate) async fn several_keys(
    report: &mut Report,
    scenario: &str,
    locker: &Locker,
    duration: Duration,
) {
    for tasks in [1usize, 16] {
        let l = locker.clone();
        let single = move |t, i| ours_cycle(l.clone(), format!("one:{t}:{}", i % 16));
        let l = locker.clone();
        let all = move |t: usize, i: u64| {
            let l = l.clone();
            async move {
                let keys = (0..SEVERAL).map(|k| format!("all:{t}:{}:{k}", i % 16));
                let guard = l.lock_all(keys).acquire().await.expect("lock_all");
                guard.release().await.expect("release");
            }
        };
        let (all, single) = in_turns(tasks, duration, all, single).await;
        report.add(
            &format!("{scenario} uncontended, {tasks} tasks"),
            &format!("lock_all of {SEVERAL} free keys, cycles/s"),
            all,
            single,
            "a single lock, ours on the same engine",
            "cycles/s",
        );
    }
}
