//! A worker task's client of the resource: one read-compute-write per [`Update`], on whichever
//! store the URL names, fenced as the [`Fencing`] says.

use std::time::Duration;

use leasehold::fenced::FenceHolder;

use super::postgres::PgResource;
use super::redis::RedisResource;
use super::{Fencing, ResourceStore};

/// How the holder of one key proves its fence to the resource.
#[derive(Clone, Copy)]
pub enum FenceOf<'g> {
    /// A holder of a lease (a lock, the write side of a read-write lock, a key of
    /// `lock_all`, a permit, a leadership): the library's helpers for holders
    /// (`fenced::claim`, `postgres::claim_fence`), which send nothing once the lease is known
    /// lost.
    Holder(&'g dyn FenceHolder),
    /// A token alone: a stale holder that writes blind after its loss. Claimed with the
    /// guard-free forms (`fenced::claim_with_fence`, `postgres::claim_with_fence`).
    Token(u64),
}

impl FenceOf<'_> {
    /// The fencing token.
    pub fn fence(&self) -> u64 {
        match self {
            FenceOf::Holder(h) => h.holder_fence(),
            FenceOf::Token(f) => *f,
        }
    }
}

impl std::fmt::Debug for FenceOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FenceOf::Holder(h) => write!(f, "Holder({})", h.holder_fence()),
            FenceOf::Token(t) => write!(f, "Token({t})"),
        }
    }
}

/// One write of a hold: read the counter of each key written, compute for the client's
/// compute time, write it back plus one.
#[derive(Clone, Debug)]
pub struct Update<'a> {
    /// The write's name ([`write_id`](super::write_id)), recorded with it in the store.
    pub write: String,
    /// Every key of the hold, with its fence. One key: its counter goes up by one. Several:
    /// every key's record is claimed first (with [`Fencing::Claim`]), then `amount` moves
    /// from the first key's balance to the second's, and the counters of both go up by one,
    /// in one atomic write.
    pub keys: Vec<(&'a str, FenceOf<'a>)>,
    /// What a multi-key write moves between the two wallets.
    pub amount: i64,
}

impl Update<'_> {
    /// The keys whose records this update writes: the only one, or the first two.
    pub(super) fn written(&self) -> &[(&str, FenceOf<'_>)] {
        &self.keys[..self.keys.len().min(2)]
    }
}

/// One worker task's connection to the resource.
pub enum ResourceClient {
    /// On Redis.
    Redis(RedisResource),
    /// On PostgreSQL.
    Postgres(PgResource),
}

impl ResourceClient {
    /// Connects to the resource at `url` (its scheme names the store) for a holder of leases
    /// of `lease`; on PostgreSQL also creates the tables if they are missing, and the rows of
    /// `keys`, and bounds how long a claiming transaction may wait for its client (the lease
    /// plus 5 s, as `postgres::claim_fence` advises), so that a holder stalled inside one
    /// does not keep the next holders' claims waiting for good.
    ///
    /// # Errors
    /// When the URL names no store, or the store cannot be reached.
    pub async fn connect(
        url: &str,
        fencing: Fencing,
        compute: Duration,
        keys: &[String],
        lease: Duration,
    ) -> Result<Self, String> {
        Ok(match ResourceStore::of(url)? {
            ResourceStore::Redis => {
                ResourceClient::Redis(RedisResource::connect(url, fencing, compute).await?)
            }
            ResourceStore::Postgres => ResourceClient::Postgres(
                PgResource::connect(url, fencing, compute, keys, lease).await?,
            ),
        })
    }

    /// Reads, computes and writes back `update`; `on_read` gets the counters read (one per
    /// key written) as soon as the read returns. `Ok(true)` when the store accepted the write,
    /// `Ok(false)` when it refused it (or a claim was refused, or the guard's helper sent
    /// nothing since the lease was known lost): nothing was written.
    ///
    /// # Errors
    /// When the store failed: the write may have been applied or not.
    pub async fn update(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        match self {
            ResourceClient::Redis(r) => r.update(update, on_read).await,
            ResourceClient::Postgres(p) => p.update(update, on_read).await,
        }
    }

    /// The balance of the wallet of `key` (0 when it has none).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn balance(&mut self, key: &str) -> Result<i64, String> {
        match self {
            ResourceClient::Redis(r) => r.balance(key).await,
            ResourceClient::Postgres(p) => p.balance(key).await,
        }
    }

    /// Sets the balance of the wallet of `key`, unfenced (before the workers start).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn set_balance(&mut self, key: &str, balance: i64) -> Result<(), String> {
        match self {
            ResourceClient::Redis(r) => r.set_balance(key, balance).await,
            ResourceClient::Postgres(p) => p.set_balance(key, balance).await,
        }
    }
}

/// The record of one accepted write, as Redis keeps it in the hash: `fence read new`.
pub(super) fn entry(fence: u64, read: i64, new: i64) -> String {
    format!("{fence} {read} {new}")
}
