//! Leases: acquire (one `leasehold_acquire` call), handover, and renewals of every kind of
//! lease (one statement per kind in a batch, split when the server refuses it). A lock's
//! release is `releases.rs`'s.

use std::collections::HashSet;

use tokio_postgres as pg;

use super::errors::{answered_row, attempt_of, sql_state};
use super::text::{db_text, token_text};
use super::waiters::MAX_INTEREST;
use super::PostgresStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Renewal, Renewed, StoreFuture};

/// Fences of one acquisition: `sequence value × FENCE_SLOTS + n`.
const FENCE_SLOTS: u64 = 32;

/// How many renewals one statement carries.
const RENEW_CHUNK: usize = 1000;

impl PostgresStore {
    pub(super) async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        debug_assert!(
            req.fences < FENCE_SLOTS,
            "fences of one acquisition overflow"
        );
        let key = db_text(req.keys.lock());
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let fences = req.fences as i64;
        let name: &str = req.contender.unwrap_or(&self.contender);
        let wait_ms = match req.interest.is_zero() {
            true => 0,
            false => req.interest.min(MAX_INTEREST).as_millis().max(1) as i64,
        };
        let queued = req.queued;
        // Recorded before sending: an acquire dropped before its answer may have queued us.
        let waits_as_process = wait_ms > 0 && req.contender.is_none();
        if waits_as_process {
            self.queued_set().insert(req.keys.lock().to_owned());
        }
        let answer = self
            .pool
            .call_creating(owner, "refused an acquire", |conn| {
                let (key, owner) = (key.clone(), owner);
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 7] = [
                        &key.as_ref(),
                        &owner,
                        &lease_ms,
                        &fences,
                        &name,
                        &wait_ms,
                        &queued,
                    ];
                    conn.client
                        .query_one(&conn.statements.acquire, &params)
                        .await
                }
            })
            .await;
        let Some(row) = answered_row(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        let attempt = attempt_of(&row);
        if waits_as_process && matches!(attempt, Attempt::Granted { .. }) {
            // The grant took us out of the line (leasehold_acquire).
            self.queued_set().remove(req.keys.lock());
        }
        Ok(attempt)
    }

    /// Takes every lease of `batch` (locks and readers' shares of distinct keys, none
    /// waiting in line) in one call of `leasehold_acquire_all`, or none: every answer
    /// `Granted` or every answer `Held`. Each lease's owner token is recorded for settling
    /// when the call's outcome becomes unknown, so the give-back of any of them waits until
    /// the call can no longer land ([`Store::settle`](crate::store::Store::settle)).
    pub(super) async fn acquire_all(
        &self,
        batch: &[AcquireRequest<'_>],
    ) -> Result<Vec<Attempt>, LockError> {
        debug_assert!(
            batch.iter().all(|r| r.fences < FENCE_SLOTS),
            "fences of one acquisition overflow"
        );
        let keys: Vec<String> = batch
            .iter()
            .map(|r| db_text(r.keys.lock()).into_owned())
            .collect();
        let owners: Vec<&str> = batch.iter().map(|r| token_text(r.token)).collect();
        let reads: Vec<bool> = batch.iter().map(|r| r.kind == LeaseKind::Read).collect();
        let leases: Vec<i64> = batch
            .iter()
            .map(|r| r.lease.as_millis().max(1) as i64)
            .collect();
        let fences: Vec<i64> = batch.iter().map(|r| r.fences as i64).collect();
        let name: &str = &self.contender;
        let answer = self
            .pool
            .call_creating_all(&owners, "refused to take several locks at once", |conn| {
                let (keys, owners, reads, leases, fences) =
                    (&keys, &owners, &reads, &leases, &fences);
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 6] =
                        [keys, owners, reads, leases, fences, &name];
                    conn.client
                        .query(&conn.statements.acquire_all, &params)
                        .await
                }
            })
            .await?;
        if answer.len() != batch.len() {
            return Err(LockError::unavailable(
                format!(
                    "PostgreSQL at {} answered {} leases for a batch of {}",
                    self.shared.shown,
                    answer.len(),
                    batch.len()
                ),
                None,
            ));
        }
        Ok(answer.iter().map(attempt_of).collect())
    }

    /// Hands the lock `token` holds on to another holder of this process ([`HAND_OVER`]):
    /// the next holder's fence, or `None` while a fenced transaction of the lock is open (the
    /// lock must then go back and be taken anew once that transaction ended) or once `token`
    /// no longer holds it.
    ///
    /// [`HAND_OVER`]: super::sql::HAND_OVER
    pub(super) async fn hand_over_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<Option<u64>, LockError> {
        let key = db_text(keys.lock());
        let owner = token_text(token);
        let row = self
            .call("refused a handover", |conn| {
                let key = key.clone();
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 2] = [&key.as_ref(), &owner];
                    conn.client
                        .query_one(&conn.statements.hand_over, &params)
                        .await
                }
            })
            .await?;
        let fence: Option<i64> = row.get(1);
        Ok(fence.and_then(|f| u64::try_from(f).ok()))
    }

    pub(super) async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut out = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(RENEW_CHUNK) {
            out.extend(self.renew_split(chunk).await?);
        }
        Ok(out)
    }

    /// Renews `batch` in one statement, halved while the server refuses it (an error with an
    /// SQLSTATE: a row waited on past `lock_timeout`, anything about one of its leases):
    /// [`renew_halving`](crate::store::renew_halving).
    fn renew_split<'a>(&'a self, batch: &'a [Renewal<'a>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(crate::store::renew_halving(
            batch,
            move |part| self.renew_statement(part),
            |e| sql_state(e).is_some(),
        ))
    }

    /// One renewal statement for every lease of `batch` of each kind present (the locks'
    /// rows, readers' leases, semaphore holders), sent side by side, so the batch is bounded
    /// by one operation timeout; all of them fail together if one fails.
    async fn renew_statement(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let parts: Vec<Vec<usize>> = [Kind::Lock, Kind::Reader, Kind::Permits]
            .into_iter()
            .map(|kind| {
                (0..batch.len())
                    .filter(|&i| Kind::of(batch[i].kind) == kind)
                    .collect::<Vec<usize>>()
            })
            .filter(|part| !part.is_empty())
            .collect();
        let renewed =
            crate::store::join_all(parts.iter().map(|part| self.renew_kind(batch, part))).await;
        let mut out = vec![Renewed::No; batch.len()];
        for (part, renewed) in parts.iter().zip(renewed) {
            for (&i, yes) in part.iter().zip(renewed?) {
                if yes {
                    out[i] = Renewed::Yes;
                }
            }
        }
        Ok(out)
    }

    /// Renews the leases `part` of `batch`, all of one kind, in one statement: whether each
    /// was extended.
    async fn renew_kind(
        &self,
        batch: &[Renewal<'_>],
        part: &[usize],
    ) -> Result<Vec<bool>, LockError> {
        let kind = Kind::of(batch[part[0]].kind);
        let keys: Vec<String> = part
            .iter()
            .map(|&i| db_text(batch[i].keys.lock()).into_owned())
            .collect();
        let owners: Vec<&str> = part.iter().map(|&i| token_text(batch[i].token)).collect();
        let leases: Vec<i64> = part
            .iter()
            .map(|&i| batch[i].lease.as_millis().max(1) as i64)
            .collect();
        let rows = self
            .call("refused a renewal", |conn| {
                let (keys, owners, leases) = (&keys, &owners, &leases);
                async move {
                    let statement = match kind {
                        Kind::Lock => &conn.statements.renew,
                        Kind::Reader => &conn.statements.renew_shared,
                        Kind::Permits => &conn.statements.renew_permits,
                    };
                    conn.client.query(statement, &[keys, owners, leases]).await
                }
            })
            .await?;
        let extended: HashSet<(String, String)> = rows
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
            .collect();
        Ok(keys
            .iter()
            .zip(&owners)
            .map(|(key, owner)| extended.contains(&(key.clone(), (*owner).to_owned())))
            .collect())
    }
}

/// What a renewal extends, by table: each has its statement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    Reader,
    Permits,
}

impl Kind {
    fn of(kind: LeaseKind) -> Self {
        match kind {
            LeaseKind::Exclusive => Kind::Lock,
            LeaseKind::Read => Kind::Reader,
            LeaseKind::Permits { .. } => Kind::Permits,
        }
    }
}
