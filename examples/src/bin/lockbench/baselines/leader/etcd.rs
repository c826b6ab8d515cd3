//! etcd's own election API (`v3election`: Campaign, Resign, Observe), through the client the
//! engine uses (`etcd_client`'s `campaign`, `resign`, `observe`). Each candidate is a client
//! with a lease of its own kept alive, as ours holds one per locker; the term is the leader
//! key's create revision.

use etcd_client as etcd;

use crate::baselines::EtcdLockService;
use crate::scenarios::leader::handover::Election;

/// Its name in the report.
pub(crate) const ETCD_ELECTION: &str = "etcd's election API (etcd-client campaign/resign/observe)";

/// The election `name` on the server at `endpoint`.
pub(crate) struct EtcdElection {
    endpoint: String,
    name: String,
}

impl EtcdElection {
    pub(crate) fn new(endpoint: &str, name: String) -> EtcdElection {
        EtcdElection {
            endpoint: endpoint.to_owned(),
            name: format!("bench-raw-leader/{name}"),
        }
    }
}

impl Election for EtcdElection {
    type Candidate = EtcdLockService;
    type Leadership = etcd::LeaderKey;
    type Observer = etcd::ObserveStream;

    async fn candidate(&self) -> EtcdLockService {
        EtcdLockService::connect(&self.endpoint).await
    }

    async fn campaign<'a>(
        &'a self,
        session: &'a EtcdLockService,
        identity: &'a str,
    ) -> (etcd::LeaderKey, u64) {
        let mut elected = session
            .client()
            .campaign(self.name.as_str(), identity, session.lease())
            .await
            .expect("campaign");
        let key = elected.take_leader().expect("a leader key");
        let term = key.rev() as u64;
        (key, term)
    }

    async fn resign<'a>(&'a self, session: &'a EtcdLockService, key: etcd::LeaderKey) {
        let options = etcd::ResignOptions::new().with_leader(key);
        session
            .client()
            .resign(Some(options))
            .await
            .expect("resign");
    }

    /// The session's lease revoked, as etcd's own sessions close (its keys go with it).
    async fn end_session(&self, session: EtcdLockService, _: etcd::LeaderKey) {
        let (mut client, lease) = (session.client(), session.lease());
        drop(session); // its keep-alive stops
        client.lease_revoke(lease).await.expect("revoke");
    }

    async fn observer(&self) -> etcd::ObserveStream {
        let mut client = etcd::Client::connect([self.endpoint.as_str()], None)
            .await
            .expect("etcd client");
        client.observe(self.name.as_str()).await.expect("observe")
    }

    async fn next_leader<'a>(&'a self, stream: &'a mut etcd::ObserveStream, last: u64) -> u64 {
        loop {
            let message = stream.message().await.expect("observe").expect("a leader");
            if let Some(kv) = message.kv() {
                let term = kv.create_revision() as u64;
                if term != last {
                    return term;
                }
            }
        }
    }
}
