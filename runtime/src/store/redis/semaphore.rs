//! Semaphores on Redis: permits taken, given back, renewed and inspected by the `sem_*.lua`
//! scripts, every permit a member of the semaphore's sorted set with the end of its lease.

use std::time::Duration;

use super::conn::ScriptCall;
use super::scripts::{
    millis, QUEUE_TTL, SEM_ACQUIRE, SEM_INSPECT, SEM_RELEASE, SEM_RENEW, SEM_WITHDRAW,
};
use super::RedisStore;
use crate::error::LockError;
use crate::store::identity::{holder, Stamp};
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{
    disagreement, AcquireRequest, Attempt, PermitState, PermitWaiter, Renewal, Renewed,
};

impl RedisStore {
    /// Takes `count` permits among `limit` (sem_acquire.lua), queuing a `waiter` for its turn
    /// (see `Store::acquire` of permits); the holder's fencing token comes from the semaphore's
    /// fence counter by the writers' rule (fence.lua).
    pub(crate) async fn acquire_permits(
        &self,
        req: &AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> Result<Attempt, LockError> {
        let (place, interest) = match waiter {
            Some(w) => {
                let left = w.interest();
                // Zero: it will not wait any more, so it is not queued.
                let interest = if left.is_zero() { 0 } else { millis(left) };
                (PermitWaiter::place(w.name, count), interest)
            }
            None => (String::new(), 0),
        };
        let mut inv = ScriptCall::new(&SEM_ACQUIRE);
        inv.key(req.keys.lock())
            .key(req.keys.limit())
            .key(req.keys.fence())
            .key(req.keys.queue())
            .key(req.keys.interest())
            .arg(req.token.as_bytes())
            .arg(millis(req.lease))
            .arg(limit)
            .arg(count)
            .arg(millis(req.fence_ttl))
            .arg(&place)
            .arg(interest)
            .arg(millis(QUEUE_TTL));
        let (answer, value): (i64, i64) = self.run(inv).await?;
        let attempt = match answer {
            1 => Attempt::granted(
                u64::try_from(value)
                    .map_err(|_| super::scripts::malformed(&self.core.endpoint, "sem_acquire"))?,
            ),
            0 => Attempt::Held {
                remaining: u64::try_from(value).ok().map(Duration::from_millis),
            },
            _ => {
                let agreed = u32::try_from(value).unwrap_or(u32::MAX);
                return Err(disagreement(agreed, limit));
            }
        };
        #[cfg(feature = "sentinel")]
        if let Attempt::Granted { .. } = attempt {
            if self.min_replicas > 0 {
                self.await_permit_replicas(req, count).await?;
            }
        }
        Ok(attempt)
    }

    /// Gives the permits back if the replicas do not acknowledge them in time (Sentinel's
    /// `min_replicas`), as an exclusive acquire does.
    #[cfg(feature = "sentinel")]
    async fn await_permit_replicas(
        &self,
        req: &AcquireRequest<'_>,
        count: u32,
    ) -> Result<(), LockError> {
        let (conn, endpoint, op_timeout) =
            (&self.core.conn, &self.core.endpoint, self.core.op_timeout);
        let wait = conn.wait_replicas(self.min_replicas, op_timeout.mul_f64(0.8));
        match super::conn::bounded(endpoint, op_timeout, wait).await {
            Ok(n) if n >= self.min_replicas => Ok(()),
            other => {
                let _ = self.release_permits(req.keys, req.token, count).await;
                let seen = other.as_ref().map_or(0, |n| *n);
                Err(LockError::unavailable(
                    format!(
                        "only {seen} of the {} required replicas acknowledged the permits \
                         within {op_timeout:?} (min_replicas); check the replicas' health and lag",
                        self.min_replicas
                    ),
                    other.err().map(|e| Box::new(e) as crate::error::BoxError),
                ))
            }
        }
    }

    /// Takes a waiter for several permits out of the semaphore's queue, in the background
    /// (sem_withdraw.lua), waking the others.
    pub(crate) fn withdraw_permits(&self, keys: &LockKeys, waiter: u128, count: u32) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the waiter lapses when its interest runs out
        };
        let core = self.core.clone();
        let keys = keys.clone();
        runtime.spawn(async move {
            let mut inv = ScriptCall::new(&SEM_WITHDRAW);
            inv.key(keys.queue())
                .key(keys.interest())
                .arg(PermitWaiter::place(waiter, count))
                .arg(keys.wake())
                .arg(core.conn.publish_command());
            if let Err(e) = core.run::<i64>(inv).await {
                tracing::debug!(error = %e, "withdrawing a permit waiter failed; it lapses");
            }
        });
    }

    /// Gives back the permits of `token` (sem_release.lua).
    pub(crate) async fn release_permits(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        count: u32,
    ) -> Result<bool, LockError> {
        let mut inv = ScriptCall::new(&SEM_RELEASE);
        inv.key(keys.lock())
            .key(keys.limit())
            .arg(token.as_bytes())
            .arg(count)
            .arg(keys.wake())
            .arg(self.core.conn.publish_command());
        let released: i64 = self.run(inv).await?;
        Ok(released == 1)
    }

    /// Renews the leases of semaphore holders of one slot (sem_renew.lua).
    pub(super) async fn renew_permits(
        &self,
        batch: &[Renewal<'_>],
    ) -> Result<Vec<Renewed>, LockError> {
        let mut inv = ScriptCall::new(&SEM_RENEW);
        for r in batch {
            inv.key(r.keys.lock())
                .key(r.keys.limit())
                .arg(r.token.as_bytes())
                .arg(millis(r.lease))
                .arg(r.kind.permits());
        }
        let renewed: Vec<redis::Value> = self.run(inv).await?;
        self.renewal_answers(&renewed, batch.len())
    }

    /// The holders of a semaphore (sem_inspect.lua).
    pub(crate) async fn inspect_permits(&self, keys: &LockKeys) -> Result<PermitState, LockError> {
        let mut inv = ScriptCall::new(&SEM_INSPECT);
        inv.key(keys.lock()).key(keys.limit());
        let answer: Vec<redis::Value> = self.run(inv).await?;
        let malformed = || super::scripts::malformed(&self.core.endpoint, "sem_inspect");
        let Some((limit, holders)) = answer.split_first() else {
            return Err(malformed());
        };
        let number =
            |v: &redis::Value| redis::from_redis_value_ref::<i64>(v).map_err(|_| malformed());
        let mut listed = Vec::with_capacity(holders.len() / 3);
        for h in holders.chunks_exact(3) {
            let public: String = redis::from_redis_value_ref(&h[2]).map_err(|_| malformed())?;
            listed.push((number(&h[0])?, number(&h[1])?, Stamp::of_public(&public)));
        }
        let ids = listed
            .iter()
            .filter_map(|h| h.2.as_ref())
            .map(|s| s.locker.as_str());
        let described = self.descriptions(keys.prefix(), ids).await?;
        Ok(PermitState {
            limit: u32::try_from(number(limit)?).ok(),
            holders: listed
                .into_iter()
                .map(|(permits, left, stamp)| {
                    (
                        u32::try_from(permits).unwrap_or(0),
                        Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                        holder(stamp, |id| described.get(id).cloned()),
                    )
                })
                .collect(),
        })
    }
}
