//! One etcd call: bounded by the operation timeout, tried again while it found no connection,
//! and its failure told as `Unavailable`.

use std::future::Future;
use std::time::Duration;

use etcd_client as etcd;

use super::Etcd;
use crate::error::LockError;

impl Etcd {
    /// The error for a failed call: `Config` when etcd refused it for the user's rights
    /// (retrying or waiting cannot mend that), `Unavailable` otherwise.
    pub(super) fn unavailable(&self, what: &str, e: etcd::Error) -> LockError {
        if refused_rights(&e) {
            return LockError::Config {
                message: format!(
                    "etcd at {} {what}: {e}; the user lacks a right the locker needs: give its \
                     role readwrite on the locker's prefix (see the README's Security section), \
                     or use credentials that have it",
                    self.shown
                ),
                source: Some(Box::new(e)),
            };
        }
        LockError::unavailable(
            format!("etcd at {} {what}: {e}", self.shown),
            Some(Box::new(e)),
        )
    }

    pub(super) fn late(&self, limit: Duration) -> LockError {
        LockError::unavailable(
            format!("etcd at {} did not answer within {limit:?}", self.shown),
            None,
        )
    }

    /// Sends the transaction `txn`, bounded as [`bounded`](Self::bounded) bounds every call;
    /// `what` says what etcd refused when it fails.
    pub(super) async fn txn(
        &self,
        what: &str,
        txn: etcd::Txn,
    ) -> Result<etcd::TxnResponse, LockError> {
        self.bounded(what, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }

    /// Runs one call with the operation timeout (see [`retry_unsent`]).
    pub(super) async fn bounded<T, F, Fut>(&self, what: &str, call: F) -> Result<T, LockError>
    where
        F: FnMut(etcd::Client) -> Fut,
        Fut: Future<Output = Result<T, etcd::Error>>,
    {
        match retry_unsent(&self.client, self.settings.op_timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.unavailable(what, e)),
            Err(_) => Err(self.late(self.settings.op_timeout)),
        }
    }
}

/// Runs `call` until etcd answers, or it fails for another reason than a connection that could
/// not be made, within `limit`. A request that found no connection never left this process,
/// so another endpoint may take it: with a member down, the client's balancer still picks it
/// now and then.
pub(super) async fn retry_unsent<T, F, Fut>(
    client: &etcd::Client,
    limit: Duration,
    mut call: F,
) -> Result<Result<T, etcd::Error>, tokio::time::error::Elapsed>
where
    F: FnMut(etcd::Client) -> Fut,
    Fut: Future<Output = Result<T, etcd::Error>>,
{
    tokio::time::timeout(limit, async {
        loop {
            match call(client.clone()).await {
                Err(e) if unsent(&e) => tokio::time::sleep(Duration::from_millis(10)).await,
                answer => return answer,
            }
        }
    })
    .await
}

/// Whether a call failed before its request left: no connection could be made.
pub(super) fn unsent(e: &etcd::Error) -> bool {
    match e {
        etcd::Error::GRpcStatus(status) => status.message().contains("tcp connect error"),
        _ => false,
    }
}

/// The bound on an HTTP/2 ping's answer: below it, a busy machine drops healthy connections.
pub(super) const MIN_PING_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether an error is etcd refusing the user name or password.
pub(super) fn refused_credentials(e: &etcd::Error) -> bool {
    let text = e.to_string();
    text.contains("authentication failed") || text.contains("invalid auth token")
}

/// Whether an error is etcd refusing a call for the user's rights (a role without the key
/// range, or no user at all while authentication is on).
pub(super) fn refused_rights(e: &etcd::Error) -> bool {
    let text = e.to_string();
    text.contains("permission denied") || text.contains("user name is empty")
}

/// Whether an error says the lease does not exist (any more).
pub(super) fn lease_gone(e: &etcd::Error) -> bool {
    e.to_string().contains("lease not found")
}
