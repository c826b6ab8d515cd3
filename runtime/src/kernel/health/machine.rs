//! The state machine of an engine's health, with nothing around it: which event moves which
//! state where. [`Health`](super::Health) feeds it and publishes what it decides.
//!
//! ```text
//! connected ──unanswered──▶ suspended ──answered──▶ reconnected ──unanswered──▶ suspended …
//!     │                        │   ▲                     │
//!     └────────lost────────────┴───┼───▶ lost ◀──────────┘
//!                                  │      │
//!                                  └──────┴──answered──▶ reconnected
//! any state ──closed──▶ closed (for good)
//! ```
//!
//! Outcomes are ordered by their calls' send times, not by their arrival: a failure counts
//! only if no answered call was sent after it, and an answer ends a suspension (or a loss)
//! only if its call was sent after the failure that began it (or after the loss). So a slow
//! call that was sent before an outage and answered after it began does not end it, and one
//! timed-out call among answered later ones does not begin one.

use tokio::time::Instant;

use super::EngineState;

/// What the locker learned of its engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A call (or a probe, or the engine's own connection) sent at `sent` was answered: any
    /// answer but [`LockError::Unavailable`](crate::LockError::Unavailable).
    Answered { sent: Instant },
    /// A call sent at `sent` found the engine unreachable (or the engine's own connection
    /// went down then).
    Unanswered { sent: Instant },
    /// The leases granted over the engine's session are gone.
    Lost,
    /// The locker was closed.
    Closed,
}

/// The state, and what the next event is judged against.
#[derive(Debug)]
pub(crate) struct Machine {
    state: EngineState,
    /// Connected once: an answer after a suspension is a reconnection, not a first connection
    /// (a lazily connected locker starts suspended).
    ever_connected: bool,
    /// While suspended or lost: an answer counts only for a call sent at or after this (the
    /// failed call's send time, or the moment of the loss).
    since: Instant,
}

impl Machine {
    pub(crate) fn new(state: EngineState, now: Instant) -> Self {
        Machine {
            state,
            ever_connected: state.is_connected(),
            since: now,
        }
    }

    pub(crate) fn state(&self) -> EngineState {
        self.state
    }

    /// Applies `event` at `now`, `answered` being the send time of the latest answered call;
    /// the new state when it changed.
    pub(crate) fn apply(
        &mut self,
        event: Event,
        now: Instant,
        answered: Option<Instant>,
    ) -> Option<EngineState> {
        use EngineState::*;
        let next = match (self.state, event) {
            (Closed, _) => return None,
            (_, Event::Closed) => Closed,
            (Lost, Event::Lost) => {
                self.since = self.since.max(now);
                return None;
            }
            (_, Event::Lost) => {
                self.since = now;
                Lost
            }
            (Connected | Reconnected, Event::Unanswered { sent }) => {
                if answered.is_some_and(|answered| answered > sent) {
                    // The engine answered a call sent after this one: a straggler.
                    return None;
                }
                self.since = sent;
                Suspended
            }
            (Suspended | Lost, Event::Unanswered { .. }) => return None,
            (Suspended | Lost, Event::Answered { sent }) if sent >= self.since => {
                match std::mem::replace(&mut self.ever_connected, true) {
                    true => Reconnected,
                    false => Connected,
                }
            }
            (_, Event::Answered { .. }) => return None,
        };
        self.state = next;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use EngineState::*;

    fn at(ms: u64) -> Instant {
        base() + Duration::from_millis(ms)
    }

    fn base() -> Instant {
        static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        Instant::from_std(*BASE.get_or_init(std::time::Instant::now))
    }

    fn answered(ms: u64) -> Event {
        Event::Answered { sent: at(ms) }
    }

    fn unanswered(ms: u64) -> Event {
        Event::Unanswered { sent: at(ms) }
    }

    /// Runs `events` (each with the moment it is applied and the latest answered send
    /// time then) from `start`, and returns the states it moved through.
    fn run(start: EngineState, events: &[(u64, Event, Option<u64>)]) -> Vec<EngineState> {
        let mut m = Machine::new(start, at(0));
        events
            .iter()
            .filter_map(|&(now, event, latest)| m.apply(event, at(now), latest.map(at)))
            .collect()
    }

    #[test]
    fn a_failure_suspends_and_an_answer_sent_after_it_reconnects() {
        let seen = run(
            Connected,
            &[
                (10, answered(5), Some(5)),
                (20, unanswered(12), Some(5)),
                (25, unanswered(21), Some(5)),
                (40, answered(30), Some(30)),
                (50, answered(45), Some(45)),
            ],
        );
        assert_eq!(seen, [Suspended, Reconnected]);
    }

    #[test]
    fn a_straggler_neither_suspends_nor_reconnects() {
        // A call sent at 3 times out at 20, after one sent at 10 was answered: no outage.
        assert_eq!(run(Connected, &[(20, unanswered(3), Some(10))]), []);
        // Suspended by a call sent at 12; one sent at 8 answers late: still out.
        let seen = run(
            Connected,
            &[(20, unanswered(12), Some(5)), (22, answered(8), Some(8))],
        );
        assert_eq!(seen, [Suspended]);
    }

    #[test]
    fn a_loss_needs_an_answer_sent_after_it() {
        let seen = run(
            Connected,
            &[
                (10, unanswered(5), None),
                (30, Event::Lost, None),
                (31, unanswered(29), None),
                (32, answered(20), Some(20)),
                (33, Event::Lost, Some(20)),
                (40, answered(35), Some(35)),
            ],
        );
        assert_eq!(seen, [Suspended, Lost, Reconnected]);
        // A loss while connected (a Redis connection that dropped) needs no suspension first.
        let seen = run(
            Reconnected,
            &[(10, Event::Lost, Some(9)), (11, answered(11), Some(11))],
        );
        assert_eq!(seen, [Lost, Reconnected]);
    }

    #[test]
    fn a_first_connection_is_connected_and_later_ones_reconnected() {
        let seen = run(
            Suspended,
            &[
                (10, unanswered(5), None),
                (20, answered(15), Some(15)),
                (30, unanswered(25), Some(15)),
                (40, answered(35), Some(35)),
            ],
        );
        assert_eq!(seen, [Connected, Suspended, Reconnected]);
    }

    #[test]
    fn closed_is_for_good() {
        let seen = run(
            Suspended,
            &[
                (10, Event::Closed, None),
                (20, answered(15), Some(15)),
                (21, Event::Lost, Some(15)),
                (22, unanswered(21), Some(15)),
                (23, Event::Closed, Some(15)),
            ],
        );
        assert_eq!(seen, [Closed]);
    }
}
