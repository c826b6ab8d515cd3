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
mod kinds;
mod names;
mod postgres;
mod records;
mod redis;

pub use client::{FenceOf, ResourceClient, Update};
pub use kinds::{Fencing, ResourceStore};
pub use names::{parse_write_id, resource_key, write_id};
pub use records::{read_records, ResourceRecords, StoredWrite};
