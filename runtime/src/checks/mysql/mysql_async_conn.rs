//! The fence statement on mysql_async: a [`Conn`](mysql_async::Conn) (a pool's connection is
//! one) or a [`Transaction`](mysql_async::Transaction), by `&mut`.

use std::future::Future;

use mysql_async::prelude::Queryable;

use super::client::{Direct, RunsFenceCheck, StatementError};

async fn run<Q>(
    client: &mut Q,
    statement: &'static str,
    key: Vec<u8>,
    fence: i64,
) -> Result<Option<i64>, StatementError>
where
    Q: Queryable,
{
    let row: Option<Option<i64>> = client
        .exec_first(statement, (key, fence))
        .await
        .map_err(failed)?;
    Ok(row.flatten())
}

fn failed(e: mysql_async::Error) -> StatementError {
    let code = match &e {
        mysql_async::Error::Server(server) => Some(server.code),
        _ => None,
    };
    StatementError::new(e.to_string(), code, Box::new(e))
}

impl RunsFenceCheck<Direct> for &mut mysql_async::Conn {
    fn run_fence_check(
        self,
        statement: &'static str,
        key: Vec<u8>,
        fence: i64,
    ) -> impl Future<Output = Result<Option<i64>, StatementError>> + Send {
        run(self, statement, key, fence)
    }
}

impl RunsFenceCheck<Direct> for &mut mysql_async::Transaction<'_> {
    fn run_fence_check(
        self,
        statement: &'static str,
        key: Vec<u8>,
        fence: i64,
    ) -> impl Future<Output = Result<Option<i64>, StatementError>> + Send {
        run(self, statement, key, fence)
    }
}
