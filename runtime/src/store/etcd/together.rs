//! A batch of writers' and readers' keys put in one transaction (see the recipe's
//! `together`): it compares first that every lock of the batch is free for its kind, and puts
//! nothing otherwise, so a batch costs one round trip whether it is granted or not.

use etcd_client as etcd;

use super::names::{range_of, writers_end};
use super::reader::reader_place;
use super::Etcd;
use crate::error::LockError;
use crate::store::sequenced::{writer_top, Contender, Created, Creation, Place, Role};

/// The most keys one transaction puts together: etcd refuses a transaction of more than
/// `--max-txn-ops` operations in a branch (128 by default), and each key takes two (its key
/// and its writer's fence record, or its key and the read of its reader's fence record), plus
/// one read of a created key. A larger batch is taken key by key.
pub(super) const MOST_TOGETHER: usize = 63;

impl Etcd {
    /// Puts every key of `batch` in one transaction ([`put_all_txn`]), or nothing; `None`
    /// without a round trip for a batch too large for one.
    pub(super) async fn put_all(
        &self,
        batch: &[Creation<i64>],
    ) -> Result<Option<Created<i64>>, LockError> {
        let Some(txn) = put_all_txn(batch) else {
            return Ok(None);
        };
        let answer = self.txn("refused a write", txn).await?;
        self.all_answer(batch, answer)
    }

    /// What [`put_all_txn`] answered for `batch`: `None` when it put nothing (a lock was
    /// taken), else every contender, the writers holding their locks and the readers where
    /// their locks' fence records put them.
    pub(super) fn all_answer(
        &self,
        batch: &[Creation<i64>],
        answer: etcd::TxnResponse,
    ) -> Result<Option<Created<i64>>, LockError> {
        if !answer.succeeded() {
            return Ok(None);
        }
        let mut gets = answer.op_responses().into_iter().filter_map(|r| match r {
            etcd::TxnOpResponse::Get(get) => Some(get.kvs().first().cloned()),
            _ => None,
        });
        let Some(order) = gets.next().flatten().map(|kv| kv.create_revision()) else {
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: a key put in this transaction was not there; try again",
                    self.shown
                ),
                None,
            ));
        };
        let created = batch
            .iter()
            .map(|one| {
                let mine = one.contender(order);
                let place = match one.role {
                    Role::Writer => Place::Holds {
                        top: writer_top(order, one.fences),
                    },
                    _ => reader_place(&mine, None, gets.next().flatten()),
                };
                (mine, Some(place))
            })
            .collect();
        Ok(Some(created))
    }

    /// Deletes every key of `mine` in one transaction, only while each create revision is
    /// ours; `Ok(false)`, with nothing deleted, when one is not.
    pub(super) async fn delete_keys(&self, mine: &[Contender<i64>]) -> Result<bool, LockError> {
        let compares: Vec<_> = mine
            .iter()
            .map(|c| {
                etcd::Compare::create_revision(c.name.clone(), etcd::CompareOp::Equal, c.order)
            })
            .collect();
        let deletes: Vec<_> = mine
            .iter()
            .map(|c| etcd::TxnOp::delete(c.name.clone(), None))
            .collect();
        let txn = etcd::Txn::new().when(compares).and_then(deletes);
        let answer = self.txn("refused a delete", txn).await?;
        Ok(answer.succeeded())
    }
}

/// The transaction that puts every key of `batch` (on each one's lease: the batch's one) if
/// each lock is free for its kind (a writer's range empty; no writer's key in a reader's
/// range), with each writer's fence record (`+n`, whose revision is the key's create
/// revision), and puts nothing otherwise. The keys share one create revision: the
/// transaction's. `None` for an empty batch or one too large for a transaction.
pub(super) fn put_all_txn(batch: &[Creation<i64>]) -> Option<etcd::Txn> {
    if batch.is_empty() || batch.len() > MOST_TOGETHER {
        return None;
    }
    let on_lease = |lease: i64| Some(etcd::PutOptions::new().with_lease(lease));
    let mut compares = Vec::with_capacity(batch.len() * 2);
    let mut writes = Vec::with_capacity(batch.len() * 2 + 1);
    let mut reads = Vec::with_capacity(batch.len() + 1);
    // The create revision of the batch, read back from its first key.
    reads.push(etcd::TxnOp::get(batch[0].name.clone(), None));
    for one in batch {
        let keys = &one.keys;
        writes.push(etcd::TxnOp::put(
            one.name.clone(),
            one.token.as_bytes(),
            on_lease(one.via),
        ));
        match one.role {
            Role::Writer => {
                // Every key of the range was created at revision 0: there is none.
                compares.push(
                    etcd::Compare::create_revision(range_of(keys), etcd::CompareOp::Equal, 0)
                        .with_prefix(),
                );
                writes.push(etcd::TxnOp::put(
                    keys.fence().to_owned(),
                    format!("+{}", one.fences),
                    on_lease(one.via),
                ));
            }
            _ => {
                // No writer's key (those sort before the readers'), and not our own.
                compares.push(
                    etcd::Compare::create_revision(range_of(keys), etcd::CompareOp::Equal, 0)
                        .with_range(writers_end(keys)),
                );
                compares.push(etcd::Compare::create_revision(
                    one.name.clone(),
                    etcd::CompareOp::Equal,
                    0,
                ));
                reads.push(etcd::TxnOp::get(keys.fence().to_owned(), None));
            }
        }
    }
    writes.extend(reads);
    Some(etcd::Txn::new().when(compares).and_then(writes))
}
