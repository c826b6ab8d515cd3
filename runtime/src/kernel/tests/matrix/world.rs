//! The world of one cell: two lockers on one scripted store, the options of an acquisition,
//! and how each primitive is taken, through the request API or the attribute's runtime.

use super::*;

/// Two processes on one store: `a` takes with the cell's options, `b` is the other process.
pub(super) struct World {
    pub(super) store: ScriptedStore,
    pub(super) a: Locker,
    pub(super) b: Locker,
}

/// The lockers' profiles: `quick` (no wait, a short lease, no watchdog), `fair`, `loose`
/// (not fair), `limit` (a semaphore's limit of 2).
pub(super) fn world_where(session_locks: bool) -> World {
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

pub(super) fn world() -> World {
    world_where(false)
}

/// Lets the background task run what it was handed.
pub(super) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// How an option is given: to the request API, or to the attribute (its runtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Via {
    Api,
    Attribute,
}

/// Where the primitive is offered: the attribute has no elections.
pub(super) fn vias(prim: Prim) -> &'static [Via] {
    match prim {
        Prim::leader => &[Via::Api],
        _ => &[Via::Api, Via::Attribute],
    }
}

/// The options of one acquisition.
#[derive(Clone, Debug)]
pub(super) struct Opts {
    pub(super) hold_at_least: Option<Duration>,
    pub(super) lease: Option<Duration>,
    pub(super) watchdog: Option<bool>,
    pub(super) wait: Option<Duration>,
    pub(super) fair: bool,
    pub(super) unfenced: bool,
    pub(super) profile: Option<&'static str>,
    pub(super) on_lost: OnLost,
    /// A semaphore's limit.
    pub(super) limit: u32,
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
    pub(super) fn waiting(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    pub(super) fn lock<'a>(&self, r: LockRequest<'a>) -> LockRequest<'a> {
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
    pub(super) fn spec(&self, kind: LeaseKind) -> Spec {
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
pub(super) enum Taken {
    One(LockGuard),
    Unfenced(UnfencedGuard),
    All(MultiGuard),
    Permit(PermitGuard),
    Leader(Leadership),
}

impl Taken {
    pub(super) fn is_held(&self) -> bool {
        match self {
            Taken::One(g) => g.is_held(),
            Taken::Unfenced(g) => g.is_held(),
            Taken::All(g) => g.is_held(),
            Taken::Permit(g) => g.is_held(),
            Taken::Leader(g) => g.is_leader(),
        }
    }

    pub(super) async fn lost(&self) {
        match self {
            Taken::One(g) => g.lost().await,
            Taken::Unfenced(g) => g.lost().await,
            Taken::All(g) => g.lost().await,
            Taken::Permit(g) => g.lost().await,
            Taken::Leader(g) => g.lost().await,
        }
    }

    pub(super) async fn release(self) -> Result<(), LockError> {
        match self {
            Taken::One(g) => g.release().await,
            Taken::Unfenced(g) => g.release().await,
            Taken::All(g) => g.release().await,
            Taken::Permit(g) => g.release().await,
            Taken::Leader(g) => g.resign().await,
        }
    }

    pub(super) fn scope<F>(
        &self,
        fut: F,
    ) -> std::pin::Pin<Box<dyn Future<Output = F::Output> + Send + '_>>
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
    pub(super) async fn run<F: Future>(
        &self,
        spec: &Spec,
        body: F,
    ) -> Result<F::Output, LockError> {
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
pub(super) fn kind_of(prim: Prim, limit: u32) -> LeaseKind {
    match prim {
        Prim::read => LeaseKind::Read,
        Prim::permits => LeaseKind::Permits { limit, count: 1 },
        _ => LeaseKind::Exclusive,
    }
}

/// Takes one key's lock, read or write (no downgrade), as `via` says.
pub(super) async fn take_one(
    l: &Locker,
    prim: Prim,
    o: &Opts,
    via: Via,
) -> Result<Taken, LockError> {
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
pub(super) async fn take(l: &Locker, prim: Prim, o: &Opts, via: Via) -> Result<Taken, LockError> {
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
pub(super) async fn free_for(l: &Locker, prim: Prim) -> bool {
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

pub(super) fn assert_config<T: std::fmt::Debug>(
    result: Result<T, LockError>,
    says: &str,
    case: &str,
) {
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

/// What keeps `prim` out, taken by `l` (another process): a writer keeps a reader out, a
/// reader a writer, one key of two `lock_all`; and what it is.
pub(super) async fn blocker(l: &Locker, prim: Prim, via: Via) -> (Taken, &'static str) {
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
