//! [`LeaderStatus`]: whether this instance leads an election now, as a cheap handle that any
//! task may keep and ask (a status endpoint, a metrics gauge), apart from the task that leads.

use std::fmt;
use std::sync::{Arc, Mutex};

use crate::kernel::reentrant::Held;

/// Whether this instance leads an election now, and in which term: a cheap, cloneable handle
/// for the code that does not run the leader's task (a status or readiness endpoint, a
/// metrics gauge, a handler that only the leader serves), as Curator's
/// `LeaderLatch.hasLeadership()`. Get it from the campaign before it starts
/// ([`LeaderRequest::status`](crate::LeaderRequest::status)), which also covers every term
/// of [`lead_forever`](crate::LeaderRequest::lead_forever) and
/// [`run_while_leader`](crate::LeaderRequest::run_while_leader), or from a
/// [`Leadership`](crate::Leadership).
///
/// [`is_leader`](Self::is_leader) answers as [`Leadership::is_leader`](crate::Leadership::is_leader)
/// does, from the leadership's lease: false as soon as this process knows the leadership is
/// gone (resigned, found lost by a renewal, or past its lease's validity on this process's
/// monotonic clock), even before the leading task has noticed. It costs a lock of a mutex and
/// no call to the engine. Clones share the state.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let campaign = locker.leader("expiry-worker").identity("pod-7");
/// let status = campaign.status(); // for the status endpoint
/// assert!(!status.is_leader());
/// let seen = status.clone();
/// let term = campaign
///     .run_while_leader(move |leader| {
///         assert!(seen.is_leader()); // e.g. a status endpoint, elsewhere
///         assert_eq!(seen.term(), Some(leader.term()));
///         async move { leader.term() }
///     })
///     .await?;
/// assert!(term > 0);
/// assert!(!status.is_leader()); // the task ended: resigned
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct LeaderStatus {
    current: Arc<Mutex<Option<Term>>>,
}

/// The term this instance leads (or led last, until it ended).
struct Term {
    leader: Leader,
    /// The leadership's lease and fence, which say whether it still holds.
    held: Held,
}

impl Term {
    fn is_held(&self) -> bool {
        self.held.lease.is_held_by(self.held.fence)
    }
}

impl LeaderStatus {
    /// A status that shows no leadership yet: give it to a campaign with
    /// [`LeaderRequest::with_status`](crate::LeaderRequest::with_status).
    pub fn new() -> Self {
        LeaderStatus::default()
    }

    /// Whether this instance leads now: elected, and the leadership not resigned, lost or
    /// past its lease's validity.
    pub fn is_leader(&self) -> bool {
        self.with_current(|_| ()).is_some()
    }

    /// This instance as followers see it ([`Leader`]: identity and term) while it leads;
    /// `None` when it does not.
    pub fn leader(&self) -> Option<Leader> {
        self.with_current(Leader::clone)
    }

    /// The term this instance leads in: the fence to give the leader's writes; `None` when
    /// it does not lead.
    pub fn term(&self) -> Option<u64> {
        self.with_current(Leader::term)
    }

    /// `f` of the current leader, if this instance leads.
    fn with_current<T>(&self, f: impl FnOnce(&Leader) -> T) -> Option<T> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current
            .as_ref()
            .filter(|term| term.is_held())
            .map(|term| f(&term.leader))
    }

    /// This instance was elected as `leader`, its leadership's lease held as `held`.
    pub(crate) fn elected(&self, leader: Leader, held: Held) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Term { leader, held });
    }

    /// The leadership of `term` ended (resigned, dropped): forget it, unless a later term
    /// took its place.
    pub(crate) fn ended(&self, term: u64) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|t| t.leader.term() == term) {
            *current = None;
        }
    }
}

impl fmt::Debug for LeaderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderStatus")
            .field("leader", &self.leader())
            .finish()
    }
}

/// A leader as followers see it: who, and in which term.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = leasehold::Locker::in_memory();
/// let leadership = locker.leader("scheduler").identity("pod-7").campaign().await?;
/// let mut followers = locker.observe_leader("scheduler")?;
/// let leader = followers.next().await?.expect("a leader");
/// assert_eq!((leader.identity(), leader.term()), ("pod-7", leadership.term()));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leader {
    pub(crate) identity: String,
    pub(crate) term: u64,
}

impl Leader {
    /// The identity the leader campaigned with.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Its term: the fence of its leadership, strictly greater than every earlier leader's.
    pub fn term(&self) -> u64 {
        self.term
    }
}

impl fmt::Display for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (term {})", self.identity, self.term)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Locker;

    /// The status follows every term of `lead_forever` and turns false the moment a
    /// leadership's lease runs out, before the leading task has noticed.
    #[tokio::test(start_paused = true)]
    async fn the_status_follows_each_term_and_the_lease_not_the_task() {
        let locker = Locker::in_memory();
        let status = LeaderStatus::new();
        let (terms_tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
        let leading = tokio::spawn({
            let (locker, status) = (locker.clone(), status.clone());
            async move {
                locker
                    .leader("expiry-worker")
                    .identity("pod-7")
                    .with_status(status)
                    .lead_forever(move |leader| {
                        let terms_tx = terms_tx.clone();
                        async move {
                            let _ = terms_tx.send(leader.term());
                            tokio::time::sleep(Duration::from_secs(5)).await;
                        }
                    })
                    .await
            }
        });
        let first = terms.recv().await.unwrap();
        assert!(status.is_leader());
        assert_eq!(status.term(), Some(first));
        assert_eq!(status.leader().unwrap().identity(), "pod-7");
        // The task ends, the term is resigned, and the next one shows.
        let second = terms.recv().await.unwrap();
        assert!(second > first);
        assert_eq!(status.term(), Some(second));
        let _ = locker.close().await;
        assert!(matches!(
            leading.await.unwrap(),
            Err(crate::LockError::Closed)
        ));
        assert!(!status.is_leader());
        assert_eq!((status.term(), status.leader()), (None, None));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unrenewed_leadership_stops_showing_when_its_lease_ends() {
        let locker = Locker::in_memory();
        let campaign = locker
            .leader("scheduler")
            .lease(Duration::from_millis(100))
            .watchdog(false);
        let status = campaign.status();
        assert!(!status.is_leader());
        let leadership = campaign.campaign().await.unwrap();
        let from_leadership = leadership.status();
        assert!(status.is_leader() && from_leadership.is_leader());
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Nobody polled `lost()`: the status reads the lease itself.
        assert!(!status.is_leader() && !from_leadership.is_leader());
        assert_eq!(status.term(), None);
        drop(leadership);

        // Resigning ends it at once.
        let campaign = locker.leader("scheduler");
        let status = campaign.status();
        let leadership = campaign.campaign().await.unwrap();
        assert!(status.is_leader());
        leadership.resign().await.unwrap();
        assert!(!status.is_leader());
    }
}
