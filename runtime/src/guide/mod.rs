//! The front page and the guide's chapters, as doc tests so that their examples cannot rot,
//! and a test that every relative link between them leads to a file and a heading that exist.
//!
//! A chapter's `rust` blocks run, `no_run` ones compile, `ignore` ones are left out, as
//! rustdoc treats them anywhere; blocks in other languages (`toml`, `sh`, `sql`, `text`) are
//! not Rust. The doc tests are merged into one binary (edition 2024), so a chapter costs no
//! binary of its own. `testing.md` and `local-servers.md` are about the testkit, whose crate
//! tests their examples. The security pages of `docs/` are doc tests too, each with the feature
//! of its engine.

#[cfg(test)]
mod links;

/// `README.md`, the front page.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct FrontPage;

/// `docs/guide/benchmarks.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/benchmarks.md")]
pub struct Benchmarks;

/// `docs/guide/coming-from-redisson-and-curator.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/coming-from-redisson-and-curator.md")]
pub struct ComingFromRedissonAndCurator;

/// `docs/guide/configuration.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/configuration.md")]
pub struct Configuration;

/// `docs/guide/engines.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/engines.md")]
pub struct Engines;

/// `docs/guide/etcd.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/etcd.md")]
pub struct Etcd;

/// `docs/guide/fencing.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/fencing.md")]
pub struct Fencing;

/// `docs/guide/how-it-works.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/how-it-works.md")]
pub struct HowItWorks;

/// `docs/guide/jobs.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/jobs.md")]
pub struct Jobs;

/// `docs/guide/leader-election.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/leader-election.md")]
pub struct LeaderElection;

/// `docs/guide/limits.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/limits.md")]
pub struct Limits;

/// `docs/guide/locks.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/locks.md")]
pub struct Locks;

/// `docs/guide/mysql.md`, whose example needs the MySQL client.
#[cfg(all(doctest, feature = "mysql"))]
#[doc = include_str!("../../../docs/guide/mysql.md")]
pub struct Mysql;

/// `docs/guide/operations.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/operations.md")]
pub struct Operations;

/// `docs/guide/postgres.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/postgres.md")]
pub struct Postgres;

/// `docs/guide/read-write.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/read-write.md")]
pub struct ReadWrite;

/// `docs/guide/redis.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/redis.md")]
pub struct Redis;

/// `docs/guide/repository.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/repository.md")]
pub struct Repository;

/// `docs/guide/security.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/security.md")]
pub struct Security;

/// `docs/guide/semaphores.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/semaphores.md")]
pub struct Semaphores;

/// `docs/guide/two-commands.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/two-commands.md")]
pub struct TwoCommands;

/// `docs/guide/web.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/web.md")]
pub struct Web;

/// `docs/guide/zookeeper.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/zookeeper.md")]
pub struct Zookeeper;

/// `docs/security-etcd.md`.
#[cfg(all(doctest, feature = "etcd"))]
#[doc = include_str!("../../../docs/security-etcd.md")]
pub struct SecurityEtcd;

/// `docs/security-mysql.md`.
#[cfg(all(doctest, feature = "mysql"))]
#[doc = include_str!("../../../docs/security-mysql.md")]
pub struct SecurityMysql;

/// `docs/security-postgres.md`.
#[cfg(all(doctest, feature = "postgres"))]
#[doc = include_str!("../../../docs/security-postgres.md")]
pub struct SecurityPostgres;

/// `docs/security-redis.md`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/security-redis.md")]
pub struct SecurityRedis;

/// `docs/security-zookeeper.md`.
#[cfg(all(doctest, feature = "zookeeper"))]
#[doc = include_str!("../../../docs/security-zookeeper.md")]
pub struct SecurityZookeeper;
