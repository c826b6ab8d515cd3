//! The health monitor of a locker: a task beside its watchdog that feeds its [`Health`] what
//! no call brings: the end of a session (its epoch moves on: lost), the engine's own reports
//! of its connection ([`Info::link`](crate::store::Info::link)), and, while the engine is
//! suspended or lost, one probe a second ([`Store::probe`](crate::store::Store::probe)), so that a locker without traffic
//! notices the engine come back.
//! It ends with the locker (it holds the store and the health only weakly) or when the locker
//! is closed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::calls::Calls;
use super::state::{EngineState, StateLog};
use super::Health;
use crate::error::LockError;

/// How often the monitor probes an engine that is suspended or lost.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Starts the monitor of `store` (the locker's, whose calls feed `health`) on `runtime`,
/// unless the store always answers.
pub(crate) fn spawn(runtime: &tokio::runtime::Handle, store: &Arc<Calls>, health: &Arc<Health>) {
    if store.always_answers() {
        return;
    }
    // Subscribed now, not when the task first runs: nothing that happens in between is missed.
    let log = health.log();
    let mut link = store.info().link;
    // A link down already (a lazily connected store's, until it connects) suspends it now;
    // one that is up tells nothing new.
    if link.as_mut().is_some_and(|l| !*l.borrow_and_update()) {
        report_link(health, false);
    }
    let epoch = store.session().map(|s| s.epoch());
    runtime.spawn(run(
        Arc::downgrade(store),
        Arc::downgrade(health),
        log,
        link,
        epoch,
    ));
}

type Probe = Pin<Box<dyn Future<Output = Result<(), LockError>> + Send>>;

async fn run(
    store: Weak<Calls>,
    health: Weak<Health>,
    mut log: watch::Receiver<StateLog>,
    mut link: Option<watch::Receiver<bool>>,
    mut epoch: Option<watch::Receiver<u64>>,
) {
    let mut probe: Option<Probe> = None;
    let mut next_probe: Option<Instant> = None;
    loop {
        let state = log.borrow_and_update().now;
        if state == EngineState::Closed {
            return;
        }
        if state.is_connected() {
            // An answer came meanwhile: the probe in flight tells nothing more.
            probe = None;
            next_probe = None;
        } else if probe.is_none() && next_probe.is_none() {
            next_probe = Some(Instant::now() + PROBE_EVERY);
        }
        if epoch.is_none() {
            // A lazily connected store has a session once it connected.
            let Some(store) = store.upgrade() else { return };
            epoch = store.session().map(|s| s.epoch());
        }
        tokio::select! {
            changed = log.changed() => {
                if changed.is_err() {
                    return; // the locker is gone
                }
            }
            up = changed(&mut link) => match up {
                Some(up) => {
                    let Some(health) = health.upgrade() else { return };
                    report_link(&health, up);
                }
                None => link = None,
            },
            ended = changed(&mut epoch) => match ended {
                Some(_) => {
                    let Some(health) = health.upgrade() else { return };
                    health.lost("the session the leases were granted over ended");
                }
                None => epoch = None,
            },
            () = sleep_until(next_probe) => {
                next_probe = None;
                let Some(store) = store.upgrade() else { return };
                // Through the locker's store: its outcome reaches the health like a call's.
                probe = Some(Box::pin(async move { store.call(|store| store.probe()).await }));
            }
            _ = finish(&mut probe) => {
                probe = None;
                next_probe = Some(Instant::now() + PROBE_EVERY);
            }
        }
    }
}

/// The engine said its connection is up or down.
fn report_link(health: &Health, up: bool) {
    let now = Instant::now();
    match up {
        true => health.answered(now),
        false => health.unanswered(
            now,
            &"the engine's own connection is down (its session, keep-alives or listening \
              connection)",
        ),
    }
}

/// The next value of `rx`, if there is one; `None` once its sender is gone. Pending forever
/// without a receiver.
async fn changed<T: Clone>(rx: &mut Option<watch::Receiver<T>>) -> Option<T> {
    match rx.as_mut() {
        Some(rx) => match rx.changed().await {
            Ok(()) => Some(rx.borrow_and_update().clone()),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn finish(probe: &mut Option<Probe>) -> Result<(), LockError> {
    match probe.as_mut() {
        Some(probe) => probe.await,
        None => std::future::pending().await,
    }
}
