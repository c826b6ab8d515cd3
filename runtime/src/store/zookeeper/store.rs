//! The ZooKeeper engine behind the store boundary: what it is made of, and the calls of
//! [`Store`] it answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::contend::Nodes;
use super::names::{CHILD, READER};
use super::session::Connection;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Admin, Attempt, Renewal, Renewed, Session, Settings, Store, StoreFuture,
    WakeSubscription,
};

pub(crate) struct ZooKeeperStore {
    pub(super) hosts: String,
    /// The session timeout asked for; the server may grant another (see `granted`).
    pub(super) session_timeout: Duration,
    /// The session timeout the server granted the latest session, in milliseconds (the unit
    /// ZooKeeper negotiates in): the lease bound. The asked one until a first session opened.
    pub(super) granted: AtomicU64,
    pub(super) settings: Settings,
    pub(super) current: Arc<tokio::sync::Mutex<Option<Connection>>>,
    /// Bumped each time a session ends (expired, closed): its ephemeral znodes are gone.
    pub(super) epoch: Arc<watch::Sender<u64>>,
    pub(super) nodes: Arc<Mutex<Nodes>>,
}

impl Store for ZooKeeperStore {
    fn describe(&self) -> String {
        format!("zookeeper at {}", self.hosts)
    }

    fn session(&self) -> Option<Session> {
        Some(Session::current(&self.epoch))
    }

    /// Leases are bounded by the session timeout the server granted the latest session: a
    /// lease no longer than it ends, on this process's clock, before the server can expire
    /// the session.
    fn capabilities(&self) -> crate::store::Capabilities {
        let granted = Duration::from_millis(self.granted.load(Ordering::Acquire));
        crate::store::Engine::ZooKeeper.capabilities(granted)
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_once(req))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, CHILD))
    }

    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_shared_once(req))
    }

    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, READER))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    fn withdraw(&self, keys: &LockKeys) {
        if let Some(node) = self.forget_waiting(keys.lock()) {
            self.delete_later(node);
        }
    }

    fn admin(&self) -> Result<&dyn Admin, LockError> {
        Ok(self)
    }
}
