//! Semaphores on the recipe, once for both engines: a permits request is a contender of the
//! semaphore's weighted queue ([`standing`]), fenced like a writer, and a
//! waiter for several permits keeps its contender (its turn) across its attempts.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    fits, holders, standing, writer_top, Contender, Driver, Inspection, Role, Sequenced, Standing,
};
use crate::error::LockError;
use crate::inspect::Holder;
use crate::store::identity::contender_holder;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{disagreement, AcquireRequest, Attempt, PermitState, PermitWaiter};

/// Where an attempt's contender is recorded, and so who deletes it if the attempt stops.
enum Kept {
    /// As a waiter's seat in the book of waiting contenders: the waiter's withdrawal.
    Seat(String),
    /// As the attempt's token's held lease: the release of that token.
    Token,
}

/// The name a waiter's contender is recorded under while it waits: one per waiter, so that
/// each is withdrawn by its own name.
fn seat_of(keys: &LockKeys, waiter: u128) -> String {
    format!("{}#{waiter:032x}", keys.lock())
}

impl<D: Driver> Sequenced<D> {
    /// A permits request's attempt. A `waiter` that still waits keeps its contender in the
    /// queue while it is behind (its turn: the permits that come free are kept for it), and
    /// looks at it again on its next attempt; any other request looks at the queue first and
    /// enters only if it would fit now (so that attempts bound to fail do not come and go,
    /// waking every waiter with their deletions), and leaves at once if it does not hold.
    pub(crate) async fn acquire_permits_once(
        &self,
        req: &AcquireRequest<'_>,
        limit: u32,
        count: u32,
        waiter: Option<PermitWaiter>,
    ) -> Result<Attempt, LockError> {
        let role = Role::Permits { limit, count };
        let name = self.driver.name(req.keys, req.token, role);
        let attempt = self.contenders.in_flight(name.clone());
        let seat = waiter.map(|w| seat_of(req.keys, w.name));
        // Looked at by this attempt, the waiter's contender does not lapse meanwhile.
        let _looking = seat.as_deref().map(|s| self.contenders.attempt(s));
        let (via, session) = self.driver.open(req.lease).await?;
        let waits = waiter.is_some_and(|w| w.until > Instant::now());
        let queued = match seat.as_deref().and_then(|s| self.contenders.waiting(s)) {
            Some(mine) if mine.session == session => Some(mine),
            Some(stale) => {
                self.forget(seat.as_deref(), req.token);
                self.driver.delete_later(stale);
                None
            }
            None => None,
        };
        let mut looked = None;
        if let Some(mine) = queued {
            let (listed, vouched) =
                tokio::join!(self.driver.list(req.keys), self.driver.vouch(session, req));
            match standing(&listed?, &mine.name, limit, count) {
                // Deleted under us (an operator, a session that ended): queue anew.
                Standing::Gone => {
                    self.forget(seat.as_deref(), req.token);
                }
                place => looked = Some((mine, place, vouched)),
            }
        }
        let (mine, place, vouched, kept) = match (looked, seat) {
            (Some((mine, place, vouched)), Some(seat)) => (mine, place, vouched, Kept::Seat(seat)),
            (_, seat) => {
                if !waits {
                    match fits(&self.driver.list(req.keys).await?, limit, count) {
                        Standing::Disagrees { agreed } => return Err(disagreement(agreed, limit)),
                        Standing::Holds => {}
                        _ => return Ok(Attempt::Held { remaining: None }),
                    }
                }
                let (created, vouched) = tokio::join!(
                    self.create(&attempt, &via, session, &name, req, role),
                    self.driver.vouch(session, req)
                );
                let (mine, _) = created?;
                // Recorded at once: if the attempt stops from here on, the waiter's withdrawal
                // or the release of its token finds the contender and deletes it. A waiter's
                // is its turn from here on, not this attempt's: the give-back of this
                // attempt's token leaves it alone (the next attempt may be granted on it).
                let kept = match seat {
                    Some(seat) if waits => {
                        self.contenders.wait(&seat, mine.clone());
                        Kept::Seat(seat)
                    }
                    _ => {
                        self.contenders.hold_alone(req.token, mine.clone());
                        Kept::Token
                    }
                };
                let listed = self.driver.list(req.keys).await?;
                let place = standing(&listed, &mine.name, limit, count);
                (mine, place, vouched, kept)
            }
        };
        let seat = match &kept {
            Kept::Seat(seat) => Some(seat.as_str()),
            Kept::Token => None,
        };
        match place {
            Standing::Holds => {
                let valid_from = match vouched {
                    Ok(valid_from) => valid_from,
                    Err(e) => {
                        // A waiter's contender stays in its turn (its withdrawal deletes it if
                        // the waiter stops); another request's leaves now.
                        if seat.is_none() {
                            self.forget(None, req.token);
                            self.leave(mine).await;
                        }
                        return Err(e);
                    }
                };
                let top = writer_top(mine.order, 1);
                if let Some(seat) = seat {
                    if let Err(lapsed) = self.contenders.hold(seat, req.token, mine) {
                        // Withdrawn while this attempt was not polled (its wait lost
                        // interest): deleted, never granted. The next attempt queues anew.
                        self.driver.delete_later(lapsed);
                        return Ok(Attempt::Held { remaining: None });
                    }
                }
                Ok(Attempt::Granted { top, valid_from })
            }
            Standing::Behind if waits && seat.is_some() => Ok(Attempt::Held { remaining: None }),
            Standing::Behind => {
                self.forget(seat, req.token);
                self.leave(mine).await;
                Ok(Attempt::Held { remaining: None })
            }
            Standing::Disagrees { agreed } => {
                self.forget(seat, req.token);
                self.leave(mine).await;
                Err(disagreement(agreed, limit))
            }
            Standing::Gone => {
                self.forget(seat, req.token);
                Err(self.vanished())
            }
        }
    }

    /// Forgets an attempt's contender: its waiter's seat, or its token's.
    fn forget(&self, seat: Option<&str>, token: &OwnerToken) -> Option<Contender<D::Via>> {
        match seat {
            Some(seat) => self.contenders.forget_waiting(seat),
            None => self.contenders.forget_held(token),
        }
    }
}

impl<D: Inspection> Sequenced<D> {
    /// The holders of a semaphore now: the prefix of its queue that holds, with how long each
    /// holder's contender outlives its process at most, as the engine can tell.
    pub(crate) async fn inspect_permits_once(
        &self,
        keys: &LockKeys,
    ) -> Result<PermitState, LockError> {
        let listed = self.driver.list(keys).await?;
        let (limit, holding) = holders(&listed);
        let owners: Vec<i64> = holding.iter().map(|q| q.owner).collect();
        let remaining = self.driver.remaining(&owners).await?;
        let who = self.driver.who(keys, holding).await?;
        let mut holders: Vec<(u32, Duration, Holder)> = holding
            .iter()
            .zip(remaining)
            .zip(who)
            .map(|((q, left), who)| {
                let w = who.unwrap_or_default();
                let holder = contender_holder(w.stamp, w.description, w.created);
                match q.role {
                    Role::Permits { count, .. } => (count, left, holder),
                    _ => (0, left, holder),
                }
            })
            .collect();
        holders.sort_by_key(|h| h.1);
        Ok(PermitState { limit, holders })
    }
}

impl<D: Driver> Sequenced<D> {
    /// Forgets the waiter's contender and deletes it in the background: its deletion wakes
    /// the waiters behind it.
    pub(crate) fn withdraw_permits(&self, keys: &LockKeys, waiter: u128) {
        if let Some(mine) = self.contenders.forget_waiting(&seat_of(keys, waiter)) {
            self.driver.delete_later(mine);
        }
    }
}
