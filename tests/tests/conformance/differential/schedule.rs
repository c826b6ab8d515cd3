//! What a schedule is: operations of every primitive, each with its wait, lease, hold and way
//! out, and the faults between them; printed as the short program a regression test is
//! written in.

use std::fmt;

use super::fault::{Fault, FaultAt};

/// The semaphores' limit.
pub const LIMIT: u32 = 3;

/// Tasks per process.
pub const TASKS: usize = 2;

/// What an operation takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prim {
    /// `lock(k)`: an exclusive, fenced lock.
    Lock(u8),
    /// `lock(k).unfenced()`.
    Unfenced(u8),
    /// `lock(k).fair(true)`.
    Fair(u8),
    /// `read_lock(k)`.
    Read(u8),
    /// `write_lock(k)`.
    Write(u8),
    /// `lock_all` of these keys.
    All(Vec<u8>),
    /// `lock_all` of these keys with `read_keys` of the last one ("read the venue, write
    /// these seats"): the written keys exclusive, the read key a reader's share.
    Booking(Vec<u8>, u8),
    /// This many permits of semaphore `s` (of [`LIMIT`]).
    Permits(u8, u32),
    /// A campaign for election `e`.
    Leader(u8),
    /// A singleton job: `lock(k).hold_at_least(ms)`.
    Job(u8, u64),
}

impl Prim {
    /// The kind, for the refusal rule: every operation of a kind is refused, or none.
    pub fn kind(&self) -> &'static str {
        match self {
            Prim::Lock(_) => "lock",
            Prim::Unfenced(_) => "unfenced",
            Prim::Fair(_) => "fair",
            Prim::Read(_) => "read",
            Prim::Write(_) => "write",
            Prim::All(_) => "lock_all",
            Prim::Booking(..) => "lock_all_read",
            Prim::Permits(..) => "semaphore",
            Prim::Leader(_) => "leader",
            Prim::Job(..) => "job",
        }
    }

    /// The lock keys it takes (none for semaphores and elections).
    pub fn keys(&self) -> Vec<String> {
        match self {
            Prim::Lock(k)
            | Prim::Unfenced(k)
            | Prim::Fair(k)
            | Prim::Read(k)
            | Prim::Write(k)
            | Prim::Job(k, _) => vec![key(*k)],
            Prim::All(ks) => ks.iter().map(|k| key(*k)).collect(),
            Prim::Booking(ks, read) => ks
                .iter()
                .chain(std::iter::once(read))
                .map(|k| key(*k))
                .collect(),
            Prim::Permits(..) | Prim::Leader(_) => Vec::new(),
        }
    }

    /// Whether it takes `k` as a reader's share (a read lock, a booking's read key).
    pub fn reads(&self, k: &str) -> bool {
        match self {
            Prim::Read(r) => key(*r) == k,
            Prim::Booking(ks, read) => key(*read) == k && !ks.iter().any(|w| key(*w) == k),
            _ => false,
        }
    }
}

pub fn key(k: u8) -> String {
    format!("k{k}")
}

pub fn semaphore(s: u8) -> String {
    format!("s{s}")
}

pub fn election(e: u8) -> String {
    format!("e{e}")
}

/// How an operation asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// `acquire` with this wait (ms); a campaign with this wait.
    Acquire(u64),
    /// `try_acquire`; a campaign with no wait.
    Try,
}

/// How a holder lets go (or how the acquire ends early).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `release().await` (`resign` for a leader).
    Release,
    /// The guard dropped.
    Drop,
    /// A panic inside the guard's scope, in a task of its own.
    Panic,
    /// The acquire dropped after this many polls (if it has not finished by then).
    Cancel(u8),
}

/// One operation of a task: at `at` ms after the start (or when the task's previous operation
/// ended, if later), take `prim`, hold it for `hold` ms, let go by `exit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub proc: usize,
    pub task: usize,
    pub at: u64,
    pub prim: Prim,
    pub how: How,
    pub lease: u64,
    pub watchdog: bool,
    pub hold: u64,
    pub exit: Exit,
}

/// A schedule: `procs` processes of [`TASKS`] tasks, their operations and the faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub procs: usize,
    pub ops: Vec<Op>,
    pub faults: Vec<FaultAt>,
}

// The short program a failing schedule is printed as (and regression tests are written in).

impl Schedule {
    pub fn new(procs: usize) -> Self {
        Schedule {
            procs,
            ops: Vec::new(),
            faults: Vec::new(),
        }
    }

    pub fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    pub fn fault(mut self, at: u64, fault: Fault) -> Self {
        self.faults.push(FaultAt { at, fault });
        self
    }
}

/// `on(proc, task, at)` starts an operation's description.
pub fn on(proc: usize, task: usize, at: u64) -> OpAt {
    OpAt { proc, task, at }
}

pub struct OpAt {
    pub proc: usize,
    pub task: usize,
    pub at: u64,
}

impl OpAt {
    pub fn take(self, prim: Prim) -> Op {
        Op {
            proc: self.proc,
            task: self.task,
            at: self.at,
            prim,
            how: How::Acquire(1000),
            lease: 1500,
            watchdog: true,
            hold: 100,
            exit: Exit::Release,
        }
    }
}

impl Op {
    pub fn how(mut self, how: How) -> Self {
        self.how = how;
        self
    }
    pub fn lease(mut self, lease: u64, watchdog: bool) -> Self {
        self.lease = lease;
        self.watchdog = watchdog;
        self
    }
    pub fn hold(mut self, hold: u64) -> Self {
        self.hold = hold;
        self
    }
    pub fn exit(mut self, exit: Exit) -> Self {
        self.exit = exit;
        self
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Schedule::new({})", self.procs)?;
        let mut ops: Vec<&Op> = self.ops.iter().collect();
        ops.sort_by_key(|op| (op.at, op.proc, op.task));
        for op in ops {
            writeln!(
                f,
                "    .op(on({}, {}, {}).take(Prim::{:?}).how(How::{:?}).lease({}, {}).hold({}).exit(Exit::{:?}))",
                op.proc, op.task, op.at, op.prim, op.how, op.lease, op.watchdog, op.hold, op.exit
            )?;
        }
        let mut faults: Vec<&FaultAt> = self.faults.iter().collect();
        faults.sort_by_key(|fault| fault.at);
        for fault in faults {
            writeln!(f, "    .fault({}, Fault::{:?})", fault.at, fault.fault)?;
        }
        Ok(())
    }
}
