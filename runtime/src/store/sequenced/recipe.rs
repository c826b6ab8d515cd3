//! The recipe's calls of the store boundary, once for both engines: a writer's attempt, a
//! reader's, a release, and a waiter that stops waiting.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::contenders::InFlight;
use super::creates::Creates;
use super::interest::withdraw_lapsed;
use super::releases::Releases;
use super::{Contender, Contenders, Create, Created, Creation, Driver, Place, Role, FENCE_SLOTS};
use crate::error::LockError;
use crate::store::heard;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt, Session};

/// A lock engine made of the recipe and one driver: ZooKeeper's or etcd's.
pub(crate) struct Sequenced<D: Driver> {
    /// Shared with the task that withdraws the waiters' contenders that lapsed.
    pub(crate) driver: Arc<D>,
    pub(crate) contenders: Contenders<D::Via>,
    /// Bumped each time a session ends: its contenders are gone or going.
    pub(super) epoch: Arc<watch::Sender<u64>>,
    /// The releases' deletes, sent together where they meet.
    releases: Arc<Releases<D>>,
    /// The attempts' creates, sent together where they meet (on an engine that can).
    creates: Arc<Creates<D>>,
}

impl<D: Driver> Sequenced<D> {
    /// The recipe over `driver`, which shares `contenders` and `epoch` with it, its attempts
    /// bounded by `patience` (the engine's [`patience`](super::patience)); the waiters'
    /// contenders whose wait lost interest are withdrawn in the background while it lives
    /// (see `interest`).
    pub(crate) fn new(
        driver: D,
        contenders: Contenders<D::Via>,
        epoch: Arc<watch::Sender<u64>>,
        patience: Duration,
    ) -> Self {
        let driver = Arc::new(driver);
        withdraw_lapsed(Arc::downgrade(&driver), contenders.downgrade(), patience);
        Sequenced {
            releases: Releases::new(driver.clone(), patience),
            creates: Creates::new(driver.clone(), patience),
            driver,
            contenders,
            epoch,
        }
    }

    /// The session leases are granted over now.
    pub(crate) fn current_session(&self) -> Session {
        Session::current(&self.epoch)
    }

    /// A writer's attempt: its contender goes in the queue (or, queued already, is looked
    /// at), and holds the lock when it is first. Not first, it stays while the request
    /// waits, and leaves at once when it does not.
    pub(crate) async fn acquire_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        debug_assert!(req.fences < FENCE_SLOTS, "fences of one contender overflow");
        let lock = req.keys.lock();
        let name = self.driver.name(req.keys, req.token, Role::Writer);
        let attempt = self.contenders.in_flight(name.clone());
        // Looked at by this attempt, the lock's waiting contender does not lapse meanwhile.
        let _looking = self.contenders.attempt(lock);
        let (via, session) = self.driver.open(req.lease).await?;
        let queued = match self.contenders.waiting(lock) {
            Some(mine) if req.queued && mine.session == session => Some(mine),
            Some(stale) => {
                self.contenders.forget_waiting(lock);
                self.driver.delete_later(stale);
                None
            }
            None => None,
        };
        // A queued contender is looked at again; one deleted under us (an operator, a session
        // that ended) is forgotten, and the attempt queues anew like a new one.
        let mut looked = None;
        if let Some(mine) = queued {
            let (place, vouched) = tokio::join!(
                self.driver.look(req, &mine, Role::Writer),
                self.driver.vouch(session, req)
            );
            match place? {
                Place::Gone => {
                    self.contenders.forget_waiting(lock);
                }
                place => looked = Some((mine, place, vouched)),
            }
        }
        let (mine, place, vouched) = match looked {
            Some(looked) => looked,
            None => {
                let (entered, vouched) = tokio::join!(
                    self.enter(&attempt, &via, session, &name, req),
                    self.driver.vouch(session, req)
                );
                let (mine, place) = entered?;
                (mine, place, vouched)
            }
        };
        match place {
            Place::Holds { top } => {
                // First in line, but the session cannot be vouched for: the contender stays
                // queued; the turn withdraws it if the caller stops.
                let valid_from = vouched?;
                if let Err(lapsed) = self.contenders.hold(lock, req.token, mine) {
                    // Withdrawn while this attempt was not polled (its wait lost interest):
                    // deleted, never granted. The next attempt queues anew.
                    self.driver.delete_later(lapsed);
                    return Ok(Attempt::Held { remaining: None });
                }
                Ok(Attempt::Granted { top, valid_from })
            }
            Place::Behind if !req.interest.is_zero() => Ok(Attempt::Held { remaining: None }),
            Place::Behind => {
                // Not waiting: leave the queue at once.
                self.contenders.forget_waiting(lock);
                self.leave(mine).await;
                Ok(Attempt::Held { remaining: None })
            }
            // Gone right after it was created (its session ended): the next attempt queues
            // anew.
            Place::Gone => {
                self.contenders.forget_waiting(lock);
                Err(self.vanished())
            }
        }
    }

    /// Creates a writer's contender and records it as its lock's waiting one at once: it is
    /// the wait's turn from here on, not this attempt's. If the attempt fails or is cancelled
    /// from here on, the turn's withdrawal (the wait's end) deletes it, never the give-back of
    /// this attempt's token: the wait's next attempt may be granted on it. Then where it
    /// stands, when the create could not tell.
    async fn enter(
        &self,
        attempt: &InFlight<D::Via>,
        via: &D::Via,
        session: u64,
        name: &str,
        req: &AcquireRequest<'_>,
    ) -> Result<(Contender<D::Via>, Place), LockError> {
        let (mine, place) = self
            .create(attempt, via, session, name, req, Role::Writer)
            .await?;
        self.contenders.wait(req.keys.lock(), mine.clone());
        let place = match place {
            Some(place) => place,
            None => self.driver.look(req, &mine, Role::Writer).await?,
        };
        Ok((mine, place))
    }

    /// A reader's attempt: its contender goes in the queue, and stays if no writer's is ahead
    /// of it; otherwise it leaves again at once (readers do not wait in the queue, so one
    /// that stops waiting leaves nothing behind).
    pub(crate) async fn acquire_shared_once(
        &self,
        req: &AcquireRequest<'_>,
    ) -> Result<Attempt, LockError> {
        let name = self.driver.name(req.keys, req.token, Role::Reader);
        let attempt = self.contenders.in_flight(name.clone());
        let (via, session) = self.driver.open(req.lease).await?;
        let (created, vouched) = tokio::join!(
            self.create(&attempt, &via, session, &name, req, Role::Reader),
            self.driver.vouch(session, req)
        );
        let (mine, place) = created?;
        // Recorded at once: if this attempt is cancelled from here on, or fails, the release
        // of its token (the locker's clean-up of a failed attempt) finds it and deletes it.
        self.contenders.hold_alone(req.token, mine.clone());
        let place = match place {
            Some(place) => place,
            None => self.driver.look(req, &mine, Role::Reader).await?,
        };
        match (place, vouched) {
            (Place::Holds { top }, Ok(valid_from)) => Ok(Attempt::Granted { top, valid_from }),
            (Place::Gone, _) => {
                self.contenders.forget_held(req.token);
                Err(self.vanished())
            }
            (place, vouched) => {
                // A writer holds the lock or waits for it (or the session cannot be vouched
                // for): leave at once, and wait without a contender for the writers ahead.
                self.contenders.forget_held(req.token);
                self.leave(mine).await;
                match (place, vouched) {
                    (Place::Behind, _) | (_, Ok(_)) => Ok(Attempt::Held { remaining: None }),
                    (_, Err(e)) => Err(e),
                }
            }
        }
    }

    /// Deletes the contender of a held lease (a writer's, or a reader's: `role`).
    pub(crate) async fn release_once(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        role: Role,
    ) -> Result<bool, LockError> {
        let Some((mine, _releasing)) = self.contenders.take_for_release(token) else {
            // Not held by us: a lease lost meanwhile, or the give-back of an attempt that
            // failed or was cancelled. Only an attempt whose create was sent and never
            // answered may have made a contender nobody here knows: its name finds it. One
            // whose create was answered made a contender this process knows (a waiter's turn,
            // which the wait's next attempt may be granted on and only the wait's end
            // withdraws; a holder's; or one the attempt deleted itself): never this
            // give-back's to delete.
            let name = self.driver.name(keys, token, role);
            if self.contenders.take_unanswered(&name) {
                self.driver.abandoned(&name).await?;
            }
            // Told without the server: the clean-up of an abandoned create (both engines
            // start it in the background) answers nothing of its own.
            heard::answered_alone();
            return Ok(false);
        };
        if *self.epoch.borrow() != mine.session {
            // Its session ended: the contender is gone or going with it.
            heard::answered_alone();
            return Ok(false);
        }
        // Unknown outcome (a failover, a partition, this release dropped before the answer):
        // the contender is deleted in the background as soon as the engine answers, and a
        // caller that is still there hears the error. It has no TTL of its own: left behind,
        // it would hold the lock as long as its session lives. (Taken out of the held ones,
        // it is not this token's any more: a later give-back of the token finds nothing.)
        // Sent with the releases it meets (a guard's other keys given back together): one
        // round trip for them all where the engine can.
        let deleting = Deleting::new(&*self.driver, mine);
        let deleted = self.releases.delete(deleting.mine().clone()).await?;
        deleting.answered();
        Ok(deleted)
    }

    /// The waiter at the front of this process's queue for `keys` stopped waiting: forget
    /// its contender, and delete it in the background.
    pub(crate) fn withdraw_waiting(&self, keys: &LockKeys) {
        if let Some(mine) = self.contenders.forget_waiting(keys.lock()) {
            self.driver.delete_later(mine);
        }
    }

    /// Sends the create of `attempt`'s contender `name`: known to be sent before it goes (an
    /// attempt that ends before its answer leaves it to the give-back of its token to clean
    /// up after), and answered once it is. A writer's or a reader's goes with the creates it
    /// meets where the engine sends them together (`creates`); a permits contender by itself.
    pub(super) async fn create(
        &self,
        attempt: &InFlight<D::Via>,
        via: &D::Via,
        session: u64,
        name: &str,
        req: &AcquireRequest<'_>,
        role: Role,
    ) -> Result<(Contender<D::Via>, Option<Place>), LockError> {
        let one = Creation {
            via: via.clone(),
            session,
            name: name.to_owned(),
            keys: req.keys.clone(),
            token: req.token.clone(),
            role,
            fences: req.fences,
        };
        let together =
            self.driver.creates_together() && matches!(role, Role::Writer | Role::Reader);
        attempt.sending();
        let created = match together {
            true => self.creates.send(Create::One(one)).await.one()?,
            false => self.driver.create(&one).await?,
        };
        attempt.answered();
        Ok(created)
    }

    /// Sends the create of a batch taken together ([`Driver::create_all`]): with the creates
    /// it meets where the engine sends batches with them (`creates`), else by itself.
    pub(super) async fn create_all(
        &self,
        batch: Vec<Creation<D::Via>>,
    ) -> Result<Option<Created<D::Via>>, LockError> {
        match self.driver.creates_together() && self.driver.batches_together() {
            true => self.creates.send(Create::All(batch)).await.all(),
            false => self.driver.create_all(&batch).await,
        }
    }

    /// Takes a contender out of the queue now, or in the background when the engine does
    /// not answer.
    pub(super) async fn leave(&self, mine: Contender<D::Via>) {
        let deleting = Deleting::new(&*self.driver, mine);
        if self.driver.delete(deleting.mine()).await.is_ok() {
            deleting.answered();
        }
    }

    pub(super) fn vanished(&self) -> LockError {
        LockError::unavailable(
            format!(
                "{}: this contender vanished from the lock's queue; try again",
                self.driver.describe()
            ),
            None,
        )
    }
}

/// The delete of one of this process's contenders, forgotten already: unless its answer comes
/// ([`Deleting::answered`]), the contender is deleted in the background when this drops, after
/// an error as after the caller stopped waiting for it (its delete may not have been sent).
struct Deleting<'a, D: Driver> {
    driver: &'a D,
    mine: Option<Contender<D::Via>>,
}

impl<'a, D: Driver> Deleting<'a, D> {
    fn new(driver: &'a D, mine: Contender<D::Via>) -> Self {
        Deleting {
            driver,
            mine: Some(mine),
        }
    }

    fn mine(&self) -> &Contender<D::Via> {
        self.mine.as_ref().expect("deleted once")
    }

    /// The engine answered the delete: nothing is left to settle.
    fn answered(mut self) {
        self.mine = None;
    }
}

impl<D: Driver> Drop for Deleting<'_, D> {
    fn drop(&mut self) {
        if let Some(mine) = self.mine.take() {
            self.driver.delete_later(mine);
        }
    }
}
