//! The defaults of a [`Locker`](crate::Locker) and the bounds of its options, named once.

use std::time::Duration;

/// The default prefix of every name the library writes in its engine (see
/// [`LockerBuilder::prefix`](crate::LockerBuilder::prefix)).
pub const DEFAULT_PREFIX: &str = "leasehold";
/// The default lease: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default time to wait for a busy lock: 3 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);
/// The default bound on one call to the engine: 1 s.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(1);
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
