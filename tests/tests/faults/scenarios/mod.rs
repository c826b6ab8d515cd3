//! The fault suite, scenarios 1 to 5 and 8 to 11 of RELIABILITY.md, on one Redis node, on a
//! RedLock of three masters and (scenarios 9 and 11) through Sentinel: worker processes take
//! the same lock in a loop (scenario 11: read-write locks, semaphores, multi-key locks and
//! leader elections) and log every step; the test injects faults; `History::check` fails the run
//! on overlapping holders, fences out of order (also across restarts and failovers), stale
//! writes accepted by the fenced resource, calls over their bound, resurrected leases and
//! hangs. These are the short versions; `scripts/reliability` repeats them (`LEASEHOLD_RUNS`)
//! and runs the long ones.
//!
//! One module per scenario, named by its number (`-- scenarios::s3_` runs scenario 3);
//! `support` holds what they share.

mod baseline;
mod s10_one_connection;
mod s11_primitives;
mod s1_paused_holder;
mod s2_killed_holder;
mod s3_restarted_empty;
mod s4_stalled;
mod s5_blocked_runtime;
pub(crate) mod s8_restored;
mod s9_failover;
mod support;
