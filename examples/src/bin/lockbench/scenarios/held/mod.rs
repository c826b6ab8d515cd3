//! Scenario 10, `held` (issue 19's "scenario 5": many held locks, how cost grows): one process
//! holds 1k, 10k and 100k locks at once with the watchdog on (lease 3 s), against the hand-written
//! renewal users write (one task per guard, a compare-and-PEXPIRE script every lease/3).
//!
//! Each side of each point runs in a fresh worker process (`lockbench --held-worker ...`), so
//! that its resident memory is its own, against a throwaway `redis-server` of its own that is
//! flushed between runs, so that Redis's CPU is spent on that run's keys alone. Per point:
//!
//! - client memory per held lock: the worker's RSS (`/proc/self/statm`) after acquiring all
//!   locks and letting them settle for half a lease (every lease renewed at least once), minus
//!   its RSS before, over the number held;
//! - Redis CPU per renewal: `used_cpu_sys + used_cpu_user` (`INFO cpu`) over the hold window,
//!   less what the idle server used in as long a time before the locks were taken (its cron),
//!   over the renewals done in it; and per held lock per second, for the curve;
//! - renewal lag p99: how late each renewal was sent against its schedule (a third of the
//!   lease after the previous acquire or renewal was sent). Ours is the library's own
//!   `leasehold_renewal_lag_seconds` histogram (the `metrics` feature), read by a recorder of
//!   the worker's; the baseline's tasks measure the same thing themselves;
//! - commands per renewal: `total_commands_processed` over the hold window (less the worker's
//!   own `INFO`), over the renewals done in it (Redis counts the commands a script runs too:
//!   a compare-and-PEXPIRE is GET and PEXPIRE), and script calls (`EVALSHA`, `EVAL`: client
//!   requests) per renewal;
//! - acquisitions per second while taking them (512 tasks; the library batches).

mod point;
mod probe;
mod scenario;
mod worker;

pub(crate) use point::Point;
pub(crate) use scenario::{scenario, Plan, Run};
pub(crate) use worker::worker;
