//! etcd's driver of the recipe: contenders are keys of the lock's range attached to the
//! locker's lease, in the order of their create revisions, which also fence them.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::cleanup::{clean_up, Until};
use super::names::{key_of, range_of, reader_key_of};
use super::reader::reader_txn;
use super::together::put_all_txn;
use super::watch::{watch_predecessor, Target, Watcher};
use super::writer::writer_txn;
use super::Etcd;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::sequenced::{
    Ask, Awaited, Contender, Create, Created, Creation, Driver, Head, Inspection, Made, Place,
    Queued, Records, Role, Wake, Who,
};
use crate::store::token::OwnerToken;
use crate::store::{join_all, AcquireRequest};

impl Driver for Etcd {
    type Via = i64;
    type Watcher = Watcher;

    fn describe(&self) -> String {
        format!("etcd at {}", self.shown)
    }

    /// `P:lock:{K}/<tag>` for a writer, `P:lock:{K}/~r-<tag>` for a reader, `P:sem:{K}/<tag>`
    /// for permits (their limit and count are the key's value).
    fn name(&self, keys: &LockKeys, token: &OwnerToken, role: Role) -> String {
        match role {
            Role::Writer | Role::Permits { .. } => key_of(keys, token),
            Role::Reader => reader_key_of(keys, token),
        }
    }

    /// Every lease is bounded by the TTL asked for (a shorter grant is refused), so there is
    /// nothing to check per lease.
    async fn open(&self, _lease: Duration) -> Result<(i64, u64), LockError> {
        self.lease().await
    }

    /// A put does not refresh an etcd lease, and etcd keeps it at least a TTL after the last
    /// keep-alive it acknowledged was sent: the lock counts from there (see
    /// [`counted_from`](super::lease::counted_from)), with no round trip of its own. When that
    /// keep-alive is too old to leave a useful lock, one goes with the request, in parallel,
    /// and the lock counts from the request's send time.
    async fn vouch(
        &self,
        session: u64,
        req: &AcquireRequest<'_>,
    ) -> Result<Option<Instant>, LockError> {
        if let Some(from) = self.vouched_from(session, req).await {
            return Ok((from < req.sent).then_some(from));
        }
        if self.kept_alive(session).await {
            return Ok(None);
        }
        Err(LockError::unavailable(
            format!(
                "etcd at {} did not acknowledge a keep-alive of the lease within {:?}",
                self.shown, self.settings.op_timeout
            ),
            None,
        ))
    }

    /// One transaction puts the key and reads where it stands.
    async fn create(
        &self,
        one: &Creation<i64>,
    ) -> Result<(Contender<i64>, Option<Place>), LockError> {
        let (mine, place) = match one.role {
            Role::Writer => self.put_writer(one).await?,
            Role::Reader => self.put_reader(one).await?,
            Role::Permits { limit, count } => {
                let mine = self
                    .put_permits(one.via, one.session, &one.name, (limit, count))
                    .await?;
                return Ok((mine, None));
            }
        };
        Ok((mine, Some(place)))
    }

    /// A transaction carries many: each contender's own goes in one as a nested transaction.
    fn creates_together(&self) -> bool {
        true
    }

    /// One transaction, each create's own transaction nested in it (its comparisons and its
    /// branches are its own), in `batch`'s order: one round trip and one revision for them
    /// all, and each its own outcome. A permits contender, never sent here, is created by
    /// itself, and a batch too large for a transaction is answered `None` without being sent,
    /// as [`create_all`](Driver::create_all) answers it.
    async fn create_many(&self, batch: &[Create<i64>]) -> Result<Vec<Made<i64>>, LockError> {
        let permits = |one: &Creation<i64>| matches!(one.role, Role::Permits { .. });
        if batch.iter().any(|c| c.creations().iter().any(permits)) {
            return Ok(join_all(batch.iter().map(|create| create.alone(self))).await);
        }
        let txns: Vec<Option<etcd_client::Txn>> = batch
            .iter()
            .map(|create| match create {
                Create::One(one) if one.role == Role::Reader => Some(reader_txn(one)),
                Create::One(one) => Some(writer_txn(one)),
                Create::All(all) => put_all_txn(all),
            })
            .collect();
        let ops: Vec<_> = txns
            .iter()
            .flatten()
            .map(|txn| etcd_client::TxnOp::txn(txn.clone()))
            .collect();
        let answer = match ops.is_empty() {
            true => None,
            false => {
                let txn = etcd_client::Txn::new().and_then(ops);
                let answer = self.txn("refused a write", txn).await?;
                Some(answer)
            }
        };
        // One transaction, one revision: every key it created was created at it.
        let revision = answer
            .as_ref()
            .and_then(|a| a.header())
            .map(|h| h.revision());
        let mut nested = answer
            .into_iter()
            .flat_map(|answer| answer.op_responses())
            .filter_map(|r| match r {
                etcd_client::TxnOpResponse::Txn(nested) => Some(nested),
                _ => None,
            });
        // An answer short of a transaction per create: those without one are unknown.
        let unanswered = || {
            LockError::unavailable(
                format!("etcd at {} left a create unanswered; try again", self.shown),
                None,
            )
        };
        let made = batch.iter().zip(&txns).map(|(create, txn)| match create {
            Create::All(_) if txn.is_none() => Made::All(Ok(None)),
            Create::All(all) => Made::All(match nested.next() {
                Some(answer) => self.all_answer(all, answer),
                None => Err(unanswered()),
            }),
            Create::One(one) => Made::One(match nested.next() {
                Some(answer) => {
                    let answered = match one.role {
                        Role::Reader => self.reader_answer(one, answer, revision),
                        _ => self.writer_answer(one, answer, revision),
                    };
                    answered.map(|(mine, place)| (mine, Some(place)))
                }
                None => Err(unanswered()),
            }),
        });
        Ok(made.collect())
    }

    /// One transaction: it compares that every lock is free for its kind and puts every key
    /// with its writer's fence record, or puts nothing.
    async fn create_all(&self, batch: &[Creation<i64>]) -> Result<Option<Created<i64>>, LockError> {
        self.put_all(batch).await
    }

    /// Never asked after [`create_all`](Driver::create_all), which tells where every key
    /// stands; one look per key.
    async fn look_all(
        &self,
        batch: &[Ask<'_, '_>],
        mine: &[Contender<i64>],
    ) -> Result<Vec<Place>, LockError> {
        let looks = batch
            .iter()
            .zip(mine)
            .map(|(ask, mine)| self.look(ask.req, mine, ask.role));
        join_all(looks).await.into_iter().collect()
    }

    /// One transaction, while every create revision is ours.
    async fn delete_all(&self, mine: &[Contender<i64>]) -> Result<bool, LockError> {
        self.delete_keys(mine).await
    }

    async fn look(
        &self,
        req: &AcquireRequest<'_>,
        mine: &Contender<i64>,
        role: Role,
    ) -> Result<Place, LockError> {
        if role == Role::Reader {
            return self.look_reader(req.keys, mine).await;
        }
        self.look_writer(req.keys, mine, req.fences).await
    }

    /// Only while its create revision is ours (a transaction), so a key deleted by an operator
    /// and made again by another is never touched.
    async fn delete(&self, mine: &Contender<i64>) -> Result<bool, LockError> {
        let txn = etcd_client::Txn::new()
            .when([etcd_client::Compare::create_revision(
                mine.name.clone(),
                etcd_client::CompareOp::Equal,
                mine.order,
            )])
            .and_then([etcd_client::TxnOp::delete(mine.name.clone(), None)]);
        let answer = self.txn("refused a delete", txn).await?;
        Ok(answer.succeeded())
    }

    fn delete_later(&self, mine: Contender<i64>) {
        clean_up(
            self.client.clone(),
            mine.name,
            Until::SessionEnds(Arc::downgrade(&self.epoch), mine.session),
        );
    }

    /// Deleted until etcd answers, and once more a little later, in case the abandoned write
    /// itself arrives after the first deletion; should it land later still, the sweep of the
    /// lease deletes it. Never while this process knows the key as a waiter's or a holder's.
    async fn abandoned(&self, name: &str) -> Result<(), LockError> {
        clean_up(
            self.client.clone(),
            name.to_owned(),
            Until::Twice(self.settings.op_timeout * 2, self.contenders.downgrade()),
        );
        self.sweep_orphans();
        Ok(())
    }

    /// One read of the range, values included (a permits key's value is its limit and count).
    async fn list(&self, keys: &LockKeys) -> Result<Vec<Queued>, LockError> {
        self.list_queue(keys).await
    }

    async fn watcher(&self, keys: &LockKeys) -> Result<Watcher, LockError> {
        Ok(Watcher {
            client: self.client.clone(),
            range: range_of(keys),
            limit: self.settings.op_timeout,
        })
    }

    /// A predecessor's watch from the revision the queue was read at: a release after the
    /// read is never missed.
    async fn watch(watcher: &Watcher, awaited: Awaited<'_, i64>) -> Result<Option<Wake>, String> {
        let target = match awaited {
            Awaited::Predecessor(mine) => Target::Predecessor(mine.order),
            Awaited::Writers => Target::Writers,
            Awaited::Deletions => Target::Deletions,
        };
        let watched =
            watch_predecessor(&watcher.client, &watcher.range, target, watcher.limit).await?;
        Ok(watched
            .map(|mut watching| -> Wake { Box::pin(async move { watching.deleted().await }) }))
    }
}

impl Inspection for Etcd {
    /// One read of the queue, one of each lease's description.
    async fn who(
        &self,
        keys: &LockKeys,
        contenders: &[Queued],
    ) -> Result<Vec<Option<Who>>, LockError> {
        self.who_of(keys, contenders).await
    }

    /// The remaining TTL of each lease, one call per lease.
    async fn remaining(&self, owners: &[i64]) -> Result<Vec<Duration>, LockError> {
        self.leases_left(owners).await
    }
}

impl Records for Etcd {
    async fn head(&self, keys: &LockKeys) -> Result<Option<Head>, LockError> {
        self.first_of(keys).await
    }

    /// A transaction comparing the key's create revision, keeping it on its lease.
    async fn write(&self, mine: &Contender<i64>, data: &[u8]) -> Result<bool, LockError> {
        self.write_value(mine, data).await
    }
}
