//! The etcd engine behind the store boundary: the recipe over etcd's driver, and what only
//! this engine answers (its lease, renewals vouched for by keep-alives).

use std::sync::Arc;
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::watch;

use super::Etcd;
use crate::error::LockError;
use crate::store::heard;
use crate::store::sequenced::{
    patience, Contender, Contenders, Renews, Sequenced, SequencedEngine,
};
use crate::store::{Capabilities, Engine, Renewal, Renewed, Settings};

/// How many reads one renewal transaction carries (etcd refuses more than 128 by default).
const RENEW_CHUNK: usize = 64;

/// The etcd engine: the sequential-contender recipe over etcd's driver.
pub(crate) type EtcdStore = Sequenced<Etcd>;

impl Sequenced<Etcd> {
    /// Connects and grants a first lease; fails with `Unavailable` when no endpoint answers
    /// within the connect timeout, with `Config` when etcd refuses the credentials.
    pub(crate) async fn connect(
        endpoints: &[String],
        session_timeout: Duration,
        settings: &Settings,
    ) -> Result<Self, LockError> {
        let contenders = Contenders::default();
        let epoch = Arc::new(watch::channel(0).0);
        let driver = Etcd::connect(
            endpoints,
            session_timeout,
            settings,
            contenders.clone(),
            epoch.clone(),
        )
        .await?;
        Ok(Sequenced::new(
            driver,
            contenders,
            epoch,
            patience(settings),
        ))
    }
}

impl Renews for Sequenced<Etcd> {
    /// A lease is renewed when its key is still ours and a keep-alive sent with the check was
    /// acknowledged: a put does not refresh an etcd lease, a keep-alive does.
    async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let session = {
            let current = self.driver.current.lock().await;
            current
                .as_ref()
                .filter(|c| !c.beats.is_closed())
                .map(|c| c.session)
        };
        let mine: Vec<Option<Contender<i64>>> = self
            .contenders
            .held(batch.iter().map(|r| r.token))
            .into_iter()
            .map(|c| c.filter(|c| Some(c.session) == session))
            .collect();
        let Some(session) = session else {
            // The session is gone, and every lease with it: told without asking etcd.
            heard::answered_alone();
            return Ok(vec![Renewed::No; batch.len()]);
        };
        let present: Vec<&Contender<i64>> = mine.iter().flatten().collect();
        let reads = async {
            let mut found = Vec::with_capacity(present.len());
            for chunk in present.chunks(RENEW_CHUNK) {
                let txn = etcd::Txn::new().and_then(
                    chunk
                        .iter()
                        .map(|c| {
                            etcd::TxnOp::get(
                                c.name.clone(),
                                Some(etcd::GetOptions::new().with_keys_only()),
                            )
                        })
                        .collect::<Vec<_>>(),
                );
                let answer = self
                    .driver
                    .bounded("refused a read", |mut c| {
                        let txn = txn.clone();
                        async move { c.txn(txn).await }
                    })
                    .await?;
                for (c, r) in chunk.iter().zip(answer.op_responses()) {
                    let ours = match r {
                        etcd::TxnOpResponse::Get(get) => get
                            .kvs()
                            .first()
                            .is_some_and(|kv| kv.create_revision() == c.order),
                        _ => false,
                    };
                    found.push(ours);
                }
            }
            Ok::<_, LockError>(found)
        };
        let (found, alive) = tokio::join!(reads, self.driver.kept_alive(session));
        let found = found?;
        if present.is_empty() && !alive {
            // No read was sent and no keep-alive acknowledged: etcd said nothing.
            heard::answered_alone();
        }
        let mut found = found.into_iter();
        Ok(mine
            .iter()
            .map(|c| match c {
                None => Renewed::No,
                Some(_) => match found.next() {
                    Some(false) => Renewed::No,
                    Some(true) if alive => Renewed::Yes,
                    _ => Renewed::Unknown,
                },
            })
            .collect())
    }
}

/// The lease bound is the session's: the TTL of the locker's etcd lease.
impl SequencedEngine for Etcd {
    fn capabilities(&self) -> Capabilities {
        Engine::Etcd.capabilities(self.ttl)
    }

    fn engine(&self) -> Engine {
        Engine::Etcd
    }

    fn link(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.link.subscribe())
    }

    /// A keep-alive of the live lease (a new lease when the last ended), acknowledged.
    async fn probe(&self) -> Result<(), LockError> {
        let (_, session) = self.lease().await?;
        if self.kept_alive(session).await {
            return Ok(());
        }
        Err(LockError::unavailable(
            format!(
                "etcd at {} did not acknowledge a keep-alive within {:?}",
                self.shown, self.settings.op_timeout
            ),
            None,
        ))
    }
}
