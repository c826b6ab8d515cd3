//! Building a store: the schema checked (or created) on a first connection, the listener
//! started, every pooled connection opened, and the listener up before the first call.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::conn::{connector, Shared};
use super::listener::listen;
use super::pool::{Pool, POOL};
use super::releases::{Calls, Releases};
use super::url::parse;
use super::wakes::Wakes;
use super::PostgresStore;
use crate::error::LockError;
use crate::store::Settings;

impl PostgresStore {
    /// Connects, creates the schema if it is missing, and starts listening for releases;
    /// fails with `Unavailable` when the server does not answer within the connect timeout,
    /// with `Config` when it refuses the credentials, the database or the schema.
    pub(crate) async fn connect(url: &str, settings: &Settings) -> Result<Self, LockError> {
        let target = parse(url)?;
        let shared = Arc::new(Shared {
            tls: connector(&target.tls)?,
            config: target.config,
            shown: target.shown,
            settings: settings.clone(),
            wakes: Wakes::default(),
        });
        let (mut first, driver) = shared.open(None).await?;
        let limit = settings.connect_timeout;
        // The check that the schema is there answers within the connect timeout; creating it
        // (once per database) may take longer: see `SCHEMA_CREATION`.
        let creating = limit.max(super::schema::SCHEMA_CREATION);
        match tokio::time::timeout(creating, shared.ensure_schema(&mut first)).await {
            Ok(result) => result?,
            Err(_) => return Err(shared.late(creating)),
        }
        drop(first);
        driver.abort();
        let (up_tx, up_rx) = watch::channel(false);
        let listener = tokio::spawn(listen(Arc::downgrade(&shared), up_tx)).abort_handle();
        let pool = Arc::new(Pool {
            shared: shared.clone(),
            slots: (0..POOL).map(|_| Arc::default()).collect(),
            next: AtomicUsize::new(0),
            unsettled: Default::default(),
        });
        let contender: Arc<str> = settings.locker_id.clone().into();
        let store = PostgresStore {
            releases: Releases::new(
                Calls::new(pool.clone(), contender.clone()),
                settings.op_timeout,
            ),
            pool,
            shared,
            listening: up_rx,
            listener,
            contender,
            queued: Mutex::default(),
        };
        // Every connection for lock calls now, side by side: a bad URL fails here rather than
        // later (the first one's error), and the first burst of acquires does not wait behind
        // connections being opened, which would let a request that came later reach the line
        // of waiters first. The others open again on use if they failed.
        let opened = crate::store::join_all((0..POOL).map(|i| store.pool.conn(i))).await;
        if let Some(Err(e)) = opened.into_iter().next() {
            return Err(e);
        }
        store.wait_listening(limit).await?;
        Ok(store)
    }
}
