//! A lock holder in a process of its own, for the fault suite: takes locks in a loop, updates
//! a counter of the resource under them (read, compute, write back), and logs every step with
//! CLOCK_MONOTONIC times (see `leasehold_tests::history` for the log format and the checker).
//!
//! Each hold: acquire; check `is_held()` and update at once (so a new holder's fence reaches
//! the resource first); then `writes` more updates spread over `hold`, each after checking
//! `is_held()`; release. An update reads the key's counter, computes for `--compute-ms` and
//! writes it back plus one, with its record (`leasehold_tests::history::Update`): on Redis or
//! PostgreSQL (`--resource`'s scheme), its first touch a claim through leasehold's helpers, or
//! (`--resource-fencing write-only`) a plain read and a write fenced alone. A holder that
//! notices its loss logs it, makes one blind update with its stale fence (the resource must
//! refuse it, or take it whole), and releases (which must fail). A sampler thread outside the
//! Tokio runtime asks `is_held()` every millisecond, so the checker knows when each holder
//! believed it held the lock, even while the runtime is blocked.
//!
//! Usage: `history_worker --id N --log PATH --urls URL[,URL...] --resource URL --keys K[,K...]
//! ...` (all options: `WorkerSpec::to_args`). With `--servers redis`, one URL is a single node
//! and several are the independent masters of a RedLock; with `--servers sentinel:NAME` they
//! are sentinels, with `--servers cluster` nodes of a Redis Cluster, with
//! `--servers zookeeper:MS` ZooKeeper servers (`host:port`) and the session timeout, with
//! `--servers etcd:MS` members of an etcd cluster (`http://host:port`) and the lease's TTL,
//! with `--servers postgres` one PostgreSQL database's URL.
//!
//! Each hold takes one key with `lock` (the default), `read_lock` or `write_lock`
//! (`--read-percent`: that share of the holds read, the rest write; readers only check
//! `is_held()`), or several keys with `lock_all` (`--multi K`: K distinct keys named in
//! random order; each update claims every key's record, then moves money between the wallets
//! of the first two). It logs the hold's keys and mode when invoked, and each key's fence when
//! acquired. With `--permits N` each hold takes one permit of a semaphore of N named by the
//! key (its fence is the permit holder's; with one permit it guards the updates); with
//! `--leader true` it campaigns for the leadership of an election named by the key (its fence
//! is the term, and its updates carry it). `--fence-ttl-ms` sets the locker's `fence_ttl`.
//!
//! Every acquire runs under a timeout of its bound plus 2 s (`wait + 3 × op_timeout`, and the
//! checker's slack of 1 s, plus 1 s): one that never returns is logged as failed (`aerr hold
//! hung`), which the checker reports as over its bound, and the worker goes on instead of
//! hanging the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{Leadership, LockError, LockGuard, Locker, MultiGuard, PermitGuard};
use leasehold_tests::history::{
    encode_key, monotonic_ns, write_id, EventLog, FenceOf, LockServers, ResourceClient,
    ResourceStore, Update, WorkerSpec,
};

const TWO_MS: Duration = Duration::from_millis(2);

/// How often the sampler logs a true `is_held()` while it stays true.
const HEARTBEAT_NS: u64 = 10_000_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (id, log_path, spec) = match WorkerSpec::from_args(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("history_worker: {e}");
            std::process::exit(2);
        }
    };
    let log = match EventLog::create(&log_path) {
        Ok(log) => Arc::new(log),
        Err(e) => {
            eprintln!("history_worker: cannot open {}: {e}", log_path.display());
            std::process::exit(2);
        }
    };
    let runtime = if spec.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
    .expect("build the runtime");
    runtime.block_on(run(id, spec, log));
}

/// What a hold took: one key (exclusive, read or write side), several, a semaphore's
/// permit (`--permits`) or a leadership (`--leader`).
enum Guard {
    One(LockGuard),
    Many(MultiGuard),
    Permit(PermitGuard),
    Leader(Leadership),
}

impl Guard {
    fn is_held(&self) -> bool {
        match self {
            Guard::One(g) => g.is_held(),
            Guard::Many(g) => g.is_held(),
            Guard::Permit(p) => p.is_held(),
            Guard::Leader(l) => l.is_leader(),
        }
    }

    async fn lost(&self) {
        match self {
            Guard::One(g) => g.lost().await,
            Guard::Many(g) => g.lost().await,
            Guard::Permit(p) => p.lost().await,
            Guard::Leader(l) => l.lost().await,
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Guard::One(g) => g.release().await,
            Guard::Many(g) => g.release().await,
            Guard::Permit(p) => p.release().await,
            Guard::Leader(l) => l.resign().await,
        }
    }

    /// How the holder of `key` proves its fence to the resource when it writes while it
    /// believes it holds: as a holder of its lease (the library's helpers take a lock's
    /// guard, a permit and a leadership alike).
    fn fence_of(&self, key: &str) -> FenceOf<'_> {
        match self {
            Guard::One(g) => FenceOf::Holder(g),
            Guard::Many(g) => match g.guard(key) {
                Some(guard) => FenceOf::Holder(guard),
                None => FenceOf::Token(self.fence(key)),
            },
            Guard::Permit(p) => FenceOf::Holder(p),
            Guard::Leader(l) => FenceOf::Holder(l),
        }
    }

    /// The fence of `key`.
    fn fence(&self, key: &str) -> u64 {
        match self {
            Guard::One(g) => g.fence(),
            Guard::Many(g) => g.fence(key).unwrap_or(0),
            // Each permit holder has a token of its own (it writes nothing with it: holders
            // share the resource, but the checker judges the tokens' order).
            Guard::Permit(p) => p.fence(),
            Guard::Leader(l) => l.term(),
        }
    }
}

/// How a hold takes its keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `lock` (one key) or `lock_all` (several).
    Exclusive,
    /// `read_lock`.
    Read,
    /// `write_lock`.
    Write,
}

impl Mode {
    fn tag(self) -> &'static str {
        match self {
            Mode::Exclusive => "x",
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }
}

/// The hold a task has open, as the sampler sees it.
struct Open {
    hold: String,
    guard: Arc<Guard>,
    last_true: Option<u64>,
    logged: u64,
    seen_false: bool,
}

type Slots = Arc<Vec<Mutex<Option<Open>>>>;

async fn run(id: usize, spec: WorkerSpec, log: Arc<EventLog>) {
    let ms = |d: Duration| d.as_millis();
    log.now(
        "start",
        &[
            &id,
            &std::process::id(),
            &ms(spec.lease),
            &ms(spec.wait),
            &ms(spec.op_timeout),
            &spec.tasks,
            &u8::from(spec.fair),
        ],
    );
    if spec.permits > 0 {
        log.now("sem", &[&spec.permits]);
    }
    if spec.leader {
        log.now("ldr", &[]);
    }
    let store = ResourceStore::of(&spec.resource_url).unwrap_or_else(|e| {
        eprintln!("history_worker: {e}");
        std::process::exit(2);
    });
    log.now(
        "res",
        &[
            &store.name(),
            &spec.fencing,
            &ms(spec.compute),
            &ms(spec.update_limit),
        ],
    );
    let deadline = tokio::time::Instant::now() + spec.duration;
    let locker = connect(&spec, deadline).await;
    // One connection per task: a PostgreSQL transaction needs one of its own.
    let mut resources = Vec::new();
    for _ in 0..spec.tasks {
        let client = ResourceClient::connect(
            &spec.resource_url,
            spec.fencing,
            spec.compute,
            &spec.keys,
            spec.lease,
        )
        .await
        .unwrap_or_else(|e| {
            eprintln!("history_worker: the resource is unreachable: {e}");
            std::process::exit(3);
        });
        resources.push(tokio::sync::Mutex::new(client));
    }

    let slots: Slots = Arc::new((0..spec.tasks).map(|_| Mutex::new(None)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (slots, stop, log) = (slots.clone(), stop.clone(), log.clone());
        std::thread::spawn(move || sample(&slots, &stop, &log))
    };

    let spec = Arc::new(spec);
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(locker) = locker {
        for (task, resource) in resources.into_iter().enumerate() {
            let (locker, log, slots, spec) =
                (locker.clone(), log.clone(), slots.clone(), spec.clone());
            tasks.spawn(async move {
                let ctx = Task {
                    id,
                    task,
                    locker,
                    resource,
                    log,
                    slots,
                    spec,
                };
                ctx.run(deadline).await
            });
        }
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done {
            eprintln!("history_worker: a task failed: {e}");
        }
    }
    stop.store(true, Ordering::Release);
    let _ = sampler.join();
    log.now("end", &[]);
}

/// Connects, retrying while the server is down (a worker may start during a fault); `None`
/// when the deadline passes first.
///
/// The connect timeout starts at the operation timeout (500 ms at least) and doubles after
/// each failure, up to [`CONNECT_TIMEOUT_MAX`]: a loaded machine makes a worker's start slower,
/// not impossible. (With a fixed 500 ms, opening a PostgreSQL locker, its pooled connections
/// and their prepared statements, timed out 36 times in a row for one worker of a CI run whose
/// machine was busy compiling, while the other two got in after 6 and 8 tries; the run ended
/// with that worker holding nothing.)
async fn connect(spec: &WorkerSpec, deadline: tokio::time::Instant) -> Option<Locker> {
    let mut connect_timeout = spec.op_timeout.max(Duration::from_millis(500));
    loop {
        let urls = spec.urls.iter().cloned();
        let builder = match (&spec.servers, spec.urls.as_slice()) {
            (LockServers::Redis, [one]) => Locker::builder().url(one.as_str()),
            // Several independent masters: RedLock.
            (LockServers::Redis, _) => Locker::builder().redlock(urls),
            (LockServers::Sentinel(master), _) => Locker::builder().sentinel(urls, master.clone()),
            (LockServers::Cluster, _) => Locker::builder().cluster(urls),
            (LockServers::ZooKeeper(session), hosts) => Locker::builder()
                .zookeeper(hosts.join(","))
                .session_timeout(*session),
            (LockServers::Etcd(ttl), _) => Locker::builder().etcd(urls).session_timeout(*ttl),
            (LockServers::Postgres, [url]) => Locker::builder().postgres(url.as_str()),
            (LockServers::Mysql, [url]) => Locker::builder().mysql(url.as_str()),
            (LockServers::Postgres | LockServers::Mysql, _) => {
                eprintln!("history_worker: --servers postgres and mysql take one URL");
                return None;
            }
        };
        let builder = match spec.fence_ttl {
            Some(ttl) => builder.fence_ttl(ttl),
            None => builder,
        };
        let built = builder
            .prefix(spec.prefix.as_str())
            .default_lease(spec.lease)
            .default_wait(spec.wait)
            .op_timeout(spec.op_timeout)
            .connect_timeout(connect_timeout)
            .build()
            .await;
        match built {
            Ok(locker) => return Some(locker),
            Err(e) if tokio::time::Instant::now() < deadline => {
                connect_timeout = (connect_timeout * 2).min(CONNECT_TIMEOUT_MAX);
                eprintln!("history_worker: connect: {e}; retrying within {connect_timeout:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                eprintln!("history_worker: connect: {e}; giving up");
                return None;
            }
        }
    }
}

/// The longest connect timeout a worker's retries grow to.
const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(4);

/// Asks `is_held()` of every open hold every millisecond, from outside the runtime.
fn sample(slots: &Slots, stop: &AtomicBool, log: &EventLog) {
    while !stop.load(Ordering::Acquire) {
        for slot in slots.iter() {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            let Some(open) = slot.as_mut() else { continue };
            // Taken before asking: a true answer proves belief at this instant.
            let before = monotonic_ns();
            if open.guard.is_held() {
                if open.seen_false {
                    log.at(before, "rz", &[&open.hold]);
                    open.seen_false = false;
                }
                open.last_true = Some(before);
                if before - open.logged >= HEARTBEAT_NS {
                    log.at(before, "h", &[&open.hold]);
                    open.logged = before;
                }
            } else if !open.seen_false {
                if let Some(t) = open.last_true.filter(|&t| t > open.logged) {
                    log.at(t, "h", &[&open.hold]);
                    open.logged = t;
                }
                log.now("nh", &[&open.hold]);
                open.seen_false = true;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Task {
    id: usize,
    task: usize,
    locker: Locker,
    resource: tokio::sync::Mutex<ResourceClient>,
    log: Arc<EventLog>,
    slots: Slots,
    spec: Arc<WorkerSpec>,
}

impl Task {
    async fn run(&self, deadline: tokio::time::Instant) {
        let mut rng = Rng::new(self.id as u64 * 1000 + self.task as u64);
        let mut n = 0u32;
        let more = |n: u32| self.spec.max_holds.is_none_or(|max| n < max);
        while tokio::time::Instant::now() < deadline && more(n) {
            n += 1;
            let hold = format!("{}.{}.{n}", self.id, self.task);
            let keys = self.pick_keys(&mut rng);
            let mode = match self.spec.read_percent {
                None => Mode::Exclusive,
                Some(p) if rng.below(100) < u64::from(p) => Mode::Read,
                Some(_) => Mode::Write,
            };
            let named = keys
                .iter()
                .map(|k| encode_key(k))
                .collect::<Vec<_>>()
                .join(",");
            self.log.now("inv", &[&hold, &named, &mode.tag()]);
            match tokio::time::timeout(self.acquire_limit(), self.acquire(&hold, &keys, mode)).await
            {
                Err(_) => {
                    self.log.now("aerr", &[&hold, &"hung"]);
                }
                Ok(Ok(guard)) => {
                    // The validity the library promises from the send time of the acquire
                    // (`lease × (1 − drift) − 2 ms`, default drift), for the record; the
                    // checker judges by what `is_held()` said, sampled.
                    let validity = self.spec.lease.mul_f64(0.99).saturating_sub(TWO_MS);
                    let fences: Vec<u64> = keys.iter().map(|k| guard.fence(k)).collect();
                    if keys.len() == 1 {
                        self.log
                            .now("ok", &[&hold, &fences[0], &validity.as_micros()]);
                    } else {
                        let list = fences
                            .iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(",");
                        self.log
                            .now("ok", &[&hold, &fences[0], &validity.as_micros(), &list]);
                    }
                    self.hold(&hold, &keys, &fences, mode, guard, n, &mut rng)
                        .await;
                }
                Ok(Err(e)) => {
                    self.log.now("aerr", &[&hold, &e.code()]);
                    if !e.is_busy() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            let gap = self.spec.gap.as_millis() as u64;
            if gap > 0 {
                tokio::time::sleep(Duration::from_millis(rng.below(gap + 1))).await;
            }
        }
    }

    /// One key at random, or (multi-key mode) `multi` distinct keys in random order.
    fn pick_keys(&self, rng: &mut Rng) -> Vec<String> {
        let all = &self.spec.keys;
        if self.spec.multi == 0 {
            return vec![all[rng.below(all.len() as u64) as usize].clone()];
        }
        let mut order: Vec<usize> = (0..all.len()).collect();
        for i in 0..self.spec.multi {
            let j = i + rng.below((order.len() - i) as u64) as usize;
            order.swap(i, j);
        }
        order[..self.spec.multi]
            .iter()
            .map(|&i| all[i].clone())
            .collect()
    }

    async fn acquire(&self, hold: &str, keys: &[String], mode: Mode) -> Result<Guard, LockError> {
        if self.spec.permits > 0 {
            let permits = self.locker.semaphore(keys[0].as_str(), self.spec.permits);
            return permits.acquire().await.map(Guard::Permit);
        }
        if self.spec.leader {
            return self
                .locker
                .leader(keys[0].as_str())
                .identity(format!("w{}.{}", self.id, self.task))
                .wait(self.spec.wait)
                .campaign()
                .await
                .map(Guard::Leader);
        }
        if self.spec.multi > 0 {
            return self
                .locker
                .lock_all(keys.iter().cloned())
                .acquire()
                .await
                .map(Guard::Many);
        }
        let key = keys[0].as_str();
        let request = match mode {
            Mode::Exclusive => self.locker.lock(key).fair(self.spec.fair),
            // Readers have no fair mode (a fair read is refused): the writers' order is.
            Mode::Read => self.locker.read_lock(key),
            Mode::Write => self.locker.write_lock(key).fair(self.spec.fair),
        };
        // The hold's id in its owner token, so that a test can tell whose grant the store
        // recorded (`history::store_order`).
        request
            .label(leasehold_tests::history::holder_label(hold))
            .acquire()
            .await
            .map(Guard::One)
    }

    /// How long an acquire may run before it counts as hung: past the checker's bound
    /// (`wait + 3 × op_timeout` + 1 s), so that it is reported, and not much later, so that
    /// the run goes on.
    fn acquire_limit(&self) -> Duration {
        self.spec.wait + self.spec.op_timeout * 3 + Duration::from_secs(2)
    }

    #[allow(clippy::too_many_arguments)]
    async fn hold(
        &self,
        hold: &str,
        keys: &[String],
        fences: &[u64],
        mode: Mode,
        guard: Guard,
        n: u32,
        rng: &mut Rng,
    ) {
        let guard = Arc::new(guard);
        *self.slot() = Some(Open {
            hold: hold.to_owned(),
            guard: guard.clone(),
            last_true: None,
            logged: 0,
            seen_false: false,
        });
        let block = !self.spec.block.is_zero()
            && self.spec.block_every > 0
            && n % self.spec.block_every == 0;
        let steps = self.spec.writes;
        let pause = self.spec.hold / steps.max(1);
        // Readers write nothing; permit holders only where one permit makes the holder alone.
        let writes = mode != Mode::Read && self.spec.permits <= 1;
        let mut written = 0;
        let mut lost = false;
        for step in 0..=steps {
            if step > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = guard.lost() => {}
                }
            }
            if block && step == 1 {
                // Blocks the whole current-thread runtime, watchdog included.
                self.log.now("blk", &[&hold]);
                std::thread::sleep(self.spec.block);
                self.log.now("blkend", &[&hold]);
            }
            let before = monotonic_ns();
            let held = guard.is_held();
            self.log.at(before, "chk", &[&hold, &u8::from(held)]);
            if !held {
                lost = true;
                break;
            }
            if writes {
                self.write(hold, written, keys, fences, Some(&*guard), rng)
                    .await;
                written += 1;
            }
        }
        if lost {
            self.log.now("lost", &[&hold]);
            if writes {
                // The stale holder tries anyway, with its token alone: the fence must make the
                // resource refuse it, or take it whole before any newer holder touched it.
                self.write(hold, written, keys, fences, None, rng).await;
            }
        }
        *self.slot() = None;
        let before = monotonic_ns();
        let held = guard.is_held();
        self.log.at(before, "rel", &[&hold, &u8::from(held)]);
        let guard = Arc::try_unwrap(guard)
            .unwrap_or_else(|_| panic!("the sampler let go of the guard of {hold}"));
        let outcome = match guard.release().await {
            Ok(()) => "rok",
            Err(LockError::Lost { .. }) => "rlost",
            Err(e) if e.is_unavailable() => "runav",
            Err(_) => "rerr",
        };
        self.log.now(outcome, &[&hold]);
    }

    /// The `n`-th update of the hold: the counter of the key read, computed on and written
    /// back plus one, or (several keys) every key's record claimed and a transfer of 1 to 10
    /// from the first key's wallet to the second's. `guard` is the holder's while it believes
    /// it holds (`careful`); `None` for the blind update of a holder that noticed its loss,
    /// which goes with its tokens alone.
    async fn write(
        &self,
        hold: &str,
        n: usize,
        keys: &[String],
        fences: &[u64],
        guard: Option<&Guard>,
        rng: &mut Rng,
    ) {
        let careful = guard.is_some();
        self.log
            .now("win", &[&hold, &fences[0], &u8::from(careful)]);
        let update = Update {
            write: write_id(hold, n),
            keys: keys
                .iter()
                .zip(fences)
                .map(|(key, &fence)| {
                    let proof = guard.map_or(FenceOf::Token(fence), |g| g.fence_of(key));
                    (key.as_str(), proof)
                })
                .collect(),
            amount: 1 + rng.below(10) as i64,
        };
        // A careful holder with a token checks its lease before it sends, as the guard
        // helpers do for a lock guard.
        let unsure = update
            .keys
            .iter()
            .any(|(_, proof)| matches!(proof, FenceOf::Token(_)));
        if careful && unsure && !guard.is_some_and(Guard::is_held) {
            self.log.now("wok", &[&hold, &0]);
            return;
        }
        let mut resource = self.resource.lock().await;
        let log = &self.log;
        let read = |values: &[i64]| {
            let values: Vec<String> = values.iter().map(i64::to_string).collect();
            log.now("rd", &[&hold, &values.join(",")]);
        };
        let limit = self.spec.update_limit + self.spec.compute;
        match tokio::time::timeout(limit, resource.update(&update, read)).await {
            Ok(Ok(accepted)) => {
                self.log.now("wok", &[&hold, &u8::from(accepted)]);
            }
            Ok(Err(e)) => {
                eprintln!("history_worker: update {}: {e}", update.write);
                self.log.now("werr", &[&hold]);
            }
            Err(_) => {
                self.log.now("werr", &[&hold]);
            }
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Open>> {
        self.slots[self.task]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// xorshift64*: key choice and gaps only, no need for quality.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng((seed ^ u64::from(std::process::id()) ^ monotonic_ns()) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}
