//! Leases: acquire (one `leasehold_acquire` call), the in-process handover, and renewals of
//! every kind of lease (one call per kind in a batch, halved when the server refuses it);
//! releases are `releases.rs`'s.

use std::collections::HashSet;

use mysql_async::prelude::Queryable;

use super::errors::{is_lock_wait, refused};
use super::sql::{ACQUIRE, ACQUIRE_ALL, HAND_OVER, RENEW, RENEW_PERMITS, RENEW_SHARED};
use super::text::{hex, token_text};
use super::waiters::MAX_INTEREST;
use super::MysqlStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Renewal, Renewed};

/// Fences of one acquisition: `slot × FENCE_SLOTS + n`.
const FENCE_SLOTS: u64 = 32;

/// How many renewals one call carries.
const RENEW_CHUNK: usize = 500;

/// What an acquire's row says: the top fence when granted, else the holder's remaining lease
/// in milliseconds (when known).
pub(super) fn attempt_of(fence: Option<i64>, remaining: Option<i64>) -> Attempt {
    match fence {
        Some(top) => Attempt::granted(top as u64),
        None => Attempt::Held {
            remaining: remaining.map(|ms| std::time::Duration::from_millis(ms.max(1) as u64)),
        },
    }
}

/// An acquire's answer: a statement that waited for a row another transaction held (or met a
/// deadlock) reads as held, and is tried again.
pub(super) fn answered<T>(answer: Result<Option<T>, LockError>) -> Result<Option<T>, LockError> {
    match answer {
        Err(e) if super::errors::driver_error(&e).is_some_and(is_lock_wait) => Ok(None),
        other => other,
    }
}

impl MysqlStore {
    pub(super) async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        debug_assert!(
            req.fences < FENCE_SLOTS,
            "fences of one acquisition overflow"
        );
        let key = req.keys.lock().to_owned();
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let fences = req.fences as i64;
        let name: String = req.contender.unwrap_or(&self.contender).to_owned();
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
                let params = (
                    key.clone(),
                    owner.to_owned(),
                    lease_ms,
                    fences,
                    name.clone(),
                    wait_ms,
                    queued,
                );
                Box::pin(conn.exec_first::<(Option<i64>, Option<i64>), _, _>(ACQUIRE, params))
            })
            .await;
        let Some((fence, remaining)) = answered(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        let attempt = attempt_of(fence, remaining);
        if waits_as_process && matches!(attempt, Attempt::Granted { .. }) {
            // The grant took us out of the line (leasehold_acquire).
            self.queued_set().remove(req.keys.lock());
        }
        Ok(attempt)
    }

    /// Takes every lease of `batch` (locks and readers' shares of distinct keys, none
    /// waiting in line) in one call of `leasehold_acquire_all`, or none: every answer
    /// `Granted` or every answer `Held`. The batch goes as JSON, keys and owners in hex,
    /// sorted by key so that two batches lock their rows in the same order. Each lease's owner
    /// token is recorded for settling when the call's outcome becomes unknown, so the
    /// give-back of any of them waits until the call can no longer land
    /// ([`Store::settle`](crate::store::Store::settle)).
    pub(super) async fn acquire_all(
        &self,
        batch: &[AcquireRequest<'_>],
    ) -> Result<Vec<Attempt>, LockError> {
        debug_assert!(
            batch.iter().all(|r| r.fences < FENCE_SLOTS),
            "fences of one acquisition overflow"
        );
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by(|&a, &b| batch[a].keys.lock().cmp(batch[b].keys.lock()));
        let mut json = String::from("[");
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                json.push(',');
            }
            let req = &batch[i];
            json.push_str(&format!(
                "[\"{}\",\"{}\",{},{},{}]",
                hex(req.keys.lock().as_bytes()),
                hex(token_text(req.token).as_bytes()),
                u8::from(req.kind == LeaseKind::Read),
                req.lease.as_millis().max(1),
                req.fences
            ));
        }
        json.push(']');
        let owners: Vec<&str> = batch.iter().map(|r| token_text(r.token)).collect();
        let name = self.contender.to_string();
        let answer = self
            .pool
            .call_creating_all(&owners, "refused to take several locks at once", |conn| {
                let params = (json.clone(), name.clone());
                Box::pin(
                    conn.exec_first::<(Option<String>, Option<i64>, Option<i64>), _, _>(
                        ACQUIRE_ALL,
                        params,
                    ),
                )
            })
            .await;
        let held = |remaining: Option<i64>, at: Option<i64>| {
            let mut attempts = vec![Attempt::Held { remaining: None }; batch.len()];
            if let Some(i) = at.and_then(|at| order.get(at as usize)) {
                attempts[*i] = attempt_of(None, remaining);
            }
            attempts
        };
        let Some((fences, remaining, at)) = answered(answer)? else {
            return Ok(held(None, None));
        };
        let Some(fences) = fences else {
            return Ok(held(remaining, at));
        };
        let tops: Vec<u64> = fences
            .split(',')
            .filter_map(|f| f.parse::<u64>().ok())
            .collect();
        if tops.len() != batch.len() {
            return Err(LockError::unavailable(
                format!(
                    "MySQL at {} answered {} fences for a batch of {}",
                    self.shared.shown,
                    tops.len(),
                    batch.len()
                ),
                None,
            ));
        }
        let mut attempts = vec![Attempt::Held { remaining: None }; batch.len()];
        for (&i, top) in order.iter().zip(tops) {
            attempts[i] = Attempt::granted(top);
        }
        Ok(attempts)
    }

    /// Hands the lock `token` holds on to another holder of this process (`leasehold_hand_over`):
    /// the next holder's fence, or `None` while a fenced transaction of the lock is open (the
    /// lock must then go back and be taken anew once that transaction ended) or once `token`
    /// no longer holds it.
    pub(super) async fn hand_over_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<Option<u64>, LockError> {
        let key = keys.lock().to_owned();
        let owner = token_text(token);
        let row = self
            .call("refused a handover", |conn| {
                let params = (key.clone(), owner.to_owned());
                Box::pin(conn.exec_first::<(Option<i64>, Option<i64>), _, _>(HAND_OVER, params))
            })
            .await;
        let row = answered(row)?;
        Ok(row
            .and_then(|(_, fence)| fence)
            .and_then(|f| u64::try_from(f).ok()))
    }

    pub(super) async fn renew_all(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut out = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(RENEW_CHUNK) {
            out.extend(
                crate::store::renew_halving(chunk, |part| self.renew_call(part), refused).await?,
            );
        }
        Ok(out)
    }

    /// One renewal call for every lease of `batch` of each kind present (the locks' rows,
    /// readers' leases, semaphore holders), sent side by side on pooled connections, so the
    /// batch is bounded by one operation timeout; all of them fail together if one fails.
    async fn renew_call(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
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
        for renewed in renewed {
            for i in renewed? {
                out[i] = Renewed::Yes;
            }
        }
        Ok(out)
    }

    /// Renews the leases `part` of `batch`, all of one kind, in one call: the indexes (into
    /// `batch`) of those extended. The batch goes as JSON, keys and owners in hex (keys may hold
    /// any byte), sorted by key so that two batches lock shared rows in the same order.
    async fn renew_kind(
        &self,
        batch: &[Renewal<'_>],
        part: &[usize],
    ) -> Result<Vec<usize>, LockError> {
        let kind = Kind::of(batch[part[0]].kind);
        let mut part = part.to_vec();
        part.sort_by(|&a, &b| batch[a].keys.lock().cmp(batch[b].keys.lock()));
        let mut json = String::from("[");
        for (n, &i) in part.iter().enumerate() {
            if n > 0 {
                json.push(',');
            }
            json.push_str(&format!(
                "[{i},\"{}\",\"{}\",{}]",
                hex(batch[i].keys.lock().as_bytes()),
                hex(token_text(batch[i].token).as_bytes()),
                batch[i].lease.as_millis().max(1)
            ));
        }
        json.push(']');
        let statement = match kind {
            Kind::Lock => RENEW,
            Kind::Reader => RENEW_SHARED,
            Kind::Permits => RENEW_PERMITS,
        };
        let rows: Vec<i64> = self
            .call("refused a renewal", |conn| {
                Box::pin(conn.exec::<i64, _, _>(statement, (json.clone(),)))
            })
            .await?;
        let asked: HashSet<usize> = part.iter().copied().collect();
        Ok(rows
            .into_iter()
            .filter_map(|i| usize::try_from(i).ok())
            .filter(|i| asked.contains(i))
            .collect())
    }
}

/// What a renewal extends, by table: each has its procedure.
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
