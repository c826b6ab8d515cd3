//! The ZooKeeper engine behind the store boundary: the recipe over ZooKeeper's driver, and
//! what only this engine answers (its session, its lease bound, renewals).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::{Ensemble, ZooKeeper};
use crate::error::LockError;
use crate::store::heard;
use crate::store::join_all;
use crate::store::sequenced::{patience, Contenders, Renews, Sequenced, SequencedEngine};
use crate::store::{Capabilities, Engine, Renewal, Renewed, Settings};

/// The ZooKeeper engine: the sequential-contender recipe over ZooKeeper's driver.
pub(crate) type ZooKeeperStore = Sequenced<ZooKeeper>;

impl Sequenced<ZooKeeper> {
    /// Connects a first session; fails with `Unavailable` when no server answers within the
    /// connect timeout, with `Config` when the connect string does not parse or the servers
    /// refuse its credentials.
    pub(crate) async fn connect(
        hosts: &str,
        session_timeout: Duration,
        settings: &Settings,
    ) -> Result<Self, LockError> {
        let ensemble = Ensemble::parse(hosts).map_err(LockError::config)?;
        let contenders = Contenders::default();
        let epoch = Arc::new(watch::channel(0).0);
        let driver = ZooKeeper::new(
            ensemble,
            session_timeout,
            settings,
            contenders.clone(),
            epoch.clone(),
        );
        driver.client().await?;
        Ok(Sequenced::new(
            driver,
            contenders,
            epoch,
            patience(settings),
        ))
    }
}

impl Renews for Sequenced<ZooKeeper> {
    /// A lease is renewed by proving its znode alive in this session: while connected, the
    /// session (and so the znode) lives on at the server.
    async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let (client, session) = self.driver.client().await?;
        let nodes = self.contenders.held(batch.iter().map(|r| r.token));
        let session_id = client.session_id().0;
        let limit = self.driver.settings.op_timeout;
        let checks = nodes.iter().map(|node| {
            let client = &client;
            async move {
                // Each renewal, and whether the server answered its check.
                let Some(node) = node else {
                    return (Renewed::No, false);
                };
                if node.session != session {
                    return (Renewed::No, false);
                }
                match tokio::time::timeout(limit, client.check_stat(&node.name)).await {
                    Ok(Ok(Some(stat))) if stat.ephemeral_owner == session_id => {
                        (Renewed::Yes, true)
                    }
                    Ok(Ok(_)) => (Renewed::No, true),
                    Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => {
                        (Renewed::No, false)
                    }
                    Ok(Err(_)) | Err(_) => (Renewed::Unknown, false),
                }
            }
        });
        let (renewed, answered): (Vec<Renewed>, Vec<bool>) =
            join_all(checks).await.into_iter().unzip();
        if !answered.contains(&true) {
            // Every lease is told from this process's own knowledge (none in the live
            // session, or its client gave the session up): the server said nothing.
            heard::answered_alone();
        }
        Ok(renewed)
    }
}

/// The lease bound is the session's: the session timeout the server granted the latest session (a lease no longer than it ends, on this process's clock, before the server can expire the session).
impl SequencedEngine for ZooKeeper {
    fn capabilities(&self) -> Capabilities {
        let granted = Duration::from_millis(self.granted.load(Ordering::Acquire));
        Engine::ZooKeeper.capabilities(granted)
    }

    fn engine(&self) -> Engine {
        Engine::ZooKeeper
    }

    fn link(&self) -> Option<watch::Receiver<bool>> {
        Some(self.link.subscribe())
    }

    /// Whether the root znode exists (which needs no permission on it), in the live session
    /// (a new one when the last ended: the engine is reconnected then).
    async fn probe(&self) -> Result<(), LockError> {
        let (client, _) = self.client().await?;
        self.bounded("did not answer", client.check_stat("/"))
            .await
            .map(|_| ())
    }
}
