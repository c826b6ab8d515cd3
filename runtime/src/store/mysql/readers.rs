//! Read locks: a reader's lease is a row of `leasehold_readers`, and the lock's row holds `R`
//! while readers hold it (`leasehold_acquire_shared`, `leasehold_release_shared` and
//! `leasehold_renew_shared` in `schema.sql`).

use mysql_async::prelude::Queryable;

use super::lease::{answered, attempt_of};
use super::sql::{ACQUIRE_SHARED, RELEASE_SHARED};
use super::text::token_text;
use super::waiters::YIELD_WINDOW;
use super::MysqlStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

impl MysqlStore {
    pub(super) async fn acquire_shared_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        let key = req.keys.lock().to_owned();
        let owner = token_text(req.token);
        let lease_ms = req.lease.as_millis().max(1) as i64;
        let answer = self
            .pool
            .call_creating(owner, "refused a read lock", |conn| {
                let params = (key.clone(), owner.to_owned(), lease_ms);
                Box::pin(
                    conn.exec_first::<(Option<i64>, Option<i64>), _, _>(ACQUIRE_SHARED, params),
                )
            })
            .await;
        let Some((fence, remaining)) = answered(answer)? else {
            return Ok(Attempt::Held { remaining: None });
        };
        Ok(attempt_of(fence, remaining))
    }

    pub(super) async fn release_shared_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let key = keys.lock().to_owned();
        let wake = keys.wake().to_owned();
        let owner = token_text(token);
        let window_ms = YIELD_WINDOW.as_millis() as i64;
        let row = self
            .call("refused a read lock's release", |conn| {
                let params = (key.clone(), owner.to_owned(), window_ms, wake.clone());
                Box::pin(conn.exec_first::<(Option<i64>,), _, _>(RELEASE_SHARED, params))
            })
            .await?;
        Ok(row.and_then(|(valid,)| valid) == Some(1))
    }
}
