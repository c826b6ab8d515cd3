//! The deletes that releases send, by group commit ([`batch`](crate::store::batch), as Redis's
//! release scripts go): a release that finds nothing on its way deletes its contender alone,
//! at once, as before; releases that meet (concurrent ones, while every slot is out; the keys
//! of a guard given back together, [`join_together`](crate::store::join_together)) delete
//! their contenders in one round trip, [`Driver::delete_all`] (one etcd transaction, one
//! ZooKeeper `multi`). That call is all or nothing: when it could not be done at once (one of
//! them was gone already, an operator's delete, a session that ended) nothing was deleted and
//! each is deleted by itself, so every release gets its own answer, as alone. A call that
//! fails fails every release in it, whose contender is then deleted in the background (the
//! caller's [`Deleting`](super::recipe)), as a lone delete's would be.

use std::sync::Arc;
use std::time::Duration;

use super::{Contender, Driver};
use crate::error::LockError;
use crate::store::batch::{self, Item, Queue};
use crate::store::join_all;

/// The contenders' deletes of one recipe, waiting to share a round trip.
pub(crate) struct Releases<D: Driver> {
    driver: Arc<D>,
    /// How long a release may wait in all, in the queue and in its call (each call to the
    /// engine is bounded by the operation timeout on its own).
    bound: Duration,
    queue: Queue<Contender<D::Via>, Releases<D>>,
}

impl<D: Driver> Releases<D> {
    /// The deletes of `driver`'s contenders, each waiting at most `bound`.
    pub(super) fn new(driver: Arc<D>, bound: Duration) -> Arc<Self> {
        Arc::new(Releases {
            driver,
            bound,
            queue: Queue::default(),
        })
    }

    /// Deletes `mine` if it is still the one this process created (`Ok(false)` when it was
    /// gone already), in the next call that has room, with the releases it meets there.
    pub(super) async fn delete(
        self: &Arc<Self>,
        mine: Contender<D::Via>,
    ) -> Result<bool, LockError> {
        let deadline = tokio::time::Instant::now() + self.bound;
        let late = || {
            LockError::unavailable(
                format!(
                    "{} did not answer a release within {:?}",
                    self.driver.describe(),
                    self.bound
                ),
                None,
            )
        };
        batch::submit(self, mine, deadline, late).await?
    }
}

impl<D: Driver> Item<Releases<D>> for Contender<D::Via> {
    type Out = Result<bool, LockError>;

    /// Two operations a contender in one etcd transaction (its compare and its delete), each
    /// branch at most 128 by default (`--max-txn-ops`): 64 keeps well inside it.
    const MAX_BATCH: usize = 64;

    fn queue(ctx: &Releases<D>) -> &Queue<Self, Releases<D>> {
        &ctx.queue
    }

    async fn send(ctx: &Arc<Releases<D>>, items: &[Self]) -> Result<Vec<Self::Out>, LockError> {
        if let [one] = items {
            return Ok(vec![ctx.driver.delete(one).await]);
        }
        // One ZooKeeper `multi` goes over one session.
        let one_session = items.windows(2).all(|w| w[0].session == w[1].session);
        if one_session && ctx.driver.delete_all(items).await? {
            return Ok(items.iter().map(|_| Ok(true)).collect());
        }
        Ok(join_all(items.iter().map(|one| ctx.driver.delete(one))).await)
    }

    /// The caller went away after its delete was sent: it was deleted (or it was gone), and
    /// nothing is left to undo.
    fn abandoned(_: &Arc<Releases<D>>, _: Self, _: Self::Out) {}
}
