//! The creates that attempts send, by group commit ([`batch`](crate::store::batch), as the
//! releases' deletes go, `releases`), on an engine that can send many in one round trip
//! ([`Driver::creates_together`]: etcd's transaction, ZooKeeper's `multi`). A create is one
//! contender (an attempt on one lock, or a reader's share), or a batch taken together, all or
//! nothing (`lock_all` of free keys, a reservation's read and write locks: `together`). A create
//! that finds nothing on its way goes alone, at once, as before; creates that meet (concurrent
//! ones, while every slot is out) go in one call, [`Driver::create_many`], each with its own
//! outcome: one lock taken does not hold up the attempts on the others.
//!
//! **No writer shares its lock in a call.** A lock with a writer's contender in a call has no other
//! contender in it: etcd evaluates every comparison of a transaction before it applies any of its
//! writes, so two writers of a free lock would both find it free, and a reader would not see a
//! writer put in the same call; on ZooKeeper a `multi` is one transaction with one zxid, so two
//! writers of one lock would share a `czxid`, and so a fence. Those go in calls of their own, side
//! by side ([`calls`]). Readers' shares of one lock may share a call (a reservation's read lock on
//! the show, say): each puts a key of its own, and each needs only that no writer is there.
//!
//! **A refusal is one lock's.** A call the engine refused as a whole ([`LockError::Config`]:
//! a lock of another identity's, say) made nothing: each of its creates goes again alone, so
//! the refusal fails that lock's attempt and no other beside it.
//!
//! **A call that failed may have happened.** A call that fails fails every attempt in it; each
//! attempt's create was sent and never answered, so the give-back of its token finds what it
//! made by its name ([`Driver::abandoned`]), as after a lone create. So does the give-back of
//! an attempt whose caller stopped waiting before the answer came (cancelled, or past its
//! deadline): the answer comes to nobody, and the create is settled as a lone one would be.

use std::sync::Arc;
use std::time::Duration;

use super::{Create, Driver, Made, Role};
use crate::error::LockError;
use crate::store::batch::{self, Item, Queue};
use crate::store::join_all;

/// The contenders' creates of one recipe, waiting to share a round trip.
pub(crate) struct Creates<D: Driver> {
    driver: Arc<D>,
    /// How long a create may wait in all, in the queue and in its call (each call to the
    /// engine is bounded by the operation timeout on its own).
    bound: Duration,
    queue: Queue<Create<D::Via>, Creates<D>>,
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

    /// Sends `create` in the next call that has room, with the creates it meets there.
    pub(super) async fn send(self: &Arc<Self>, create: Create<D::Via>) -> Made<D::Via> {
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
        let all = matches!(create, Create::All(_));
        match batch::submit(self, create, deadline, late).await {
            Ok(made) => made,
            Err(e) if all => Made::All(Err(e)),
            Err(e) => Made::One(Err(e)),
        }
    }
}

impl<D: Driver> Item<Creates<D>> for Create<D::Via> {
    type Out = Made<D::Via>;

    /// One operation a create in an etcd transaction (its own transaction, nested), at most
    /// 128 a branch by default (`--max-txn-ops`): 64 keeps well inside it (and a ZooKeeper
    /// `multi` of 64 creates and their fence records well inside its 1 MB packets).
    const MAX_BATCH: usize = 64;

    fn queue(ctx: &Creates<D>) -> &Queue<Self, Creates<D>> {
        &ctx.queue
    }

    async fn send(ctx: &Arc<Creates<D>>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        if let [one] = items {
            return Ok(vec![one.alone(&*ctx.driver).await]);
        }
        let calls = calls(items);
        let answers = join_all(calls.iter().map(|call| async {
            match call.as_slice() {
                [one] => Ok(vec![items[*one].alone(&*ctx.driver).await]),
                _ => {
                    let batch: Vec<_> = call.iter().map(|&i| items[i].clone()).collect();
                    match ctx.driver.create_many(&batch).await {
                        // Refused, nothing made: each again alone, for its own answer.
                        Err(LockError::Config { .. }) => {
                            Ok(join_all(batch.iter().map(|one| one.alone(&*ctx.driver))).await)
                        }
                        answer => answer,
                    }
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
                    for (&i, err) in call.iter().zip(batch::for_each(e)) {
                        outs[i] = Some(Made::failed(&items[i], err));
                    }
                }
            }
        }
        Ok(outs
            .into_iter()
            .map(|out| out.expect("every create is in one call"))
            .collect())
    }

    /// The caller stopped waiting after the create was sent. Its attempt was left unanswered,
    /// so the give-back of its token deletes what the create made, by its name, as after a
    /// lone create ([`Driver::abandoned`]): never a contender this process knows as a waiter's
    /// or a holder's, which a later attempt of the same wait may have taken up by that name.
    /// Deleting it here could not tell.
    fn abandoned(_: &Arc<Creates<D>>, _: Self, _: Self::Out) {}
}

/// The calls `items` go in, as indices: a lock with a writer's contender in a call has no
/// other contender in it (each create goes in the first call where none of its contenders
/// meets another of its lock, unless both are readers').
fn calls<V>(items: &[Create<V>]) -> Vec<Vec<usize>> {
    let mut calls: Vec<Vec<usize>> = Vec::new();
    let conflict = |i: usize, j: usize| {
        items[i].creations().iter().any(|a| {
            items[j].creations().iter().any(|b| {
                a.keys.lock() == b.keys.lock() && (a.role != Role::Reader || b.role != Role::Reader)
            })
        })
    };
    for i in 0..items.len() {
        let free = calls
            .iter_mut()
            .find(|call| call.iter().all(|&j| !conflict(i, j)));
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
    use crate::store::sequenced::Creation;
    use crate::store::token::OwnerToken;

    fn one(lock: &str) -> Create<()> {
        Create::One(creation(lock))
    }

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
            .map(one)
            .collect();
        assert_eq!(calls(&items), [vec![0, 1, 3], vec![2, 5], vec![4]]);
        let distinct: Vec<_> = ["a", "b", "c"].into_iter().map(one).collect();
        assert_eq!(calls(&distinct), [vec![0, 1, 2]]);
        // A batch taken together holds each of its locks in its call.
        let items = vec![
            Create::All(vec![creation("a"), creation("b")]),
            one("c"),
            one("b"),
            Create::All(vec![creation("d"), creation("c")]),
            one("e"),
        ];
        assert_eq!(calls(&items), [vec![0, 1, 4], vec![2, 3]]);
        // Readers' shares of one lock share a call; a writer of it does not join them.
        let reader = |lock: &str| Creation {
            role: Role::Reader,
            ..creation(lock)
        };
        let items = vec![
            Create::All(vec![reader("show"), creation("seat:1")]),
            Create::All(vec![reader("show"), creation("seat:2")]),
            Create::One(reader("show")),
            one("show"),
            Create::All(vec![reader("show"), creation("seat:1")]),
        ];
        assert_eq!(calls(&items), [vec![0, 1, 2], vec![3], vec![4]]);
    }
}
