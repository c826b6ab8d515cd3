//! An etcd semaphore written with the client the engine uses (etcd-client); etcd has no
//! semaphore API of its own. Each acquisition puts a key under the semaphore's prefix,
//! attached to the process's lease (kept alive, as ours), and holds once its key is among
//! the first [`PERMITS`] of the prefix sorted by create revision; until then it watches the
//! prefix for deletes from the revision it read at (every waiter wakes on every release).

use etcd_client as etcd;

use crate::baselines::{token, EtcdLockService};
use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const ETCD_SEMAPHORE: &str =
    "keys on a lease under a prefix, range by create revision, watch deletes (etcd-client; \
     etcd has no semaphore API)";

#[derive(Clone)]
pub(crate) struct EtcdPermits {
    session: EtcdLockService,
    prefix: String,
}

impl EtcdPermits {
    pub(crate) async fn connect(endpoint: &str, name: &str) -> EtcdPermits {
        EtcdPermits {
            session: EtcdLockService::connect(endpoint).await,
            prefix: format!("bench-raw-semaphore/{name}/"),
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
        loop {
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
            let read_at = holders.header().expect("a header").revision();
            let deletes = etcd::WatchOptions::new()
                .with_prefix()
                .with_start_revision(read_at + 1)
                .with_filters([etcd::WatchFilterType::NoPut]);
            let mut watch = client
                .watch(self.prefix.as_str(), Some(deletes))
                .await
                .expect("watch");
            while let Some(message) = watch.message().await.expect("watch") {
                if !message.events().is_empty() {
                    break;
                }
            }
        }
    }

    async fn release(&self, key: String) {
        let mut client = self.session.client();
        client.delete(key, None).await.expect("delete");
    }
}
