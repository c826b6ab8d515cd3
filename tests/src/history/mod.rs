//! Histories of lock holders that run as separate OS processes, and the checker that judges them.
//!
//! Worker processes (the `history_worker` binary) take locks in a loop, update a counter of a
//! resource under them (read, compute, write back: [`Update`]), and log every step with
//! `CLOCK_MONOTONIC` times, which compare across processes of one machine; the test logs the
//! faults it injects in the same clock. The resource's store (Redis or PostgreSQL) keeps a
//! record of every write it accepted, with what the write was computed from, and
//! [`Run::full_history`] reads them back with the logs. [`History::check`] then fails a run on holders whose
//! validity windows overlap (two readers of a read-write lock may; a multi-key hold counts on
//! each of its keys), fences out of real-time order (one rule for every primitive: writers,
//! readers, permits, leader terms, each key of a multi-key hold), readers whose fence is not
//! between the writers before and after them, stale writes that the fenced resource accepted,
//! lost updates (two writes the store accepted computed from the same value: judged from the
//! store's records, whatever the clients were told), fair locks granted out of the order of
//! arrival, calls that took longer than their bound, leases that came back after being
//! reported lost, and workers that hung.
//!
//! ```no_run
//! use std::time::Duration;
//! use leasehold_tests::harness::RedisServer;
//! use leasehold_tests::history::{Run, WorkerSpec};
//!
//! # async fn demo() {
//! // The locks on one Redis, the counters on another (a `postgres://` URL works too).
//! let (locks, resource) = (RedisServer::start().await, RedisServer::start().await);
//! let mut run = Run::new("example");
//! let spec = WorkerSpec::new(&locks.url(), &resource.url()).duration(Duration::from_secs(3));
//! for _ in 0..3 {
//!     run.spawn(&spec);
//! }
//! run.wait_all(Duration::from_secs(20)).await;
//! let report = run.full_history().check();
//! assert!(report.violations.is_empty(), "{report}");
//! # }
//! ```
//!
//! # The log
//!
//! One event per line, `T EVENT FIELDS...`, `T` in nanoseconds of `CLOCK_MONOTONIC`; each line
//! is written with a single `write` on a file opened for appending, so a worker killed with
//! SIGKILL leaves whole lines. A *hold* is one acquisition, named `worker.task.n`.
//!
//! | event | fields | meaning |
//! | --- | --- | --- |
//! | `start` | id pid lease_ms wait_ms op_ms \[tasks fair\] | the worker's settings (fair 1/0) |
//! | `inv` | hold keys \[mode\] | acquire invoked; keys comma-separated (one, or a `lock_all`'s as named), each as [`encode_key`] writes it; mode `x` exclusive (the default), `r` read side, `w` write side, `pN` N permits of a semaphore (a `sem` worker's holds take 1 without it) |
//! | `ok` | hold fence validity_us \[fences\] | acquire returned a guard (fence: of the first key; `-` for an unfenced lock, which has none); its validity budget; for several keys, each key's fence, comma-separated, in the keys' order |
//! | `res` | store fencing compute_ms update_limit_ms | the worker's resource: `redis` or `postgres`; `claim` (the first touch of each update claims the record) or `write-only` (a plain read, the write fenced alone); how long each update computes between its read and its write; how long an update may take besides that before the worker gives it up |
//! | `sem` | permits | the worker takes permits of semaphores of this many, not locks (`--permits`) |
//! | `ldr` | | the worker campaigns for leader elections named by the keys, not locks (`--leader`); a hold is a leadership, its fence the term |
//! | `aerr` | hold code | acquire failed (`lock_busy`, `lock_unavailable`, ...; `hung` when the worker gave up on it past its bound) |
//! | `chk` | hold 1/0 | the task asked `is_held()` (time taken before asking) |
//! | `h` | hold | the sampler thread saw `is_held()` true (time taken before asking) |
//! | `nh` | hold | the sampler first saw it false |
//! | `rz` | hold | the sampler saw it true again after false: a resurrected lease |
//! | `win` | hold fence 1/0 | an update of the resource invoked (its `n`-th, from 0, is recorded in the store as `w:hold:n`); 1 = careful, after a true `chk` (through the lock guard's helpers where the hold has a lock guard; a permit or a leadership checks `is_held()` and claims with its token), 0 = blind, after the loss, with the stale token alone |
//! | `rd` | hold value\[,value\] | the update's read (its claim) returned these counters, one per key written |
//! | `wok` | hold 1/0 | the resource accepted (1) or refused (0) the write; 0 also when a claim was refused, or nothing was sent since the lease was known lost |
//! | `werr` | hold | the update failed or timed out: it may have been applied (the store's records tell) |
//! | `lost` | hold | the holder noticed the loss and stops using the lock |
//! | `blk` / `blkend` | hold | the worker blocks its own Tokio runtime (`std::thread::sleep`) |
//! | `rel` | hold 1/0 | release invoked; 1 when `is_held()` was true just before |
//! | `rok` / `rlost` / `runav` / `rerr` | hold | release returned Ok / Lost / Unavailable / other |
//! | `end` | | the worker finished its run |
//!
//! The bracketed fields are newer: logs without them still parse (one exclusive key, `tasks`
//! unknown, not fair); so do logs without `res` and `rd` (the write bound is then 2 s).
//!
//! The test's `faults.log` holds `T fault KIND TARGET` and `T heal KIND TARGET`.

mod check;
mod log;
mod parse;
mod report;
mod resource;
mod run;
mod store_order;
mod store_order_mysql;
mod store_order_read_write;
mod worker;

pub use log::{decode_key, encode_key, monotonic_ns, EventLog};
pub use parse::{Fault, History, Hold, WorkerLife, Write, FIFO_SLACK_NS};
pub use report::{Report, Rule, Violation};
pub use resource::{
    parse_write_id, read_records, resource_key, write_id, FenceOf, Fencing, ResourceClient,
    ResourceRecords, ResourceStore, StoredWrite, Update,
};
pub use run::{rss_kib, Run, WorkerProc};
pub use store_order::{
    assert_store_fifo, holder_label, judge_fifo, record_redis_order, record_store_order,
    redis_events, store_order, FifoJudged, RedisOrder, StoreEvent,
};
pub use store_order_mysql::{
    mysql_events, mysql_store_order, record_mysql_store_order, MysqlLogRow,
};
pub use store_order_read_write::{assert_readers_wait_for_writers, judge_readers, ReadersJudged};
pub use worker::{LockServers, WorkerSpec, DEFAULT_COMPUTE, DEFAULT_UPDATE_LIMIT};
