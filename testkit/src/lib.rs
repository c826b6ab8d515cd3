//! # leasehold-testkit
//!
//! Test your own code under the faults leasehold's own suite runs under: a lease lost mid-body,
//! a holder paused past its lease while another takes the key with a higher fence, an engine
//! that is out for a while, a failover whose fences continue, an expired permit, a deposed
//! leader, a forced release, a fenced write delayed past its holder's lease.
//!
//! - [`faulty`] / [`faulty_with`]: an in-memory locker with the semantics of
//!   `Locker::in_memory()`, and [`Faults`], the handle that injects each fault on demand.
//!   Deterministic under Tokio's paused clock (`#[tokio::test(start_paused = true)]`).
//! - [`assert_held!`] inside a body, and a [`Witness`] that a function ran under a lock.
//! - `servers` (feature `servers`): throwaway Redis, ZooKeeper, etcd, PostgreSQL and MariaDB
//!   servers and a fault-injecting TCP proxy, for integration tests against real engines; and
//!   the `leasehold-servers` command, which starts them for local work.
//! - [`History`]: record your holders' reads of your own resource, and their writes with the
//!   fence they carried; [`History::check`] reports overlaps, stale writes accepted and lost
//!   updates, naming the holders.
//!
//! ```
//! use std::time::Duration;
//! use leasehold_testkit::{faulty, History};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), leasehold::LockError> {
//! let (locker, faults) = faulty();
//! let history = History::new();
//! let a = locker.lock("stock:42").lease(Duration::from_secs(10)).acquire().await?;
//! history.read("a", "stock:42", 10);
//! faults.pause_holder("stock:42"); // a stops, past its lease: b may take the key
//! let other_process = faults.locker(); // the same store, as another process sees it
//! let b = other_process.lock("stock:42").acquire().await?;
//! assert!(b.fence() > a.fence());
//! assert!(a.is_held()); // a does not know yet
//! history.read("b", "stock:42", 10);
//! history.write("b", "stock:42", b.fence(), true);
//! history.write("a", "stock:42", a.fence(), true); // a resource without a fence check
//! let report = history.check();
//! assert!(report.has_stale_write() && report.has_lost_update(), "{report}");
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod assert;
mod history;
mod locker;
#[cfg(feature = "servers")]
#[cfg_attr(docsrs, doc(cfg(feature = "servers")))]
pub mod servers;

/// The crate's README, whose example is compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's chapter on testing (`docs/guide/testing.md`), whose examples are this crate's
/// doc tests.
#[cfg(all(doctest, feature = "servers"))]
#[doc = include_str!("../../docs/guide/testing.md")]
pub struct GuideTesting;

#[doc(hidden)]
pub use assert::__private;
pub use assert::Witness;
pub use history::{History, Report, Violation};
pub use leasehold::testing::Faults;
pub use locker::{faulty, faulty_with};
