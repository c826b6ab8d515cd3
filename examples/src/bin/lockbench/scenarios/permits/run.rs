//! The semaphore measurement of scenarios 9 and 12, written once over [`Permits`]: a
//! semaphore of [`PERMITS`] permits, [`TASKS`] tasks each taking one permit in a loop and
//! holding it for [`HOLD`], ours and a baseline taking turns in windows; throughput and wait
//! percentiles, as ratios.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::{LockError, Locker, PermitGuard};

use crate::measure::percentile;
use crate::report::Report;

pub(crate) const PERMITS: u32 = 8;
const TASKS: usize = 64;
const HOLD: Duration = Duration::from_millis(1);
/// Windows per side: the two take turns, so that a stall of the machine hits both.
const WINDOWS: u32 = 3;

/// A semaphore of [`PERMITS`] permits, ours or a baseline, shared by the tasks of a run.
pub(crate) trait Permits: Clone + Send + Sync + 'static {
    /// What [`acquire`](Self::acquire) hands to [`release`](Self::release).
    type Permit: Send + 'static;

    /// Waits until one permit is held.
    fn acquire(&self) -> impl Future<Output = Self::Permit> + Send + '_;

    /// Gives the permit back, and waits until it is given back.
    fn release(&self, permit: Self::Permit) -> impl Future<Output = ()> + Send + '_;
}

/// Ours: `locker.semaphore(key, PERMITS)`.
#[derive(Clone)]
pub(crate) struct OursPermits {
    locker: Locker,
    key: String,
}

impl OursPermits {
    /// Ours on `locker`'s engine, or `None` when the engine refuses semaphores
    /// ([`LockError::Config`]).
    pub(crate) async fn on(locker: Locker, key: &str) -> Option<OursPermits> {
        match locker.semaphore(key, PERMITS).try_acquire().await {
            Ok(permit) => {
                if let Some(permit) = permit {
                    permit.release().await.expect("release");
                }
                Some(OursPermits {
                    locker,
                    key: key.to_owned(),
                })
            }
            Err(LockError::Config { .. }) => None,
            Err(e) => panic!("a permit: {e}"),
        }
    }
}

impl Permits for OursPermits {
    type Permit = PermitGuard;

    async fn acquire(&self) -> PermitGuard {
        let request = self.locker.semaphore(self.key.as_str(), PERMITS);
        request.acquire().await.expect("a permit")
    }

    async fn release(&self, permit: PermitGuard) {
        permit.release().await.expect("release");
    }
}

/// Acquisitions and each one's wait in ms, over every window of one side.
#[derive(Default)]
struct Tally {
    acquired: AtomicU64,
    waits_ms: Mutex<Vec<f64>>,
    elapsed: Mutex<Duration>,
}

impl Tally {
    /// Permits/s, wait p50 and p99.
    fn stats(&self) -> [f64; 3] {
        let mut waits = self.waits_ms.lock().unwrap().clone();
        waits.sort_by(f64::total_cmp);
        let secs = self.elapsed.lock().unwrap().as_secs_f64();
        [
            self.acquired.load(Ordering::Relaxed) as f64 / secs,
            percentile(&waits, 0.5),
            percentile(&waits, 0.99),
        ]
    }
}

/// Runs [`TASKS`] tasks taking permits of `side` for `window`.
async fn window<P: Permits>(tally: &Arc<Tally>, window: Duration, side: &P) {
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..TASKS {
        let (side, tally) = (side.clone(), tally.clone());
        handles.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            while start.elapsed() < window {
                let asked = Instant::now();
                let permit = side.acquire().await;
                waits.push(asked.elapsed().as_secs_f64() * 1e3);
                tokio::time::sleep(HOLD).await;
                side.release(permit).await;
            }
            tally
                .acquired
                .fetch_add(waits.len() as u64, Ordering::Relaxed);
            tally.waits_ms.lock().unwrap().extend(waits);
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    *tally.elapsed.lock().unwrap() += start.elapsed();
}

/// Adds `scenario`'s rows: ours (when the engine offers semaphores) against `baseline`
/// (named `name`), taking turns over [`WINDOWS`] windows that share `duration` per side.
pub(crate) async fn compare<O: Permits, B: Permits>(
    report: &mut Report,
    scenario: &str,
    ours: Option<O>,
    baseline: B,
    name: &str,
    duration: Duration,
) {
    if ours.is_none() {
        println!("{scenario}: ours not available on this engine yet (the baseline still runs)");
    }
    let (ours_tally, theirs) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let slice = duration / WINDOWS;
    for _ in 0..WINDOWS {
        window(&theirs, slice, &baseline).await;
        if let Some(ours) = &ours {
            window(&ours_tally, slice, ours).await;
        }
    }
    let units = [
        ("permits/s", "permits/s"),
        ("wait p50", "ms"),
        ("wait p99", "ms"),
    ];
    for (i, (metric, unit)) in units.into_iter().enumerate() {
        let them = theirs.stats()[i];
        match ours {
            Some(_) => report.add(scenario, metric, ours_tally.stats()[i], them, name, unit),
            None => report.baseline_only(scenario, metric, them, name, unit),
        }
    }
}
