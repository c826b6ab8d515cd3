//! Three bugs that users' code has, each found by the test kit (`leasehold-testkit`): a test
//! of the buggy code that asserts the kit reports the bug, and one of the fixed code that
//! asserts it reports nothing. Every test runs on Tokio's paused clock, so each interleaving
//! is the same on every run.
//!
//! - [`purchase`]: the demo shop's purchase, whose write is fenced but whose read is not: a
//!   lost update, found by the history checker; fixed by claiming the record with the fence
//!   on the read.
//! - [`leader_job`]: a leader-only job that keeps writing after losing its term: a stale
//!   write accepted; fixed by sending the term with each write and stopping on `lost()`.
//! - [`ignored_lost`]: a handler that ignores `lost()` and goes on writing while the next
//!   holder holds the key: an overlap and a stale write; fixed by stopping on `lost()`.

mod ignored_lost;
mod leader_job;
mod purchase;
