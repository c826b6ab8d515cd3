//! Where the verifications of one lease stand ([`crate::kernel::verify`]): what a lease
//! holds of them, apart from the verifying itself, which needs the locker.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The shortest time between two verifications of one lease in the background.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(250);

/// Where a lease's verifications stand.
#[derive(Default)]
pub(crate) struct Verifying {
    pub(super) state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    /// A verification in the background runs, or waits for its turn.
    pub(super) running: bool,
    /// Asked for while one ran: one more, sent after the ask, follows it.
    pub(super) again: bool,
    /// One of those asks heard a release: the next one goes at once.
    pub(super) urgent: bool,
    /// When the last verification was sent.
    pub(super) last_sent: Option<Instant>,
}

impl Verifying {
    pub(super) fn sent(&self, at: Instant) {
        self.state.lock().unwrap().last_sent = Some(at);
    }
}

impl State {
    /// When the next verification may be sent: at once after a heard release.
    pub(super) fn next_after(&self, heard: bool) -> Option<Instant> {
        match heard {
            true => None,
            false => self.last_sent.map(|at| at + MIN_GAP),
        }
    }
}
