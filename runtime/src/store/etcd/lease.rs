//! The locker's etcd lease, its session: granted on first use and again after it ended,
//! vouched for by acknowledged keep-alives, and its end turned into lost leases.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::calls::{refused_credentials, retry_unsent, MIN_PING_TIMEOUT};
use super::endpoints::Endpoints;
use super::keeper::Keeper;
use super::session::{Ended, LeaseSession};
use crate::error::LockError;
use crate::store::sequenced::Contenders;
use crate::store::{AcquireRequest, Settings};

/// The etcd driver of the recipe: the lease its keys are attached to, and the client.
pub(crate) struct Etcd {
    /// The endpoints without credentials, for messages.
    pub(super) shown: String,
    pub(super) client: etcd::Client,
    /// The TTL asked for: every bound of a session (see the module's docs).
    pub(super) ttl: Duration,
    /// The TTL etcd granted the latest lease, in seconds (0 before the first): told once when
    /// it differs from the one asked.
    pub(super) granted: AtomicI64,
    pub(super) settings: Settings,
    pub(super) current: Arc<tokio::sync::Mutex<Option<LeaseSession>>>,
    /// Bumped each time a lease ends (expired, given up): its keys are gone or going.
    pub(super) epoch: Arc<watch::Sender<u64>>,
    /// The recipe's contenders: a session's are forgotten when it ends, and the orphan sweep
    /// leaves the ones it knows alone.
    pub(super) contenders: Contenders<i64>,
    /// The session whose lease is being swept for orphans, if any.
    pub(super) swept: Mutex<Option<u64>>,
    /// True while the lease's keep-alives are acknowledged ([`Info::link`](crate::store::Info::link)):
    /// false once one is overdue (unanswered for the operation timeout), the stream cannot be
    /// opened, or the lease ended, until one is acknowledged (or a new lease granted).
    pub(super) link: Arc<watch::Sender<bool>>,
    /// The lease the locker's description is attached to, if one is.
    pub(super) described: Mutex<Option<i64>>,
}

impl Etcd {
    /// Connects and grants a first lease; fails with `Unavailable` when no endpoint answers
    /// within the connect timeout, with `Config` when etcd refuses the credentials.
    pub(super) async fn connect(
        endpoints: &[String],
        session_timeout: Duration,
        settings: &Settings,
        contenders: Contenders<i64>,
        epoch: Arc<watch::Sender<u64>>,
    ) -> Result<Self, LockError> {
        let parsed = Endpoints::parse(endpoints).map_err(LockError::config)?;
        let shown = parsed.urls.join(",");
        let mut options = etcd::ConnectOptions::new()
            .with_connect_timeout(settings.connect_timeout)
            .with_require_leader(true)
            .with_auto_token_refresh(true)
            // etcd refuses pings more often than every 5 s by default.
            .with_keep_alive(
                Duration::from_secs(5),
                settings.op_timeout.max(MIN_PING_TIMEOUT),
            );
        if let Some((user, password)) = &parsed.user {
            options = options.with_user(user, password);
        }
        #[cfg(feature = "tls")]
        if parsed.tls {
            options = options.with_tls(etcd::TlsOptions::new().with_native_roots());
        }
        let _ = parsed.tls;
        let limit = settings.connect_timeout;
        let client =
            match tokio::time::timeout(limit, etcd::Client::connect(&parsed.urls, Some(options)))
                .await
            {
                Ok(Ok(client)) => client,
                Ok(Err(e)) if refused_credentials(&e) => {
                    return Err(LockError::config(format!(
                        "etcd at {shown} refused the user name or password: {e}"
                    )))
                }
                Ok(Err(e)) => {
                    return Err(LockError::unavailable(
                        format!("etcd at {shown} could not be reached: {e}"),
                        Some(Box::new(e)),
                    ))
                }
                Err(_) => {
                    return Err(LockError::unavailable(
                        format!("etcd at {shown} did not answer within {limit:?}"),
                        None,
                    ))
                }
            };
        let store = Etcd {
            shown,
            client,
            ttl: session_timeout,
            granted: AtomicI64::new(0),
            settings: settings.clone(),
            current: Arc::default(),
            epoch,
            contenders,
            swept: Mutex::new(None),
            link: Arc::new(watch::channel(false).0),
            described: Mutex::new(None),
        };
        match store.lease().await {
            Err(LockError::Unavailable { message, .. }) if message.contains("authenticat") => {
                Err(LockError::config(message))
            }
            Err(e) => Err(e),
            Ok(_) => Ok(store),
        }
    }

    /// The lease of the live session, granting a new one when there is none (first use, or
    /// the last one ended).
    pub(super) async fn lease(&self) -> Result<(i64, u64), LockError> {
        let limit = self.settings.connect_timeout;
        let mut current = match tokio::time::timeout(limit, self.current.lock()).await {
            Ok(current) => current,
            Err(_) => return Err(self.late(limit)),
        };
        if let Some(c) = current.as_ref() {
            if !c.beats.is_closed() {
                return Ok((c.id, c.session));
            }
        }
        let ttl = i64::try_from(self.ttl.as_secs() + u64::from(self.ttl.subsec_nanos() > 0))
            .unwrap_or(i64::MAX);
        let sent = Instant::now();
        let grant = |mut c: etcd::Client| async move { c.lease_grant(ttl, None).await };
        let granted = match retry_unsent(&self.client, limit, grant).await {
            Ok(Ok(granted)) => granted,
            Ok(Err(e)) => return Err(self.unavailable("refused a lease", e)),
            Err(_) => return Err(self.late(limit)),
        };
        self.check_granted(&granted, ttl)?;
        let session = *self.epoch.borrow();
        let (beats, requests) = mpsc::unbounded_channel();
        let acked = Arc::new(Mutex::new(sent));
        tokio::spawn(
            Keeper {
                client: self.client.clone(),
                id: granted.id(),
                ttl: self.ttl,
                op_timeout: self.settings.op_timeout,
                acked: acked.clone(),
                link: Arc::downgrade(&self.link),
                ended: Ended {
                    client: self.client.clone(),
                    id: granted.id(),
                    epoch: Arc::downgrade(&self.epoch),
                    contenders: self.contenders.downgrade(),
                    current: Arc::downgrade(&self.current),
                    session,
                },
            }
            .run(requests),
        );
        *current = Some(LeaseSession {
            id: granted.id(),
            session,
            beats,
            acked,
        });
        self.link.send_replace(true);
        Ok((granted.id(), session))
    }

    /// Refuses a lease granted a shorter TTL than asked (the bounds here are the TTL asked for:
    /// etcd would expire keys the client still trusts), revoking it; says once when etcd
    /// granted more (its shortest TTL), which only delays the release of a crashed process's
    /// locks.
    pub(super) fn check_granted(
        &self,
        granted: &etcd::LeaseGrantResponse,
        asked: i64,
    ) -> Result<(), LockError> {
        let ttl = granted.ttl();
        if u64::try_from(ttl).map_or(true, |secs| Duration::from_secs(secs) < self.ttl) {
            let (mut client, id) = (self.client.clone(), granted.id());
            let limit = self.settings.op_timeout;
            tokio::spawn(async move {
                let _ = tokio::time::timeout(limit, client.lease_revoke(id)).await;
            });
            return Err(LockError::config(format!(
                "etcd at {} granted a lease TTL of {ttl} s, shorter than the {:?} asked: leases \
                 would be trusted after etcd expired them; give a session_timeout of at most \
                 {ttl} s",
                self.shown, self.ttl
            )));
        }
        if ttl > asked && self.granted.swap(ttl, Ordering::AcqRel) != ttl {
            tracing::info!(
                asked,
                granted = ttl,
                "etcd at {} granted a lease TTL of {ttl} s, above the {asked} s asked (its \
                 shortest, 1.5 x its election timeout): a crashed process's locks are freed \
                 only after {ttl} s",
                self.shown
            );
        }
        Ok(())
    }

    /// Waits until a keep-alive sent after this call is acknowledged: the lease then lives at
    /// least a TTL from the call, on etcd's clock. False when that cannot be said in time.
    pub(super) async fn kept_alive(&self, session: u64) -> bool {
        let beats = {
            let current = self.current.lock().await;
            match current.as_ref() {
                Some(c) if c.session == session => c.beats.clone(),
                _ => return false,
            }
        };
        let (tx, rx) = oneshot::channel();
        if beats.send(tx).is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout(self.settings.op_timeout, rx).await,
            Ok(Ok(()))
        )
    }

    /// The instant a lock granted over `session` for `req` counts from without a keep-alive
    /// of its own, from the lease's last acknowledged one ([`counted_from`]); `None` when it
    /// needs one (see there), or the session is not the live one.
    pub(super) async fn vouched_from(
        &self,
        session: u64,
        req: &AcquireRequest<'_>,
    ) -> Option<Instant> {
        let acked = {
            let current = self.current.lock().await;
            match current.as_ref() {
                Some(c) if c.session == session => *c.acked.lock().unwrap(),
                _ => return None,
            }
        };
        counted_from(acked, self.ttl, req.sent, req.lease, req.validity)
    }
}

/// Where a lock's validity counts from when its key is attached to an etcd lease whose last
/// acknowledged keep-alive was sent at `acked`: etcd cannot expire that lease before `acked`
/// plus the TTL (it restarts the countdown when the keep-alive arrives, after it was sent),
/// and a put on it succeeds only while it lives, so the lock lasts at least that long. Of
/// that span the client counts on the share it counts on of its own lease
/// (`validity / lease`), so that a lease as long as the TTL counts from `acked` exactly,
/// and a shorter one from as much later as the TTL is longer; never later than `sent`.
///
/// `None` when that leaves less than half the validity from `sent` (keep-alives stalled, or
/// none acknowledged lately): too short a lock to hand out, so the acquire waits for a
/// keep-alive sent after it instead, and counts from `sent`. With a keep-alive every third of
/// the TTL, an acquire never waits in the steady state.
pub(super) fn counted_from(
    acked: Instant,
    ttl: Duration,
    sent: Instant,
    lease: Duration,
    validity: Duration,
) -> Option<Instant> {
    let share = if lease.is_zero() {
        0.0
    } else {
        validity.as_secs_f64() / lease.as_secs_f64()
    };
    let from = (acked + ttl.saturating_sub(lease).mul_f64(share)).min(sent);
    (from + validity >= sent + validity / 2).then_some(from)
}
