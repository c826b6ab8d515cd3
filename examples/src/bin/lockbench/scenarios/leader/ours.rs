//! leasehold's leader election as an [`Election`]: every candidate a locker of its own on the
//! place (its own connection or session; clones of one store in memory), the observer
//! another.

use leasehold::{LeaderObserver, Leadership, LockError, Locker};

use super::handover::Election;
use crate::engine::Place;

/// Ours on `place`, for the election `name`.
pub(crate) struct OursElection {
    place: Place,
    name: String,
}

impl OursElection {
    pub(crate) fn new(place: &Place, name: String) -> OursElection {
        OursElection {
            place: place.clone(),
            name,
        }
    }

    /// Whether this engine offers leader election yet: it refuses an observer with
    /// [`LockError::Config`] when it does not.
    pub(crate) async fn available(place: &Place) -> bool {
        let locker = place.locker().await;
        match locker.observe_leader("probe") {
            Ok(_) => true,
            Err(LockError::Config { .. }) => false,
            Err(e) => panic!("observing a leader: {e}"),
        }
    }
}

impl Election for OursElection {
    type Candidate = Locker;
    type Leadership = Leadership;
    type Observer = (Locker, LeaderObserver);

    async fn candidate(&self) -> Locker {
        self.place.locker().await
    }

    async fn campaign<'a>(&'a self, locker: &'a Locker, identity: &'a str) -> (Leadership, u64) {
        let leadership = locker
            .leader(self.name.as_str())
            .identity(identity)
            .campaign()
            .await
            .expect("campaign");
        let term = leadership.term();
        (leadership, term)
    }

    async fn resign<'a>(&'a self, _: &'a Locker, leadership: Leadership) {
        leadership.resign().await.expect("resign");
    }

    /// The leadership and its locker dropped: the leadership ends in the background, and
    /// with it the locker's session where the engine has one.
    async fn end_session(&self, locker: Locker, leadership: Leadership) {
        drop(leadership);
        drop(locker);
    }

    async fn observer(&self) -> (Locker, LeaderObserver) {
        let locker = self.place.locker().await;
        let observer = locker.observe_leader(&self.name).expect("observe");
        (locker, observer)
    }

    async fn next_leader<'a>(
        &'a self,
        (_, observer): &'a mut (Locker, LeaderObserver),
        last: u64,
    ) -> u64 {
        loop {
            match observer.next().await {
                Ok(Some(leader)) if leader.term() != last => return leader.term(),
                Ok(_) => {}
                // The engine did not answer within the operation timeout (a loaded machine):
                // ask again rather than end the run.
                Err(e) if e.is_unavailable() => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
                Err(e) => panic!("observe: {e}"),
            }
        }
    }
}
