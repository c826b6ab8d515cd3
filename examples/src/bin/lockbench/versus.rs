//! The uncontended half of every other engine's scenario (6 to 8, 13): leasehold on the engine
//! against the engine's own baseline, lock/unlock cycles at 1 and 16 tasks, taking turns; and
//! on every engine, `lock_all` of several free keys against a single lock.

use std::time::Duration;

use leasehold::Locker;

use crate::key_lock::{AllOf, KeyLock, KeysAtOnce};
use crate::measure::{in_turns, in_turns_costs, Costs};
use crate::report::Report;

/// One uncontended cycle of ours: `key` (handed over as it is) taken and released.
pub(crate) async fn ours_cycle(locker: Locker, key: String) {
    let guard = locker.lock(key).acquire().await.expect("acquire");
    guard.release().await.expect("release");
}

/// One uncontended `lock_all` cycle of ours: task `t`'s `i`-th, [`SEVERAL`] free keys of its
/// own (`all:{t}:{i % 16}:{k}`) taken at once and released.
pub(crate) async fn ours_all_cycle(locker: Locker, t: usize, i: u64) {
    let keys = (0..SEVERAL).map(|k| format!("all:{t}:{}:{k}", i % 16));
    let guard = locker.lock_all(keys).acquire().await.expect("lock_all");
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
        let all = move |t, i| ours_all_cycle(l.clone(), t, i);
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

/// A floor of `lock_all` on one engine, written by hand: [`SEVERAL`] keys taken in one request
/// and given back in one (`all`, named `name`), and a single key by hand on the same engine
/// (`one`, named `one_name`: the engine's single-key baseline, or `all`'s request with one key
/// as [`AllOf::one`]). Each task cycles over 16 key sets of its own, named from
/// `baseline_key(task, k)`.
pub(crate) struct ByHand<'a, A, L> {
    pub(crate) all: &'a A,
    pub(crate) name: &'a str,
    pub(crate) one: &'a L,
    pub(crate) one_name: &'a str,
    pub(crate) baseline_key: fn(usize, u64) -> String,
    /// What the rows' metrics end with: `""`, or how the server was run for them.
    pub(crate) metric: &'a str,
}

/// Adds `{scenario} uncontended, {tasks} tasks` rows at 1 and 16 tasks, each comparison taking
/// turns, with the client's and the server's CPU per cycle over the same windows:
/// - our `lock_all` of [`SEVERAL`] free keys against the same keys taken by hand in one
///   request: what the library adds to a `lock_all`;
/// - the keys by hand in one request against a single key by hand: what several keys cost on
///   the engine before any library work, the floor of "`lock_all` against a single lock".
pub(crate) async fn several_keys_by_hand<A: KeysAtOnce, L: KeyLock>(
    report: &mut Report,
    scenario: &str,
    locker: &Locker,
    by_hand: ByHand<'_, A, L>,
    duration: Duration,
    server: Option<u32>,
) {
    let key = by_hand.baseline_key;
    for tasks in [1usize, 16] {
        let row = format!("{scenario} uncontended, {tasks} tasks");
        let l = locker.clone();
        let ours = move |t, i| ours_all_cycle(l.clone(), t, i);
        let all = AllOf::several(by_hand.all.clone());
        let all_cycle = move |t, i| baseline_cycle(all.clone(), format!("{}-all", key(t, i % 16)));
        let costs = in_turns_costs(tasks, duration, ours, all_cycle.clone(), server).await;
        let metric = |what: &str| {
            format!(
                "lock_all of {SEVERAL} free keys vs the same keys by hand, {what}{}",
                by_hand.metric
            )
        };
        add_costs(report, &row, costs, by_hand.name, (&metric, "server"));
        let one = by_hand.one.clone();
        let one_cycle = move |t, i| baseline_cycle(one.clone(), key(t, i % 16));
        let costs = in_turns_costs(tasks, duration, all_cycle, one_cycle, server).await;
        let metric = |what: &str| {
            format!(
                "by hand: {SEVERAL} free keys in one request vs one key, {what}{}",
                by_hand.metric
            )
        };
        add_costs(report, &row, costs, by_hand.one_name, (&metric, "server"));
    }
}
