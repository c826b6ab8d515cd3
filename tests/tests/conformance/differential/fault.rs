//! The faults a schedule injects (stalls, cuts, snapshots, restarts, a failover, and calls
//! of unknown outcome), and their injection: the window each covered.

use std::fmt;
use std::time::Duration;

use leasehold_tests::conformance::Engine;
// The proxy's directions; `Held` here is a held guard.
use leasehold_tests::harness::Held as HeldBytes;
use tokio::time::sleep;

use super::judge::{ns, RECOVERY, SETTLE};
use super::run::Logs;
use super::schedule::{election, key, semaphore};

/// How long a fault of unknown outcome waits for a call to name its target before it gives
/// up (the schedule's operations on it may all be over).
pub const ARMED_FOR: Duration = Duration::from_millis(1500);

/// A fault injected at `at` ms after the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every lock server stops answering for this many ms.
    Stall(u64),
    /// Every connection to the lock servers is closed, and new ones refused, for this many ms.
    Cut(u64),
    /// A snapshot of the Redis servers' data, for a later restart from data.
    Snapshot,
    /// The lock server restarts, from its data or empty.
    Restart { from_data: bool },
    /// A failover where the engine has one ([`Engine::failover`]: a leader change of the
    /// etcd cluster).
    Failover,
    /// The `nth` call from now that names `on` (the ones before it go through) is held on
    /// its connection, with every call that connection carries after it, for `ms`, then
    /// delivered: a call that reaches the server after its client gave up (`ms` is beyond
    /// the operation timeout). The second call is the interesting one where the first
    /// enters a queue and the second looks at it.
    Late { on: On, nth: u8, ms: u64 },
    /// The `nth` call from now that names `on` reaches the server at once, but its reply
    /// (with every later reply on its connection) is held for `ms`, then delivered: a call
    /// applied whose answer came after its client gave up.
    LateReply { on: On, nth: u8, ms: u64 },
    /// As [`LateReply`](Self::LateReply), but the connection is then cut: a call applied
    /// whose answer never came.
    LostReply { on: On, nth: u8, ms: u64 },
    /// The `nth` call from now that names `on` and its connection go silent (nothing goes
    /// through either way) for `ms`, then the connection is cut: a call never applied whose
    /// client cannot know that, and the calls it sends meanwhile (a give-back) lost with it.
    LostRequest { on: On, nth: u8, ms: u64 },
}

/// What a fault of unknown outcome aims at: a name that every engine's requests about it
/// carry on the wire, the user key between braces (Redis's keys `P:lock:{k0}`,
/// `P:sem:{s0}`, `P:leader:lock:{e0}`; ZooKeeper's paths and etcd's keys made from them;
/// PostgreSQL's parameters).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// Lock key `k` (every lock kind, `lock_all`, jobs).
    Key(u8),
    /// Semaphore `s`.
    Semaphore(u8),
    /// Election `e`.
    Election(u8),
}

impl On {
    /// The bytes the proxy looks for.
    pub fn pattern(self) -> String {
        let name = match self {
            On::Key(k) => key(k),
            On::Semaphore(s) => semaphore(s),
            On::Election(e) => election(e),
        };
        format!("{{{name}}}")
    }
}

// Printed as the expression that builds it, for the schedule's program.
impl fmt::Debug for On {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            On::Key(k) => write!(f, "On::Key({k})"),
            On::Semaphore(s) => write!(f, "On::Semaphore({s})"),
            On::Election(e) => write!(f, "On::Election({e})"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultAt {
    pub at: u64,
    pub fault: Fault,
}

/// A fault window: when it started, when it ended, whether it may have lost locks.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start: u64,
    pub end: u64,
    pub loses_locks: bool,
    /// One connection held (from the call that sprang the trap to its release or cut): the
    /// calls it carried have an unknown outcome until [`SETTLE`] after `end`, and waits are
    /// judged from then on, not [`RECOVERY`] later.
    pub unknown: bool,
    /// The held connection was cut at `end` (not delivered).
    pub cut: bool,
    /// What it was, for the trace.
    pub kind: &'static str,
}

impl Window {
    pub fn new(start: u64, end: u64, kind: &'static str) -> Self {
        Window {
            start,
            end,
            loses_locks: false,
            unknown: false,
            cut: false,
            kind,
        }
    }

    /// Until when what happened in it may keep others out.
    pub fn settled_by(&self) -> u64 {
        self.end + ns(if self.unknown { SETTLE } else { RECOVERY })
    }
}

/// Injects `fault` where the engine has it; the window it covered, `None` if skipped.
pub async fn inject(engine: &Engine, fault: Fault, logs: &Logs) -> Option<Window> {
    match fault {
        Fault::Stall(ms) | Fault::Cut(ms) => {
            let (name, done) = match fault {
                Fault::Stall(_) => ("stall", engine.stall()),
                _ => ("cut", engine.cut()),
            };
            if !done {
                return None;
            }
            let start = logs.fault("fault", name);
            sleep(Duration::from_millis(ms)).await;
            engine.heal();
            let end = logs.fault("heal", name);
            Some(Window::new(start, end, name))
        }
        Fault::Late { on, nth, ms }
        | Fault::LateReply { on, nth, ms }
        | Fault::LostReply { on, nth, ms }
        | Fault::LostRequest { on, nth, ms } => {
            let (name, held) = match fault {
                Fault::Late { .. } => ("late", HeldBytes::Requests),
                Fault::LateReply { .. } => ("late_reply", HeldBytes::Replies),
                Fault::LostReply { .. } => ("lost_reply", HeldBytes::Replies),
                _ => ("lost_request", HeldBytes::Both),
            };
            let before = engine.caught();
            if !engine.hold_nth_sending(on.pattern().as_bytes(), usize::from(nth), held) {
                return None;
            }
            // From the moment a call sprang the trap (the proxy catches it within the 2 ms
            // it polls at; a call in flight before counts from its invocation anyway).
            if !engine.wait_caught(before + 1, ARMED_FOR).await {
                // Nothing named it: nothing held (a call caught in between is let go now).
                engine.release_held();
                return None;
            }
            let start = logs.fault("fault", name);
            sleep(Duration::from_millis(ms)).await;
            match fault {
                Fault::LostReply { .. } | Fault::LostRequest { .. } => engine.cut_held(),
                _ => engine.release_held(),
            }
            let end = logs.fault("heal", name);
            Some(Window {
                unknown: true,
                cut: matches!(fault, Fault::LostReply { .. } | Fault::LostRequest { .. }),
                ..Window::new(start, end, name)
            })
        }
        Fault::Snapshot => {
            engine.snapshot().await;
            None
        }
        Fault::Failover => {
            if !engine.fails_over() {
                return None;
            }
            let start = logs.fault("fault", "failover");
            engine.failover().await;
            let end = logs.fault("heal", "failover");
            Some(Window::new(start, end, "failover"))
        }
        Fault::Restart { from_data } => {
            let (empty, data) = engine.restarts();
            if !(if from_data { data } else { empty }) {
                return None;
            }
            let name = if from_data {
                "restart_data"
            } else {
                "restart_empty"
            };
            let start = logs.fault("fault", name);
            engine.restart(from_data).await;
            let end = logs.fault("heal", name);
            Some(Window {
                loses_locks: engine.restart_loses_locks(from_data),
                ..Window::new(start, end, name)
            })
        }
    }
}
