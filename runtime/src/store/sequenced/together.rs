//! A batch of leases taken together (`lock_all` of free keys, readers' shares beside locks):
//! every contender created by one write, all or nothing.
//!
//! **One write.** The driver creates every contender in one transaction
//! ([`Driver::create_all`]; with the creates it meets, each with its own outcome, where the
//! engine sends creates together: `creates`), so they all share one creation order (etcd's
//! create revision, ZooKeeper's `czxid`): etcd's transaction first compares that every lock's queue is empty
//! and no reader's key has a writer's contender, and creates nothing otherwise (one round
//! trip); ZooKeeper's `multi` cannot compare "no children" (its only check is a znode's data
//! version), so it creates every contender, reads where they stand (one read `multi`), and
//! deletes them all (one more `multi`) when any is not first: two round trips when the keys
//! are free, three when one is taken. A batch that is not granted whole leaves nothing and
//! is answered `Held` throughout; the locker then takes the keys one by one in the global
//! order.
//!
//! **Nothing left behind.** Each contender's name carries its own request's tag, as a single
//! attempt's does: a batch whose answer never came is cleaned up after by each token's
//! give-back ([`Driver::abandoned`]), which finds the contender of that token by its name,
//! now and should the write land later. A batch whose answer came records every contender as
//! its token's held lease at once, so the give-back of a batch that fails after that (a look
//! that timed out, a caller that stopped) deletes it as a release does.
//!
//! **Fences.** A writer's fences are `order × 32 + n` from the one creation order, above
//! every earlier holder's; its fence record goes in the same write. A reader's comes from its
//! lock's fence record as a single reader's does.

use super::{Ask, Contender, Creation, Driver, Place, Role, Sequenced, FENCE_SLOTS};
use crate::error::LockError;
use crate::store::kind::LeaseKind;
use crate::store::{join_all, AcquireRequest, Attempt};

impl<D: Driver> Sequenced<D> {
    /// Takes every lease of `batch` (locks and readers' shares of distinct keys, none
    /// queued) in one write, or none of them: every answer `Granted`, or every answer `Held`
    /// with nothing left in any queue.
    pub(crate) async fn acquire_together(
        &self,
        batch: &[AcquireRequest<'_>],
    ) -> Result<Vec<Attempt>, LockError> {
        let taken = || vec![Attempt::Held { remaining: None }; batch.len()];
        let mut asks = Vec::with_capacity(batch.len());
        for req in batch {
            let role = match req.kind {
                LeaseKind::Exclusive => Role::Writer,
                LeaseKind::Read => Role::Reader,
                // Never sent together (`AtOnce` leaves permits out): taken one by one.
                LeaseKind::Permits { .. } => return Ok(taken()),
            };
            debug_assert!(req.fences < FENCE_SLOTS, "fences of one contender overflow");
            let name = self.driver.name(req.keys, req.token, role);
            asks.push(Ask { req, role, name });
        }
        let attempts: Vec<_> = asks
            .iter()
            .map(|ask| self.contenders.in_flight(ask.name.clone()))
            .collect();
        let lease = batch.iter().map(|req| req.lease).max().unwrap_or_default();
        let (via, session) = self.driver.open(lease).await?;
        for attempt in &attempts {
            attempt.sending();
        }
        let creations = asks
            .iter()
            .map(|ask| Creation {
                via: via.clone(),
                session,
                name: ask.name.clone(),
                keys: ask.req.keys.clone(),
                token: ask.req.token.clone(),
                role: ask.role,
                fences: ask.req.fences,
            })
            .collect();
        let (created, vouched) = tokio::join!(
            self.create_all(creations),
            self.driver.vouch(session, &batch[0])
        );
        let created = created?;
        for attempt in &attempts {
            attempt.answered();
        }
        let Some(created) = created else {
            return Ok(taken());
        };
        // Recorded at once as each token's lease: if this attempt fails or is cancelled from
        // here on, the give-back of each token finds its contender and deletes it.
        for (ask, (mine, _)) in asks.iter().zip(&created) {
            self.contenders.hold_alone(ask.req.token, mine.clone());
        }
        drop(attempts);
        let (mine, told): (Vec<_>, Vec<_>) = created.into_iter().unzip();
        let places = match told.into_iter().collect::<Option<Vec<Place>>>() {
            Some(places) => places,
            None => self.driver.look_all(&asks, &mine).await?,
        };
        let tops: Option<Vec<u64>> = places
            .iter()
            .map(|place| match place {
                Place::Holds { top } => Some(*top),
                _ => None,
            })
            .collect();
        match (tops, vouched) {
            (Some(tops), Ok(valid_from)) => Ok(tops
                .into_iter()
                .map(|top| Attempt::Granted { top, valid_from })
                .collect()),
            (tops, vouched) => {
                // A lease taken (or a session that cannot be vouched for): every contender of
                // the batch leaves.
                for ask in &asks {
                    self.contenders.forget_held(ask.req.token);
                }
                self.leave_all(mine).await;
                match (tops, vouched) {
                    (Some(_), Err(e)) => Err(e),
                    _ if places.contains(&Place::Gone) => Err(self.vanished()),
                    _ => Ok(taken()),
                }
            }
        }
    }

    /// Deletes the contenders of a batch: in one round trip where the engine can; else one
    /// by one (one was gone already), or in the background when the engine did not answer or
    /// the caller stopped waiting meanwhile (forgotten already, they are nobody's to delete
    /// but this call's).
    async fn leave_all(&self, mine: Vec<Contender<D::Via>>) {
        let mut unsettled = Unsettled {
            driver: &*self.driver,
            mine,
        };
        match self.driver.delete_all(&unsettled.mine).await {
            Ok(true) => unsettled.mine.clear(),
            Ok(false) => {
                let mine = std::mem::take(&mut unsettled.mine);
                join_all(mine.into_iter().map(|one| self.leave(one))).await;
            }
            // Deleted in the background as `unsettled` drops.
            Err(_) => {}
        }
    }
}

/// Contenders of a batch whose delete is not answered yet: deleted in the background when
/// this drops, after an error as after the caller stopped waiting.
struct Unsettled<'a, D: Driver> {
    driver: &'a D,
    mine: Vec<Contender<D::Via>>,
}

impl<D: Driver> Drop for Unsettled<'_, D> {
    fn drop(&mut self) {
        for one in self.mine.drain(..) {
            self.driver.delete_later(one);
        }
    }
}
