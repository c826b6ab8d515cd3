//! Starting without the engine: a [`LazyStore`] stands in for an engine that is not
//! connected yet. It connects in the background, from the moment the locker is built, and
//! tries again with backoff until the engine answers; meanwhile every call fails at once with
//! [`LockError::Unavailable`] (503 over HTTP) saying why (an acquire that waits tries again
//! until its wait ends, as in any outage), and the first success is logged.
//! Once connected it only forwards: one atomic read per call. Its link
//! ([`Store::link`]) is down until then, and the engine's own once connected, so that the
//! locker's state is suspended until the first connection.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{
    AcquireRequest, Admin, Attempt, Deployment, Info, LeaderRecords, Leave, PermitState, Renewal,
    Renewed, Settings, Store, StoreFuture, WakeSubscription,
};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::Session;

/// The first pause between connection attempts, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

struct State {
    deployment: Deployment,
    store: OnceLock<Arc<dyn Store>>,
    /// Why the last attempt failed, for the callers meanwhile.
    last_error: Mutex<Option<String>>,
    /// A refusal that retrying will not mend (credentials, a missing database): callers get
    /// it as it is.
    refused: Mutex<Option<String>>,
    /// False until connected; then the engine's own link, or true for an engine without one.
    link: watch::Sender<bool>,
}

pub(crate) struct LazyStore {
    state: Arc<State>,
}

impl LazyStore {
    /// Starts connecting `deployment` in the background (on the current Tokio runtime).
    pub(crate) fn start(deployment: Deployment, settings: Settings) -> LazyStore {
        let state = Arc::new(State {
            deployment,
            store: OnceLock::new(),
            last_error: Mutex::new(None),
            refused: Mutex::new(None),
            link: watch::channel(false).0,
        });
        tokio::spawn(connect(Arc::downgrade(&state), settings));
        LazyStore { state }
    }

    fn store(&self) -> Result<&Arc<dyn Store>, LockError> {
        if let Some(store) = self.state.store.get() {
            return Ok(store);
        }
        if let Some(message) = self.state.refused.lock().unwrap().clone() {
            return Err(LockError::config(message));
        }
        let why = self.state.last_error.lock().unwrap().clone();
        Err(LockError::unavailable(
            match why {
                Some(why) => format!("not connected to the lock engine yet: {why}"),
                None => "not connected to the lock engine yet (the first attempt is under way)"
                    .to_owned(),
            },
            None,
        ))
    }
}

/// Tries to connect until it works or the store is dropped.
async fn connect(state: Weak<State>, settings: Settings) {
    let mut pause = RETRY_FIRST;
    loop {
        let Some(live) = state.upgrade() else { return };
        let deployment = live.deployment.clone();
        drop(live);
        let attempt =
            tokio::time::timeout(settings.connect_timeout, deployment.connect(&settings)).await;
        let Some(live) = state.upgrade() else { return };
        match attempt {
            Ok(Ok(store)) => {
                tracing::info!(engine = %store.describe(), "connected to the lock engine");
                let link = store.link();
                let _ = live.store.set(store);
                match link {
                    Some(link) => {
                        drop(live);
                        forward_link(state, link).await;
                    }
                    None => {
                        live.link.send_replace(true);
                    }
                }
                return;
            }
            Ok(Err(e)) => {
                let text = e.to_string();
                tracing::debug!(error = %text, "the lock engine did not answer; trying again");
                if matches!(e, LockError::Config { .. }) {
                    *live.refused.lock().unwrap() = Some(text.clone());
                }
                *live.last_error.lock().unwrap() = Some(text);
            }
            Err(_) => {
                *live.last_error.lock().unwrap() = Some(format!(
                    "no answer within the connect timeout ({:?})",
                    settings.connect_timeout
                ));
            }
        }
        drop(live);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// Copies the connected engine's link into the lazy store's, until either is gone.
async fn forward_link(state: Weak<State>, mut link: watch::Receiver<bool>) {
    loop {
        let up = *link.borrow_and_update();
        match state.upgrade() {
            Some(live) => live.link.send_replace(up),
            None => return,
        };
        if link.changed().await.is_err() {
            return;
        }
    }
}

fn not_yet<'a, T: Send + 'a>(e: LockError) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(e)))
}

impl Store for LazyStore {
    /// The engine's once connected (a lease bound can change with its sessions); before,
    /// the deployment's, which are the same table's.
    fn info(&self) -> Info {
        match self.state.store.get() {
            Some(store) => store.info(),
            None => {
                let deployment = &self.state.deployment;
                Info::of(
                    deployment.engine(),
                    deployment.capabilities(),
                    format!("{deployment:?} (not connected yet)"),
                )
            }
        }
    }

    fn session(&self) -> Option<Session> {
        self.state.store.get().and_then(|s| s.session())
    }

    fn link(&self) -> Option<watch::Receiver<bool>> {
        Some(self.state.link.subscribe())
    }

    fn probe(&self) -> StoreFuture<'_, ()> {
        match self.store() {
            Ok(store) => store.probe(),
            Err(e) => not_yet(e),
        }
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        match self.store() {
            Ok(store) => store.acquire(req),
            Err(e) => not_yet(e),
        }
    }

    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        kind: LeaseKind,
        valid_until: tokio::time::Instant,
    ) -> StoreFuture<'a, bool> {
        match self.store() {
            Ok(store) => store.release(keys, token, kind, valid_until),
            Err(e) => not_yet(e),
        }
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        match self.store() {
            Ok(store) => store.renew(batch),
            Err(e) => not_yet(e),
        }
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        match self.store() {
            Ok(store) => store.subscribe(keys),
            Err(e) => not_yet(e),
        }
    }

    /// Nothing waited before the engine connected, so nothing to leave then.
    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        if let Some(store) = self.state.store.get() {
            store.leave(keys, place);
        }
    }

    fn inspect_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        match self.store() {
            Ok(store) => store.inspect_permits(keys),
            Err(e) => not_yet(e),
        }
    }

    fn takes_all_at_once(&self, keys: &[&LockKeys]) -> bool {
        self.state
            .store
            .get()
            .is_some_and(|s| s.takes_all_at_once(keys))
    }

    fn acquire_all<'a>(
        &'a self,
        reqs: &'a [AcquireRequest<'_>],
    ) -> StoreFuture<'a, Option<Vec<u64>>> {
        match self.store() {
            Ok(store) => store.acquire_all(reqs),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    /// A lease to hand over was granted by the engine, so it is connected.
    fn hand_over<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> Option<StoreFuture<'a, Option<u64>>> {
        self.state.store.get()?.hand_over(keys, token)
    }

    /// Nothing was sent before the engine connected, so nothing to settle then.
    fn settle<'a>(&'a self, token: &'a OwnerToken) -> Option<super::Settling<'a>> {
        self.state.store.get()?.settle(token)
    }

    fn admin(&self) -> Result<&dyn Admin, LockError> {
        self.store()?.admin()
    }

    fn describe_locker<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a crate::store::identity::Identity,
    ) -> StoreFuture<'a, ()> {
        match self.store() {
            Ok(store) => store.describe_locker(prefix, identity),
            Err(e) => not_yet(e),
        }
    }

    fn leader_records(&self) -> Result<&dyn LeaderRecords, LockError> {
        self.store()?.leader_records()
    }
}
