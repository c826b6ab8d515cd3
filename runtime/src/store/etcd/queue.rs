//! The keys of one lock's queue: putting a contender's, looking where it stands, watching
//! the one ahead, and deleting ours in the background until etcd answers.

use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::calls::retry_unsent;
use super::contenders::Contender;
use super::names::{first_by_creation, key_of, range_of, FENCE_SLOTS};
use super::EtcdStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;

/// How long a background deletion keeps trying while the session lives, at most.
pub(super) const CLEAN_UP_FOR: Duration = Duration::from_secs(60);

impl EtcdStore {
    pub(super) fn forget_waiting(&self, lock: &str) -> Option<Contender> {
        self.contenders.lock().unwrap().waiting.remove(lock)
    }

    /// Deletes a key of ours in the background, until etcd answers or its session ends.
    pub(super) fn delete_later(&self, contender: Contender) {
        clean_up(
            self.client.clone(),
            contender.key,
            Until::SessionEnds(Arc::downgrade(&self.epoch), contender.session),
        );
    }

    /// Puts this attempt's key, reading the lock's first key in the same transaction. When
    /// the lock's range is empty (the key will be first), the same transaction records the
    /// fences this writer is about to be given (see [`fence_record`]).
    pub(super) async fn put_contender(
        &self,
        lease: i64,
        session: u64,
        keys: &LockKeys,
        token: &OwnerToken,
        fences: u64,
    ) -> Result<(Contender, Option<etcd::KeyValue>), LockError> {
        let key = key_of(keys, token);
        let first = etcd::TxnOp::get(range_of(keys), Some(first_by_creation()));
        let absent = etcd::Compare::create_revision(key.clone(), etcd::CompareOp::Equal, 0);
        let put = etcd::TxnOp::put(
            key.clone(),
            token.as_bytes(),
            Some(etcd::PutOptions::new().with_lease(lease)),
        );
        // The record's revision is the key's create revision (one transaction): `+n` says
        // "that revision × 32 + n".
        let record = etcd::TxnOp::put(
            keys.fence().to_owned(),
            format!("+{fences}"),
            Some(etcd::PutOptions::new().with_lease(lease)),
        );
        let queue = etcd::Txn::new()
            .when([absent.clone()])
            .and_then([
                put.clone(),
                etcd::TxnOp::get(key.clone(), None),
                first.clone(),
            ])
            .or_else([etcd::TxnOp::get(key.clone(), None), first.clone()]);
        let txn = etcd::Txn::new()
            .when([
                absent,
                // Every key of the range was created at revision 0: there is none.
                etcd::Compare::create_revision(range_of(keys), etcd::CompareOp::Equal, 0)
                    .with_prefix(),
            ])
            .and_then([put, record, etcd::TxnOp::get(key.clone(), None), first])
            .or_else([etcd::TxnOp::txn(queue)]);
        let answer = self
            .bounded("refused a write", |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let mut gets = reads_of(answer).into_iter();
        let mine = gets.next().and_then(|g| g.kvs().first().cloned());
        let first = gets.next().and_then(|g| g.kvs().first().cloned());
        let Some(mine) = mine.filter(|kv| kv.lease() == lease) else {
            // Our tag under another lease: 64 random bits collided, or a lease ended meanwhile.
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: this contender's key belongs to another lease; try again",
                    self.shown
                ),
                None,
            ));
        };
        let contender = Contender {
            key,
            revision: mine.create_revision(),
            session,
            lease,
        };
        Ok((contender, first))
    }

    /// The current state of a waiting contender's key, and the lock's first key. When the key
    /// is first, the same transaction records the fences this writer is about to be given
    /// (see [`fence_record`]).
    pub(super) async fn look(
        &self,
        keys: &LockKeys,
        mine: &Contender,
        fences: u64,
    ) -> Result<(bool, Option<etcd::KeyValue>), LockError> {
        let reads = [
            etcd::TxnOp::get(mine.key.clone(), None),
            etcd::TxnOp::get(range_of(keys), Some(first_by_creation())),
        ];
        let top = (mine.revision as u64) * FENCE_SLOTS + fences;
        let txn = etcd::Txn::new()
            .when([
                etcd::Compare::create_revision(
                    mine.key.clone(),
                    etcd::CompareOp::Equal,
                    mine.revision,
                ),
                // No key of the range is older than ours: ours is first.
                etcd::Compare::create_revision(
                    range_of(keys),
                    etcd::CompareOp::Greater,
                    mine.revision - 1,
                )
                .with_prefix(),
            ])
            .and_then([
                etcd::TxnOp::put(
                    keys.fence().to_owned(),
                    top.to_string(),
                    Some(etcd::PutOptions::new().with_lease(mine.lease)),
                ),
                reads[0].clone(),
                reads[1].clone(),
            ])
            .or_else(reads);
        let answer = self
            .bounded("refused a write", |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let mut gets = answer.op_responses().into_iter().filter_map(|r| match r {
            etcd::TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let alive = gets
            .next()
            .and_then(|g| {
                g.kvs()
                    .first()
                    .map(|kv| kv.create_revision() == mine.revision)
            })
            .unwrap_or(false);
        let first = gets.next().and_then(|g| g.kvs().first().cloned());
        Ok((alive, first))
    }
}

/// The reads of a transaction's answer, in order, those of a nested transaction included.
pub(super) fn reads_of(answer: etcd::TxnResponse) -> Vec<etcd::GetResponse> {
    let mut reads = Vec::new();
    for r in answer.op_responses() {
        match r {
            etcd::TxnOpResponse::Get(get) => reads.push(get),
            etcd::TxnOpResponse::Txn(nested) => reads.extend(reads_of(nested)),
            _ => {}
        }
    }
    reads
}

/// The top of the fences of the last writer given the lock, from its record (`P:fence:{K}`):
/// `n` as it is, or `+n` for `n` above the fences' base of the record's own revision (written
/// with the writer's key, in one transaction, when the lock was free).
pub(super) fn fence_record(kv: &etcd::KeyValue) -> Option<u64> {
    let text = kv.value_str().ok()?;
    match text.strip_prefix('+') {
        Some(n) => Some((kv.mod_revision() as u64) * FENCE_SLOTS + n.parse::<u64>().ok()?),
        None => text.parse().ok(),
    }
}

/// Whether `mine` is the lock's first key.
pub(super) fn is_first(first: &Option<etcd::KeyValue>, mine: &Contender) -> bool {
    first
        .as_ref()
        .is_some_and(|kv| kv.create_revision() == mine.revision)
}

/// A watch on the deletion of one key (or of any key of a range).
pub(super) struct Watching {
    _stream: etcd::WatchRequestSender,
    events: mpsc::Receiver<()>,
}

impl Watching {
    /// Resolves at the watched deletion, or when the watch breaks (a waiter then looks).
    pub(super) async fn deleted(&mut self) {
        let _ = self.events.recv().await;
    }
}

/// Watches the deletion of the key just ahead of revision `mine` in `range` (of any writer's
/// key of the range when this process has no key there, as a waiting reader: readers' keys
/// come and go without waking it), from the revision the queue was read at. `None` when there
/// is nothing to wait for.
pub(super) async fn watch_predecessor(
    client: &etcd::Client,
    range: &str,
    mine: Option<i64>,
    limit: Duration,
) -> Result<Option<Watching>, String> {
    let mut options = etcd::GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Descend)
        .with_limit(1);
    if let Some(mine) = mine {
        options = options.with_max_create_revision(mine - 1);
    }
    let read = retry_unsent(client, limit, |mut c| {
        let options = options.clone();
        async move { c.get(range, Some(options)).await }
    })
    .await
    .map_err(|_| format!("no answer within {limit:?}"))?
    .map_err(|e| e.to_string())?;
    let revision = read.header().map_or(0, |h| h.revision());
    let watched = match (mine, read.kvs().first()) {
        (Some(_), None) => return Ok(None), // first in line
        (Some(_), Some(ahead)) => ahead.key().to_vec(),
        (None, _) => range.as_bytes().to_vec(),
    };
    let mut options = etcd::WatchOptions::new()
        .with_start_revision(revision + 1)
        .with_filters([etcd::WatchFilterType::NoPut]);
    if mine.is_none() {
        // The writers' keys: the range up to where readers' keys start.
        options = options.with_range(format!("{range}~"));
    }
    let mut stream = retry_unsent(client, limit, |mut c| {
        let (watched, options) = (watched.clone(), options.clone());
        async move { c.watch(watched, Some(options)).await }
    })
    .await
    .map_err(|_| format!("no answer within {limit:?}"))?
    .map_err(|e| e.to_string())?;
    // The first answer confirms the watch; events may come with it.
    let created = tokio::time::timeout(limit, stream.message())
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
        .map_err(|e| e.to_string())?
        .ok_or("the watch stream ended at once")?;
    let (tx, events) = mpsc::channel(1);
    if !created.events().is_empty() || created.canceled() {
        let _ = tx.try_send(());
    }
    let (sender, mut responses) = stream.split();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                answer = responses.message() => match answer {
                    Ok(Some(r)) if r.events().is_empty() && !r.canceled() => continue,
                    // A deletion, a cancelled watch (compaction) or a broken stream: look again.
                    _ => {
                        let _ = tx.try_send(());
                        return;
                    }
                },
                // Nobody watches any more: dropping the stream cancels the watch.
                () = tx.closed() => return,
            }
        }
    });
    Ok(Some(Watching {
        _stream: sender,
        events,
    }))
}

/// How long a background deletion goes on.
pub(super) enum Until {
    /// Until the key's session ends (its lease, and so the key, then go).
    SessionEnds(Weak<watch::Sender<u64>>, u64),
    /// Until etcd answered a deletion, and then once more after this long (an abandoned write
    /// may land after the first deletion).
    Twice(Duration),
}

/// Deletes `key` in the background, trying again while etcd does not answer (a failover, a
/// partition). A key of ours left behind would stand in the lock's queue as long as this
/// process keeps its lease alive, and everyone behind it would wait.
pub(super) fn clean_up(client: etcd::Client, key: String, until: Until) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return; // no runtime: no keep-alives either, the lease expires with its keys
    };
    runtime.spawn(async move {
        let give_up = Instant::now() + CLEAN_UP_FOR;
        let mut pause = Duration::from_millis(50);
        let mut again = match until {
            Until::Twice(after) => Some(after),
            Until::SessionEnds(..) => None,
        };
        while Instant::now() < give_up {
            if let Until::SessionEnds(epoch, session) = &until {
                match epoch.upgrade() {
                    Some(epoch) if *epoch.borrow() == *session => {}
                    _ => return, // the lease ended or is being revoked: the key goes with it
                }
            }
            let mut c = client.clone();
            let limit = Duration::from_secs(2);
            let deleted = tokio::time::timeout(limit, c.delete(key.clone(), None)).await;
            if matches!(deleted, Ok(Ok(_))) {
                match again.take() {
                    Some(after) => {
                        tokio::time::sleep(after).await;
                        continue;
                    }
                    None => return,
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    });
}
