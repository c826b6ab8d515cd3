//! The etcd engine behind the store boundary: what it is made of, and the calls of
//! [`Store`] it answers.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::watch;

use super::contenders::Contenders;
use super::lease::LeaseSession;
use super::names::{key_of, reader_key_of};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    AcquireRequest, Admin, Attempt, Renewal, Renewed, Session, Settings, Store, StoreFuture,
    WakeSubscription,
};

pub(crate) struct EtcdStore {
    /// The endpoints without credentials, for messages.
    pub(super) shown: String,
    pub(super) client: etcd::Client,
    /// The TTL asked for: every bound of a session (see the module's docs).
    pub(super) ttl: Duration,
    /// The TTL etcd granted the latest lease, in seconds (0 before the first): told once when
    /// it differs from the one asked.
    pub(super) granted: AtomicI64,
    pub(super) settings: Settings,
    pub(super) current: Arc<tokio::sync::Mutex<Option<LeaseSession>>>,
    /// Bumped each time a lease ends (expired, given up): its keys are gone or going.
    pub(super) epoch: Arc<watch::Sender<u64>>,
    pub(super) contenders: Arc<Mutex<Contenders>>,
}

impl Store for EtcdStore {
    fn describe(&self) -> String {
        format!("etcd at {}", self.shown)
    }

    fn session(&self) -> Option<Session> {
        Some(Session::current(&self.epoch))
    }

    fn capabilities(&self) -> crate::store::Capabilities {
        crate::store::Engine::Etcd.capabilities(self.ttl)
    }

    fn acquire<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_once(req))
    }

    fn release<'a>(&'a self, keys: &'a LockKeys, token: &'a OwnerToken) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, key_of))
    }

    fn acquire_shared<'a>(&'a self, req: &'a AcquireRequest<'_>) -> StoreFuture<'a, Attempt> {
        Box::pin(self.acquire_shared_once(req))
    }

    fn release_shared<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.release_once(keys, token, reader_key_of))
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(self.renew_all(batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(self.subscribe_once(keys))
    }

    fn withdraw(&self, keys: &LockKeys) {
        if let Some(contender) = self.forget_waiting(keys.lock()) {
            self.delete_later(contender);
        }
    }

    fn admin(&self) -> Result<&dyn Admin, LockError> {
        Ok(self)
    }
}
