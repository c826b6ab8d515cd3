//! Starting without the engine: a [`LazyStore`] connects the engine in the background, from
//! the moment the locker is built, and tries again with backoff until the engine answers,
//! then hands out the connected store; meanwhile it says why there is none
//! ([`LockError::Unavailable`], 503 over HTTP; an acquire that waits tries again until its
//! wait ends, as in any outage), and the first success is logged. It is a connector, not a
//! store: the locker asks its [`Connection`] for the engine at each call (one atomic read once
//! connected). Its link is down until then, and the engine's own once connected, so that the
//! locker's state is suspended until the first connection.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Deployment, Info, Settings, Store};
use crate::error::LockError;

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

/// An engine connected in the background ([`start`](Self::start)).
pub(crate) struct LazyStore {
    state: Arc<State>,
}

/// The engine of a locker: connected when it was built, or connecting in the background.
pub(crate) enum Connection {
    /// Connected.
    Ready(Arc<dyn Store>),
    /// Connecting, or connected since.
    Lazy(LazyStore),
}

impl Connection {
    /// The engine, once connected.
    pub(crate) fn connected(&self) -> Option<&Arc<dyn Store>> {
        match self {
            Connection::Ready(store) => Some(store),
            Connection::Lazy(lazy) => lazy.state.store.get(),
        }
    }

    /// The engine, or why there is none yet: [`LockError::Unavailable`] saying why the last
    /// attempt failed, or the [`LockError::Config`] refusal that retrying will not mend.
    pub(crate) fn store(&self) -> Result<&Arc<dyn Store>, LockError> {
        match self {
            Connection::Ready(store) => Ok(store),
            Connection::Lazy(lazy) => lazy.store(),
        }
    }

    /// The engine's, once connected (a lease bound can change with its sessions); before,
    /// the deployment's, which are the same table's. A lazily connected engine never
    /// answers alone: its connection is watched.
    pub(crate) fn info(&self) -> Info {
        match self {
            Connection::Ready(store) => store.info(),
            Connection::Lazy(lazy) => Info {
                link: Some(lazy.state.link.subscribe()),
                ..match lazy.state.store.get() {
                    Some(store) => Info {
                        always_answers: false,
                        ..store.info()
                    },
                    None => {
                        let deployment = &lazy.state.deployment;
                        Info::of(
                            deployment.engine(),
                            deployment.capabilities(),
                            format!("{deployment:?} (not connected yet)"),
                        )
                    }
                }
            },
        }
    }

    /// What the engine's own background work sees of its connection ([`Info::link`]); a
    /// lazily connected engine's is down until it connects, and the engine's own then.
    pub(crate) fn link(&self) -> Option<watch::Receiver<bool>> {
        self.info().link
    }
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

    /// The connected engine, or why there is none yet.
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
                let link = store.info().link;
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
