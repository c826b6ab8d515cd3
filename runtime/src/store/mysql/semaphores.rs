//! Semaphores: a row per semaphore in `leasehold_semaphores` (the agreed limit, the last
//! fence), a row per holder with its own lease in `leasehold_permits`, and the waiters for
//! several permits in the line table under the semaphore's key (`leasehold_acquire_permits`
//! and `leasehold_renew_permits` in `schema.sql`).

use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::lease::{answered, attempt_of};
use super::sql::{ACQUIRE_PERMITS, INSPECT_PERMITS, RELEASE_PERMITS, WITHDRAW_PERMITS};
use super::text::{public_of, token_text};
use super::MysqlStore;
use crate::error::LockError;
use crate::store::identity::{holder, Stamp};
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{disagreement, AcquireRequest, Attempt, PermitState, PermitWaiter};

impl MysqlStore {
    pub(super) async fn acquire_permits_once(
        &self,
        req: &AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> Result<Attempt, LockError> {
        let (place, wait_ms) = match waiter {
            Some(w) => {
                let left = w.interest();
                // Zero: it will not wait any more, so it is not queued.
                let wait_ms = if left.is_zero() {
                    0
                } else {
                    left.as_millis().max(1) as i64
                };
                (PermitWaiter::place(w.name, count), wait_ms)
            }
            None => (String::new(), 0),
        };
        let key = req.keys.lock().to_owned();
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let (limit_sql, count_sql) = (
            i32::try_from(limit).unwrap_or(i32::MAX),
            i32::try_from(count).unwrap_or(i32::MAX),
        );
        let answer = self
            .pool
            .call_creating(owner, "refused a semaphore's permits", |conn| {
                let params = (
                    key.clone(),
                    owner.to_owned(),
                    lease_ms,
                    limit_sql,
                    count_sql,
                    place.clone(),
                    wait_ms,
                );
                Box::pin(
                    conn.exec_first::<(Option<i64>, Option<i64>, Option<i64>), _, _>(
                        ACQUIRE_PERMITS,
                        params,
                    ),
                )
            })
            .await;
        let Some((fence, remaining, agreed)) = answered(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        if let Some(agreed) = agreed {
            return Err(disagreement(u32::try_from(agreed).unwrap_or(0), limit));
        }
        Ok(attempt_of(fence, remaining))
    }

    pub(super) async fn release_permits_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let key = keys.lock().to_owned();
        let wake = keys.wake().to_owned();
        let owner = token_text(token);
        let row = self
            .call("refused a release of permits", |conn| {
                let params = (key.clone(), owner.to_owned(), wake.clone());
                Box::pin(conn.exec_first::<(Option<i64>,), _, _>(RELEASE_PERMITS, params))
            })
            .await?;
        Ok(row.and_then(|(valid,)| valid) == Some(1))
    }

    pub(super) async fn inspect_permits_once(
        &self,
        keys: &LockKeys,
    ) -> Result<PermitState, LockError> {
        let key = keys.lock().to_owned();
        let rows: Vec<(i64, i64, i64, Vec<u8>)> = self
            .call("refused a read of a semaphore", |conn| {
                Box::pin(conn.exec(INSPECT_PERMITS, (key.clone(),)))
            })
            .await?;
        let Some(first) = rows.first() else {
            return Ok(PermitState::default());
        };
        let limit = first.0;
        let stamps: Vec<Option<Stamp>> = rows
            .iter()
            .map(|row| Stamp::of_public(public_of(&row.3)))
            .collect();
        let ids = stamps.iter().flatten().map(|s| s.locker.as_str());
        let described = self.descriptions(ids).await?;
        Ok(PermitState {
            limit: u32::try_from(limit).ok(),
            holders: rows
                .iter()
                .zip(stamps)
                .map(|(row, stamp)| {
                    (
                        u32::try_from(row.1).unwrap_or(0),
                        Duration::from_millis(u64::try_from(row.2).unwrap_or(0)),
                        holder(stamp, |id| described.get(id).cloned()),
                    )
                })
                .collect(),
        })
    }

    /// Leaves the queue in the background; without a runtime, or with the server unreachable,
    /// the place lapses by itself within [`PERMIT_INTEREST`](crate::store::PERMIT_INTEREST).
    pub(super) fn withdraw_permits(&self, keys: &LockKeys, waiter: u128, count: u32) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let key = keys.lock().to_owned();
        let wake = keys.wake().to_owned();
        let place = PermitWaiter::place(waiter, count);
        runtime.spawn(async move {
            let done = pool
                .call("refused a withdrawal of a permit waiter", |conn| {
                    let params = (key.clone(), place.clone(), wake.clone());
                    Box::pin(conn.exec_drop(WITHDRAW_PERMITS, params))
                })
                .await;
            if let Err(e) = done {
                tracing::debug!(error = %e, "withdrawing a permit waiter failed; it lapses");
            }
        });
    }
}
