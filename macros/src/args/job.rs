//! The options of singleton jobs: `on_busy`, `hold_at_least` and `hold_at_most`, their values
//! and how they combine with the other options (checked once all options are read).

use std::time::Duration;

use syn::{Expr, LitStr};

use super::{duration, string, Args, MIN_LEASE};

/// What a call does when another holder has the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnBusy {
    /// Wait for it up to `wait`, then fail with `LockError::Busy` (the default).
    Wait,
    /// Return at once without running the body: `Ok(())` or `Ok(None)`.
    Skip,
}

/// The singleton-job options as written, with the literal of each for errors.
#[derive(Default)]
pub(crate) struct Job {
    pub on_busy: Option<(OnBusy, LitStr)>,
    pub hold_at_least: Option<(Duration, LitStr)>,
    pub hold_at_most: Option<(Duration, LitStr)>,
}

impl Job {
    /// Whether a busy lock skips the call.
    pub(crate) fn skips(&self) -> bool {
        matches!(self.on_busy, Some((OnBusy::Skip, _)))
    }

    /// The literal of `on_busy = "skip"`, where errors about the skip point.
    pub(crate) fn skip_literal(&self) -> Option<&LitStr> {
        match &self.on_busy {
            Some((OnBusy::Skip, lit)) => Some(lit),
            _ => None,
        }
    }

    /// `hold_at_least`, if given.
    pub(crate) fn hold_at_least(&self) -> Option<Duration> {
        self.hold_at_least.as_ref().map(|(d, _)| *d)
    }
}

pub(crate) fn on_busy(value: &Expr) -> syn::Result<(OnBusy, LitStr)> {
    let lit = string(value, "on_busy", "\"skip\"")?;
    match lit.value().as_str() {
        "skip" => Ok((OnBusy::Skip, lit)),
        "wait" => Ok((OnBusy::Wait, lit)),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`on_busy = {other:?}` is not an action: write \"skip\" (return at once without \
                 running the body when the lock is taken) or \"wait\" (wait up to `wait`, then \
                 fail with `LockError::Busy`; the default)"
            ),
        )),
    }
}

pub(crate) fn hold_at_least(value: &Expr) -> syn::Result<(Duration, LitStr)> {
    let (lit, hold) = duration(value, "hold_at_least")?;
    if hold.is_zero() {
        return Err(syn::Error::new(
            lit.span(),
            "`hold_at_least` must be longer than zero: it keeps the lock taken that long after \
             the body started; write e.g. \"30s\", or leave it out to release the lock as soon \
             as the body ends",
        ));
    }
    Ok((hold, lit))
}

pub(crate) fn hold_at_most(value: &Expr) -> syn::Result<(Duration, LitStr)> {
    let (lit, hold) = duration(value, "hold_at_most")?;
    if hold < MIN_LEASE {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`hold_at_most = {:?}` is shorter than the shortest lease, {MIN_LEASE:?}: it is \
                 the lease the job runs under, never renewed; write the longest the job may \
                 run, e.g. \"10m\"",
                lit.value()
            ),
        ));
    }
    Ok((hold, lit))
}

/// Checks how the job options combine with the others (`given` names every option written)
/// and turns `hold_at_most` into the lease without renewal it stands for.
pub(crate) fn settle(args: &mut Args, given: &[&'static str]) {
    let job = std::mem::take(&mut args.job);
    let has = |name: &str| given.contains(&name);
    if let (Some(lit), true) = (job.skip_literal(), has("wait")) {
        args.errors.push(syn::Error::new(
            lit.span(),
            "`on_busy = \"skip\"` never waits: a call that finds the lock taken returns at once \
             without running the body, so `wait` cannot be given with it; remove `wait` (or \
             write `on_busy = \"wait\"` to wait for the lock)",
        ));
    }
    if let Some((hold, lit)) = &job.hold_at_most {
        if has("lease") {
            args.errors.push(syn::Error::new(
                lit.span(),
                "`hold_at_most` is the job's lease, never renewed, so `lease` cannot be given \
                 with it: remove `lease` (or remove `hold_at_most` for a lease that the \
                 watchdog renews while the body runs)",
            ));
        }
        if has("watchdog") {
            args.errors.push(syn::Error::new(
                lit.span(),
                "`hold_at_most` turns the watchdog off (its lease is never renewed), so \
                 `watchdog` cannot be given with it: remove `watchdog` (or remove \
                 `hold_at_most` and write `lease = \"...\"` for a renewed lease)",
            ));
        }
        if !has("lease") && !has("watchdog") {
            args.lease = Some(*hold);
            args.watchdog = Some(false);
        }
    }
    if let Some((hold, lit)) = &job.hold_at_least {
        if has("keys") {
            args.errors.push(syn::Error::new(
                lit.span(),
                "`hold_at_least` takes one `key`: a job that holds several keys at once cannot \
                 keep them after it ended; lock one key for the job (e.g. `key = \"job:<name>\"`)",
            ));
        }
        if let Some((at_most, at_most_lit)) = &job.hold_at_most {
            if hold > at_most {
                args.errors.push(syn::Error::new(
                    lit.span(),
                    format!(
                        "`hold_at_least = {:?}` is longer than `hold_at_most = {:?}`: the lock \
                         ends before the hold would; shorten `hold_at_least` or lengthen \
                         `hold_at_most`",
                        lit.value(),
                        at_most_lit.value()
                    ),
                ));
            }
        } else if let (Some(lease), Some(false)) = (args.lease, args.watchdog) {
            if *hold > lease {
                args.errors.push(syn::Error::new(
                    lit.span(),
                    format!(
                        "`hold_at_least = {:?}` is longer than the lease ({lease:?}), which \
                         `watchdog = false` does not renew: the lock ends before the hold \
                         would; shorten `hold_at_least`, lengthen `lease`, or turn the \
                         watchdog on",
                        lit.value()
                    ),
                ));
            }
        }
    }
    args.job = job;
}
