//! Reservations: several skus bought in one request, as a booking service books the seats of
//! a show. `POST /reservations/{show}` with `{"seats": ["sku-1", "sku-7", ...]}` takes the
//! show's read lock and every seat's lock (the lock a single purchase of that sku takes,
//! `stock:<sku>`, so the two exclude each other), checks that every seat is in stock, then
//! buys each under its own lock's fence: all of the seats or none.
//!
//! How the locks are taken (`--reservation-locks`, on any lock server):
//! - `together` (the default): one `lock_all`, the seats as write keys and the show as a read
//!   key, which each engine takes in one round trip while the keys are free;
//! - `one-by-one`: the show's read lock, then each seat's lock, one after another (in the
//!   seats' sorted order, so that two reservations never wait for each other in a circle),
//!   and every lock given back by itself: what a service does without `lock_all`.
//!
//! `scripts/web-bench-reservations` measures the two against each other and against the same
//! shop without locks.

use std::time::Duration;

use leasehold::{LockError, LockGuard};
use serde::{Deserialize, Serialize};

use crate::shop::{Order, Shop, ShopError};

/// The most seats in one reservation.
pub const MAX_SEATS: usize = 16;

/// How long a reservation's locks are leased (renewed while it runs), as a purchase's.
const LEASE: Duration = Duration::from_secs(10);

/// `POST /reservations/{show}`'s body.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Reservation {
    /// The skus to buy, one item each: 1 to [`MAX_SEATS`] of them, each once.
    pub seats: Vec<String>,
}

/// `POST /reservations/{show}`'s answer: one order per seat, in the order asked.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Reserved {
    /// The show whose read lock the reservation held.
    pub show: String,
    /// The orders, one per seat.
    pub orders: Vec<Order>,
}

/// How a shop's reservations take their locks (`--reservation-locks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReservationLocks {
    /// One `lock_all` for the show's read lock and every seat's lock: the default.
    Together,
    /// The show's read lock, then each seat's lock, one after another.
    OneByOne,
    /// No locks at all (`--no-lock`): it oversells.
    Off,
}

impl ReservationLocks {
    /// Parses `--reservation-locks`'s value.
    ///
    /// # Errors
    /// A value other than `together` and `one-by-one`.
    pub fn parse(value: &str) -> Result<ReservationLocks, String> {
        match value {
            "together" => Ok(ReservationLocks::Together),
            "one-by-one" => Ok(ReservationLocks::OneByOne),
            other => Err(format!(
                "--reservation-locks {other:?}: give together (one lock_all) or one-by-one"
            )),
        }
    }
}

/// The lock of one seat: a purchase's lock of that sku.
fn seat_key(seat: &str) -> String {
    format!("stock:{seat}")
}

/// The read lock of a show.
fn show_key(show: &str) -> String {
    format!("show:{show}")
}

impl Shop {
    /// `POST /reservations/{show}`: buys one item of every seat of `seats`, all or none, under
    /// the locks [`Shop::reservations`] says.
    ///
    /// # Errors
    /// [`ShopError::InvalidSeats`] for an empty, too long or repeated list; a lock error
    /// (busy after the wait, unavailable); [`ShopError::SoldOut`] or
    /// [`ShopError::UnknownSku`] for the first seat that cannot be bought (nothing is bought
    /// then); [`ShopError::Store`]; `Lock(Lost)` when a write was refused for a stale fence
    /// (the seats before it were bought).
    pub async fn reserve(&self, show: &str, seats: &[String]) -> Result<Reserved, ShopError> {
        let mut distinct = seats.to_vec();
        distinct.sort();
        distinct.dedup();
        if seats.is_empty() || seats.len() > MAX_SEATS || distinct.len() != seats.len() {
            return Err(ShopError::InvalidSeats);
        }
        match self.reservations {
            ReservationLocks::Off => self.buy_seats(show, seats, |_| None).await,
            ReservationLocks::Together => {
                let held = self
                    .locker
                    .lock_all(seats.iter().map(|s| seat_key(s)))
                    .read_keys([show_key(show)])
                    .lease(LEASE)
                    .acquire()
                    .await?;
                let reserved = self
                    .buy_seats(show, seats, |seat| held.guard(&seat_key(seat)))
                    .await;
                given_back(held.release().await, show);
                reserved
            }
            ReservationLocks::OneByOne => {
                let show_lock = self.locker.read_lock(show_key(show)).lease(LEASE).acquire();
                let show_lock = show_lock.await?;
                let mut held: Vec<LockGuard> = Vec::with_capacity(seats.len());
                let mut taken = Ok(());
                for seat in &distinct {
                    match self
                        .locker
                        .lock(seat_key(seat))
                        .lease(LEASE)
                        .acquire()
                        .await
                    {
                        Ok(guard) => held.push(guard),
                        Err(e) => {
                            taken = Err(e);
                            break;
                        }
                    }
                }
                let reserved = match taken {
                    Ok(()) => {
                        self.buy_seats(show, seats, |seat| {
                            let key = seat_key(seat);
                            held.iter().find(|g| g.key() == key)
                        })
                        .await
                    }
                    Err(e) => Err(ShopError::Lock(e)),
                };
                for guard in held {
                    given_back(guard.release().await, show);
                }
                given_back(show_lock.release().await, show);
                reserved
            }
        }
    }

    /// Checks that every seat is in stock, then buys each, its read and write fenced by the
    /// guard `guard_of` gives for it (none without locks).
    async fn buy_seats<'g>(
        &self,
        show: &str,
        seats: &[String],
        guard_of: impl Fn(&str) -> Option<&'g LockGuard>,
    ) -> Result<Reserved, ShopError> {
        for seat in seats {
            match self.store.stock(seat).await? {
                None => return Err(ShopError::UnknownSku),
                Some(stock) if stock.quantity < 1 => return Err(ShopError::SoldOut),
                Some(_) => {}
            }
        }
        let mut orders = Vec::with_capacity(seats.len());
        for seat in seats {
            orders.push(self.buy(seat, guard_of(seat)).await?);
        }
        Ok(Reserved {
            show: show.to_owned(),
            orders,
        })
    }
}

/// A give-back that failed loses nothing (the lock ends with its lease) and does not change
/// what the reservation did, which is what the caller must hear: it is logged.
fn given_back(released: Result<(), LockError>, show: &str) {
    if let Err(e) = released {
        eprintln!(
            "a lock of a reservation for {show} was not given back (it ends with its lease): {e}"
        );
    }
}
