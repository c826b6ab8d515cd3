//! Contending for a lock with this process's keys: the writer's and the reader's attempt,
//! release, renewal, and the subscription that watches the predecessor.

use tokio::sync::watch;

use etcd_client as etcd;

use super::calls::retry_unsent;
use super::contenders::{take_for_release, Contender, InFlight};
use super::names::{first_writer, key_of, range_of, reader_key_of, FENCE_SLOTS};
use super::queue::{clean_up, fence_record, is_first, watch_predecessor, Until};
use super::EtcdStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Renewal, Renewed, WakeSubscription};

/// How many reads one renewal transaction carries (etcd refuses more than 128 by default).
pub(super) const RENEW_CHUNK: usize = 64;

impl EtcdStore {
    pub(super) async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        debug_assert!(req.fences < FENCE_SLOTS, "fences of one key overflow");
        let _in_flight = InFlight::new(&self.contenders, key_of(req.keys, req.token));
        let (lease, session) = self.lease().await?;
        let existing = self
            .contenders
            .lock()
            .unwrap()
            .waiting
            .get(req.keys.lock())
            .cloned();
        let queued = match existing {
            Some(c) if req.queued && c.session == session => Some(c),
            Some(stale) => {
                self.forget_waiting(req.keys.lock());
                self.delete_later(stale);
                None
            }
            None => None,
        };
        // A put does not refresh an etcd lease: when its last acknowledged keep-alive is too
        // old to cover this lock, one goes with the request, in parallel.
        let need = self.needs_keep_alive(session, req.sent, req.lease).await;
        let keep_alive = async {
            if need {
                self.kept_alive(session).await
            } else {
                true
            }
        };
        let (looked, alive) = match queued {
            Some(mine) => {
                let (looked, alive) =
                    tokio::join!(self.look(req.keys, &mine, req.fences), keep_alive);
                let (still, first) = looked?;
                if still {
                    ((mine, first), alive)
                } else {
                    // Deleted under us (an operator, a lease that ended): queue anew.
                    self.forget_waiting(req.keys.lock());
                    let (put, alive) = tokio::join!(
                        self.put_contender(lease, session, req.keys, req.token, req.fences),
                        self.kept_alive(session)
                    );
                    (put?, alive)
                }
            }
            None => {
                let (put, alive) = tokio::join!(
                    self.put_contender(lease, session, req.keys, req.token, req.fences),
                    keep_alive
                );
                (put?, alive)
            }
        };
        let (mine, first) = looked;
        // Recorded at once: if this attempt is cancelled from here on, the turn's withdrawal
        // finds the key and deletes it.
        self.contenders
            .lock()
            .unwrap()
            .waiting
            .insert(req.keys.lock().to_owned(), mine.clone());
        if is_first(&first, &mine) {
            if !alive {
                // First in line, but the lease cannot be vouched for. The key stays queued;
                // the turn withdraws it if the caller stops.
                return Err(LockError::unavailable(
                    format!(
                        "etcd at {} did not acknowledge a keep-alive of the lease within {:?}",
                        self.shown, self.settings.op_timeout
                    ),
                    None,
                ));
            }
            let top = (mine.revision as u64) * FENCE_SLOTS + req.fences;
            let mut contenders = self.contenders.lock().unwrap();
            contenders.waiting.remove(req.keys.lock());
            contenders.held.insert(req.token.clone(), mine);
            return Ok(Attempt::Granted { top });
        }
        if req.interest.is_zero() {
            // Not waiting: leave the queue at once.
            self.forget_waiting(req.keys.lock());
            let key = mine.key.clone();
            let delete = |mut c: etcd::Client| {
                let key = key.clone();
                async move { c.delete(key, None).await }
            };
            let deleted = retry_unsent(&self.client, self.settings.op_timeout, delete).await;
            if !matches!(deleted, Ok(Ok(_))) {
                self.delete_later(mine);
            }
        }
        Ok(Attempt::Held { remaining: None })
    }

    /// Deletes the key of a held lease: a writer's, or a reader's; `key` names where an
    /// abandoned attempt of `token` would have put it (`key_of`, `reader_key_of`).
    pub(super) async fn release_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        key: fn(&LockKeys, &OwnerToken) -> String,
    ) -> Result<bool, LockError> {
        let (held, _releasing) = take_for_release(&self.contenders, token).unzip();
        let Some(mine) = held else {
            // Not held by us: a lease lost meanwhile, or an attempt abandoned before its
            // answer came. Delete what that attempt may have created (its tag names it), until
            // etcd answers; and once more a little later, in case the abandoned write itself
            // arrives after the first deletion.
            clean_up(
                self.client.clone(),
                key(keys, token),
                Until::Twice(self.settings.op_timeout * 2),
            );
            // Should that write land later still, the sweep of the lease deletes it.
            self.sweep_orphans();
            return Ok(false);
        };
        if *self.epoch.borrow() != mine.session {
            return Ok(false); // its lease ended: the key is gone or going with it
        }
        let txn = etcd::Txn::new()
            .when([etcd::Compare::create_revision(
                mine.key.clone(),
                etcd::CompareOp::Equal,
                mine.revision,
            )])
            .and_then([etcd::TxnOp::delete(mine.key.clone(), None)]);
        let call = |mut c: etcd::Client| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        };
        match retry_unsent(&self.client, self.settings.op_timeout, call).await {
            Ok(Ok(answer)) => Ok(answer.succeeded()),
            // Unknown outcome (a failover, a partition): the caller hears it, and the key is
            // deleted in the background as soon as etcd answers. It has no TTL of its own:
            // left behind, it would hold the lock as long as the lease lives.
            Ok(Err(e)) => {
                self.delete_later(mine);
                Err(self.unavailable("refused a delete", e))
            }
            Err(_) => {
                self.delete_later(mine);
                Err(self.late(self.settings.op_timeout))
            }
        }
    }

    /// One reader's attempt: its key, the lock's first writer and the fence record in one
    /// transaction. The key stays when no writer's key is older than it; otherwise it goes
    /// again at once (readers do not wait in the queue).
    pub(super) async fn acquire_shared_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        let key = reader_key_of(req.keys, req.token);
        let _in_flight = InFlight::new(&self.contenders, key.clone());
        let (lease, session) = self.lease().await?;
        let reads = [
            etcd::TxnOp::get(key.clone(), None),
            etcd::TxnOp::get(range_of(req.keys), Some(first_writer(req.keys))),
            etcd::TxnOp::get(req.keys.fence().to_owned(), None),
        ];
        let put = etcd::TxnOp::put(
            key.clone(),
            req.token.as_bytes(),
            Some(etcd::PutOptions::new().with_lease(lease)),
        );
        let txn = etcd::Txn::new()
            .when([etcd::Compare::create_revision(
                key.clone(),
                etcd::CompareOp::Equal,
                0,
            )])
            .and_then(
                std::iter::once(put)
                    .chain(reads.clone())
                    .collect::<Vec<_>>(),
            )
            .or_else(reads);
        // As for a writer: a keep-alive goes with the request when the last one is too old.
        let need = self.needs_keep_alive(session, req.sent, req.lease).await;
        let keep_alive = async {
            if need {
                self.kept_alive(session).await
            } else {
                true
            }
        };
        let put = self.bounded("refused a write", |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        });
        let (answer, alive) = tokio::join!(put, keep_alive);
        let answer = answer?;
        let mut gets = answer.op_responses().into_iter().filter_map(|r| match r {
            etcd::TxnOpResponse::Get(get) => Some(get),
            _ => None,
        });
        let mine = gets.next().and_then(|g| g.kvs().first().cloned());
        let writer = gets.next().and_then(|g| g.kvs().first().cloned());
        let record = gets.next().and_then(|g| g.kvs().first().cloned());
        let Some(mine) = mine.filter(|kv| kv.lease() == lease) else {
            return Err(LockError::unavailable(
                format!(
                    "etcd at {}: this reader's key belongs to another lease; try again",
                    self.shown
                ),
                None,
            ));
        };
        let mine = Contender {
            key,
            revision: mine.create_revision(),
            session,
            lease,
        };
        let blocked = writer.is_some_and(|w| w.create_revision() < mine.revision);
        if blocked || !alive {
            // A writer holds the lock or waits for it (or the lease cannot be vouched for):
            // leave at once, and wait without a key for the writers ahead to go.
            let key = mine.key.clone();
            let delete = |mut c: etcd::Client| {
                let key = key.clone();
                async move { c.delete(key, None).await }
            };
            let deleted = retry_unsent(&self.client, self.settings.op_timeout, delete).await;
            if !matches!(deleted, Ok(Ok(_))) {
                self.delete_later(mine);
            }
            if blocked {
                return Ok(Attempt::Held { remaining: None });
            }
            return Err(LockError::unavailable(
                format!(
                    "etcd at {} did not acknowledge a keep-alive of the lease within {:?}",
                    self.shown, self.settings.op_timeout
                ),
                None,
            ));
        }
        let top = record
            .as_ref()
            .and_then(fence_record)
            .unwrap_or((mine.revision as u64) * FENCE_SLOTS)
            .max(1);
        self.contenders
            .lock()
            .unwrap()
            .held
            .insert(req.token.clone(), mine);
        Ok(Attempt::Granted { top })
    }

    pub(super) async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let session = {
            let current = self.current.lock().await;
            current
                .as_ref()
                .filter(|c| !c.beats.is_closed())
                .map(|c| c.session)
        };
        let mine: Vec<Option<Contender>> = {
            let contenders = self.contenders.lock().unwrap();
            batch
                .iter()
                .map(|r| {
                    contenders
                        .held
                        .get(r.token)
                        .filter(|c| Some(c.session) == session)
                        .cloned()
                })
                .collect()
        };
        let Some(session) = session else {
            return Ok(vec![Renewed::No; batch.len()]);
        };
        let present: Vec<&Contender> = mine.iter().flatten().collect();
        let reads = async {
            let mut found = Vec::with_capacity(present.len());
            for chunk in present.chunks(RENEW_CHUNK) {
                let txn = etcd::Txn::new().and_then(
                    chunk
                        .iter()
                        .map(|c| {
                            etcd::TxnOp::get(
                                c.key.clone(),
                                Some(etcd::GetOptions::new().with_keys_only()),
                            )
                        })
                        .collect::<Vec<_>>(),
                );
                let answer = self
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
                            .is_some_and(|kv| kv.create_revision() == c.revision),
                        _ => false,
                    };
                    found.push(ours);
                }
            }
            Ok::<_, LockError>(found)
        };
        let (found, alive) = tokio::join!(reads, self.kept_alive(session));
        let found = found?;
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

    pub(super) async fn subscribe_once(
        &self,
        keys: &LockKeys,
    ) -> Result<WakeSubscription, LockError> {
        let mine = self
            .contenders
            .lock()
            .unwrap()
            .waiting
            .get(keys.lock())
            .map(|c| c.revision);
        let (tx, rx) = watch::channel(0u64);
        let range = range_of(keys);
        let limit = self.settings.op_timeout;
        // The first watch is set before this returns, from the revision the queue was read
        // at: a release after the read is never missed.
        let first = watch_predecessor(&self.client, &range, mine, limit)
            .await
            .map_err(|e| {
                LockError::unavailable(format!("etcd at {} refused a watch: {e}", self.shown), None)
            })?;
        let client = self.client.clone();
        tokio::spawn(async move {
            let mut next = first;
            let mut mine = mine;
            loop {
                // No predecessor (we are first, or gone): wake the waiter to look at once.
                if let Some(mut watching) = next.take() {
                    tokio::select! {
                        _ = watching.deleted() => {}
                        _ = tx.closed() => return,
                    }
                }
                tx.send_modify(|n| *n += 1);
                if tx.is_closed() {
                    return;
                }
                next = match watch_predecessor(&client, &range, mine, limit).await {
                    Ok(Some(w)) => Some(w),
                    // This process's key is first or gone: a reader of this process that
                    // subscribed alongside it still waits, now for the writers' keys.
                    Ok(None) if mine.is_some() => {
                        mine = None;
                        match watch_predecessor(&client, &range, None, limit).await {
                            Ok(Some(w)) => Some(w),
                            _ => return,
                        }
                    }
                    // Nothing to wait for, or etcd did not answer: the waiter's own attempts
                    // (at least every second) take it from here.
                    _ => return,
                };
            }
        });
        Ok(WakeSubscription::new(rx, None))
    }
}
