//! The program's `#[distributed_lock]` call sites, gathered by the linker, checked against a
//! locker before the first request: what a call site asks for that the locker cannot give (a
//! primitive its engine lacks, a profile it does not define, an unrenewed lease above the
//! engine's bound) is found at start-up, every call site at once, by the same resolution
//! every acquire makes. A configuration error a call site still meets at run time is logged
//! at `error` once per call site.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::__private::{Site, Spec, CALL_SITES};
use crate::error::LockError;
use crate::locker::Locker;

/// Which call sites a check covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sites {
    /// Every call site of the program.
    All,
    /// Those without `locker = ...`: they use the global default.
    OfTheDefault,
    /// Those that name their locker.
    Named,
}

impl Sites {
    fn covers(self, site: &Site) -> bool {
        match self {
            Sites::All => true,
            Sites::OfTheDefault => site.locker.is_none(),
            Sites::Named => site.locker.is_some(),
        }
    }
}

impl Locker {
    /// Checks every `#[distributed_lock]` of the program against this locker, as their
    /// acquires would resolve their options: an attribute that asks for what this locker
    /// cannot give (a primitive its engine lacks, such as `permits` on RedLock; a `profile`
    /// it does not define; a profile's `limit` on a lock that is not a semaphore; a lease
    /// above the engine's bound without the watchdog) is an error now, before the first
    /// request, rather than a `500 lock_config` on every call.
    ///
    /// [`set_global_default`](crate::set_global_default) runs this check for the
    /// attributes without `locker = ...`, and building a locker logs what it finds for the
    /// attributes that name theirs. Call it at start-up (or in a test) with each locker your
    /// attributes name.
    ///
    /// # Errors
    /// [`LockError::Config`] listing every call site at fault: its function, file and line,
    /// key template, and what is wrong.
    ///
    /// ```standalone_crate
    /// // A program of its own: the check sees every call site of the program it runs in.
    /// use leasehold::{distributed_lock, LockError, Locker};
    ///
    /// #[distributed_lock(key = "partner-api", permits = 3, profile = "partner")]
    /// async fn call_partner() -> Result<(), LockError> { Ok(()) }
    ///
    /// // This locker defines no profile "partner": every call would fail, so the check does.
    /// let err = Locker::in_memory().check_call_sites().unwrap_err().to_string();
    /// assert!(err.contains("call_partner") && err.contains("profile \"partner\""), "{err}");
    /// ```
    pub fn check_call_sites(&self) -> Result<(), LockError> {
        self.check_sites(Sites::All)
    }

    /// The check of [`check_call_sites`](Self::check_call_sites) over `which` call sites.
    pub(crate) fn check_sites(&self, which: Sites) -> Result<(), LockError> {
        refuse(self, "#[distributed_lock] call site", problems(self, which))
    }
}

/// `Ok` without problems; else the `Config` error listing them, one line each, for `what`
/// (call sites, route rules) that asks for what `locker` cannot give.
pub(crate) fn refuse(locker: &Locker, what: &str, problems: Vec<String>) -> Result<(), LockError> {
    if problems.is_empty() {
        return Ok(());
    }
    let one = problems.len() == 1;
    Err(LockError::config(format!(
        "{} {what}{} ask{} for what this locker ({}) cannot give:\n{}",
        problems.len(),
        if one { "" } else { "s" },
        if one { "s" } else { "" },
        locker.inner.store.describe(),
        problems.join("\n")
    )))
}

/// One line per call site among `which` whose options do not resolve against `locker`, in
/// source order.
fn problems(locker: &Locker, which: Sites) -> Vec<String> {
    let mut sites: Vec<(&Site, &Spec)> = CALL_SITES
        .iter()
        .filter_map(|spec| spec.site.as_ref().map(|site| (site, &**spec)))
        .filter(|(site, _)| which.covers(site))
        .collect();
    sites.sort_by_key(|(site, _)| (site.file, site.line, site.function));
    sites.dedup_by_key(|(site, _)| (site.file, site.line, site.function));
    sites
        .into_iter()
        .filter_map(|(site, spec)| {
            crate::__private::check(locker, spec)
                .err()
                .map(|e| format!("  - {}: {}", shown(site), message(&e)))
        })
        .collect()
}

/// Logs, at `error`, what the call sites that name their locker ask for that `locker`
/// cannot give: it may not be the locker they name, so building one does not fail for them.
pub(crate) fn log_named(locker: &Locker) {
    let problems = problems(locker, Sites::Named);
    if !problems.is_empty() {
        tracing::error!(
            target: "leasehold::config",
            locker = %locker.inner.store.describe(),
            "#[distributed_lock] call sites that name their locker ask for what this locker \
             cannot give (if one of them uses it, every call there fails):\n{}",
            problems.join("\n")
        );
    }
}

/// A call site as messages show it.
fn shown(site: &Site) -> String {
    format!(
        "`{}` ({}:{}, key {}{})",
        site.function,
        site.file,
        site.line,
        site.key,
        match site.locker {
            Some(locker) => format!(", locker = {locker}"),
            None => String::new(),
        }
    )
}

/// A `Config` error's message without its variant's wording.
fn message(e: &LockError) -> String {
    match e {
        LockError::Config { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// A call site, as the set of logged ones keeps it: file, line, function.
type SiteId = (&'static str, u32, &'static str);

/// The call sites whose configuration error was logged already.
static LOGGED: Mutex<Option<HashSet<SiteId>>> = Mutex::new(None);

/// Logs a call site's configuration error at `error`, the first time that call site meets
/// one: a deployment bug that every call repeats, which must reach the operator once, not
/// once per request (and not stay silent, as the caller's `500` does).
pub(crate) fn config_error(spec: &Spec, e: &LockError) {
    let (LockError::Config { .. }, Some(site)) = (e, spec.site.as_ref()) else {
        return;
    };
    let first = LOGGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert((site.file, site.line, site.function));
    if first {
        tracing::error!(
            target: "leasehold::config",
            function = site.function,
            file = site.file,
            line = site.line,
            key = site.key,
            error = %e,
            "a #[distributed_lock] call site cannot take its lock: every call there fails \
             with this configuration error (logged once per call site)"
        );
    }
}
