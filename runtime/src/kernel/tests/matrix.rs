//! The options × primitives matrix (issue 46): every option of a request or of the attribute,
//! on every primitive, does what its documentation says there, or is refused with
//! [`LockError::Config`]; where neither the API (no such method) nor the attribute (a compile
//! error) offers it, the table says so and why. [`MATRIX`] says which, cell by cell; one test
//! per cell (`matrix::<option>::<primitive>`) checks it, on the scripted store (two lockers
//! on it stand for two processes) and Tokio's paused clock, so every instant is the test's.
//! What depends on the engine (how a hold outlives its release, how an unrenewed lease ends)
//! is checked on every engine by the conformance property `options`.
//!
//! The primitives: `lock`, `read` (`read_lock`), `write` (`write_lock`), `downgrade` (the
//! write taken with the option, a read taken inside it, the write released: what is left is
//! the read), `lock_all`, `permits` (`semaphore`) and `leader`. Each option goes through the
//! request API and through the attribute's runtime (what `#[distributed_lock]` expands to),
//! wherever each offers it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::__private::{self, LeaseKind, OnLost, Spec};
use crate::store::scripted::ScriptedStore;
use crate::{
    Leadership, LockError, LockGuard, LockRequest, Locker, LockerBuilder, MultiGuard, PermitGuard,
    Profile, UnfencedGuard,
};

const KEY: &str = "matrix";
const KEYS: [&str; 2] = ["matrix:1", "matrix:2"];
/// A `hold_at_least`.
const HOLD: Duration = Duration::from_secs(5);
/// An unrenewed lease (`watchdog(false)`, the profile `quick`).
const LEASE: Duration = Duration::from_secs(1);
/// A `hold_at_most`.
const BOUND: Duration = Duration::from_secs(10);
/// Less than any margin the assertions leave on either side of an instant.
const TICK: Duration = Duration::from_millis(5);
const LONG: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
enum Opt {
    hold_at_least,
    hold_at_most,
    fair,
    unfenced,
    profile,
    on_lost,
    watchdog_off,
    wait_zero,
}

const OPTS: [Opt; 8] = [
    Opt::hold_at_least,
    Opt::hold_at_most,
    Opt::fair,
    Opt::unfenced,
    Opt::profile,
    Opt::on_lost,
    Opt::watchdog_off,
    Opt::wait_zero,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
enum Prim {
    lock,
    read,
    write,
    downgrade,
    lock_all,
    permits,
    leader,
}

const PRIMS: [Prim; 7] = [
    Prim::lock,
    Prim::read,
    Prim::write,
    Prim::downgrade,
    Prim::lock_all,
    Prim::permits,
    Prim::leader,
];

/// What one option does on one primitive.
#[derive(Debug)]
enum Cell {
    /// What its documentation says: the cell's check asserts it.
    Means,
    /// Refused at the acquire with [`LockError::Config`] (an attribute's call site also at
    /// start-up, by [`Locker::check_call_sites`]).
    Config,
    /// Not offered: no such method, and a compile error in the attribute (or no attribute).
    NotOffered(&'static str),
}

macro_rules! matrix {
    (@cell Means) => { Cell::Means };
    (@cell Config) => { Cell::Config };
    (@cell NotOffered $why:literal) => { Cell::NotOffered($why) };
    (@test $opt:ident $prim:ident NotOffered) => {};
    (@test $opt:ident $prim:ident $cell:ident) => {
        #[tokio::test(start_paused = true)]
        async fn $prim() {
            check(Opt::$opt, Prim::$prim).await;
        }
    };
    ($($opt:ident { $($prim:ident => $cell:ident $(($why:literal))?),+ $(,)? })+) => {
        /// Every cell of the matrix.
        const MATRIX: &[(Opt, Prim, Cell)] = &[
            $($((Opt::$opt, Prim::$prim, matrix!(@cell $cell $($why)?)),)+)+
        ];
        $(
            mod $opt {
                use super::*;
                $(matrix!(@test $opt $prim $cell);)+
            }
        )+
    };
}

matrix! {
    hold_at_least {
        lock => Means,
        read => Means,
        write => Means,
        // The write's hold, kept through the downgrade (issue 46, item 2).
        downgrade => Means,
        lock_all => NotOffered("no MultiLockRequest::hold_at_least; `keys` with `hold_at_least` is a compile error (ui fail/hold_at_least_with_keys)"),
        permits => NotOffered("no SemaphoreRequest::hold_at_least; `permits` with `hold_at_least` is a compile error (macros build.rs: a permit is given back when the body ends)"),
        leader => NotOffered("no LeaderRequest::hold_at_least, and no attribute for elections"),
    }
    hold_at_most {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => NotOffered("an attribute option only, and `permits` with `hold_at_most` is a compile error (macros build.rs: write `lease`, `watchdog = false`)"),
        leader => NotOffered("an attribute option only, and no attribute for elections: an unrenewed leadership is watchdog_off::leader"),
    }
    fair {
        lock => Means,
        read => Config,
        write => Means,
        // The write's fairness; a fair read inside it is refused.
        downgrade => Means,
        lock_all => Means,
        permits => NotOffered("no SemaphoreRequest::fair; `permits` with `fair` is a compile error (macros build.rs); a profile's fair is left out (profile::permits)"),
        // Always fair, whatever a profile says.
        leader => Means,
    }
    unfenced {
        lock => Means,
        read => Config,
        write => Means,
        downgrade => Config,
        lock_all => NotOffered("no MultiLockRequest::unfenced; `keys` with `fencing = false` is a compile error (ui fail/fencing_with_keys)"),
        permits => NotOffered("no SemaphoreRequest::unfenced; `permits` with `fencing = false` is a compile error (ui fail/fencing_with_permits)"),
        leader => NotOffered("no LeaderRequest::unfenced: the term is the leadership's fence"),
    }
    profile {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
    on_lost {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => NotOffered("an attribute option only, and no attribute for elections: run_while_leader always cancels the task when the leadership is lost (kernel::tests::leader)"),
    }
    watchdog_off {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
    wait_zero {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
}

#[test]
fn every_option_meets_every_primitive_once() {
    for opt in OPTS {
        for prim in PRIMS {
            let cells = MATRIX
                .iter()
                .filter(|(o, p, _)| (*o, *p) == (opt, prim))
                .count();
            assert_eq!(cells, 1, "{opt:?} × {prim:?} has {cells} cells");
        }
    }
    assert_eq!(MATRIX.len(), OPTS.len() * PRIMS.len());
    for (opt, prim, cell) in MATRIX {
        if let Cell::NotOffered(why) = cell {
            assert!(
                !why.is_empty(),
                "{opt:?} × {prim:?}: say why it is not offered"
            );
        }
    }
}

async fn check(opt: Opt, prim: Prim) {
    let (_, _, cell) = MATRIX
        .iter()
        .find(|(o, p, _)| (*o, *p) == (opt, prim))
        .expect("every test is a cell");
    match cell {
        Cell::Means => match opt {
            Opt::hold_at_least => hold_at_least(prim).await,
            Opt::hold_at_most => hold_at_most(prim).await,
            Opt::fair => fair(prim).await,
            Opt::unfenced => unfenced(prim).await,
            Opt::profile => profile(prim).await,
            Opt::on_lost => on_lost(prim).await,
            Opt::watchdog_off => watchdog_off(prim).await,
            Opt::wait_zero => wait_zero(prim).await,
        },
        Cell::Config => refused(opt, prim).await,
        Cell::NotOffered(_) => unreachable!("no test for a cell that is not offered"),
    }
}

// ---- the world of one cell ----------------------------------------------------------------

/// Two processes on one store: `a` takes with the cell's options, `b` is the other process.
struct World {
    store: ScriptedStore,
    a: Locker,
    b: Locker,
}

/// The lockers' profiles: `quick` (no wait, a short lease, no watchdog), `fair`, `loose`
/// (not fair), `limit` (a semaphore's limit of 2).
fn world_where(session_locks: bool) -> World {
    let store = ScriptedStore::new();
    if session_locks {
        store.keep_locks_for_the_session();
    }
    let locker = || {
        let builder = LockerBuilder::default()
            .profile(
                "quick",
                Profile::new()
                    .wait(Duration::ZERO)
                    .lease(LEASE)
                    .watchdog(false),
            )
            .profile("fair", Profile::new().fair(true))
            .profile("loose", Profile::new().fair(false))
            .profile("limit", Profile::new().limit(2));
        Locker::with_store(Arc::new(store.clone()), builder)
    };
    World {
        a: locker(),
        b: locker(),
        store,
    }
}

fn world() -> World {
    world_where(false)
}

/// Lets the background task run what it was handed.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// How an option is given: to the request API, or to the attribute (its runtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Api,
    Attribute,
}

/// Where the primitive is offered: the attribute has no elections.
fn vias(prim: Prim) -> &'static [Via] {
    match prim {
        Prim::leader => &[Via::Api],
        _ => &[Via::Api, Via::Attribute],
    }
}

/// The options of one acquisition.
#[derive(Clone, Debug)]
struct Opts {
    hold_at_least: Option<Duration>,
    lease: Option<Duration>,
    watchdog: Option<bool>,
    wait: Option<Duration>,
    fair: bool,
    unfenced: bool,
    profile: Option<&'static str>,
    on_lost: OnLost,
    /// A semaphore's limit.
    limit: u32,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            hold_at_least: None,
            lease: None,
            watchdog: None,
            wait: None,
            fair: false,
            unfenced: false,
            profile: None,
            on_lost: OnLost::Cancel,
            limit: 1,
        }
    }
}

/// Sets the options every request builder offers (`lease`, `wait`, `watchdog`) on `$request`
/// from `$opts`; the builders share no trait, so a macro. A profile is set last, by
/// `with_profile!`: its values win over those set before it.
macro_rules! with_common {
    ($request:expr, $opts:expr) => {{
        let (mut r, o) = ($request, $opts);
        if let Some(lease) = o.lease {
            r = r.lease(lease);
        }
        if let Some(wait) = o.wait {
            r = r.wait(wait);
        }
        if let Some(on) = o.watchdog {
            r = r.watchdog(on);
        }
        r
    }};
}

/// Sets `$opts`'s profile, if any, on `$request`.
macro_rules! with_profile {
    ($request:expr, $opts:expr) => {{
        let (r, o) = ($request, $opts);
        match o.profile {
            Some(profile) => r.profile(profile),
            None => r,
        }
    }};
}

impl Opts {
    fn waiting(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    fn lock<'a>(&self, r: LockRequest<'a>) -> LockRequest<'a> {
        let mut r = with_common!(r, self);
        if let Some(hold) = self.hold_at_least {
            r = r.hold_at_least(hold);
        }
        if self.fair {
            r = r.fair(true);
        }
        with_profile!(r, self)
    }

    /// What the attribute's expansion passes for these options (`hold_at_most` is its lease
    /// and watchdog).
    fn spec(&self, kind: LeaseKind) -> Spec {
        Spec {
            lease: self.lease,
            wait: self.wait,
            watchdog: self.watchdog,
            on_lost: self.on_lost,
            kind,
            fair: self.fair,
            hold_at_least: self.hold_at_least,
            profile: self.profile.map(Into::into),
            site: None,
        }
    }
}

/// What a cell took.
enum Taken {
    One(LockGuard),
    Unfenced(UnfencedGuard),
    All(MultiGuard),
    Permit(PermitGuard),
    Leader(Leadership),
}

impl Taken {
    fn is_held(&self) -> bool {
        match self {
            Taken::One(g) => g.is_held(),
            Taken::Unfenced(g) => g.is_held(),
            Taken::All(g) => g.is_held(),
            Taken::Permit(g) => g.is_held(),
            Taken::Leader(g) => g.is_leader(),
        }
    }

    async fn lost(&self) {
        match self {
            Taken::One(g) => g.lost().await,
            Taken::Unfenced(g) => g.lost().await,
            Taken::All(g) => g.lost().await,
            Taken::Permit(g) => g.lost().await,
            Taken::Leader(g) => g.lost().await,
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Taken::One(g) => g.release().await,
            Taken::Unfenced(g) => g.release().await,
            Taken::All(g) => g.release().await,
            Taken::Permit(g) => g.release().await,
            Taken::Leader(g) => g.resign().await,
        }
    }

    fn scope<F>(&self, fut: F) -> std::pin::Pin<Box<dyn Future<Output = F::Output> + Send + '_>>
    where
        F: Future + Send + 'static,
    {
        match self {
            Taken::One(g) => Box::pin(g.scope(fut)),
            Taken::Unfenced(g) => Box::pin(g.scope(fut)),
            Taken::All(g) => Box::pin(g.scope(fut)),
            Taken::Permit(g) => Box::pin(g.scope(fut)),
            Taken::Leader(_) => unreachable!("a leadership has no scope"),
        }
    }

    /// Runs `body` as the attribute runs its function's body under the guard.
    async fn run<F: Future>(&self, spec: &Spec, body: F) -> Result<F::Output, LockError> {
        match self {
            Taken::One(g) => __private::hold(g, spec, body).await,
            Taken::Unfenced(g) => __private::hold(g, spec, body).await,
            Taken::All(g) => __private::hold(g, spec, body).await,
            Taken::Permit(g) => __private::hold(g, spec, body).await,
            Taken::Leader(_) => unreachable!("no attribute for elections"),
        }
    }
}

/// The lease kind of a one-key primitive.
fn kind_of(prim: Prim, limit: u32) -> LeaseKind {
    match prim {
        Prim::read => LeaseKind::Read,
        Prim::permits => LeaseKind::Permits { limit, count: 1 },
        _ => LeaseKind::Exclusive,
    }
}

/// Takes one key's lock, read or write (no downgrade), as `via` says.
async fn take_one(l: &Locker, prim: Prim, o: &Opts, via: Via) -> Result<Taken, LockError> {
    match via {
        Via::Api => {
            let request = o.lock(match prim {
                Prim::read => l.read_lock(KEY),
                Prim::write => l.write_lock(KEY),
                _ => l.lock(KEY),
            });
            if o.unfenced {
                request.unfenced().acquire().await.map(Taken::Unfenced)
            } else {
                request.acquire().await.map(Taken::One)
            }
        }
        Via::Attribute => {
            let spec = o.spec(kind_of(prim, o.limit));
            if o.unfenced {
                __private::acquire::<UnfencedGuard>(Ok(l), KEY.into(), &spec)
                    .await
                    .map(Taken::Unfenced)
            } else {
                __private::acquire::<LockGuard>(Ok(l), KEY.into(), &spec)
                    .await
                    .map(Taken::One)
            }
        }
    }
}

/// Takes what `prim` takes with options `o`, as `via` says. A downgrade takes the write with
/// `o`, a plain read inside it, and releases the write: the read is what it took.
async fn take(l: &Locker, prim: Prim, o: &Opts, via: Via) -> Result<Taken, LockError> {
    match (prim, via) {
        (Prim::lock | Prim::read | Prim::write, _) => take_one(l, prim, o, via).await,
        (Prim::downgrade, _) => {
            let write = take_one(l, Prim::write, o, via).await?;
            let l2 = l.clone();
            let read = write
                .scope(async move { take_one(&l2, Prim::read, &Opts::default(), via).await })
                .await?;
            write.release().await?;
            Ok(read)
        }
        (Prim::lock_all, Via::Api) => {
            let mut r = with_common!(l.lock_all(KEYS), o);
            if o.fair {
                r = r.fair(true);
            }
            let r = with_profile!(r, o);
            assert!(o.hold_at_least.is_none() && !o.unfenced, "not offered");
            r.acquire().await.map(Taken::All)
        }
        (Prim::lock_all, Via::Attribute) => {
            let keys = KEYS.map(String::from).to_vec();
            let spec = o.spec(LeaseKind::Exclusive);
            __private::acquire::<MultiGuard>(Ok(l), keys, &spec)
                .await
                .map(Taken::All)
        }
        (Prim::permits, Via::Api) => {
            let r = with_profile!(with_common!(l.semaphore(KEY, o.limit), o), o);
            r.acquire().await.map(Taken::Permit)
        }
        (Prim::permits, Via::Attribute) => {
            let spec = o.spec(kind_of(prim, o.limit));
            __private::acquire::<PermitGuard>(Ok(l), KEY.into(), &spec)
                .await
                .map(Taken::Permit)
        }
        (Prim::leader, Via::Api) => {
            let r = with_profile!(with_common!(l.leader(KEY), o), o);
            r.campaign().await.map(Taken::Leader)
        }
        (Prim::leader, Via::Attribute) => unreachable!("no attribute for elections"),
    }
}

/// Whether another process could take now what `prim` holds (the writer a read keeps out,
/// the lock, every key, the one permit, the election); what it got is given back at once.
async fn free_for(l: &Locker, prim: Prim) -> bool {
    let got = match prim {
        Prim::lock | Prim::read | Prim::write | Prim::downgrade => l
            .write_lock(KEY)
            .try_acquire()
            .await
            .unwrap()
            .map(Taken::One),
        Prim::lock_all => l
            .lock_all(KEYS)
            .try_acquire()
            .await
            .unwrap()
            .map(Taken::All),
        Prim::permits => l
            .semaphore(KEY, 1)
            .try_acquire()
            .await
            .unwrap()
            .map(Taken::Permit),
        Prim::leader => match l.leader(KEY).wait(Duration::ZERO).campaign().await {
            Ok(leadership) => Some(Taken::Leader(leadership)),
            Err(LockError::Busy { .. }) => None,
            Err(e) => panic!("{e:?}"),
        },
    };
    match got {
        Some(taken) => {
            taken.release().await.unwrap();
            true
        }
        None => false,
    }
}

fn assert_config<T: std::fmt::Debug>(result: Result<T, LockError>, says: &str, case: &str) {
    match result {
        Err(LockError::Config { message, .. }) => {
            assert!(message.contains(says), "{case}: {message}")
        }
        other => panic!("{case}: expected a Config error that says {says:?}, got {other:?}"),
    }
}

impl std::fmt::Debug for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Taken::One(_) => "a guard",
            Taken::Unfenced(_) => "an unfenced guard",
            Taken::All(_) => "a multi-guard",
            Taken::Permit(_) => "a permit",
            Taken::Leader(_) => "a leadership",
        })
    }
}

// ---- the cells ------------------------------------------------------------------------------

/// `hold_at_least`: released (or dropped) early, what was taken stays taken until the hold
/// ends, for every other process, then comes free; where locks expire (an expiry set at the
/// release) and where they live with the session (released by the locker at the end).
async fn hold_at_least(prim: Prim) {
    for &via in vias(prim) {
        for session_locks in [false, true] {
            let case = format!("{prim:?} via {via:?}, session locks {session_locks}");
            let w = world_where(session_locks);
            let start = Instant::now();
            let o = Opts {
                hold_at_least: Some(HOLD),
                ..Opts::default()
            };
            let taken = take(&w.a, prim, &o, via).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            taken.release().await.unwrap();
            settle().await;
            assert!(
                !free_for(&w.b, prim).await,
                "{case}: free after the release"
            );
            if prim == Prim::read {
                let reader = w.b.read_lock(KEY).try_acquire().await.unwrap();
                assert!(reader.is_some(), "{case}: a held read keeps readers out");
            }
            tokio::time::sleep_until(start + HOLD - TICK).await;
            assert!(!free_for(&w.b, prim).await, "{case}: free within the hold");
            tokio::time::sleep_until(start + HOLD + TICK).await;
            assert!(free_for(&w.b, prim).await, "{case}: taken after the hold");
        }
    }
}

/// `hold_at_most` (the attribute's lease that nobody renews): a body running past it is
/// cancelled with `Lost` at the bound, and the lock is taken until then and free after.
async fn hold_at_most(prim: Prim) {
    let w = world();
    let o = Opts {
        lease: Some(BOUND),
        watchdog: Some(false),
        ..Opts::default()
    };
    let start = Instant::now();
    let taken = take(&w.a, prim, &o, Via::Attribute).await.unwrap();
    // The body under the read of a downgrade is the read's (a plain one inside the write).
    let spec = match prim {
        Prim::downgrade => Opts::default().spec(LeaseKind::Read),
        _ => o.spec(kind_of(prim, 1)),
    };
    let finished = Arc::new(Mutex::new(false));
    let ran = finished.clone();
    let body = taken.run(&spec, async move {
        tokio::time::sleep(BOUND * 2).await;
        *ran.lock().unwrap() = true;
    });
    let other = async {
        tokio::time::sleep_until(start + BOUND - TICK * 20).await;
        assert!(
            !free_for(&w.b, prim).await,
            "{prim:?}: free before the bound"
        );
    };
    let (out, ()) = tokio::join!(body, other);
    assert!(
        matches!(out, Err(LockError::Lost { .. })),
        "{prim:?}: {out:?}"
    );
    assert!(
        !*finished.lock().unwrap(),
        "{prim:?}: the body ran past the bound"
    );
    assert!(
        start.elapsed() <= BOUND,
        "{prim:?}: cancelled at {:?}",
        start.elapsed()
    );
    assert!(taken.release().await.unwrap_err().is_lost());
    tokio::time::sleep_until(start + BOUND + TICK).await;
    assert!(
        free_for(&w.b, prim).await,
        "{prim:?}: taken after the bound"
    );
}

/// Fair requests queued in one process are served in the order they came, each through the
/// store (a fair release never hands over in the process); without `fair`, the same queue is
/// served by handovers (the control, for the lock). Leaders are always fair.
async fn fair(prim: Prim) {
    let fair = Opts {
        fair: true,
        ..Opts::default()
    };
    match prim {
        Prim::lock | Prim::write | Prim::lock_all => {
            for &via in vias(prim) {
                served_in_order(prim, via, &fair, true).await;
            }
            if prim == Prim::lock {
                served_in_order(prim, Via::Api, &Opts::default(), false).await;
            }
        }
        Prim::downgrade => {
            for &via in vias(prim) {
                served_in_order(prim, via, &fair, true).await;
            }
            // A fair read inside the write: refused, as every fair read.
            let w = world();
            let write = take_one(&w.a, Prim::write, &Opts::default(), Via::Api)
                .await
                .unwrap();
            let a = w.a.clone();
            let read = write
                .scope(async move { take_one(&a, Prim::read, &fair, Via::Api).await })
                .await;
            assert_config(read, "fair read locks are not offered", "a fair downgrade");
        }
        Prim::leader => {
            served_in_order(prim, Via::Api, &Opts::default(), true).await;
            let loose = Opts {
                profile: Some("loose"),
                ..Opts::default()
            };
            served_in_order(prim, Via::Api, &loose, true).await;
        }
        Prim::read | Prim::permits => unreachable!("not a Means cell"),
    }
}

/// Three requests of one process, queued behind a holder of the same process in this order,
/// get what `prim` takes in that order once it is released; `fair`: each through the store,
/// else by handovers.
async fn served_in_order(prim: Prim, via: Via, o: &Opts, fair: bool) {
    let case = format!("{prim:?} via {via:?} with {o:?}");
    let w = world();
    let first = take(&w.a, prim, o, via).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..3 {
        let (locker, o, order) = (w.a.clone(), o.clone().waiting(LONG), order.clone());
        // A downgrade's waiters are writers.
        let waits_for = if prim == Prim::downgrade {
            Prim::write
        } else {
            prim
        };
        waiters.push(tokio::spawn(async move {
            let taken = take(&locker, waits_for, &o, via).await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(10)).await;
            taken.release().await.unwrap();
        }));
        settle().await;
    }
    let before = w.store.acquires();
    first.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2], "{case}: out of order");
    let per_holder = if prim == Prim::lock_all { 2 } else { 1 };
    let through_the_store = w.store.acquires() - before;
    match fair {
        true => assert_eq!(
            through_the_store,
            3 * per_holder,
            "{case}: a fair release handed over in the process"
        ),
        // The holder reserved one fence (nobody waited yet): the first waiter takes its own
        // lease, with fences for the two behind it, and hands it over to them.
        false => assert_eq!(through_the_store, 1, "{case}: no handover"),
    }
}

/// Unfenced: the lock (an `UnfencedGuard`) excludes as a lock does; inside its scope an
/// unfenced acquire re-enters and a fenced one is refused; a fenced waiter of the process is
/// never handed the unfenced lease (it goes to the store), an unfenced one is.
async fn unfenced(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let o = Opts {
            unfenced: true,
            ..Opts::default()
        };
        let held = take(&w.a, prim, &o, via).await.unwrap();
        assert!(matches!(held, Taken::Unfenced(_)), "{case}: {held:?}");
        assert!(
            !free_for(&w.b, prim).await,
            "{case}: another process got in"
        );
        let a = w.a.clone();
        let (fenced, again) = held
            .scope(async move {
                (
                    a.lock(KEY).try_acquire().await,
                    a.lock(KEY).unfenced().try_acquire().await,
                )
            })
            .await;
        assert_config(fenced, "inside an unfenced hold", &case);
        assert!(again.unwrap().unwrap().is_reentrant(), "{case}");
        // A fenced waiter, then an unfenced one.
        let fenced_waiter = {
            let a = w.a.clone();
            tokio::spawn(async move {
                let g = a.lock(KEY).wait(LONG).acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                g.release().await.unwrap();
            })
        };
        settle().await;
        let unfenced_waiter = {
            let a = w.a.clone();
            tokio::spawn(async move {
                let g = a.lock(KEY).unfenced().wait(LONG).acquire().await.unwrap();
                g.release().await.unwrap();
            })
        };
        settle().await;
        let before = w.store.acquires();
        held.release().await.unwrap();
        fenced_waiter.await.unwrap();
        unfenced_waiter.await.unwrap();
        assert_eq!(
            w.store.acquires() - before,
            1,
            "{case}: the fenced waiter takes a lease of its own, the unfenced one is handed it"
        );
    }
}

/// A profile: unknown, refused; a `limit` is a semaphore's (refused elsewhere); `quick`'s
/// wait, lease and watchdog replace the call's; `fair`'s fairness is the lock's (left out by
/// reads and semaphores, which have none).
async fn profile(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let named = |name| Opts {
            profile: Some(name),
            ..Opts::default()
        };
        assert_config(
            take(&w.a, prim, &named("nope"), via).await,
            "nope",
            &format!("{case}, an unknown profile"),
        );
        if prim == Prim::permits {
            let o = named("limit");
            let one = take(&w.a, prim, &o, via).await.unwrap();
            let two = take(&w.b, prim, &o, via).await.unwrap();
            let Taken::Permit(permit) = &one else {
                unreachable!()
            };
            assert_eq!(permit.limit(), 2, "{case}: the profile's limit");
            assert!(w.b.semaphore(KEY, 2).try_acquire().await.unwrap().is_none());
            drop((one, two));
            settle().await;
        } else {
            assert_config(
                take(&w.a, prim, &named("limit"), via).await,
                "limit",
                &format!("{case}, a profile with a limit"),
            );
            if prim == Prim::downgrade {
                // The read of a downgrade resolves its own profile too.
                let write = take_one(&w.a, Prim::write, &Opts::default(), via)
                    .await
                    .unwrap();
                let a = w.a.clone();
                let (unknown, limit, fair) = write
                    .scope(async move {
                        (
                            take_one(&a, Prim::read, &named("nope"), via).await,
                            take_one(&a, Prim::read, &named("limit"), via).await,
                            take_one(&a, Prim::read, &named("fair"), via).await,
                        )
                    })
                    .await;
                assert_config(unknown, "nope", &case);
                assert_config(limit, "limit", &case);
                assert!(fair.is_ok(), "{case}: a read leaves a profile's fair out");
                write.release().await.unwrap();
                settle().await;
            }
        }
        // `quick`: no wait while another process holds it, and an unrenewed short lease.
        let (other, blocked_by) = blocker(&w.b, prim, via).await;
        let start = Instant::now();
        let busy = take(&w.a, prim, &named("quick"), via).await;
        assert!(
            matches!(busy, Err(LockError::Busy { .. })),
            "{case}, held by {blocked_by}: {busy:?}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}: waited");
        other.release().await.unwrap();
        settle().await;
        let start = Instant::now();
        let taken = take(&w.a, prim, &named("quick"), via).await.unwrap();
        tokio::time::timeout(LEASE, taken.lost())
            .await
            .unwrap_or_else(|_| panic!("{case}: the profile's lease was renewed"));
        assert!(start.elapsed() < LEASE);
        tokio::time::sleep_until(start + LEASE + TICK).await;
        assert!(free_for(&w.b, prim).await, "{case}: taken after the lease");
        // `fair`: the lock's fairness (for the attribute too, whose own `fair` is false);
        // read locks and semaphores leave it out.
        match prim {
            Prim::lock | Prim::write | Prim::lock_all | Prim::downgrade | Prim::leader => {
                served_in_order(prim, via, &named("fair"), true).await
            }
            Prim::read | Prim::permits => {
                let taken = take(&w.a, prim, &named("fair"), via).await;
                assert!(taken.is_ok(), "{case}: {taken:?}");
            }
        }
    }
}

/// `on_lost` (the attribute's): when the lease is lost while the body runs (the store
/// refuses the renewals), `cancel` drops the body at once with `Lost`, `continue` lets it
/// finish.
async fn on_lost(prim: Prim) {
    for on_lost in [OnLost::Cancel, OnLost::Continue] {
        let case = format!("{prim:?}, on_lost {on_lost:?}");
        let w = world();
        let o = Opts {
            on_lost,
            ..Opts::default()
        };
        let taken = take(&w.a, prim, &o, Via::Attribute).await.unwrap();
        // The body under the read of a downgrade is the read's, with the cell's `on_lost`.
        let kind = match prim {
            Prim::downgrade => LeaseKind::Read,
            _ => kind_of(prim, 1),
        };
        w.store.refuse_renewals(1000);
        let finished = Arc::new(Mutex::new(false));
        let ran = finished.clone();
        let out = taken
            .run(&o.spec(kind), async move {
                tokio::time::sleep(LONG).await;
                *ran.lock().unwrap() = true;
                7
            })
            .await;
        assert!(!taken.is_held(), "{case}: not lost");
        let finished = *finished.lock().unwrap();
        match on_lost {
            OnLost::Cancel => {
                assert!(
                    matches!(out, Err(LockError::Lost { .. })),
                    "{case}: {out:?}"
                );
                assert!(!finished, "{case}: the body ran on");
            }
            _ => {
                assert_eq!(out.unwrap(), 7, "{case}");
                assert!(finished, "{case}: the body was cancelled");
            }
        }
        let _ = taken.release().await;
    }
}

/// `watchdog(false)`: nobody renews the lease, so the guard is lost at its end and another
/// process gets in then (not before); its release says `Lost`.
async fn watchdog_off(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let o = Opts {
            lease: Some(LEASE),
            watchdog: Some(false),
            ..Opts::default()
        };
        let start = Instant::now();
        let taken = take(&w.a, prim, &o, via).await.unwrap();
        tokio::time::sleep_until(start + LEASE / 2).await;
        assert!(taken.is_held(), "{case}");
        assert!(!free_for(&w.b, prim).await, "{case}: free within the lease");
        tokio::time::timeout_at(start + LEASE, taken.lost())
            .await
            .unwrap_or_else(|_| panic!("{case}: the lease was renewed"));
        assert!(!taken.is_held(), "{case}");
        tokio::time::sleep_until(start + LEASE + TICK).await;
        assert!(free_for(&w.b, prim).await, "{case}: taken after the lease");
        let released = taken.release().await;
        assert!(
            matches!(released, Err(LockError::Lost { .. })),
            "{case}: {released:?}"
        );
    }
}

/// `wait = 0`: what another process holds is `Busy` at once (no time passes) and leaves
/// nothing behind; a downgrade, whose read needs nobody else, is granted at once.
async fn wait_zero(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let now = Opts::default().waiting(Duration::ZERO);
        if prim == Prim::downgrade {
            let write = take_one(&w.a, Prim::write, &now, via).await.unwrap();
            let a = w.a.clone();
            let start = Instant::now();
            let read = write
                .scope(async move { take_one(&a, Prim::read, &now, via).await })
                .await
                .unwrap();
            assert_eq!(start.elapsed(), Duration::ZERO, "{case}");
            write.release().await.unwrap();
            assert!(read.is_held(), "{case}");
            assert!(!free_for(&w.b, prim).await, "{case}");
            read.release().await.unwrap();
            assert!(free_for(&w.b, prim).await, "{case}");
            continue;
        }
        let (other, blocked_by) = blocker(&w.b, prim, via).await;
        let start = Instant::now();
        let busy = take(&w.a, prim, &now, via).await;
        assert!(
            matches!(busy, Err(LockError::Busy { .. })),
            "{case}, held by {blocked_by}: {busy:?}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}: waited");
        if prim == Prim::lock_all {
            // The key it could take was given back.
            let first = w.b.lock(KEYS[0]).try_acquire().await.unwrap();
            first
                .expect("a key was left taken")
                .release()
                .await
                .unwrap();
        }
        other.release().await.unwrap();
        settle().await;
        let start = Instant::now();
        let taken = take(&w.a, prim, &now, via).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}");
        taken.release().await.unwrap();
    }
}

/// What keeps `prim` out, taken by `l` (another process): a writer keeps a reader out, a
/// reader a writer, one key of two `lock_all`; and what it is.
async fn blocker(l: &Locker, prim: Prim, via: Via) -> (Taken, &'static str) {
    let plain = Opts::default();
    let (taken, what) = match prim {
        Prim::read => (take(l, Prim::write, &plain, via).await, "a writer"),
        Prim::write | Prim::lock | Prim::downgrade => {
            (take(l, Prim::read, &plain, via).await, "a reader")
        }
        Prim::lock_all => (
            l.lock(KEYS[1]).acquire().await.map(Taken::One),
            "a holder of its second key",
        ),
        _ => (take(l, prim, &plain, via).await, "another holder"),
    };
    (taken.unwrap(), what)
}

/// The `Config` cells: refused at the acquire, and by the start-up check of an attribute.
async fn refused(opt: Opt, prim: Prim) {
    let w = world();
    match (opt, prim) {
        (Opt::fair, Prim::read) => {
            let fair = Opts {
                fair: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("a fair read via {via:?}");
                assert_config(
                    take(&w.a, prim, &fair, via).await,
                    "fair read locks are not offered",
                    &case,
                );
            }
            let spec = fair.spec(LeaseKind::Read);
            assert_config(
                __private::check(&w.a, &spec),
                "fair read locks are not offered",
                "the start-up check",
            );
        }
        (Opt::unfenced, Prim::read) => {
            let unfenced = Opts {
                unfenced: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("an unfenced read via {via:?}");
                assert_config(
                    take(&w.a, prim, &unfenced, via).await,
                    "unfenced reads are not offered",
                    &case,
                );
            }
        }
        (Opt::unfenced, Prim::downgrade) => {
            let unfenced = Opts {
                unfenced: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("a downgrade of an unfenced write via {via:?}");
                let write = take_one(&w.a, Prim::write, &unfenced, via).await.unwrap();
                let a = w.a.clone();
                let (read, unfenced_read) = write
                    .scope(async move {
                        (
                            take_one(&a, Prim::read, &Opts::default(), via).await,
                            a.read_lock(KEY).unfenced().try_acquire().await,
                        )
                    })
                    .await;
                assert_config(read, "inside an unfenced write", &case);
                assert_config(unfenced_read, "unfenced reads are not offered", &case);
                write.release().await.unwrap();
            }
        }
        other => unreachable!("{other:?} is not a Config cell"),
    }
}
