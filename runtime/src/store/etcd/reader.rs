//! A reader's key: put in one transaction with the reads of the lock's first writer and of
//! the last writer's fence record, so that a free lock costs one round trip.

use etcd_client as etcd;

use super::names::{first_writer, range_of};
use super::writer::reads_of;
use super::Etcd;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sequenced::{slots_top, Contender, Creation, Place, FENCE_SLOTS};

impl Etcd {
    /// Puts a reader's key, and reads where it stands in the same transaction
    /// ([`reader_txn`]).
    pub(super) async fn put_reader(
        &self,
        one: &Creation<i64>,
    ) -> Result<(Contender<i64>, Place), LockError> {
        let txn = reader_txn(one);
        let answer = self.txn("refused a write", txn).await?;
        let revision = answer.header().map(|h| h.revision());
        self.reader_answer(one, answer, revision)
    }

    /// The contender [`reader_txn`] put, and where it stands, from the transaction's reads.
    /// When the put went through, the key is this transaction's (its writes' `revision`, the
    /// revision of the transaction it went in, is the key's create revision) and was not read
    /// back; otherwise the key is read back.
    pub(super) fn reader_answer(
        &self,
        one: &Creation<i64>,
        answer: etcd::TxnResponse,
        revision: Option<i64>,
    ) -> Result<(Contender<i64>, Place), LockError> {
        if answer.succeeded() {
            let mine = one.contender(self.created_at(revision)?);
            let mut found = firsts(reads_of(answer));
            let (writer, record) = (found.next().flatten(), found.next().flatten());
            let place = reader_place(&mine, writer, record);
            return Ok((mine, place));
        }
        let (mine, writer, record) = read(reads_of(answer));
        let Some(mine) = mine.filter(|kv| kv.lease() == one.via) else {
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: this reader's key belongs to another lease; try again",
                    self.shown
                ),
                None,
            ));
        };
        let mine = one.contender(mine.create_revision());
        let place = reader_place(&mine, writer, record);
        Ok((mine, place))
    }

    /// Where a reader's key stands now: the reads of [`put_reader`](Self::put_reader) alone.
    pub(super) async fn look_reader(
        &self,
        keys: &LockKeys,
        mine: &Contender<i64>,
    ) -> Result<Place, LockError> {
        let txn = etcd::Txn::new().and_then(reads(keys, &mine.name));
        let answer = self.txn("refused a read", txn).await?;
        let (found, writer, record) = read(reads_of(answer));
        if found.is_none_or(|kv| kv.create_revision() != mine.order) {
            return Ok(Place::Gone);
        }
        Ok(reader_place(mine, writer, record))
    }
}

/// The reads that say where a reader stands: its key, the lock's first writer's key, and the
/// last writer's fence record.
fn reads(keys: &LockKeys, key: &str) -> [etcd::TxnOp; 3] {
    let [writer, record] = around(keys);
    [etcd::TxnOp::get(key, None), writer, record]
}

/// The reads of [`reads`] but the reader's own key: the lock's first writer's key, and the
/// last writer's fence record.
fn around(keys: &LockKeys) -> [etcd::TxnOp; 2] {
    [
        etcd::TxnOp::get(range_of(keys), Some(first_writer(keys))),
        etcd::TxnOp::get(keys.fence().to_owned(), None),
    ]
}

/// The answers of [`reads`]: the reader's key, the first writer's, and the fence record.
fn read(
    reads: Vec<etcd::GetResponse>,
) -> (
    Option<etcd::KeyValue>,
    Option<etcd::KeyValue>,
    Option<etcd::KeyValue>,
) {
    let mut found = firsts(reads);
    let mut next = || found.next().flatten();
    (next(), next(), next())
}

/// The first key each read found, in order (`None` for a read that found none).
fn firsts(reads: Vec<etcd::GetResponse>) -> impl Iterator<Item = Option<etcd::KeyValue>> {
    reads.into_iter().map(|g| g.kvs().first().cloned())
}

/// The transaction that puts a reader's key (`one.name`) on its lease, then reads the lock's
/// first writer and the fence record ([`around`]): its own key needs no reading back, since
/// the put went through (a put on a lease that ended fails the whole transaction) and was
/// created at the transaction's revision. The reads alone, its key's with them ([`reads`]),
/// when the key is there already.
pub(super) fn reader_txn(one: &Creation<i64>) -> etcd::Txn {
    let key = one.name.as_str();
    let reads = reads(&one.keys, key);
    let put = etcd::TxnOp::put(
        key,
        one.token.as_bytes(),
        Some(etcd::PutOptions::new().with_lease(one.via)),
    );
    etcd::Txn::new()
        .when([etcd::Compare::create_revision(
            key,
            etcd::CompareOp::Equal,
            0,
        )])
        .and_then(
            std::iter::once(put)
                .chain(around(&one.keys))
                .collect::<Vec<_>>(),
        )
        .or_else(reads)
}

/// Where a reader stands: behind a writer whose key is older than its own, or holding the lock
/// with the top of the fence slots of the last writer given the lock, from its record
/// ([`recorded_writer`]), or, with no record (the lease of the locker that wrote it ended), its
/// own key's `create revision × 32`: at or above every fence of the writers before it, below
/// every fence of the writers after.
pub(super) fn reader_place(
    mine: &Contender<i64>,
    writer: Option<etcd::KeyValue>,
    record: Option<etcd::KeyValue>,
) -> Place {
    if writer.is_some_and(|w| w.create_revision() < mine.order) {
        return Place::Behind;
    }
    let top = record
        .as_ref()
        .and_then(recorded_writer)
        .map(slots_top)
        .unwrap_or((mine.order as u64) * FENCE_SLOTS)
        .max(1);
    Place::Holds { top }
}

/// The creation order (create revision) of the last writer given the lock, from its record
/// (`P:fence:{K}`): `n`, the top of its fences (`order × 32 + fences`), or `+n`, written with
/// the writer's key in one transaction when the lock was free, whose own revision is the
/// order. A reader takes the top of that writer's slots ([`slots_top`]), not the recorded top:
/// a record rewritten by a look whose answer was lost may land after a later look's, with
/// fewer fences than the writer handed out, while the slots' top is above all of them and
/// below every later writer's.
pub(super) fn recorded_writer(kv: &etcd::KeyValue) -> Option<i64> {
    let text = kv.value_str().ok()?;
    match text.strip_prefix('+') {
        Some(n) => {
            n.parse::<u64>().ok()?;
            Some(kv.mod_revision())
        }
        None => i64::try_from(text.parse::<u64>().ok()? / FENCE_SLOTS).ok(),
    }
}
