//! Scenario 1: uncontended lock/unlock cycles on Redis (1, 16, 64 tasks), fenced and unfenced,
//! with the client CPU per cycle, against the same commands sent raw, a raw lock with a fence,
//! and rslock, taking turns in short windows; and `lock_all` of two keys against taking them
//! by hand, and of four free keys against a single lock and against the same four taken and
//! given back by hand in one script call each.

use std::sync::Arc;
use std::time::Duration;

use leasehold::Locker;

use crate::baselines::{rslock_lock_unlock, token, Naive};
use crate::measure::{cycles_per_sec, in_turns, in_turns_costs, CpuWindow, UNCONTENDED_ROUNDS};
use crate::report::Report;
use crate::versus::{self, SEVERAL};

/// Scenario 1's contenders that cycle one lock and unlock per call (rslock aside).
#[derive(Clone, Copy)]
pub(crate) enum Cycle {
    /// `SET NX PX`, then compare-and-delete, sent raw.
    Raw,
    /// `SET NX PX` + `INCR` in one script, then compare-and-delete, sent raw.
    Fenced,
    /// `locker.lock(k).acquire()`, then `release()`.
    Ours,
    /// `locker.lock(k).unfenced().acquire()`, then `release()`.
    Unfenced,
    /// `SAFE_FENCED_SET`, then compare-and-delete, sent raw.
    SafeFenced,
    /// `locker.lock_all(..)` of [`SEVERAL`] free keys, then `release()`.
    All,
    /// The same keys by hand: one script takes them all with restore-safe fences, one
    /// compare-and-deletes them.
    RawAll,
}

impl Cycle {
    /// `--profile`'s name for a contender; exits with a usage message on an unknown one.
    pub(crate) fn parse(s: &str) -> Cycle {
        match s {
            "raw" => Cycle::Raw,
            "fenced" => Cycle::Fenced,
            "unfenced" => Cycle::Unfenced,
            "safe-fenced" => Cycle::SafeFenced,
            "ours" => Cycle::Ours,
            "all" => Cycle::All,
            "raw-all" => Cycle::RawAll,
            other => {
                eprintln!(
                    "unknown contender {other:?}: --profile takes ours, unfenced, raw, fenced, \
                     safe-fenced, all or raw-all"
                );
                std::process::exit(2)
            }
        }
    }

    /// Cycles per second of `tasks` tasks doing this for `window`, each on 16 keys of its own.
    pub(crate) async fn run(
        self,
        naive: &Naive,
        locker: &Locker,
        tasks: usize,
        window: Duration,
    ) -> f64 {
        let (n, l) = (naive.clone(), locker.clone());
        cycles_per_sec(tasks, window, move |t, i| {
            let (n, l) = (n.clone(), l.clone());
            async move { self.once(&n, &l, t, i).await }
        })
        .await
    }

    /// One cycle of task `t`'s `i`-th: on the 16 keys of its own, `i % 16`.
    pub(crate) async fn once(self, n: &Naive, l: &Locker, t: usize, i: u64) {
        let k = i % 16;
        match self {
            Cycle::Raw => {
                let (key, tok) = (format!("raw:{t}:{k}"), token());
                assert!(n.try_lock(&key, &tok).await, "raw key was taken");
                n.unlock(&key, &tok).await;
            }
            Cycle::Fenced => {
                let (key, tok) = (format!("fenced:{{{t}:{k}}}"), token());
                let fence_key = format!("fence:{{{t}:{k}}}");
                let fence = n.try_lock_fenced(&key, &fence_key, &tok).await;
                assert!(fence.is_some(), "fenced key was taken");
                n.unlock(&key, &tok).await;
            }
            Cycle::SafeFenced => {
                let (key, tok) = (format!("safe:{{{t}:{k}}}"), token());
                let fence_key = format!("safe-fence:{{{t}:{k}}}");
                let fence = n.try_lock_safe_fenced(&key, &fence_key, &tok).await;
                assert!(fence.is_some(), "fenced key was taken");
                n.unlock(&key, &tok).await;
            }
            Cycle::Ours => {
                let guard = l.lock(format!("u:{t}:{k}")).acquire().await;
                guard.expect("acquire").release().await.expect("release");
            }
            Cycle::Unfenced => {
                let guard = l.lock(format!("nf:{t}:{k}")).unfenced().acquire().await;
                guard.expect("acquire").release().await.expect("release");
            }
            Cycle::All => crate::versus::ours_all_cycle(l.clone(), t, i).await,
            Cycle::RawAll => {
                let tok = token();
                let pairs: Vec<(String, String)> = (0..SEVERAL)
                    .map(|j| {
                        let key = format!("allraw:{t}:{k}:{j}");
                        (key.clone(), format!("f{key}"))
                    })
                    .collect();
                let fences = n.try_lock_all_safe_fenced(&pairs, &tok).await;
                assert_eq!(
                    fences.map(|f| f.len()),
                    Some(SEVERAL),
                    "raw keys were taken"
                );
                let keys: Vec<String> = pairs.into_iter().map(|(key, _)| key).collect();
                assert_eq!(n.unlock_all(&keys, &tok).await, SEVERAL as i64);
            }
        }
    }
}

/// Scenario 1 on the server at `url` (its process `redis`, whose CPU is read over each
/// contender's windows), `duration` per task count and contender.
pub(crate) async fn scenario(
    report: &mut Report,
    url: &str,
    redis: Option<u32>,
    duration: Duration,
) {
    let naive = Naive::new(url).await;
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let rslock = Arc::new(rslock::LockManager::new(vec![url.to_owned()]));
    let window = duration / UNCONTENDED_ROUNDS;
    for tasks in [1usize, 16, 64] {
        // Cycles per second of each contender, summed over the rounds (equal windows), and
        // the client CPU (getrusage: this process; Redis is another) and Redis's CPU each one
        // used. In the order of `Cycle`: raw, fenced, ours, unfenced, safe-fenced.
        let (mut rates, mut cpu, mut theirs) = ([0.0f64; 5], [0.0f64; 5], 0.0);
        let mut server = [0.0f64; 5];
        let servers: Vec<u32> = redis.into_iter().collect();
        for _ in 0..UNCONTENDED_ROUNDS {
            let cycles = [
                Cycle::Raw,
                Cycle::Fenced,
                Cycle::Ours,
                Cycle::Unfenced,
                Cycle::SafeFenced,
            ];
            for (slot, cycle) in cycles.into_iter().enumerate() {
                let window_cpu = CpuWindow::open(&servers);
                let rate = cycle.run(&naive, &locker, tasks, window).await;
                let (client, redis) = window_cpu.close();
                cpu[slot] += client;
                server[slot] += redis;
                rates[slot] += rate;
            }
            let r = rslock.clone();
            theirs += cycles_per_sec(tasks, window, move |t, i| {
                let r = r.clone();
                async move { rslock_lock_unlock(&r, &format!("rs:{t}:{}", i % 16)).await }
            })
            .await;
        }
        let rounds = f64::from(UNCONTENDED_ROUNDS);
        // Client CPU per cycle, in µs: CPU seconds over the cycles done in the same windows.
        // `rate` is still the sum of the rounds' rates: times one window, the cycles done.
        let per_cycle = |cpu: f64, rate: f64| cpu * 1e6 / (rate * window.as_secs_f64());
        let cpu_us: Vec<f64> = (0..5).map(|c| per_cycle(cpu[c], rates[c])).collect();
        let server_us: Vec<f64> = (0..5).map(|c| per_cycle(server[c], rates[c])).collect();
        let [raw, fenced, ours, unfenced, safe_fenced] = rates.map(|r| r / rounds);
        let theirs = theirs / rounds;
        let scenario = format!("1 uncontended, {tasks} tasks");
        let raw_name = "raw SET NX PX + compare-and-delete";
        let rows = [
            ("cycles/s", ours, raw, raw_name, "cycles/s"),
            (
                "cycles/s vs raw with a fence",
                ours,
                fenced,
                "raw SET NX PX + INCR in one script, compare-and-delete",
                "cycles/s",
            ),
            (
                "cycles/s vs raw, restore-safe fence",
                ours,
                safe_fenced,
                "raw SET NX PX + a fence lifted to the server clock, in one script",
                "cycles/s",
            ),
            ("cycles/s (rslock)", theirs, raw, raw_name, "cycles/s"),
            ("unfenced cycles/s", unfenced, raw, raw_name, "cycles/s"),
            (
                "client CPU per cycle",
                cpu_us[2],
                cpu_us[1],
                "raw with a fence (getrusage, same windows)",
                "us",
            ),
            (
                "unfenced client CPU per cycle",
                cpu_us[3],
                cpu_us[0],
                "raw (getrusage, same windows)",
                "us",
            ),
            // With client and server on the same cores, cycles/s at 16 and 64 tasks follow the
            // sum of both CPUs per cycle: these rows tell a gap apart into the two.
            (
                "Redis CPU per cycle vs restore-safe fence",
                server_us[2],
                server_us[4],
                "raw with a restore-safe fence (/proc schedstat, same windows)",
                "us",
            ),
            (
                "unfenced Redis CPU per cycle",
                server_us[3],
                server_us[0],
                "raw (/proc schedstat, same windows)",
                "us",
            ),
        ];
        // Redis's CPU is NaN when its process cannot be read: those rows are then left out.
        for (metric, ours, baseline, name, unit) in rows {
            report.add_if_measured(&scenario, metric, ours, baseline, name, unit);
        }
    }
    // Two keys at once (issue 16): `lock_all` takes free keys in one script call, against
    // the loop users write by hand (take each key in sorted order with a fence, then delete
    // each).
    for tasks in [1usize, 16] {
        let n = naive.clone();
        let by_hand = move |t: usize, i: u64| {
            let n = n.clone();
            async move {
                let tok = token();
                let keys = [
                    format!("mraw:{{{t}:{}:a}}", i % 16),
                    format!("mraw:{{{t}:{}:b}}", i % 16),
                ];
                for key in &keys {
                    let fence = n.try_lock_fenced(key, &format!("f{key}"), &tok).await;
                    assert!(fence.is_some(), "raw key was taken");
                }
                for key in &keys {
                    n.unlock(key, &tok).await;
                }
            }
        };
        let l = locker.clone();
        let lock_all = move |t: usize, i: u64| {
            let l = l.clone();
            async move {
                let guard = l
                    .lock_all([format!("m:{t}:{}:b", i % 16), format!("m:{t}:{}:a", i % 16)])
                    .acquire()
                    .await
                    .expect("acquire");
                guard.release().await.expect("release");
            }
        };
        let (raw, ours) = in_turns(tasks, duration, by_hand, lock_all).await;
        report.add(
            &format!("1 uncontended, {tasks} tasks"),
            "lock_all of 2 keys, cycles/s",
            ours,
            raw,
            "raw, by hand: each key in order (SET NX PX + INCR), then each deleted",
            "cycles/s",
        );
    }
    // Four free keys against one (issue 49): the rows every engine has.
    crate::versus::several_keys(report, "1", &locker, duration).await;
    // The same four keys against the floor of a one-round-trip `lock_all` with our safety:
    // written by hand, one script takes them all with restore-safe fences (or none), one
    // gives them back.
    for tasks in [1usize, 16] {
        let (n, l) = (naive.clone(), locker.clone());
        let by_hand = move |t, i| {
            let (n, l) = (n.clone(), l.clone());
            async move { Cycle::RawAll.once(&n, &l, t, i).await }
        };
        let (n, l) = (naive.clone(), locker.clone());
        let ours = move |t, i| {
            let (n, l) = (n.clone(), l.clone());
            async move { Cycle::All.once(&n, &l, t, i).await }
        };
        let costs = in_turns_costs(tasks, duration, ours, by_hand, redis).await;
        let scenario = format!("1 uncontended, {tasks} tasks");
        let name = "raw, by hand: one script takes every key with a restore-safe fence, one \
                    deletes them";
        let metric = |what: &str| format!("lock_all of {SEVERAL} free keys vs raw, {what}");
        versus::add_costs(report, &scenario, costs, name, (&metric, "Redis"));
    }
}
