//! The resource the workers' locks protect: a counter per key that each write reads, computes
//! from and writes back (`v` → `v + 1`, as the shop's purchase does), on Redis or PostgreSQL,
//! through leasehold's fencing helpers; and the records each accepted write leaves in the store,
//! which the checker reads after the run to find lost updates.
//!
//! **Fencing** ([`Fencing`]): by default the first touch of a write is a claim — on Redis
//! `fenced::claim` then `Claim::write` (`claim_with_fence` and `write_if_claimed` for a holder
//! without a `LockGuard`: a leader's term, a permit's fence, a stale holder writing blind); on
//! PostgreSQL `postgres::claim_fence` as the transaction's first statement, then the read and
//! the write in that transaction. [`Fencing::WriteOnly`] is the pattern of earlier versions: a
//! plain read, then a write fenced alone (`fenced::write_if_newer`; the README's old
//! `UPDATE … SET value = $v, fence = $f WHERE key = $k AND fence <= $f`), which loses an
//! update when an older holder's write lands between a newer holder's read and its write.
//!
//! **Records.** Every accepted write records, atomically with itself and in the store, what it
//! was computed from: on Redis a field `w:<hold>:<n>` = `fence read new` of the key's hash
//! (set by the same script call as the value), on PostgreSQL a row of `resource_writes`
//! inserted by the same statement or transaction. [`read_records`] reads them back, so that
//! the checker judges what the store accepted, whatever the clients were told (a write whose
//! client timed out may have been applied).
//!
//! A multi-key hold claims every key's record first, then moves money between the wallets of
//! its first two keys (each a `balance` beside the key's counter) in one atomic write: a
//! script of the test's own on Redis (no helper writes two records at once), one transaction
//! on PostgreSQL.

mod client;
mod postgres;
mod records;
mod redis;

pub use client::{FenceOf, ResourceClient, Update};
pub use records::{read_records, ResourceRecords, StoredWrite};

use std::fmt;
use std::str::FromStr;

/// Which store holds the resource: named by the scheme of its URL (`redis://`, `rediss://`;
/// `postgres://`, `postgresql://`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceStore {
    /// A Redis server: one hash per key.
    Redis,
    /// A PostgreSQL database: a row per key, a row per accepted write.
    Postgres,
}

impl ResourceStore {
    /// The store a URL names.
    ///
    /// # Errors
    /// A message when the scheme is neither Redis's nor PostgreSQL's.
    pub fn of(url: &str) -> Result<Self, String> {
        let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
        match scheme {
            "redis" | "rediss" => Ok(ResourceStore::Redis),
            "postgres" | "postgresql" => Ok(ResourceStore::Postgres),
            _ => Err(format!(
                "the resource's URL must start with redis:// or postgres://, not `{url}`"
            )),
        }
    }

    /// `redis` or `postgres`, as the worker logs it.
    pub fn name(self) -> &'static str {
        match self {
            ResourceStore::Redis => "redis",
            ResourceStore::Postgres => "postgres",
        }
    }
}

/// How a worker fences its read-compute-write of the resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fencing {
    /// The first touch is a claim that raises the record's fence before the read; the write
    /// needs the claim to still be the holder's. No older holder's write lands after the read.
    #[default]
    Claim,
    /// A plain read, then a write fenced alone (accepted unless a newer fence wrote): an older
    /// holder's write delayed past the newer holder's read is accepted, and an update is lost.
    WriteOnly,
}

impl Fencing {
    /// What [`WorkerSpec::new`](super::WorkerSpec::new) starts from: [`Fencing::Claim`],
    /// unless the environment variable `LEASEHOLD_RESOURCE_FENCING` says `write-only` (to
    /// run the suite the old way, and see which scenarios lose updates).
    ///
    /// # Panics
    /// When the variable holds something else than `claim` or `write-only`.
    pub fn from_env() -> Fencing {
        match std::env::var("LEASEHOLD_RESOURCE_FENCING") {
            Ok(v) => v.parse().unwrap_or_else(|e| panic!("{e}")),
            Err(_) => Fencing::Claim,
        }
    }
}

impl fmt::Display for Fencing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fencing::Claim => "claim",
            Fencing::WriteOnly => "write-only",
        })
    }
}

impl FromStr for Fencing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "claim" => Ok(Fencing::Claim),
            "write-only" => Ok(Fencing::WriteOnly),
            other => Err(format!(
                "the resource's fencing is `claim` or `write-only`, not `{other}`"
            )),
        }
    }
}

/// The Redis hash of key `key`'s counter (and wallet).
pub fn resource_key(key: &str) -> String {
    format!("resource:{key}")
}

/// The name of the `n`-th write (from 0) of hold `hold`, as its record carries it:
/// `w:<hold>:<n>`. A test can hold one worker's writes in the network by this prefix
/// (`w:0.` for worker 0's).
pub fn write_id(hold: &str, n: usize) -> String {
    format!("w:{hold}:{n}")
}

/// `(hold, n)` of a write's name made by [`write_id`].
pub fn parse_write_id(id: &str) -> Option<(String, usize)> {
    let rest = id.strip_prefix("w:")?;
    let (hold, n) = rest.rsplit_once(':')?;
    Some((hold.to_owned(), n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_store_and_write_ids_round_trip() {
        assert_eq!(
            ResourceStore::of("redis://127.0.0.1:1"),
            Ok(ResourceStore::Redis)
        );
        assert_eq!(
            ResourceStore::of("postgres://postgres@127.0.0.1:1/postgres"),
            Ok(ResourceStore::Postgres)
        );
        assert!(ResourceStore::of("http://x").is_err());
        assert_eq!(
            parse_write_id(&write_id("12.0.3", 4)),
            Some(("12.0.3".to_owned(), 4))
        );
        assert_eq!(parse_write_id("value"), None);
        for fencing in [Fencing::Claim, Fencing::WriteOnly] {
            assert_eq!(fencing.to_string().parse(), Ok(fencing));
        }
    }
}
