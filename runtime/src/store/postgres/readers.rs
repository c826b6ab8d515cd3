//! Read locks: a reader's lease is a row of `leasehold_readers`, and the lock's row holds `R`
//! while readers hold it (`leasehold_acquire_shared`, `leasehold_release_shared` and
//! `leasehold_renew_shared` in `schema.sql`).

use tokio_postgres as pg;

use super::errors::{answered_row, attempt_of};
use super::text::{db_text, token_text};
use super::waiters::YIELD_WINDOW;
use super::PostgresStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

impl PostgresStore {
    pub(super) async fn acquire_shared_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        let key = db_text(req.keys.lock());
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let answer = self
            .pool
            .call_creating(owner, "refused a read lock", |conn| {
                let key = key.clone();
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 3] =
                        [&key.as_ref(), &owner, &lease_ms];
                    conn.client
                        .query_one(&conn.statements.acquire_shared, &params)
                        .await
                }
            })
            .await;
        let Some(row) = answered_row(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        Ok(attempt_of(&row))
    }

    pub(super) async fn release_shared_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let key = db_text(keys.lock());
        let wake = db_text(keys.wake());
        let owner = token_text(token);
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let row = self
            .call("refused a read lock's release", |conn| {
                let (key, wake) = (key.clone(), wake.clone());
                async move {
                    let params: [&(dyn pg::types::ToSql + Sync); 4] =
                        [&key.as_ref(), &owner, &window_ms, &wake.as_ref()];
                    conn.client
                        .query_one(&conn.statements.release_shared, &params)
                        .await
                }
            })
            .await?;
        Ok(row.get::<_, Option<bool>>(0).unwrap_or(false))
    }
}
