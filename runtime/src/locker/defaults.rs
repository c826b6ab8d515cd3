//! The defaults of a [`Locker`](crate::Locker) and the bounds of its options, named once.

use std::time::Duration;

/// The default prefix of every name the library writes in its engine (see
/// [`LockerBuilder::prefix`](crate::LockerBuilder::prefix)).
pub const DEFAULT_PREFIX: &str = "leasehold";
/// The default lease: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default time to wait for a busy lock: 3 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The default bound on one call to the engine: 2 s.
///
/// Chosen to hold on a busy two-core machine (the engine, the service and its load on the
/// same cores): there the slowest single calls measured took 0.2 to 0.45 s (a release, an
/// acquire's one attempt; etcd the slowest, then Redis, PostgreSQL and ZooKeeper), so a bound
/// of 500 ms turned slow answers into `Unavailable` errors and 2 s leaves four times the
/// slowest. What it costs: a dead or hung engine is noticed up to 2 s after a call is made
/// (an acquire with `wait = W` returns within `W + 2 s`), and a renewal that hangs uses up to
/// 2 s of the lease (keep renewed leases at 6 s or more, three times this bound). On a
/// quiet, dedicated deployment a shorter bound (500 ms) notices a dead engine sooner; on
/// RedLock use a short one (50 ms), see [`LockerBuilder::redlock`](crate::LockerBuilder::redlock).
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(2);
/// The default bound on establishing a connection: 2 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The default lifetime of an unused fence counter (Redis and in memory): 7 days.
pub const DEFAULT_FENCE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
pub use crate::store::DEFAULT_SESSION_TIMEOUT;
/// The largest [`fence_offset`](crate::LockerBuilder::fence_offset): 2^52. Fences stay below
/// 2^53, which doubles (Lua, JavaScript) hold exactly, while the clocks that Redis and
/// PostgreSQL fences follow stay below 2^52 µs (until the year 2112).
pub const MAX_FENCE_OFFSET: u64 = 1 << 52;
pub use crate::kernel::options::{MAX_PERMITS, MIN_LEASE};
