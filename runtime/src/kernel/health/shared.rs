//! A locker's [`Health`]: the state machine behind a lock, the state in an atomic for reads
//! that never wait, the log of changes for subscribers, and the report of each change
//! (tracing, metrics).
//!
//! Answered calls are the common case and cost one atomic `fetch_max` and one load: they
//! take the machine's lock only while the state is not connected, or while a failure is
//! being judged (`attention`). A failure sets `attention` before it reads the latest answered
//! send time, and an answer records its send time before it reads `attention`, so one of the
//! two always sees the other: an answer that raced a failure is never skipped.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use tokio::sync::watch;
use tokio::time::Instant;

use super::machine::{Event, Machine};
use super::state::{EngineState, EngineStates, StateLog};
use crate::kernel::observe;
use crate::store::Connection;

/// How the engine describes itself now, while the calls to it exist.
pub(crate) type Describe = Box<dyn Fn() -> Option<String> + Send + Sync>;

pub(crate) struct Health {
    /// The state now ([`EngineState::code`]).
    now: AtomicU8,
    /// True while the state is not connected, or a failure is being judged: answered calls
    /// then go through the machine.
    attention: AtomicBool,
    /// The send time of the latest answered call, in nanoseconds after `base` plus one (0:
    /// none yet).
    answered: AtomicU64,
    base: Instant,
    machine: Mutex<Machine>,
    log: watch::Sender<StateLog>,
    /// The engine as it describes itself in events, read at each change (a lazily connected
    /// engine describes itself anew once connected); `None` once the locker's calls, which
    /// this health observes and which hold it, are gone.
    describe: Describe,
    /// The engine's name in metrics.
    engine: &'static str,
}

impl Health {
    /// The health of a locker on `store`: suspended when the engine says its connection is
    /// down (a lazily connected store that is not connected yet), else connected (`build`
    /// connected it).
    /// `describe` tells what the locker's calls to `engine` reach.
    pub(crate) fn new(engine: &Connection, describe: Describe) -> Health {
        let down = engine.link().is_some_and(|link| !*link.borrow());
        let state = match down {
            true => EngineState::Suspended,
            false => EngineState::Connected,
        };
        let now = Instant::now();
        let engine = engine.info().engine.label();
        observe::engine_state_started(engine, state);
        Health {
            now: AtomicU8::new(state.code()),
            attention: AtomicBool::new(!state.is_connected()),
            answered: AtomicU64::new(0),
            base: now,
            machine: Mutex::new(Machine::new(state, now)),
            log: watch::channel(StateLog::new(state)).0,
            describe,
            engine,
        }
    }

    /// The state now: one atomic load.
    pub(crate) fn state(&self) -> EngineState {
        EngineState::from_code(self.now.load(Ordering::Acquire))
    }

    /// Every change from now on.
    pub(crate) fn changes(&self) -> EngineStates {
        EngineStates::new(self.log.subscribe())
    }

    /// The log's receiver, for the monitor: it wakes on every change.
    pub(crate) fn log(&self) -> watch::Receiver<StateLog> {
        self.log.subscribe()
    }

    /// A call sent at `sent` was answered.
    pub(crate) fn answered(&self, sent: Instant) {
        let nanos = self.nanos(sent);
        self.answered.fetch_max(nanos, Ordering::SeqCst);
        if self.attention.load(Ordering::SeqCst) {
            self.apply(Event::Answered { sent }, "the engine answered");
        }
    }

    /// A call sent at `sent` found the engine unreachable, for `why`.
    pub(crate) fn unanswered(&self, sent: Instant, why: &dyn std::fmt::Display) {
        let mut machine = self.machine.lock().unwrap();
        if !machine.state().is_connected() {
            return;
        }
        self.attention.store(true, Ordering::SeqCst);
        let latest = self.answered.load(Ordering::SeqCst);
        let answered = latest
            .checked_sub(1)
            .map(|n| self.base + std::time::Duration::from_nanos(n));
        let event = Event::Unanswered { sent };
        self.change(&mut machine, event, answered, &why.to_string());
    }

    /// The leases granted over the engine's session are gone, for `why`.
    pub(crate) fn lost(&self, why: &str) {
        self.apply(Event::Lost, why);
    }

    /// The locker was closed.
    pub(crate) fn close(&self) {
        self.apply(Event::Closed, "the locker was closed");
    }

    fn apply(&self, event: Event, why: &str) {
        let mut machine = self.machine.lock().unwrap();
        self.change(&mut machine, event, None, why);
    }

    /// Applies `event` under the machine's lock, and publishes and reports a change.
    fn change(&self, machine: &mut Machine, event: Event, answered: Option<Instant>, why: &str) {
        let from = machine.state();
        let changed = machine.apply(event, Instant::now(), answered);
        if let Some(to) = changed {
            // Told first: whoever sees the new state finds its event and metrics there.
            let engine = (self.describe)().unwrap_or_else(|| "a dropped engine".to_owned());
            observe::engine_state_changed(self.engine, &engine, from, to, why);
            self.now.store(to.code(), Ordering::Release);
            self.log.send_modify(|log| log.push(to));
        }
        self.attention
            .store(!machine.state().is_connected(), Ordering::SeqCst);
    }

    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }
}

impl Drop for Health {
    fn drop(&mut self) {
        observe::engine_state_ended(self.engine, self.state());
    }
}
