//! Integration, fault and compile-fail tests of `leasehold`, and the harness they run on.
//!
//! The [`harness`] module starts throwaway `redis-server` processes and a fault-injecting TCP
//! proxy, so tests can kill, pause, restart and partition the Redis a lock talks to. The
//! [`conformance`] module starts each lock engine the same way for the conformance suite.
#![deny(missing_docs)]

pub mod conformance;
pub mod errors;
pub mod harness;
pub mod history;
pub mod partition;
pub mod polls;
