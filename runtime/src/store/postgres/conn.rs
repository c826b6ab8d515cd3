//! One connection to the server: opened within the connect timeout with the session's
//! bounds set, its driver on a task of its own; for lock calls, with the lock statements
//! prepared and warmed up.

use std::sync::Arc;

use tokio::task::AbortHandle;
use tokio_postgres as pg;

use super::backend::{Backend, Settlement};
use super::errors::unavailable_at;
use super::sql::{
    ACQUIRE, ACQUIRE_ALL, ACQUIRE_ALL_TYPES, ACQUIRE_PERMITS, ACQUIRE_SHARED, ACQUIRE_TYPES,
    BACKEND, HAND_OVER, RELEASE, RELEASE_ALL, RELEASE_ALL_TYPES, RELEASE_PERMITS, RELEASE_SHARED,
    RELEASE_TYPES, RENEW, RENEW_PERMITS, RENEW_SHARED, WARM_UP,
};
use super::wakes::{heard, Wakes};
use crate::error::LockError;
use crate::store::Settings;

/// The prepared statements of one connection.
pub(super) struct Statements {
    pub(super) acquire: pg::Statement,
    pub(super) release: pg::Statement,
    pub(super) release_all: pg::Statement,
    pub(super) renew: pg::Statement,
    pub(super) hand_over: pg::Statement,
    pub(super) acquire_shared: pg::Statement,
    pub(super) release_shared: pg::Statement,
    pub(super) renew_shared: pg::Statement,
    pub(super) acquire_permits: pg::Statement,
    pub(super) acquire_all: pg::Statement,
    pub(super) release_permits: pg::Statement,
    pub(super) renew_permits: pg::Statement,
}

/// One connection for lock calls.
pub(super) struct Conn {
    pub(super) client: pg::Client,
    pub(super) statements: Statements,
    pub(super) driver: AbortHandle,
    /// Its backend on the server, which a settlement ends ([`super::settle`]).
    pub(super) backend: Backend,
    /// Started by the first call on it whose outcome became unknown, shared by the others.
    pub(super) settlement: std::sync::OnceLock<Settlement>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The driver would otherwise live on behind a stalled socket.
        self.driver.abort();
    }
}

/// The TLS side of every connection: rustls with the `tls` feature, else none (the URL was
/// refused if it asked for TLS).
#[cfg(feature = "tls")]
pub(super) type Tls = super::tls::MakeRustls;
/// The TLS side of every connection: rustls with the `tls` feature, else none (the URL was
/// refused if it asked for TLS).
#[cfg(not(feature = "tls"))]
pub(super) type Tls = pg::NoTls;

/// The connector for a URL's TLS settings (its files read now, once for every connection).
pub(super) fn connector(settings: &super::url::TlsSettings) -> Result<Tls, LockError> {
    #[cfg(feature = "tls")]
    return super::tls::MakeRustls::new(settings);
    #[cfg(not(feature = "tls"))]
    {
        let _ = settings;
        Ok(pg::NoTls)
    }
}

/// A client of the caller's own ([`connect`](crate::postgres::connect)): the locker's URL
/// rules and TLS, its connection driven by a task of its own.
pub(crate) async fn connect_client(url: &str) -> Result<pg::Client, LockError> {
    let target = super::url::parse(url)?;
    let tls = connector(&target.tls)?;
    let (client, connection) = target
        .config
        .connect(tls)
        .await
        .map_err(|e| unavailable_at(&target.shown, "could not be reached", e))?;
    tokio::spawn(async move {
        // Its error reaches the client's next call.
        let _ = connection.await;
    });
    Ok(client)
}

/// What the listener and the lock calls share.
pub(super) struct Shared {
    pub(super) config: pg::Config,
    /// The same for every connection: the listener's, the pool's, the schema's.
    pub(super) tls: Tls,
    pub(super) shown: String,
    pub(super) settings: Settings,
    pub(super) wakes: Wakes,
}

impl Shared {
    /// A new connection whose driver runs on its own task, its notifications (if any) sent
    /// to `notices`. Bounded by the connect timeout, as is the session's `statement_timeout`
    /// until the caller sets [`operation_bounds`](Self::operation_bounds): whatever is still
    /// part of opening it (the schema check, statements prepared, LISTEN) must not fail because the
    /// operation timeout is short.
    pub(super) async fn open(
        &self,
        notices: Option<tokio::sync::mpsc::UnboundedSender<(String, Option<Arc<str>>)>>,
    ) -> Result<(pg::Client, AbortHandle), LockError> {
        let limit = self.settings.connect_timeout;
        #[allow(clippy::clone_on_copy)] // NoTls is Copy, without the `tls` feature
        let tls = self.tls.clone();
        let (client, mut connection) =
            match tokio::time::timeout(limit, self.config.connect(tls)).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(self.unavailable("could not be reached", e)),
                Err(_) => return Err(self.late(limit)),
            };
        let driver = tokio::spawn(async move {
            loop {
                match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(pg::AsyncMessage::Notification(n))) => {
                        if let Some(tx) = &notices {
                            let _ = tx.send(heard(n.channel(), n.payload()));
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => return,
                }
            }
        })
        .abort_handle();
        // Set whatever the role's defaults are (a role's own short timeouts too).
        let setup = session_bounds(limit);
        match tokio::time::timeout(limit, client.batch_execute(&setup)).await {
            Ok(Ok(())) => Ok((client, driver)),
            Ok(Err(e)) => {
                driver.abort();
                Err(self.unavailable("refused the session settings", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late(limit))
            }
        }
    }

    /// The session's bounds for lock calls, once the connection is open: keep the server
    /// from working on a call after the client stopped waiting for it, and from waiting long
    /// on a row another transaction locked (a fenced write).
    pub(super) fn operation_bounds(&self) -> String {
        session_bounds(self.settings.op_timeout)
    }

    pub(super) async fn open_for_locks(&self) -> Result<Conn, LockError> {
        let (client, driver) = self.open(None).await?;
        let limit = self.settings.connect_timeout;
        let prepare = async {
            use pg::types::Type;
            let acquire = client.prepare_typed(ACQUIRE, &ACQUIRE_TYPES).await?;
            let release = client.prepare_typed(RELEASE, &RELEASE_TYPES).await?;
            let release_all = client
                .prepare_typed(RELEASE_ALL, &RELEASE_ALL_TYPES)
                .await?;
            let renew = client
                .prepare_typed(
                    RENEW,
                    &[Type::TEXT_ARRAY, Type::TEXT_ARRAY, Type::INT8_ARRAY],
                )
                .await?;
            let hand_over = client
                .prepare_typed(HAND_OVER, &[Type::TEXT, Type::TEXT])
                .await?;
            let batch = [Type::TEXT_ARRAY, Type::TEXT_ARRAY, Type::INT8_ARRAY];
            let acquire_shared = client
                .prepare_typed(ACQUIRE_SHARED, &[Type::TEXT, Type::TEXT, Type::INT8])
                .await?;
            let release_shared = client
                .prepare_typed(
                    RELEASE_SHARED,
                    &[Type::TEXT, Type::TEXT, Type::INT8, Type::TEXT],
                )
                .await?;
            let renew_shared = client.prepare_typed(RENEW_SHARED, &batch).await?;
            let acquire_permits = client
                .prepare_typed(
                    ACQUIRE_PERMITS,
                    &[
                        Type::TEXT,
                        Type::TEXT,
                        Type::INT8,
                        Type::INT4,
                        Type::INT4,
                        Type::TEXT,
                        Type::INT8,
                    ],
                )
                .await?;
            let release_permits = client
                .prepare_typed(RELEASE_PERMITS, &[Type::TEXT, Type::TEXT, Type::TEXT])
                .await?;
            let renew_permits = client.prepare_typed(RENEW_PERMITS, &batch).await?;
            let acquire_all = client
                .prepare_typed(ACQUIRE_ALL, &ACQUIRE_ALL_TYPES)
                .await?;
            // Prepared under the connect timeout's bounds (a statement that names a table
            // waits for a migration's lock on it): lock calls from here on, the warm-up too.
            // The same round trip reads the backend's identity, for a settlement to end it,
            // first: still under the connect timeout's bounds (after the `SET`s a 10 ms
            // operation timeout cancelled that read on a loaded machine).
            let bounds = format!("{BACKEND}; {}", self.operation_bounds());
            let backend = Backend::of(&client.simple_query(&bounds).await?);
            let _ = client.batch_execute(WARM_UP).await;
            let statements = Statements {
                acquire,
                release,
                release_all,
                renew,
                hand_over,
                acquire_shared,
                release_shared,
                renew_shared,
                acquire_permits,
                acquire_all,
                release_permits,
                renew_permits,
            };
            Ok::<_, pg::Error>((statements, backend))
        };
        match tokio::time::timeout(limit, prepare).await {
            Ok(Ok((statements, Some(backend)))) => Ok(Conn {
                client,
                statements,
                driver,
                backend,
                settlement: std::sync::OnceLock::new(),
            }),
            Ok(Ok((_, None))) => {
                driver.abort();
                Err(LockError::unavailable(
                    format!(
                        "PostgreSQL at {} did not show this connection's session in \
                         pg_stat_activity",
                        self.shown
                    ),
                    None,
                ))
            }
            Ok(Err(e)) => {
                driver.abort();
                Err(self.unavailable("refused to prepare the lock statements", e))
            }
            Err(_) => {
                driver.abort();
                Err(self.late(limit))
            }
        }
    }
}

/// The `SET`s bounding a session's statements by `bound`, its waits for locks by half of it,
/// and a transaction left idle by four times it.
fn session_bounds(bound: std::time::Duration) -> String {
    let ms = bound.as_millis().max(1);
    format!(
        "SET statement_timeout = {ms}; SET lock_timeout = {}; \
         SET idle_in_transaction_session_timeout = {}",
        (ms / 2).max(1),
        ms * 4
    )
}

impl Shared {
    pub(super) fn unavailable(&self, what: &str, e: pg::Error) -> LockError {
        unavailable_at(&self.shown, what, e)
    }

    pub(super) fn late(&self, limit: std::time::Duration) -> LockError {
        LockError::unavailable(
            format!(
                "PostgreSQL at {} did not answer within {limit:?}",
                self.shown
            ),
            None,
        )
    }
}
