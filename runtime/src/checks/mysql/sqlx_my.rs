//! The fence statement on sqlx (feature `sqlx-mysql`): a
//! [`MySqlConnection`](sqlx::MySqlConnection) by `&mut`; its transactions and pool
//! connections deref to one.

use super::client::{Direct, RunsFenceCheck, StatementError};

impl RunsFenceCheck<Direct> for &mut sqlx::MySqlConnection {
    async fn run_fence_check(
        self,
        statement: &'static str,
        key: Vec<u8>,
        fence: i64,
    ) -> Result<Option<i64>, StatementError> {
        sqlx::query_scalar::<_, Option<i64>>(statement)
            .bind(key)
            .bind(fence)
            .fetch_one(self)
            .await
            .map_err(|e| {
                let code = e
                    .as_database_error()
                    .and_then(|db| db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
                    .map(sqlx::mysql::MySqlDatabaseError::number);
                // sqlx's message carries the server's ("error returned from database: …").
                StatementError::new(e.to_string(), code, Box::new(e))
            })
    }
}
