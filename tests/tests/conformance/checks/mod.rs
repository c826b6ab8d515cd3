//! The checks of the conformance suite, one property per file; `support` holds what they
//! share.

pub mod bounded;
pub mod busy;
pub mod cancel;
pub mod capabilities;
pub mod close;
pub mod exclusion;
pub mod fences;
pub mod forced;
pub mod health;
pub mod holders;
pub mod hostile_keys;
pub mod job;
pub mod leader;
pub mod leave;
pub mod loss;
pub mod multi;
pub mod multi_read;
pub mod options;
pub mod outage;
pub mod read_write;
pub mod reentry;
pub mod release;
pub mod semaphore;
pub mod support;
pub mod wake;
pub mod watchdog;
