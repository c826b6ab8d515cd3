//! What `#[distributed_lock]` expands to call: the attribute's settings (`Spec`, `Site`), the
//! acquire they describe and the body held under the lease. All the logic of the attribute
//! lives here, as ordinary tested code; the expansion only wires it up. Inside this crate the
//! route middleware (`web::middleware`, `web::route`) takes its locks through the same
//! functions, and the start-up check of call sites (`locker/sites.rs`) reads the `Site`s the
//! expansion registers. Not public API: the names here may change in any release, and outside
//! this crate only the attribute's expansion may use them.

pub use core::time::Duration;
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use tracing::Instrument;

use crate::error::LockError;
use crate::locker::{LockRequest, Locker};
use crate::primitives::guard::LockGuard;
use crate::primitives::multi::{MultiGuard, MultiLockRequest};
use crate::primitives::semaphore::{PermitGuard, SemaphoreRequest};
use crate::primitives::unfenced::UnfencedGuard;

/// What the lease holds: the lock, a reader's share, or permits of a semaphore.
pub use crate::store::kind::LeaseKind;

/// The attribute's options, resolved at compile time.
#[derive(Clone, Debug)]
pub struct Spec {
    /// `lease = "..."`, or the locker's default.
    pub lease: Option<Duration>,
    /// `wait = "..."`, or the locker's default.
    pub wait: Option<Duration>,
    /// `watchdog = ...`, or the locker's default.
    pub watchdog: Option<bool>,
    /// `on_lost = "..."`.
    pub on_lost: OnLost,
    /// `mode = "read"` ([`LeaseKind::Read`]), `permits = N` ([`LeaseKind::Permits`] of one
    /// permit), or the lock itself.
    pub kind: LeaseKind,
    /// `fair = true`: first come, first served across processes.
    pub fair: bool,
    /// `hold_at_least = "..."`: the lock stays taken at least this long after it was taken.
    pub hold_at_least: Option<Duration>,
    /// `profile = "..."`: the locker's named settings that override the ones above.
    pub profile: Option<Cow<'static, str>>,
    /// Where the attribute is written; `None` for a route rule's lock.
    pub site: Option<Site>,
}

/// Where an attribute is written, for the start-up check of every call site
/// ([`Locker::check_call_sites`]) and for the one log line of a call site's configuration
/// error.
#[derive(Clone, Copy, Debug)]
pub struct Site {
    /// The function, as `module::path::name`.
    pub function: &'static str,
    /// The source file.
    pub file: &'static str,
    /// The line of the attribute.
    pub line: u32,
    /// The key template (or the `keys = [...]` templates) as written.
    pub key: &'static str,
    /// `keys = [...]`: several locks at once.
    pub keys: bool,
    /// The `locker = ...` expression as written; `None`: the global default.
    pub locker: Option<&'static str>,
}

/// Every `#[distributed_lock]` of the program, gathered by the linker: each expansion adds
/// its [`Spec`] here, so a locker can check them all at start-up.
#[linkme::distributed_slice]
pub static CALL_SITES: [&'static Spec];

/// The linker's registry, for the expansion's `#[distributed_slice]` (through this path, so
/// users need no dependency of their own).
pub use linkme;

/// What happens to the body when the lease is lost (the same choice the web middleware
/// offers).
pub use crate::primitives::guard::OnLost;

/// Anything that can lend a [`Locker`]: `locker = ...` accepts these.
#[diagnostic::on_unimplemented(
    message = "`locker = ...` needs a `Locker`, `&Locker` or `Arc<Locker>`, found `{Self}`",
    label = "not a Locker",
    note = "pass the Locker itself, a reference to it, or an `Arc<Locker>`; or leave `locker` out to use the one installed with `leasehold::set_global_default`"
)]
pub trait AsLocker {
    /// The locker.
    fn as_locker(&self) -> &Locker;
}

impl AsLocker for Locker {
    fn as_locker(&self) -> &Locker {
        self
    }
}

impl AsLocker for Arc<Locker> {
    fn as_locker(&self) -> &Locker {
        self
    }
}

impl<T: AsLocker + ?Sized> AsLocker for &T {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

impl<T: AsLocker + ?Sized> AsLocker for &mut T {
    fn as_locker(&self) -> &Locker {
        (**self).as_locker()
    }
}

/// The locker of `locker = ...`.
pub fn locker_of<L: AsLocker + ?Sized>(locker: &L) -> Result<&Locker, LockError> {
    Ok(locker.as_locker())
}

/// The global default locker, or a `Config` error that says how to install one.
pub fn default_locker() -> Result<&'static Locker, LockError> {
    crate::locker::global::require_global_default()
}

/// Takes what the attribute's options describe and holds it as a `G`: the guard type the
/// expansion chose from the same options (a [`LockGuard`], an [`UnfencedGuard`] for
/// `fencing = false`, a [`PermitGuard`] for `permits`, a [`MultiGuard`] for `keys`).
pub async fn acquire<G: Acquire>(
    locker: Result<&Locker, LockError>,
    keys: G::Keys,
    spec: &Spec,
) -> Result<G, LockError> {
    let acquired = match locker {
        Ok(locker) => G::acquire(locker, keys, spec).await,
        Err(e) => Err(e),
    };
    acquired.inspect_err(|e| crate::locker::sites::config_error(spec, e))
}

/// [`acquire`] with `on_busy = "skip"`: `Ok(None)` (and an event saying the call was
/// skipped) when the lock is taken.
pub async fn try_acquire<G: Acquire>(
    locker: Result<&Locker, LockError>,
    keys: G::Keys,
    spec: &Spec,
) -> Result<Option<G>, LockError> {
    let tried = async {
        let locker = locker?;
        let shown = G::shown(locker, &keys);
        let guard = G::try_acquire(locker, keys, spec).await?;
        if guard.is_none() {
            crate::kernel::observe::skipped(&shown);
        }
        Ok(guard)
    };
    tried
        .await
        .inspect_err(|e| crate::locker::sites::config_error(spec, e))
}

/// A guard the attribute can take: how it is asked for, given the attribute's options.
pub trait Acquire: Holding {
    /// What names it: one key, or the keys of `keys = [...]`.
    type Keys: Send;
    /// Takes it, waiting as the options say.
    fn acquire<'a>(
        locker: &'a Locker,
        keys: Self::Keys,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Self, LockError>> + Send + 'a;
    /// Takes it if it is free now.
    fn try_acquire<'a>(
        locker: &'a Locker,
        keys: Self::Keys,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Option<Self>, LockError>> + Send + 'a;
    /// The keys as traces show them.
    fn shown(locker: &Locker, keys: &Self::Keys) -> String;
}

/// The request the attribute's options describe. `fair` first: the profile's settings
/// override the attribute's (`fair` among them).
fn request<'a>(locker: &'a Locker, key: String, spec: &Spec) -> LockRequest<'a> {
    let mut request = locker.lock(key).of_kind(spec.kind);
    if spec.fair {
        request = request.fair(true);
    }
    if let Some(lease) = spec.lease {
        request = request.lease(lease);
    }
    if let Some(wait) = spec.wait {
        request = request.wait(wait);
    }
    if let Some(on) = spec.watchdog {
        request = request.watchdog(on);
    }
    if let Some(hold) = spec.hold_at_least {
        request = request.hold_at_least(hold);
    }
    if let Some(profile) = &spec.profile {
        request = request.profile(profile.clone());
    }
    request
}

/// Whether a call site's options resolve against `locker` as its acquires would resolve them
/// (the engine's capabilities, the locker's profiles, the lease's bounds): the start-up check
/// of [`Locker::check_call_sites`] and the route rules' check, with no key and no round trip.
pub(crate) fn check(locker: &Locker, spec: &Spec) -> Result<(), LockError> {
    const KEY: &str = "leasehold:start-up-check";
    if spec.site.is_some_and(|site| site.keys) {
        request_all(locker, vec![KEY.to_owned()], spec).check()
    } else {
        request(locker, KEY.to_owned(), spec).options().map(drop)
    }
}

impl Acquire for LockGuard {
    type Keys = String;
    fn acquire<'a>(
        locker: &'a Locker,
        key: String,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Self, LockError>> + Send + 'a {
        request(locker, key, spec).acquire()
    }
    fn try_acquire<'a>(
        locker: &'a Locker,
        key: String,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Option<Self>, LockError>> + Send + 'a {
        request(locker, key, spec).try_acquire()
    }
    fn shown(locker: &Locker, key: &String) -> String {
        locker.inner.trace_keys.show(key)
    }
}

impl Acquire for UnfencedGuard {
    type Keys = String;
    fn acquire<'a>(
        locker: &'a Locker,
        key: String,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Self, LockError>> + Send + 'a {
        request(locker, key, spec).unfenced().acquire()
    }
    fn try_acquire<'a>(
        locker: &'a Locker,
        key: String,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Option<Self>, LockError>> + Send + 'a {
        request(locker, key, spec).unfenced().try_acquire()
    }
    fn shown(locker: &Locker, key: &String) -> String {
        locker.inner.trace_keys.show(key)
    }
}

impl Acquire for PermitGuard {
    type Keys = String;
    async fn acquire(locker: &Locker, key: String, spec: &Spec) -> Result<Self, LockError> {
        let (request, count) = semaphore(locker, key, spec)?;
        request.acquire_many(count).await
    }
    async fn try_acquire(
        locker: &Locker,
        key: String,
        spec: &Spec,
    ) -> Result<Option<Self>, LockError> {
        let (request, count) = semaphore(locker, key, spec)?;
        request.try_acquire_many(count).await
    }
    fn shown(locker: &Locker, key: &String) -> String {
        locker.inner.trace_keys.show(key)
    }
}

/// The semaphore request of a `permits = N` spec, and the permits it takes; a profile's
/// `limit` replaces `N`.
fn semaphore<'a>(
    locker: &'a Locker,
    key: String,
    spec: &Spec,
) -> Result<(SemaphoreRequest<'a>, u32), LockError> {
    let LeaseKind::Permits { limit, count } = spec.kind else {
        return Err(LockError::config(format!(
            "a permit guard was asked for a lease of kind {:?}",
            spec.kind
        )));
    };
    let mut request = request(locker, key, spec).into_semaphore(limit);
    if let Some(profile) = &spec.profile {
        request = request.profile(profile.clone());
    }
    Ok((request, count))
}

/// The request of `keys = [...]` for the attribute.
fn request_all<'a>(locker: &'a Locker, keys: Vec<String>, spec: &Spec) -> MultiLockRequest<'a> {
    let mut request = locker.lock_all(keys);
    if spec.fair {
        request = request.fair(true);
    }
    if let Some(lease) = spec.lease {
        request = request.lease(lease);
    }
    if let Some(wait) = spec.wait {
        request = request.wait(wait);
    }
    if let Some(on) = spec.watchdog {
        request = request.watchdog(on);
    }
    if let Some(profile) = &spec.profile {
        request = request.profile(profile.clone());
    }
    request
}

impl Acquire for MultiGuard {
    type Keys = Vec<String>;
    fn acquire<'a>(
        locker: &'a Locker,
        keys: Vec<String>,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Self, LockError>> + Send + 'a {
        request_all(locker, keys, spec).acquire()
    }
    fn try_acquire<'a>(
        locker: &'a Locker,
        keys: Vec<String>,
        spec: &'a Spec,
    ) -> impl Future<Output = Result<Option<Self>, LockError>> + Send + 'a {
        request_all(locker, keys, spec).try_acquire()
    }
    fn shown(locker: &Locker, keys: &Vec<String>) -> String {
        keys.iter()
            .map(|key| locker.inner.trace_keys.show(key))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a function with `on_busy = "skip"` returns in `Ok(...)` when it skipped its body:
/// `()` for `Result<(), E>`, `None` for `Result<Option<T>, E>`.
#[diagnostic::on_unimplemented(
    message = "`on_busy = \"skip\"` needs the function to return `Result<(), E>` or `Result<Option<T>, E>`, not `Result<{Self}, E>`",
    label = "a skipped call cannot make a `{Self}`",
    note = "return `Result<Option<{Self}>, E>` (a skipped call returns `Ok(None)`) or `Result<(), E>`"
)]
pub trait Skipped {
    /// The value of a skipped call.
    fn skipped() -> Self;
}

impl Skipped for () {
    fn skipped() -> Self {}
}

impl<T> Skipped for Option<T> {
    fn skipped() -> Self {
        None
    }
}

/// What the attribute holds while its body runs: one lock's guard, or a multi-lock's.
pub trait Holding: Sized + Send + Sync {
    /// Runs `fut` in the guard's re-entrancy scope, in its `leasehold.hold` span.
    fn hold_scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output>;
    /// Resolves when the guard is lost.
    fn when_lost(&self) -> impl Future<Output = ()> + Send + '_;
    /// Reports the loss (traces, metrics).
    fn tell_lost(&self, why: &'static str);
    /// The error for the loss.
    fn loss(&self) -> LockError;
    /// Releases every lock.
    fn give_back(self) -> impl Future<Output = Result<(), LockError>> + Send;
}

impl Holding for LockGuard {
    fn hold_scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        self.scope(fut).instrument(self.hold().span().clone())
    }
    fn when_lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.lost()
    }
    fn tell_lost(&self, why: &'static str) {
        self.hold().report_lost(why);
    }
    fn loss(&self) -> LockError {
        self.hold().lost_error()
    }
    fn give_back(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.release()
    }
}

impl Holding for UnfencedGuard {
    fn hold_scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        self.inner().hold_scope(fut)
    }
    fn when_lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.lost()
    }
    fn tell_lost(&self, why: &'static str) {
        self.inner().tell_lost(why);
    }
    fn loss(&self) -> LockError {
        self.inner().loss()
    }
    fn give_back(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.into_inner().release()
    }
}

impl Holding for PermitGuard {
    fn hold_scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        self.guard().hold_scope(fut)
    }
    fn when_lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.lost()
    }
    fn tell_lost(&self, why: &'static str) {
        self.guard().tell_lost(why);
    }
    fn loss(&self) -> LockError {
        self.guard().loss()
    }
    fn give_back(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.release()
    }
}

impl Holding for MultiGuard {
    fn hold_scope<F: Future>(&self, fut: F) -> impl Future<Output = F::Output> {
        // The first key's hold span: one span per body, as for a single lock.
        let span = self.guards()[0].hold().span().clone();
        self.scope(fut).instrument(span)
    }
    fn when_lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.lost()
    }
    fn tell_lost(&self, why: &'static str) {
        self.report_lost(why);
    }
    fn loss(&self) -> LockError {
        self.lost_error()
    }
    fn give_back(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.release()
    }
}

/// Runs the body in the guard's re-entrancy scope; with [`OnLost::Cancel`] the body is
/// dropped as soon as the lease is lost and the result is `Err(LockError::Lost { .. })`.
pub async fn hold<G: Holding, F: Future>(
    guard: &G,
    spec: &Spec,
    body: F,
) -> Result<F::Output, LockError> {
    let body = guard.hold_scope(body);
    match spec.on_lost {
        OnLost::Continue => Ok(body.await),
        OnLost::Cancel => {
            // Biased towards the loss: once the lease is lost, the body is not polled again,
            // not even for one more step.
            tokio::select! {
                biased;
                _ = guard.when_lost() => {
                    guard.tell_lost("the lease was lost while the body ran; the body was cancelled");
                    Err(guard.loss())
                }
                out = body => Ok(out),
            }
        }
    }
}

/// Releases the lock and hands back the outcome. A failed release after a finished body is
/// logged, not returned: the body's effects already happened. The expansion turns a
/// [`LockError`] into the function's error type itself, through the one conversion it also
/// uses for a failed acquire, so a missing `From<LockError>` is reported once, at the
/// function's error type (a bound here would be reported a second time, inside this crate).
pub async fn finish<G: Holding, T>(guard: G, out: Result<T, LockError>) -> Result<T, LockError> {
    if let Err(e) = guard.give_back().await {
        tracing::warn!(error = %e, "releasing the lock after the body failed");
    }
    out
}
