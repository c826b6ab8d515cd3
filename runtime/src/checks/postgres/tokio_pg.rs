//! The fence statements on tokio-postgres: a [`Client`](pg::Client) or a
//! [`Transaction`](pg::Transaction), by `&` or `&mut`.

use std::future::Future;

use tokio_postgres as pg;

use super::client::{Direct, RunsFenceCheck, StatementError};
use crate::store::postgres::errors::error_text;

async fn run<C>(
    client: &C,
    statement: &'static str,
    key: String,
    fence: i64,
) -> Result<bool, StatementError>
where
    C: pg::GenericClient + Sync,
{
    let row = client
        .query_one(statement, &[&key, &fence])
        .await
        .map_err(failed)?;
    row.try_get(0).map_err(failed)
}

fn failed(e: pg::Error) -> StatementError {
    let sql_state = e.code().map(|code| code.code().to_owned());
    StatementError::new(error_text(&e), sql_state.as_deref(), Box::new(e))
}

macro_rules! runs_on {
    ($($client:ty),+) => {$(
        impl RunsFenceCheck<Direct> for $client {
            fn run_fence_check(
                self,
                statement: &'static str,
                key: String,
                fence: i64,
            ) -> impl Future<Output = Result<bool, StatementError>> + Send {
                run(&*self, statement, key, fence)
            }
        }
    )+};
}

runs_on!(
    &pg::Client,
    &mut pg::Client,
    &pg::Transaction<'_>,
    &mut pg::Transaction<'_>
);
