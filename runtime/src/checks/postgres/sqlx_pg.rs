//! The fence statements on sqlx (feature `sqlx`): a [`PgConnection`](sqlx::PgConnection) by
//! `&mut`; its transactions and pool connections deref to one.

use super::client::{Direct, RunsFenceCheck, StatementError};

impl RunsFenceCheck<Direct> for &mut sqlx::PgConnection {
    async fn run_fence_check(
        self,
        statement: &'static str,
        key: String,
        fence: i64,
    ) -> Result<bool, StatementError> {
        sqlx::query_scalar::<_, bool>(statement)
            .bind(key)
            .bind(fence)
            .fetch_one(self)
            .await
            .map_err(|e| {
                let sql_state = e
                    .as_database_error()
                    .and_then(|db| db.code())
                    .map(|code| code.into_owned());
                // sqlx's message carries the server's ("error returned from database: …").
                StatementError::new(e.to_string(), sql_state.as_deref(), Box::new(e))
            })
    }
}
