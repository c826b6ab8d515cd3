//! Semaphores: a row per semaphore in `leasehold_semaphores` (the agreed limit, the last
//! fence), a row per holder with its own lease in `leasehold_permits`, and the waiters for
//! several permits in the line table under the semaphore's key (`leasehold_acquire_permits`
//! and `leasehold_renew_permits` in `schema.sql`).

use std::time::Duration;

use tokio_postgres as pg;

use super::errors::{answered_row, attempt_of};
use super::sql::{INSPECT_PERMITS, WITHDRAW_PERMITS};
use super::text::{db_text, token_text};
use super::PostgresStore;
use crate::error::LockError;
use crate::store::identity::{holder, Stamp};
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{disagreement, AcquireRequest, Attempt, PermitState, PermitWaiter};

impl PostgresStore {
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
        let key = db_text(req.keys.lock());
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let (limit_sql, count_sql) = (
            i32::try_from(limit).unwrap_or(i32::MAX),
            i32::try_from(count).unwrap_or(i32::MAX),
        );
        let answer = self
            .pool
            .call_creating(owner, "refused a semaphore's permits", |conn| {
                let (key, place) = (key.clone(), place.as_str());
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 7] = [
                        &key.as_ref(),
                        &owner,
                        &lease_ms,
                        &limit_sql,
                        &count_sql,
                        &place,
                        &wait_ms,
                    ];
                    conn.client
                        .query_one(&conn.statements.acquire_permits, &params)
                        .await
                }
            })
            .await;
        let Some(row) = answered_row(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        let agreed: Option<i32> = row.get(2);
        if let Some(agreed) = agreed {
            return Err(disagreement(u32::try_from(agreed).unwrap_or(0), limit));
        }
        Ok(attempt_of(&row))
    }

    pub(super) async fn release_permits_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let key = db_text(keys.lock());
        let wake = db_text(keys.wake());
        let owner = token_text(token);
        let rows = self
            .call("refused a release of permits", |conn| {
                let (key, wake) = (key.clone(), wake.clone());
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 3] =
                        [&key.as_ref(), &owner, &wake.as_ref()];
                    conn.client
                        .query(&conn.statements.release_permits, &params)
                        .await
                }
            })
            .await?;
        Ok(rows.first().is_some_and(|row| row.get::<_, bool>(0)))
    }

    pub(super) async fn inspect_permits_once(
        &self,
        keys: &LockKeys,
    ) -> Result<PermitState, LockError> {
        let key = db_text(keys.lock()).into_owned();
        let rows = self
            .query("refused a read of a semaphore", INSPECT_PERMITS, &[&key])
            .await?;
        let Some(first) = rows.first() else {
            return Ok(PermitState::default());
        };
        let limit: i32 = first.get(0);
        let stamps: Vec<Option<Stamp>> = rows
            .iter()
            .map(|row| Stamp::of_public(row.get::<_, &str>(3)))
            .collect();
        let ids = stamps.iter().flatten().map(|s| s.locker.as_str());
        let described = self.descriptions(ids).await?;
        Ok(PermitState {
            limit: u32::try_from(limit).ok(),
            holders: rows
                .iter()
                .zip(stamps)
                .map(|(row, stamp)| {
                    let permits: i32 = row.get(1);
                    let remaining: i64 = row.get(2);
                    (
                        u32::try_from(permits).unwrap_or(0),
                        Duration::from_millis(u64::try_from(remaining).unwrap_or(0)),
                        holder(stamp, |id| described.get(id).cloned()),
                    )
                })
                .collect(),
        })
    }
}

impl PostgresStore {
    /// Leaves the queue in the background; without a runtime, or with the server unreachable,
    /// the place lapses by itself within [`PERMIT_INTEREST`].
    pub(super) fn withdraw_permits(&self, keys: &LockKeys, waiter: u128, count: u32) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let key = db_text(keys.lock()).into_owned();
        let wake = db_text(keys.wake()).into_owned();
        let place = PermitWaiter::place(waiter, count);
        runtime.spawn(async move {
            let params: [&(dyn pg::types::ToSql + Sync); 3] = [&key, &place, &wake];
            let done = pool
                .call(
                    "refused a withdrawal of a permit waiter",
                    |conn| async move { conn.client.query(WITHDRAW_PERMITS, &params).await },
                )
                .await;
            if let Err(e) = done {
                tracing::debug!(error = %e, "withdrawing a permit waiter failed; it lapses");
            }
        });
    }
}
