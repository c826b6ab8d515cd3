//! The Redis engine: one server, a Redis Cluster, or the master that Sentinels follow
//! ([`RedisStore`]), and RedLock over several independent masters ([`RedLock`]). A store has a
//! multiplexed, auto-reconnecting connection for the lock scripts, and a second RESP3
//! connection that carries the wake-up subscriptions of every waiter in the process. Every
//! call is bounded by the locker's operation timeout.
//!
//! By job: [`conn`] (the connection over every deployment), [`connect`], [`scripts`],
//! [`items`] and [`batch`] (requests that share a round trip), [`wakes`], [`session`] (the
//! lock connection's drops), [`sentinel`], [`admin`] (operators), [`semaphore`] (permits),
//! [`redlock`].
//!
//! Fences: one rule for every primitive, in `lua/fence.lua`: a token is at least the server
//! clock in microseconds. Writers (and multi-key acquires, and leader terms, which are their
//! lease's fence) reserve theirs above both the counter and the clock (`reserve_fences`);
//! readers get `current_fence`, at or above every token handed out before and below every
//! later writer's. So fences never go back across a restart from an RDB or AOF file, a
//! failover to a replica that lagged, or a counter that expired (`fence_ttl`).
//!
//! Waiters that leave: a process waits in a lock's queue and interest set under its name; a
//! writer that waits for readers also marks the key `R+`, which holds new readers back. When
//! its waiter leaves without the lock (its wait ran out, it was cancelled or panicked, its
//! future was dropped), the process withdraws at once, in the background
//! ([`Store::leave`], `lua/withdraw.lua`), and readers come in. If it cannot (the process
//! died, Redis was unreachable), its interest lapses by itself: it waits at most until its
//! wait's end and at most [`MAX_INTEREST`](scripts::MAX_INTEREST) (2 s) past its last attempt,
//! and read_acquire.lua counts the `R+` mark only while some writer's interest is live. So a
//! writer that left holds new readers back at most 2 s (plus the readers' next look), and a
//! lock that a release had left to it stays idle at most [`YIELD_WINDOW`] (200 ms).
//!
//! Calls whose outcome is unknown ([`Store::settle`]): nothing to settle, by order. Every lock
//! call of a store goes over its one multiplexed connection, and Redis runs one connection's
//! commands in the order they came; a call that timed out stays on that connection (a
//! response timeout does not drop it), so the give-back, sent later on it, runs after it
//! whenever it runs. A connection that dropped (the server closed it, or reset it) runs
//! nothing more: the client reconnects, and the give-back goes on the new one. Only a proxy
//! between the two that still holds bytes of the old connection (a cut link it will deliver
//! later) could apply a call after its give-back; the lock is then taken for that call's lease
//! at most. RedLock: the same on each node. Cluster: the same per node; a slot that moved
//! takes the give-back to its new master, where the late call cannot land (the old master
//! refuses writes once it follows). Sentinel: likewise, a demoted master refuses it; a call
//! that timed out keeps its connection while the Sentinels name the same master.

mod admin;
mod conn;
mod connect;
mod items;
mod leader;
mod redlock;
mod revive;
mod scripts;
mod semaphore;
#[cfg(feature = "sentinel")]
mod sentinel;
mod session;
#[cfg(test)]
mod tests;
mod wakes;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

#[cfg(feature = "sentinel")]
use self::conn::bounded;
use self::conn::ScriptCall;
use self::items::{AcquireItem, Core, ReleaseItem};
use self::scripts::{
    malformed, millis, refused, ACQUIRE_ALL, RAISE_FENCE, READ_ACQUIRE, READ_RELEASE, READ_RENEW,
    RENEW, WITHDRAW, YIELD_WINDOW,
};
use self::wakes::Wakes;
use crate::error::{Endpoint, LockError};
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::Session;
use crate::store::{
    join_all, AcquireRequest, AdminAnswer, AdminOp, AtOnce, Attempt, Ended, Ending, LeaderAnswer,
    LeaderOp, Leave, Renewal, Renewed, Store, StoreFuture, Together, WakeSubscription,
};

pub(crate) use self::redlock::RedLock;
#[cfg(feature = "sentinel")]
pub(crate) use self::sentinel::Master as SentinelMaster;

/// Splits `batch` by `group_of`, renews the groups with `renew` all at once, and puts their
/// answers back in the batch's order.
async fn renew_in_groups<'a, G, Fut>(
    batch: &[Renewal<'a>],
    group_of: impl Fn(&Renewal<'a>) -> G,
    renew: impl Fn(G, Vec<Renewal<'a>>) -> Fut,
) -> Result<Vec<Renewed>, LockError>
where
    G: Copy + PartialEq,
    Fut: std::future::Future<Output = Result<Vec<Renewed>, LockError>>,
{
    let mut groups: Vec<(G, Vec<usize>)> = Vec::new();
    for (i, r) in batch.iter().enumerate() {
        let group = group_of(r);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, members)) => members.push(i),
            None => groups.push((group, vec![i])),
        }
    }
    let calls = groups
        .iter()
        .map(|(g, members)| renew(*g, members.iter().map(|&i| batch[i]).collect()));
    let answers = join_all(calls).await;
    let mut renewed = vec![Renewed::Unknown; batch.len()];
    for ((_, members), answer) in groups.iter().zip(answers) {
        for (&i, ok) in members.iter().zip(answer?) {
            renewed[i] = ok;
        }
    }
    Ok(renewed)
}

pub(crate) struct RedisStore {
    core: Arc<Core>,
    /// Replicas that must acknowledge an acquire before it counts (Sentinel deployments).
    #[cfg(feature = "sentinel")]
    min_replicas: u32,
    wakes: Arc<Wakes>,
    /// Why the server did not answer when the backend was built, if it did not.
    down_at_connect: Option<LockError>,
    /// Bumped each time the lock connection drops (single server only).
    epoch: Option<Arc<watch::Sender<u64>>>,
    /// The lock keys whose queue this process may be in under its own name: an acquire that
    /// would wait was sent for them, and neither a grant nor a withdrawal came since. Only
    /// these cost a round trip when their waiter leaves ([`Store::leave`]).
    queued: Mutex<HashSet<String>>,
}

impl RedisStore {
    /// Host and port (or socket path) of the server, for messages.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.core.endpoint
    }

    async fn run<T: redis::FromRedisValue + Send>(
        &self,
        invocation: ScriptCall<'_>,
    ) -> Result<T, LockError> {
        self.core.run(invocation).await
    }

    pub(crate) async fn acquire(&self, req: &AcquireRequest<'_>) -> Result<Attempt, LockError> {
        let answer = match self.take_free_unfenced(req).await {
            Ok(Some(granted)) => Ok(granted),
            Ok(None) => self.core.request_each(AcquireItem::new(req)).await,
            Err(e) => Err(e),
        };
        // Recorded from the answer (an acquire dropped before it goes on until it comes, and
        // its clean-up, which withdraws, waits for it): a taken lock queued us (acquire.lua),
        // and a failed call may have. A free lock costs no bookkeeping.
        if !req.interest.is_zero() && req.contender.is_none() {
            match &answer {
                Ok(Attempt::Granted { .. }) => {
                    if req.queued {
                        // The grant took us out of the queue (acquire.lua).
                        self.queued_set().remove(req.keys.lock());
                    }
                }
                Ok(Attempt::Held { .. }) | Err(_) => {
                    self.queued_set().insert(req.keys.lock().to_owned());
                }
            }
        }
        let attempt = answer?;
        #[cfg(feature = "sentinel")]
        if let Attempt::Granted { .. } = attempt {
            if self.min_replicas > 0 {
                // Boxed: rare, and deep (it may give the lock back).
                Box::pin(self.await_replicas(req)).await?;
            }
        }
        Ok(attempt)
    }

    /// An unfenced request that is not in the queue of waiters takes a free lock with a
    /// native `SET NX PX`: no script, no fence reserved (the lease's tokens are then the local
    /// numbers `1..=fences`). `None` when that does not apply or the lock is taken: the
    /// acquire script then marks it waited for and queues this process.
    async fn take_free_unfenced(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Option<Attempt>, LockError> {
        if req.fenced || req.queued || req.contender.is_some() {
            return Ok(None);
        }
        // Allocated once at its size (a command grown argument by argument reallocates its
        // buffers several times), and its `OK` read without making a string of it
        // (see [`ScriptCall`] for what this saves).
        let (key, token) = (req.keys.lock(), req.token.as_bytes());
        let mut set = redis::Cmd::with_capacity(6, key.len() + token.len() + 32);
        set.arg("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(millis(req.lease));
        let took: Option<redis::Value> = self.core.query(&set).await?;
        Ok(took.map(|_| Attempt::granted(req.fences)))
    }

    #[cfg(feature = "sentinel")]
    /// Waits until `min_replicas` replicas have the new lock; if they do not in time, gives
    /// the lock back and fails: a failover now could lose it.
    pub(super) async fn await_replicas(&self, req: &AcquireRequest<'_>) -> Result<(), LockError> {
        let (conn, endpoint, op_timeout) =
            (&self.core.conn, &self.core.endpoint, self.core.op_timeout);
        // The server gives up a little before the client does, so that the answer (how many
        // replicas did acknowledge) still arrives within the op timeout.
        let wait = conn.wait_replicas(self.min_replicas, op_timeout.mul_f64(0.8));
        let acked = bounded(endpoint, op_timeout, wait).await;
        match acked {
            Ok(n) if n >= self.min_replicas => Ok(()),
            other => {
                let _ = self.release(req.keys, req.token).await;
                let seen = other.as_ref().map_or(0, |n| *n);
                Err(LockError::unavailable(
                    format!(
                        "only {seen} of the {} required replicas acknowledged the lock within \
                         {:?} (min_replicas); check the replicas' health and lag",
                        self.min_replicas, op_timeout
                    ),
                    other.err().map(|e| Box::new(e) as crate::error::BoxError),
                ))
            }
        }
    }

    pub(crate) async fn release(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let item = ReleaseItem {
            keys: keys.clone(),
            token: token.clone(),
        };
        self.core.request_each(item).await
    }

    pub(crate) async fn renew(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        if !self.core.conn.is_cluster() {
            return self.renew_together(batch).await;
        }
        // A script may only touch keys of one slot: one call per slot, all in parallel.
        renew_in_groups(
            batch,
            |r| crate::store::keys::slot(r.keys.lock()),
            |_, part| async move { self.renew_together(&part).await },
        )
        .await
    }

    /// Renews exclusive leases, read leases and semaphore permits of one slot: one script
    /// call for each kind present.
    async fn renew_together(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        // One group per kind of lease (permits of any count together).
        let kind = |r: &Renewal<'_>| std::mem::discriminant(&r.kind);
        renew_in_groups(batch, kind, |_, part| async move {
            match part[0].kind {
                LeaseKind::Exclusive => self.renew_exclusive(&part).await,
                LeaseKind::Read => self.renew_shared(&part).await,
                LeaseKind::Permits { .. } => self.renew_permits(&part).await,
            }
        })
        .await
    }

    /// Renews read leases (read_renew.lua).
    async fn renew_shared(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        let mut inv = ScriptCall::new(&READ_RENEW);
        for r in batch {
            inv.key(r.keys.lock())
                .key(r.keys.readers())
                .arg(r.token.as_bytes())
                .arg(millis(r.lease));
        }
        let renewed: Vec<redis::Value> = self.run(inv).await?;
        self.renewal_answers(&renewed, batch.len())
    }

    /// Renews exclusive leases: one script call per distinct lease duration (one, as a rule),
    /// which carries the duration once and each lease's key and token.
    async fn renew_exclusive(&self, batch: &[Renewal<'_>]) -> Result<Vec<Renewed>, LockError> {
        renew_in_groups(
            batch,
            |r| millis(r.lease),
            |ms, part| async move { self.renew_for(&part, ms).await },
        )
        .await
    }

    /// One renew.lua call: every lease of `batch` extended to `lease_ms`.
    async fn renew_for(
        &self,
        batch: &[Renewal<'_>],
        lease_ms: u64,
    ) -> Result<Vec<Renewed>, LockError> {
        let mut inv = ScriptCall::new(&RENEW);
        inv.arg(lease_ms);
        for r in batch {
            inv.key(r.keys.lock()).arg(r.token.as_bytes());
        }
        let renewed: Vec<redis::Value> = self.run(inv).await?;
        self.renewal_answers(&renewed, batch.len())
    }

    /// The answers of a batched renewal script, one per lease.
    fn renewal_answers(
        &self,
        renewed: &[redis::Value],
        expected: usize,
    ) -> Result<Vec<Renewed>, LockError> {
        if renewed.len() != expected {
            return Err(malformed(&self.core.endpoint, "renew"));
        }
        Ok(renewed
            .iter()
            .map(|answer| match answer {
                redis::Value::Int(1) => Renewed::Yes,
                redis::Value::Int(_) => Renewed::No,
                failure => {
                    let e = refused(&self.core.endpoint, "renew", failure);
                    tracing::warn!(error = %e, "a renewal failed; trying again while the lease lasts");
                    Renewed::Unknown
                }
            })
            .collect())
    }

    /// Takes a read lock (read_acquire.lua).
    pub(crate) async fn acquire_shared(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        let mut inv = ScriptCall::new(&READ_ACQUIRE);
        inv.key(req.keys.lock())
            .key(req.keys.readers())
            .key(req.keys.fence())
            .key(req.keys.interest())
            .arg(req.token.as_bytes())
            .arg(millis(req.lease));
        let (granted, value): (i64, i64) = self.run(inv).await?;
        Ok(if granted == 1 {
            Attempt::granted(value.max(1) as u64)
        } else {
            Attempt::Held {
                remaining: u64::try_from(value).ok().map(Duration::from_millis),
            }
        })
    }

    /// Leaves a read lock (read_release.lua).
    pub(crate) async fn release_shared(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Result<bool, LockError> {
        let mut inv = ScriptCall::new(&READ_RELEASE);
        inv.key(keys.lock())
            .key(keys.readers())
            .key(keys.queue())
            .key(keys.interest())
            .arg(token.as_bytes())
            .arg(keys.wake())
            .arg(self.core.conn.publish_command())
            .arg(millis(YIELD_WINDOW));
        let released: i64 = self.run(inv).await?;
        Ok(released == 1)
    }

    /// Which leases one script can take together (acquire_all.lua): locks and readers'
    /// shares, any on one server, those that share a slot on a cluster; none where acquires
    /// wait for replicas (Sentinel's `min_replicas`), which takes its own round trip per lock.
    fn at_once(&self) -> AtOnce {
        #[cfg(feature = "sentinel")]
        if self.min_replicas > 0 {
            return AtOnce::NEVER;
        }
        let keys = match self.core.conn.is_cluster() {
            true => Together::SameSlot,
            false => Together::Always,
        };
        AtOnce { keys, reads: true }
    }

    /// Takes every lease of `reqs` (locks and readers' shares) if all are free
    /// (acquire_all.lua), in one round trip: all granted, or all held and nothing taken.
    async fn acquire_all(&self, reqs: &[AcquireRequest<'_>]) -> Result<Vec<Attempt>, LockError> {
        let Some(first) = reqs.first() else {
            return Ok(Vec::new());
        };
        let mut inv = ScriptCall::new(&ACQUIRE_ALL);
        inv.arg(millis(first.fence_ttl));
        for req in reqs {
            let kind = match req.kind {
                LeaseKind::Exclusive => "w",
                LeaseKind::Read => "r",
                // Never sent: `AtOnce` covers no permits.
                LeaseKind::Permits { .. } => {
                    return Err(LockError::config(
                        "permits cannot be taken in a batch with other leases",
                    ))
                }
            };
            inv.key(req.keys.lock())
                .key(req.keys.fence())
                .key(req.keys.readers())
                .key(req.keys.interest())
                .arg(kind)
                .arg(req.token.as_bytes())
                .arg(millis(req.lease))
                .arg(req.fences);
        }
        let answer: Vec<i64> = self.run(inv).await?;
        match answer.split_first() {
            Some((1, tops)) if tops.len() == reqs.len() => Ok(tops
                .iter()
                .zip(reqs)
                .map(|(&top, req)| match req.kind {
                    // A reader's fence is at least 1, as a single reader's.
                    LeaseKind::Read => Attempt::granted(top.max(1) as u64),
                    _ => Attempt::granted(top as u64),
                })
                .collect()),
            Some((0, _)) => Ok(vec![Attempt::Held { remaining: None }; reqs.len()]),
            _ => Err(malformed(&self.core.endpoint, "acquire_all")),
        }
    }

    /// The lock keys this process may be queued for (never poisoned: nothing panics while
    /// holding it, and a set of names is valid after any panic).
    fn queued_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a request that waited under its own name out of the queue, in the background
    /// (withdraw.lua), passing the lock on if a release had left it to that request.
    pub(crate) fn withdraw_request(&self, keys: &LockKeys, contender: &str) {
        self.withdraw_in_background(keys, contender.to_owned());
    }

    /// The front waiter of this process stopped waiting without the lock: the process leaves
    /// the queue under its name, in the background (withdraw.lua), so that it holds nobody
    /// back: a release that had left it the lock passes it on, and readers that a writer's
    /// `R+` mark kept out come in. Costs nothing when this process was not queued for the
    /// lock (a `try_acquire`). Without it (no runtime, Redis unreachable) the name's interest
    /// still lapses by itself, at most [`MAX_INTEREST`](scripts::MAX_INTEREST) after the last
    /// attempt. Should the next task of the process's local queue reach Redis before the
    /// withdrawal does, it is taken out of line with it (and a lock a release had left to the
    /// process goes on to the next process): it queues again, at the back, at its next
    /// attempt, within a second. Only the order among waiters suffers, never exclusion.
    pub(crate) fn withdraw(&self, keys: &LockKeys) {
        if self.queued_set().remove(keys.lock()) {
            self.withdraw_in_background(keys, self.core.contender.clone());
        }
    }

    /// Runs withdraw.lua for `contender` without blocking the caller.
    fn withdraw_in_background(&self, keys: &LockKeys, contender: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the name leaves the queue when its interest runs out
        };
        let core = self.core.clone();
        let keys = keys.clone();
        runtime.spawn(async move {
            let mut inv = ScriptCall::new(&WITHDRAW);
            inv.key(keys.lock())
                .key(keys.queue())
                .key(keys.interest())
                .arg(&contender)
                .arg(keys.wake())
                .arg(core.conn.publish_command())
                .arg(millis(YIELD_WINDOW));
            if let Err(e) = core.run::<i64>(inv).await {
                tracing::debug!(error = %e, "withdrawing a waiter failed; its place lapses");
            }
        });
    }

    /// Raises the fence counter of a lock to at least `top`.
    pub(crate) async fn raise_fence(
        &self,
        keys: &LockKeys,
        top: u64,
        fence_ttl: Duration,
    ) -> Result<(), LockError> {
        let mut inv = ScriptCall::new(&RAISE_FENCE);
        inv.key(keys.fence()).arg(top).arg(millis(fence_ttl));
        let _: i64 = self.run(inv).await?;
        Ok(())
    }
}

impl Store for RedisStore {
    /// One server, Sentinel and Cluster offer the same.
    fn info(&self) -> crate::store::Info {
        let redis = crate::store::Engine::Redis;
        crate::store::Info {
            at_once: self.at_once(),
            ..crate::store::Info::of(
                redis,
                redis.capabilities(Duration::ZERO),
                format!("redis at {}", self.core.endpoint),
            )
        }
    }

    fn session(&self) -> Option<Session> {
        self.current_session()
    }

    /// A `PING` on the lock connection.
    fn probe(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let ping = redis::cmd("PING");
            self.core.query::<redis::Value>(&ping).await.map(|_| ())
        })
    }

    /// A batch of several in one script call (acquire_all.lua).
    fn acquire<'a>(&'a self, batch: &'a [AcquireRequest<'_>]) -> StoreFuture<'a, Vec<Attempt>> {
        if batch.len() > 1 {
            return Box::pin(RedisStore::acquire_all(self, batch));
        }
        let [req] = batch else {
            // An empty batch: nothing to take.
            return Box::pin(std::future::ready(Ok(Vec::new())));
        };
        // One box for the call, whatever its kind: the acquire of one lease is the hot path,
        // and a box around a box costs an allocation per acquisition for nothing.
        Box::pin(async move {
            let attempt = match req.kind {
                LeaseKind::Exclusive => RedisStore::acquire(self, req).await,
                LeaseKind::Read => RedisStore::acquire_shared(self, req).await,
                LeaseKind::Permits { limit, count } => {
                    let waiter = req.waiter;
                    RedisStore::acquire_permits(self, req, limit, count, waiter).await
                }
            };
            attempt.map(|a| vec![a])
        })
    }

    /// A handover needs nothing of the server: the next holder takes the next reserved fence.
    fn release<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        ending: Ending,
    ) -> StoreFuture<'a, Ended> {
        let kind = match ending {
            Ending::HandOver => return crate::store::kept(),
            Ending::Release { kind, .. } => kind,
        };
        Box::pin(async move {
            let released = match kind {
                LeaseKind::Exclusive => RedisStore::release(self, keys, token).await,
                LeaseKind::Read => RedisStore::release_shared(self, keys, token).await,
                LeaseKind::Permits { count, .. } => {
                    RedisStore::release_permits(self, keys, token, count).await
                }
            };
            released.map(Ended::Released)
        })
    }

    fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        Box::pin(RedisStore::renew(self, batch))
    }

    fn subscribe<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, WakeSubscription> {
        Box::pin(RedisStore::subscribe(self, keys))
    }

    fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        match place {
            Leave::ProcessFront => RedisStore::withdraw(self, keys),
            Leave::Alone(contender) => RedisStore::withdraw_request(self, keys, contender),
            Leave::PermitLine { waiter, count } => {
                RedisStore::withdraw_permits(self, keys, waiter, count)
            }
        }
    }

    fn admin<'a>(&'a self, op: AdminOp<'a>) -> StoreFuture<'a, AdminAnswer> {
        super::admin_by(self, op)
    }

    fn leader<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        op: LeaderOp<'a>,
    ) -> StoreFuture<'a, LeaderAnswer> {
        super::leader_by(self, keys, record, op)
    }
}
