//! A writer's key: put in one transaction with the read of the lock's first key (and, when
//! the lock is free, the record of its fences), and looked at again while it waits.

use etcd_client as etcd;

use super::names::{first_by_creation, range_of};
use super::Etcd;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sequenced::{writer_top, Contender, Creation, Place};

impl Etcd {
    /// Puts a writer's key, reading the lock's first key in the same transaction
    /// ([`writer_txn`]).
    pub(super) async fn put_writer(
        &self,
        one: &Creation<i64>,
    ) -> Result<(Contender<i64>, Place), LockError> {
        let txn = writer_txn(one);
        let answer = self.txn("refused a write", txn).await?;
        let revision = answer.header().map(|h| h.revision());
        self.writer_answer(one, answer, revision)
    }

    /// The contender [`writer_txn`] put, and where it stands: first, holding, when the
    /// transaction found the lock's range empty (its writes' `revision`, the revision of the
    /// transaction it went in, is the key's create revision), else from its reads.
    pub(super) fn writer_answer(
        &self,
        one: &Creation<i64>,
        answer: etcd::TxnResponse,
        revision: Option<i64>,
    ) -> Result<(Contender<i64>, Place), LockError> {
        if answer.succeeded() {
            let order = self.created_at(revision)?;
            let mine = one.contender(order);
            let top = writer_top(order, one.fences);
            return Ok((mine, Place::Holds { top }));
        }
        let mut gets = reads_of(answer).into_iter();
        let mine = gets.next().and_then(|g| g.kvs().first().cloned());
        let first = gets.next().and_then(|g| g.kvs().first().cloned());
        let Some(mine) = mine.filter(|kv| kv.lease() == one.via) else {
            // Our tag under another lease: 64 random bits collided, or a lease ended meanwhile.
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: this contender's key belongs to another lease; try again",
                    self.shown
                ),
                None,
            ));
        };
        let mine = one.contender(mine.create_revision());
        let place = writer_place(&mine, first, one.fences);
        Ok((mine, place))
    }

    /// The revision a transaction that went through created its keys at (`revision`, from
    /// its answer's header), or the error for an answer without one.
    pub(super) fn created_at(&self, revision: Option<i64>) -> Result<i64, LockError> {
        revision.filter(|r| *r > 0).ok_or_else(|| {
            LockError::unavailable(
                format!(
                    "etcd at {} answered a write without its revision; try again",
                    self.shown
                ),
                None,
            )
        })
    }

    /// Where a waiting writer's key stands: gone, first, or behind. When it is first, the
    /// same transaction records the fences this writer is about to be given (see
    /// [`recorded_writer`](super::reader::recorded_writer)).
    pub(super) async fn look_writer(
        &self,
        keys: &LockKeys,
        mine: &Contender<i64>,
        fences: u64,
    ) -> Result<Place, LockError> {
        let reads = [
            etcd::TxnOp::get(mine.name.clone(), None),
            etcd::TxnOp::get(range_of(keys), Some(first_by_creation())),
        ];
        let top = writer_top(mine.order, fences);
        let txn = etcd::Txn::new()
            .when([
                etcd::Compare::create_revision(
                    mine.name.clone(),
                    etcd::CompareOp::Equal,
                    mine.order,
                ),
                // No key of the range is older than ours: ours is first.
                etcd::Compare::create_revision(
                    range_of(keys),
                    etcd::CompareOp::Greater,
                    mine.order - 1,
                )
                .with_prefix(),
            ])
            .and_then([
                etcd::TxnOp::put(
                    keys.fence().to_owned(),
                    top.to_string(),
                    Some(etcd::PutOptions::new().with_lease(mine.via)),
                ),
                reads[0].clone(),
                reads[1].clone(),
            ])
            .or_else(reads);
        let answer = self.txn("refused a write", txn).await?;
        let mut gets = answer.op_responses().into_iter().filter_map(|r| match r {
            etcd::TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let alive = gets
            .next()
            .and_then(|g| g.kvs().first().map(|kv| kv.create_revision() == mine.order))
            .unwrap_or(false);
        if !alive {
            return Ok(Place::Gone);
        }
        let first = gets.next().and_then(|g| g.kvs().first().cloned());
        Ok(writer_place(mine, first, fences))
    }
}

/// The transaction that puts a writer's key (`one.name`) on its lease. When the lock's range
/// is empty, the key is first, and the same transaction records the fences this writer is
/// about to be given (see [`recorded_writer`](super::reader::recorded_writer)); nothing needs
/// reading back: the comparisons held, the key is the lock's only one, on this lease (a put on
/// a lease that ended fails the whole transaction), created at the transaction's revision.
/// Otherwise it reads the key back and the lock's first key.
pub(super) fn writer_txn(one: &Creation<i64>) -> etcd::Txn {
    let (keys, key, lease) = (&one.keys, one.name.as_str(), one.via);
    let first = etcd::TxnOp::get(range_of(keys), Some(first_by_creation()));
    let absent = etcd::Compare::create_revision(key, etcd::CompareOp::Equal, 0);
    let put = etcd::TxnOp::put(
        key,
        one.token.as_bytes(),
        Some(etcd::PutOptions::new().with_lease(lease)),
    );
    // The record's revision is the key's create revision (one transaction): `+n` says
    // "that revision × 32 + n".
    let record = etcd::TxnOp::put(
        keys.fence().to_owned(),
        format!("+{}", one.fences),
        Some(etcd::PutOptions::new().with_lease(lease)),
    );
    let queue = etcd::Txn::new()
        .when([absent.clone()])
        .and_then([put.clone(), etcd::TxnOp::get(key, None), first.clone()])
        .or_else([etcd::TxnOp::get(key, None), first.clone()]);
    etcd::Txn::new()
        .when([
            absent,
            // Every key of the range was created at revision 0: there is none.
            etcd::Compare::create_revision(range_of(keys), etcd::CompareOp::Equal, 0).with_prefix(),
        ])
        .and_then([put, record])
        .or_else([etcd::TxnOp::txn(queue)])
}

/// Where a writer stands, from the lock's first key: holding the lock when that is its own.
fn writer_place(mine: &Contender<i64>, first: Option<etcd::KeyValue>, fences: u64) -> Place {
    if first.is_some_and(|kv| kv.create_revision() == mine.order) {
        Place::Holds {
            top: writer_top(mine.order, fences),
        }
    } else {
        Place::Behind
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
