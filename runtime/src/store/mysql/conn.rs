//! One connection to the server: opened within the connect timeout, with the session set up
//! for lock calls (READ COMMITTED, and every statement bounded by the operation timeout).

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::errors::unavailable_at;
use super::wakes::Wakes;
use crate::error::LockError;
use crate::store::Settings;

/// What one driver call returns: the future of a `Queryable` method on a borrowed connection.
pub(super) type Io<'c, T> =
    Pin<Box<dyn Future<Output = Result<T, mysql_async::Error>> + Send + 'c>>;

/// What the pool, the wake log's reader and the schema check share.
pub(super) struct Shared {
    pub(super) opts: mysql_async::Opts,
    pub(super) shown: String,
    pub(super) settings: Settings,
    pub(super) wakes: Wakes,
    /// Whether the server is MariaDB (read on the first connection): its time bound and idle
    /// bound differ from MySQL 8's.
    pub(super) mariadb: OnceLock<bool>,
}

impl Shared {
    /// A new connection, its session set up for lock calls: READ COMMITTED (no gap locks, so
    /// acquires of two free keys never wait for each other), row locks waited for at most
    /// half the operation timeout (InnoDB counts whole seconds: at least 1 s), and each
    /// statement stopped by the server at the operation timeout (MariaDB's
    /// `max_statement_time`, every statement; MySQL 8's `max_execution_time` bounds SELECTs
    /// only, so a `CALL` there is bounded by the lock wait and the client's timeout). Bounded
    /// by the connect timeout.
    pub(super) async fn open(&self) -> Result<mysql_async::Conn, LockError> {
        let limit = self.settings.connect_timeout;
        let open = async {
            let mut conn = login(&self.opts).await?;
            let mariadb = match self.mariadb.get() {
                Some(m) => *m,
                None => {
                    let found: Option<i64> = conn
                        .query_first("SELECT VERSION() LIKE '%MariaDB%'")
                        .await?;
                    *self.mariadb.get_or_init(|| found == Some(1))
                }
            };
            conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                .await?;
            conn.query_drop(session_bounds(mariadb, self.settings.op_timeout))
                .await?;
            Ok::<_, mysql_async::Error>(conn)
        };
        match tokio::time::timeout(limit, open).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(self.unavailable("could not be reached", e)),
            Err(_) => Err(self.late(limit)),
        }
    }

    pub(super) fn unavailable(&self, what: &str, e: mysql_async::Error) -> LockError {
        unavailable_at(&self.shown, what, e)
    }

    pub(super) fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!("MySQL at {} did not answer within {limit:?}", self.shown),
            None,
        )
    }
}

/// How many times a login the server refused is tried, each with a new challenge.
const LOGINS: usize = 3;

/// A connection, logged in: a login the server refused (`ER_ACCESS_DENIED_ERROR`) is tried
/// again, up to [`LOGINS`] times in all. mysql_async 0.37 drops the last byte of the server's
/// challenge when it is zero (it reads the challenge as a C string); MariaDB's `ed25519`
/// challenge is 32 random bytes, so one login in 256 signs the wrong message and is refused
/// (measured: 10 of 1,500 logins). With a new challenge each, three tries in a row fail so
/// in one of 16 million. The cost: a wrong password is refused three times, not once (a
/// server that blocks a user after `max_password_errors` refusals counts three per
/// connection).
async fn login(opts: &mysql_async::Opts) -> Result<mysql_async::Conn, mysql_async::Error> {
    let mut tries = 1;
    loop {
        match mysql_async::Conn::new(opts.clone()).await {
            Err(e) if tries < LOGINS && super::errors::code(&e) == Some(1045) => tries += 1,
            done => return done,
        }
    }
}

/// The `SET` bounding a session's statements by `bound` and its row-lock waits by half of it.
pub(super) fn session_bounds(mariadb: bool, bound: Duration) -> String {
    let wait = bound.as_secs_f64().div_euclid(2.0).ceil().max(1.0) as u64;
    if mariadb {
        format!(
            "SET SESSION innodb_lock_wait_timeout = {wait}, max_statement_time = {:.3}",
            bound.as_secs_f64().max(0.001)
        )
    } else {
        format!(
            "SET SESSION innodb_lock_wait_timeout = {wait}, max_execution_time = {}",
            bound.as_millis().max(1)
        )
    }
}
