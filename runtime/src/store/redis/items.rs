//! The requests of the Redis engine as they wait to share a round trip: concurrent acquires
//! go out in one script call, and so do concurrent releases (see [`batch`](crate::store::batch)).

use std::sync::Arc;
use std::time::Duration;

use super::conn::{bounded, Conn, ScriptCall};
use super::scripts::{
    malformed, millis, refused, ACQUIRE, MAX_INTEREST, QUEUE_TTL, RELEASE, YIELD_WINDOW,
};
use crate::error::{Endpoint, LockError};
use crate::store::batch::{self, Item, Queue};
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

/// The connection and its bounds, shared with the tasks that send batches.
pub(super) struct Core {
    pub(super) conn: Conn,
    pub(super) endpoint: Endpoint,
    pub(super) op_timeout: Duration,
    /// Acquires and releases of concurrent tasks go to Redis together. Off on a cluster,
    /// where one script may only touch one slot.
    pub(super) batching: bool,
    pub(super) acquires: Queue<AcquireItem, Core>,
    pub(super) releases: Queue<ReleaseItem, Core>,
    /// This process's name in the queues of waiting processes (random, per locker).
    pub(super) contender: String,
}

impl Core {
    pub(super) async fn run<T: redis::FromRedisValue + Send>(
        &self,
        invocation: ScriptCall<'_>,
    ) -> Result<T, LockError> {
        bounded(
            &self.endpoint,
            self.op_timeout,
            self.conn.invoke(&invocation),
        )
        .await
    }

    /// Sends one plain command, bounded by the op timeout.
    pub(super) async fn query<T: redis::FromRedisValue + Send>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, LockError> {
        bounded(&self.endpoint, self.op_timeout, self.conn.query(cmd)).await
    }

    /// Sends one request, batched with concurrent ones where possible.
    pub(super) async fn request<T: Item<Core>>(
        self: &Arc<Self>,
        item: T,
    ) -> Result<T::Out, LockError> {
        if self.batching {
            // The op timeout bounds the whole request, also the time it waited for a slot.
            let deadline = tokio::time::Instant::now() + self.op_timeout;
            let late = || {
                LockError::unavailable(
                    format!(
                        "redis at {} did not answer within {:?}",
                        self.endpoint, self.op_timeout
                    ),
                    None,
                )
            };
            batch::submit(self, item, deadline, late).await
        } else {
            let mut outs = T::send(self, std::slice::from_ref(&item)).await?;
            Ok(outs.pop().expect("one answer per request"))
        }
    }

    /// [`Core::request`] for items that answer each caller with a result of its own.
    pub(super) async fn request_each<O, T: Item<Core, Out = Result<O, LockError>>>(
        self: &Arc<Self>,
        item: T,
    ) -> Result<O, LockError> {
        self.request(item).await?
    }
}

/// One acquire, as it waits for its batch.
pub(super) struct AcquireItem {
    pub(super) keys: LockKeys,
    pub(super) token: OwnerToken,
    pub(super) lease_ms: u64,
    pub(super) fence_ttl_ms: u64,
    pub(super) fences: u64,
    /// 0: not waiting.
    pub(super) interest_ms: u64,
    pub(super) queued: bool,
    /// The request's own name in the queue (a fair request), or empty: the process's.
    pub(super) contender: Box<str>,
}

impl AcquireItem {
    /// The batch item of `req`.
    pub(super) fn new(req: &AcquireRequest<'_>) -> Self {
        AcquireItem {
            keys: req.keys.clone(),
            token: req.token.clone(),
            lease_ms: millis(req.lease),
            fence_ttl_ms: millis(req.fence_ttl),
            fences: req.fences,
            interest_ms: if req.interest.is_zero() {
                0
            } else {
                millis(req.interest.min(MAX_INTEREST))
            },
            queued: req.queued,
            contender: req.contender.unwrap_or_default().into(),
        }
    }
}

impl Item<Core> for AcquireItem {
    /// Each caller's own outcome: one lock's failure is not the batch's.
    type Out = Result<Attempt, LockError>;

    fn queue(core: &Core) -> &Queue<Self, Core> {
        &core.acquires
    }

    async fn send(core: &Arc<Core>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        let mut inv = ScriptCall::new(&ACQUIRE);
        inv.arg(items[0].fence_ttl_ms)
            .arg(&core.contender)
            .arg(millis(QUEUE_TTL));
        for it in items {
            inv.key(it.keys.lock())
                .key(it.keys.fence())
                .key(it.keys.queue())
                .key(it.keys.interest())
                .arg(it.token.as_bytes())
                .arg(it.lease_ms)
                .arg(it.fences)
                .arg(it.interest_ms)
                .arg(u8::from(it.queued))
                .arg(it.contender.as_bytes());
        }
        let flat: Vec<redis::Value> = core.run(inv).await?;
        if flat.len() != items.len() * 2 {
            return Err(malformed(&core.endpoint, "acquire"));
        }
        Ok(flat
            .chunks(2)
            .map(|answer| match answer {
                [redis::Value::Int(1), redis::Value::Int(top)] => Ok(Attempt::granted(*top as u64)),
                [redis::Value::Int(0), redis::Value::Int(pttl)] => Ok(Attempt::Held {
                    remaining: (*pttl >= 0).then(|| Duration::from_millis(*pttl as u64)),
                }),
                [_, failure] => Err(refused(&core.endpoint, "acquire", failure)),
                _ => unreachable!("chunks of two"),
            })
            .collect())
    }

    fn abandoned(core: &Arc<Core>, item: Self, out: Self::Out) {
        // The caller is gone, but the lock is taken in its name: give it back.
        if let Ok(Attempt::Granted { .. }) = out {
            let core = core.clone();
            let release = ReleaseItem {
                keys: item.keys,
                token: item.token,
            };
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { core.request_each(release).await });
            }
        }
    }
}

/// One release, as it waits for its batch.
pub(super) struct ReleaseItem {
    pub(super) keys: LockKeys,
    pub(super) token: OwnerToken,
}

impl Item<Core> for ReleaseItem {
    /// Each caller's own outcome: one lock's failure is not the batch's.
    type Out = Result<bool, LockError>;

    fn queue(core: &Core) -> &Queue<Self, Core> {
        &core.releases
    }

    async fn send(core: &Arc<Core>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        let mut inv = ScriptCall::new(&RELEASE);
        inv.arg(core.conn.publish_command())
            .arg(&core.contender)
            .arg(millis(YIELD_WINDOW));
        for it in items {
            inv.key(it.keys.lock())
                .key(it.keys.queue())
                .key(it.keys.interest())
                .arg(it.token.as_bytes())
                .arg(it.keys.wake());
        }
        let released = match core.run(inv).await? {
            // A lone release that was plainly ours or not (release_lone.lua).
            redis::Value::Int(r) if items.len() == 1 => return Ok(vec![Ok(r == 1)]),
            redis::Value::Array(answers) if answers.len() == items.len() => answers,
            _ => return Err(malformed(&core.endpoint, "release")),
        };
        Ok(released
            .iter()
            .map(|answer| match answer {
                redis::Value::Int(r) => Ok(*r == 1),
                failure => Err(refused(&core.endpoint, "release", failure)),
            })
            .collect())
    }

    fn abandoned(_: &Arc<Core>, _: Self, _: Self::Out) {}
}
