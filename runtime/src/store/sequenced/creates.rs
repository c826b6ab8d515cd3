//! The creates that attempts send, by group commit ([`batch`](crate::store::batch), as the
//! releases' deletes go, `releases`), on an engine that can send many in one round trip
//! ([`Driver::creates_together`]: etcd's transaction). An attempt that finds nothing on its way
//! creates its contender alone, at once, as before; attempts that meet (concurrent ones, while
//! every slot is out) create theirs in one call, [`Driver::create_many`], each with its own
//! outcome: one lock taken does not hold up the attempts on the others.
//!
//! **Distinct locks in a call.** Two contenders of one lock never go in the same call: etcd
//! evaluates every comparison of a transaction before it applies any of its writes, so two
//! writers of a free lock would both find it free. Those go in calls of their own, side by
//! side ([`calls`]).
//!
//! **A call that failed may have happened.** A call that fails fails every attempt in it; each
//! attempt's create was sent and never answered, so the give-back of its token finds what it
//! made by its name ([`Driver::abandoned`]), as after a lone create. An answer that arrives
//! after its caller stopped waiting (cancelled, or past its deadline) made a contender nobody
//! here records: it is deleted in the background ([`Item::abandoned`]).

use std::sync::Arc;
use std::time::Duration;

use super::{CreateOutcome, Creation, Driver};
use crate::error::LockError;
use crate::store::batch::{self, Item, Queue};
use crate::store::join_all;

/// The contenders' creates of one recipe, waiting to share a round trip.
pub(crate) struct Creates<D: Driver> {
    driver: Arc<D>,
    /// How long a create may wait in all, in the queue and in its call (each call to the
    /// engine is bounded by the operation timeout on its own).
    bound: Duration,
    queue: Queue<Creation<D::Via>, Creates<D>>,
}

impl<D: Driver> Creates<D> {
    /// The creates of `driver`'s contenders, each waiting at most `bound`.
    pub(super) fn new(driver: Arc<D>, bound: Duration) -> Arc<Self> {
        Arc::new(Creates {
            driver,
            bound,
            queue: Queue::default(),
        })
    }

    /// Creates `one` in the next call that has room, with the creates it meets there.
    pub(super) async fn create(self: &Arc<Self>, one: Creation<D::Via>) -> CreateOutcome<D::Via> {
        let deadline = tokio::time::Instant::now() + self.bound;
        let late = || {
            LockError::unavailable(
                format!(
                    "{} did not answer the create of a contender within {:?}",
                    self.driver.describe(),
                    self.bound
                ),
                None,
            )
        };
        batch::submit(self, one, deadline, late).await?
    }
}

impl<D: Driver> Item<Creates<D>> for Creation<D::Via> {
    type Out = CreateOutcome<D::Via>;

    /// One operation a contender in an etcd transaction (its own transaction, nested), at most
    /// 128 a branch by default (`--max-txn-ops`): 64 keeps well inside it.
    const MAX_BATCH: usize = 64;

    fn queue(ctx: &Creates<D>) -> &Queue<Self, Creates<D>> {
        &ctx.queue
    }

    async fn send(ctx: &Arc<Creates<D>>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        if let [one] = items {
            return Ok(vec![ctx.driver.create(one).await]);
        }
        let calls = calls(items);
        let answers = join_all(calls.iter().map(|call| async {
            match call.as_slice() {
                [one] => Ok(vec![ctx.driver.create(&items[*one]).await]),
                _ => {
                    let batch: Vec<_> = call.iter().map(|&i| items[i].clone()).collect();
                    ctx.driver.create_many(&batch).await
                }
            }
        }))
        .await;
        let mut outs: Vec<Option<Self::Out>> = items.iter().map(|_| None).collect();
        for (call, answer) in calls.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    debug_assert_eq!(answer.len(), call.len(), "one answer per create");
                    for (&i, out) in call.iter().zip(answer) {
                        outs[i] = Some(out);
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    let mut first = Some(e);
                    for &i in call {
                        let err = first
                            .take()
                            .unwrap_or_else(|| LockError::unavailable(message.clone(), None));
                        outs[i] = Some(Err(err));
                    }
                }
            }
        }
        Ok(outs
            .into_iter()
            .map(|out| out.expect("every create is in one call"))
            .collect())
    }

    /// The caller stopped waiting after the create was sent: what it made is nobody's here.
    fn abandoned(ctx: &Arc<Creates<D>>, _: Self, out: Self::Out) {
        if let Ok((mine, _)) = out {
            ctx.driver.delete_later(mine);
        }
    }
}

/// The calls `items` go in, as indices: each call holds at most one contender of a lock (the
/// first call the earliest of each lock, the next call the second, and so on).
fn calls<V>(items: &[Creation<V>]) -> Vec<Vec<usize>> {
    let mut calls: Vec<Vec<usize>> = Vec::new();
    for (i, one) in items.iter().enumerate() {
        let lock = one.keys.lock();
        let free = calls
            .iter_mut()
            .find(|call| call.iter().all(|&j| items[j].keys.lock() != lock));
        match free {
            Some(call) => call.push(i),
            None => calls.push(vec![i]),
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::LockKeys;
    use crate::store::sequenced::Role;
    use crate::store::token::OwnerToken;

    fn creation(lock: &str) -> Creation<()> {
        Creation {
            via: (),
            session: 0,
            name: format!("{lock}/w"),
            keys: LockKeys::new("t", lock),
            token: OwnerToken::generate(),
            role: Role::Writer,
            fences: 1,
        }
    }

    #[test]
    fn a_call_never_holds_two_contenders_of_one_lock() {
        let items: Vec<_> = ["a", "b", "a", "c", "a", "b"]
            .into_iter()
            .map(creation)
            .collect();
        assert_eq!(calls(&items), [vec![0, 1, 3], vec![2, 5], vec![4]]);
        let distinct: Vec<_> = ["a", "b", "c"].into_iter().map(creation).collect();
        assert_eq!(calls(&distinct), [vec![0, 1, 2]]);
    }
}
