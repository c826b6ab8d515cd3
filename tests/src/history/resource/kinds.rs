//! What a worker's resource is: the store a URL names, and how its writes are fenced.

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
    /// What [`WorkerSpec::new`](crate::history::WorkerSpec::new) starts from: [`Fencing::Claim`],
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
