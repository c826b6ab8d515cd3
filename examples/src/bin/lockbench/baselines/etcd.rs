//! The etcd baseline: etcd's own Lock service (`v3lock`), called through the client leasehold
//! itself uses (`etcd_client::Client::lock`, `unlock`), holding its locks with a lease of the
//! same TTL as ours, kept alive by one stream.

use std::sync::Arc;

use etcd_client as etcd;

use super::bounded;
use crate::engine::SESSION_TIMEOUT;
use crate::key_lock::{KeyLock, KeysAtOnce};

/// The service's lock names (it keeps each holder's key under `<name>/`).
const ROOT: &str = "bench-raw";

/// The service's name in the report.
pub(crate) const ETCD_LOCK_SERVICE: &str = "etcd's Lock service (etcd-client's Client::lock)";

/// A client of the Lock service with a lease of its own, kept alive by a background task for
/// as long as the client lives, as a user of the service would hold one.
#[derive(Clone)]
pub(crate) struct EtcdLockService {
    client: etcd::Client,
    lease: i64,
    _keep_alive: Arc<KeepAlive>,
}

/// Aborts the keep-alive task when the last clone of its client goes.
struct KeepAlive(tokio::task::JoinHandle<()>);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl EtcdLockService {
    pub(crate) async fn connect(endpoint: &str) -> EtcdLockService {
        let client = etcd::Client::connect([endpoint], None)
            .await
            .expect("etcd client");
        EtcdLockService::with_lease(client).await
    }

    /// The client, for the calls other than the Lock service's.
    pub(crate) fn client(&self) -> etcd::Client {
        self.client.clone()
    }

    /// The lease this client's keys are attached to.
    pub(crate) fn lease(&self) -> i64 {
        self.lease
    }

    /// Another lease over the same connection.
    async fn with_lease(mut client: etcd::Client) -> EtcdLockService {
        let ttl = SESSION_TIMEOUT.as_secs() as i64;
        let lease = client
            .lease_grant(ttl, None)
            .await
            .expect("lease grant")
            .id();
        let (mut keeper, mut responses) = client
            .lease_keep_alive(lease)
            .await
            .expect("lease keep-alive");
        let keep_alive = tokio::spawn(async move {
            // A third of the TTL, as leasehold's watchdog renews.
            let mut every = tokio::time::interval(SESSION_TIMEOUT / 3);
            loop {
                every.tick().await;
                if keeper.keep_alive().await.is_err() {
                    return;
                }
                if !matches!(responses.message().await, Ok(Some(_))) {
                    return;
                }
            }
        });
        EtcdLockService {
            client,
            lease,
            _keep_alive: Arc::new(KeepAlive(keep_alive)),
        }
    }
}

/// An acquisition: the service puts `<name>/<lease>` with the lease and waits until its key
/// has the lowest create revision under `name/`; the key it answers is the one to unlock.
impl KeyLock for EtcdLockService {
    type Held<'a> = Vec<u8>;

    async fn acquire<'a>(&'a self, name: &'a str) -> Vec<u8> {
        let options = etcd::LockOptions::new().with_lease(self.lease);
        let mut client = self.client.clone();
        let held = client
            .lock(format!("{ROOT}/{name}"), Some(options))
            .await
            .expect("raw lock");
        held.key().to_vec()
    }

    /// Deletes the key `acquire` answered; the next in line is woken by its watch.
    async fn release<'a>(&'a self, _: &'a str, key: Vec<u8>) {
        let mut client = self.client.clone();
        client.unlock(key).await.expect("raw unlock");
    }

    /// The service treats every request made with one lease as the same holder (its key is
    /// `<name>/<lease>`, and asking again finds it there and holds at once), so tasks sharing
    /// a lease would all hold a hot key together: each task gets a lease of its own, over the
    /// process's one connection.
    async fn for_task(&self) -> EtcdLockService {
        EtcdLockService::with_lease(self.client.clone()).await
    }
}

/// The hand-written transactions' keys.
const FENCED_ROOT: &str = "bench-fenced";

/// The hand-written transactions' name in the report.
pub(crate) const ETCD_FENCED_TXN: &str =
    "the same transactions by hand, with a fence record written as ours is";

/// Ours' uncontended cycle on etcd written by hand, with nothing of the library around it:
/// one transaction that, when the key is absent and the lock's range empty, puts the key on
/// the lease and the fence record beside it (nothing read back), and one that deletes the key
/// while its create revision is the one put. What a fenced lock on etcd costs before any
/// library work, as the restore-safe raw lock is on Redis. Uncontended cycles only: each task
/// has keys of its own, so the range is always empty (checked).
#[derive(Clone)]
pub(crate) struct EtcdFencedTxn {
    service: EtcdLockService,
}

impl EtcdFencedTxn {
    pub(crate) async fn connect(endpoint: &str) -> EtcdFencedTxn {
        EtcdFencedTxn {
            service: EtcdLockService::connect(endpoint).await,
        }
    }
}

/// The name of several keys by hand ([`KeysAtOnce`]) in the report.
pub(crate) const ETCD_KEYS_BY_HAND: &str =
    "by hand: one transaction puts every key and its fence record on the lease, one deletes them";

/// A contender's value: as long as an owner token of ours.
const TOKEN: &str = "0123456789abcdef0123456789abcdef";

impl EtcdFencedTxn {
    /// A lock's range of contenders' keys, and this lease's key in it.
    fn names(&self, name: &str) -> (String, String) {
        let range = format!("{FENCED_ROOT}:lock:{{{name}}}/");
        let key = format!("{range}{:016x}", self.service.lease);
        (range, key)
    }

    /// The transaction that deletes each of `keys` while its create revision is `revision`.
    async fn delete(&self, keys: impl IntoIterator<Item = String>, revision: i64) {
        let keys: Vec<String> = keys.into_iter().collect();
        let when: Vec<_> = keys
            .iter()
            .map(|key| {
                etcd::Compare::create_revision(key.clone(), etcd::CompareOp::Equal, revision)
            })
            .collect();
        let then: Vec<_> = keys
            .into_iter()
            .map(|key| etcd::TxnOp::delete(key, None))
            .collect();
        let txn = etcd::Txn::new().when(when).and_then(then);
        let mut client = self.service.client();
        let answer = bounded("the keys' deletion by hand", client.txn(txn))
            .await
            .expect("a delete");
        assert!(answer.succeeded(), "the hand-written lock's key went");
    }
}

impl KeyLock for EtcdFencedTxn {
    /// The key and its create revision.
    type Held<'a> = (String, i64);

    async fn acquire<'a>(&'a self, name: &'a str) -> (String, i64) {
        let lease = self.service.lease;
        let (range, key) = self.names(name);
        let on_lease = || Some(etcd::PutOptions::new().with_lease(lease));
        let txn = etcd::Txn::new()
            .when([
                etcd::Compare::create_revision(key.clone(), etcd::CompareOp::Equal, 0),
                etcd::Compare::create_revision(range, etcd::CompareOp::Equal, 0).with_prefix(),
            ])
            .and_then([
                etcd::TxnOp::put(key.clone(), TOKEN, on_lease()),
                etcd::TxnOp::put(format!("{FENCED_ROOT}:fence:{{{name}}}"), "+0", on_lease()),
            ]);
        let answer = self.service.client().txn(txn).await.expect("a put");
        assert!(
            answer.succeeded(),
            "the hand-written lock found {name} taken"
        );
        let revision = answer.header().expect("a revision").revision();
        (key, revision)
    }

    async fn release<'a>(&'a self, _: &'a str, (key, revision): (String, i64)) {
        self.delete([key], revision).await;
    }
}

/// Several free keys in one transaction as one is taken (each key absent, each lock's range
/// empty; each key and its fence record put on the lease), given back in one that deletes
/// them all while their create revision is the one put: the floor of ours on etcd, where
/// `lock_all` of free keys is one transaction.
impl KeysAtOnce for EtcdFencedTxn {
    /// The create revision they share.
    type Held = i64;

    async fn acquire_all<'a>(&'a self, names: &'a [String]) -> i64 {
        let lease = self.service.lease;
        let on_lease = || Some(etcd::PutOptions::new().with_lease(lease));
        let mut when = Vec::new();
        let mut then = Vec::new();
        for name in names {
            let (range, key) = self.names(name);
            when.push(etcd::Compare::create_revision(
                key.clone(),
                etcd::CompareOp::Equal,
                0,
            ));
            when.push(
                etcd::Compare::create_revision(range, etcd::CompareOp::Equal, 0).with_prefix(),
            );
            then.push(etcd::TxnOp::put(key, TOKEN, on_lease()));
            let fence = format!("{FENCED_ROOT}:fence:{{{name}}}");
            then.push(etcd::TxnOp::put(fence, "+0", on_lease()));
        }
        let txn = etcd::Txn::new().when(when).and_then(then);
        let mut client = self.service.client();
        let answer = bounded("the keys' transaction by hand", client.txn(txn))
            .await
            .expect("puts");
        assert!(
            answer.succeeded(),
            "the hand-written lock found one of {names:?} taken"
        );
        answer.header().expect("a revision").revision()
    }

    async fn release_all<'a>(&'a self, names: &'a [String], revision: i64) {
        self.delete(names.iter().map(|name| self.names(name).1), revision)
            .await;
    }
}
