//! An etcd semaphore written with the client the engine uses (etcd-client); etcd has no
//! semaphore API of its own. Each acquisition puts a key under the semaphore's prefix,
//! attached to the process's lease (kept alive, as ours), and holds once its key is among
//! the first [`PERMITS`] of the prefix sorted by create revision; until then it waits for a
//! delete under the prefix, which one watch per process (opened at connect, so current and
//! never behind) reports to every waiter of the process.

use std::sync::Arc;

use etcd_client as etcd;
use tokio::sync::watch;

use crate::baselines::{token, EtcdLockService};
use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const ETCD_SEMAPHORE: &str =
    "keys on a lease under a prefix, range by create revision, one watch of deletes per \
     process (etcd-client; etcd has no semaphore API)";

#[derive(Clone)]
pub(crate) struct EtcdPermits {
    session: EtcdLockService,
    prefix: String,
    /// How many deletes under the prefix the process's watch has seen.
    deletes: watch::Receiver<u64>,
    _watching: Arc<Watching>,
}

/// Aborts the watching task when the last clone goes.
struct Watching(tokio::task::AbortHandle);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl EtcdPermits {
    pub(crate) async fn connect(endpoint: &str, name: &str) -> EtcdPermits {
        let session = EtcdLockService::connect(endpoint).await;
        let prefix = format!("bench-raw-semaphore/{name}/");
        let only_deletes = etcd::WatchOptions::new()
            .with_prefix()
            .with_filters([etcd::WatchFilterType::NoPut]);
        let mut stream = session
            .client()
            .watch(prefix.as_str(), Some(only_deletes))
            .await
            .expect("watch");
        let (seen, deletes) = watch::channel(0u64);
        let watching = tokio::spawn(async move {
            while let Ok(Some(message)) = stream.message().await {
                let n = message.events().len() as u64;
                if n > 0 {
                    seen.send_modify(|count| *count += n);
                }
            }
        })
        .abort_handle();
        EtcdPermits {
            session,
            prefix,
            deletes,
            _watching: Arc::new(Watching(watching)),
        }
    }
}

impl Permits for EtcdPermits {
    /// The holder's key.
    type Permit = String;

    async fn acquire(&self) -> String {
        let mut client = self.session.client();
        let key = format!("{}{}", self.prefix, token());
        let put = etcd::PutOptions::new().with_lease(self.session.lease());
        client.put(key.as_str(), "", Some(put)).await.expect("put");
        let mut deletes = self.deletes.clone();
        loop {
            // Marked before the read: a delete after it wakes the wait below.
            deletes.borrow_and_update();
            let first = etcd::GetOptions::new()
                .with_prefix()
                .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Ascend)
                .with_limit(i64::from(PERMITS))
                .with_keys_only();
            let holders = client
                .get(self.prefix.as_str(), Some(first))
                .await
                .expect("range");
            if holders.kvs().iter().any(|kv| kv.key() == key.as_bytes()) {
                return key;
            }
            deletes.changed().await.expect("the watch lives");
        }
    }

    async fn release(&self, key: String) {
        let mut client = self.session.client();
        client.delete(key, None).await.expect("delete");
    }
}
