//! The core under every primitive: leases and their kinds' options, the contend loop, the
//! local queue, re-entry, release, undoing attempts whose outcome is unknown, the watchdog, the
//! engine's health, and the locker's shared state. ("Engine", everywhere in this crate, is a
//! backend the store talks to: Redis, ZooKeeper, etcd, PostgreSQL, memory.)

pub(crate) mod acquire;
pub(crate) mod background;
pub(crate) mod backoff;
pub(crate) mod close;
pub(crate) mod closing;
pub(crate) mod describe;
pub(crate) mod health;
pub(crate) mod hold;
pub(crate) mod inflight;
pub(crate) mod lease;
pub(crate) mod observe;
pub(crate) mod options;
pub(crate) mod outage;
pub(crate) mod place;
pub(crate) mod queue;
pub(crate) mod reentrant;
pub(crate) mod release;
pub(crate) mod state;
#[cfg(test)]
mod tests;
pub(crate) mod turns;
pub(crate) mod unsettled;
pub(crate) mod verify;
pub(crate) mod verifying;
pub(crate) mod watchdog;
