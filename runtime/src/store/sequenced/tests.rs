//! The recipe through a fake driver: one in-memory queue, created in order, looked at as
//! ZooKeeper does (a listing after the create), with every deletion recorded.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{
    tag, writer_top, Ask, Awaited, Contender, Contenders, Create, Created, Creation, Driver, Head,
    Inspection, Made, Place, Queued, Records, Role, Sequenced, Wake,
};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

/// A contender of the fake queue: its name, role, creation order and data.
type Entry = (String, Role, i64, Vec<u8>);

#[derive(Default)]
pub(super) struct Fake {
    /// The queue of the one lock the tests contend for, in creation order, with each
    /// contender's data.
    queue: Mutex<Vec<Entry>>,
    pub(super) order: AtomicI64,
    /// The session contenders are created in now.
    pub(super) session: AtomicU64,
    /// What was deleted in the background, and what abandoned attempts were cleaned up after.
    pub(super) later: Mutex<Vec<String>>,
    pub(super) abandoned: Mutex<Vec<String>>,
    /// Calls that fail as unavailable: by name (`create`, `look`, `list`, `vouch`, `delete`),
    /// after how many more that pass. A failed `create` is applied all the same (its answer was lost).
    fails: Mutex<HashMap<&'static str, u32>>,
    /// How long the next look takes (once): an attempt whose future is not polled meanwhile.
    pub(super) slow_look: Mutex<Option<Duration>>,
    /// Background deletions are recorded but not applied until [`Fake::flush_later`]: their
    /// round trip is still under way.
    pub(super) defer_later: std::sync::atomic::AtomicBool,
    /// The deleting calls, in order: `delete` of one contender, `delete_all` of several.
    pub(super) deletes: Mutex<Vec<(&'static str, usize)>>,
    /// Whether attempts' creates go together ([`Driver::creates_together`]).
    pub(super) together: std::sync::atomic::AtomicBool,
    /// The names each creating call created, in order (`create`: one; `create_many`: its
    /// batch's).
    pub(super) creates: Mutex<Vec<Vec<String>>>,
    /// How long each create takes: a call over the network, which others can meet.
    pub(super) create_delay: Mutex<Option<Duration>>,
    /// The task that sent each `create_many`.
    pub(super) senders: Mutex<Vec<Option<tokio::task::Id>>>,
    /// A lock whose creates the engine refuses (`Config`), with nothing made: one of another
    /// identity's. A call with any of its creates is refused as a whole.
    pub(super) refused: Mutex<Option<String>>,
}

impl Fake {
    /// Applies the background deletions recorded so far.
    pub(super) fn flush_later(&self) {
        for name in self.later.lock().unwrap().iter() {
            self.remove(name);
        }
    }

    /// The call `call` fails once, after `passing` more of it pass.
    pub(super) fn fail(&self, call: &'static str, passing: u32) {
        self.fails.lock().unwrap().insert(call, passing);
    }

    /// Refuses a call with a create of the refused lock, before anything is made.
    fn refusing<'a>(
        &self,
        mut creations: impl Iterator<Item = &'a Creation<()>>,
    ) -> Result<(), LockError> {
        let refused = self.refused.lock().unwrap();
        match creations.any(|one| Some(one.keys.lock()) == refused.as_deref()) {
            true => Err(LockError::config(
                "the fake refused a create: not authorized",
            )),
            false => Ok(()),
        }
    }

    fn failing(&self, call: &'static str) -> Result<(), LockError> {
        let mut fails = self.fails.lock().unwrap();
        match fails.get_mut(call) {
            Some(0) => {
                fails.remove(call);
                Err(LockError::unavailable(
                    format!("the fake's {call} failed"),
                    None,
                ))
            }
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.queue
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.0.clone())
            .collect()
    }

    pub(super) fn remove(&self, name: &str) -> bool {
        let mut queue = self.queue.lock().unwrap();
        let before = queue.len();
        queue.retain(|e| e.0 != name);
        queue.len() < before
    }
}

impl Driver for Fake {
    type Via = ();
    type Watcher = ();

    fn describe(&self) -> String {
        "fake".into()
    }

    fn name(&self, keys: &LockKeys, token: &OwnerToken, role: Role) -> String {
        let kind = match role {
            Role::Writer => "w",
            Role::Reader => "r",
            Role::Permits { .. } => "p",
        };
        format!("{}/{kind}-{}", keys.lock(), tag(token))
    }

    async fn open(&self, _lease: Duration) -> Result<((), u64), LockError> {
        Ok(((), self.session.load(Ordering::Relaxed)))
    }

    async fn vouch(
        &self,
        _session: u64,
        _req: &AcquireRequest<'_>,
    ) -> Result<Option<tokio::time::Instant>, LockError> {
        self.failing("vouch")?;
        Ok(None)
    }

    async fn create(
        &self,
        one: &Creation<()>,
    ) -> Result<(Contender<()>, Option<Place>), LockError> {
        let delay = *self.create_delay.lock().unwrap();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        self.refusing(std::iter::once(one))?;
        let order = self.order.fetch_add(1, Ordering::Relaxed) + 1;
        self.queue
            .lock()
            .unwrap()
            .push((one.name.clone(), one.role, order, Vec::new()));
        self.creates.lock().unwrap().push(vec![one.name.clone()]);
        // Applied, and then maybe the answer is lost.
        self.failing("create")?;
        Ok((made_at(one, order), None))
    }

    fn creates_together(&self) -> bool {
        self.together.load(Ordering::Relaxed)
    }

    /// Every contender at one order (one write), each create answered on its own (a batch
    /// taken together as [`create_all`](Driver::create_all) answers it); applied, and then
    /// maybe the answer is lost (`create_many` fails).
    async fn create_many(&self, batch: &[Create<()>]) -> Result<Vec<Made<()>>, LockError> {
        self.senders.lock().unwrap().push(tokio::task::try_id());
        let delay = *self.create_delay.lock().unwrap();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let creations = || batch.iter().flat_map(Create::creations);
        self.refusing(creations())?;
        let order = self.order.fetch_add(1, Ordering::Relaxed) + 1;
        let mut queue = self.queue.lock().unwrap();
        for one in creations() {
            queue.push((one.name.clone(), one.role, order, Vec::new()));
        }
        drop(queue);
        let names = creations().map(|one| one.name.clone()).collect();
        self.creates.lock().unwrap().push(names);
        self.failing("create_many")?;
        let made = |one: &Creation<()>| (made_at(one, order), None);
        Ok(batch
            .iter()
            .map(|create| match create {
                Create::One(one) => Made::One(Ok(made(one))),
                Create::All(all) => Made::All(Ok(Some(all.iter().map(made).collect()))),
            })
            .collect())
    }

    /// Every contender at one order, as ZooKeeper's `multi` does (where they stand takes a
    /// look after it); applied, and then maybe the answer is lost (`create_all` fails).
    async fn create_all(&self, batch: &[Creation<()>]) -> Result<Option<Created<()>>, LockError> {
        self.refusing(batch.iter())?;
        let order = self.order.fetch_add(1, Ordering::Relaxed) + 1;
        let mut queue = self.queue.lock().unwrap();
        for one in batch {
            queue.push((one.name.clone(), one.role, order, Vec::new()));
        }
        drop(queue);
        self.failing("create_all")?;
        let made = batch.iter().map(|one| (made_at(one, order), None));
        Ok(Some(made.collect()))
    }

    async fn look_all(
        &self,
        batch: &[Ask<'_, '_>],
        mine: &[Contender<()>],
    ) -> Result<Vec<Place>, LockError> {
        self.failing("look_all")?;
        let mut places = Vec::new();
        for (ask, mine) in batch.iter().zip(mine) {
            places.push(self.look(ask.req, mine, ask.role).await?);
        }
        Ok(places)
    }

    /// All or nothing, as the engines' transactions: when one is gone, none is deleted.
    async fn delete_all(&self, mine: &[Contender<()>]) -> Result<bool, LockError> {
        self.deletes
            .lock()
            .unwrap()
            .push(("delete_all", mine.len()));
        self.failing("delete_all")?;
        let names = self.names();
        if !mine.iter().all(|one| names.contains(&one.name)) {
            return Ok(false);
        }
        for one in mine {
            self.remove(&one.name);
        }
        Ok(true)
    }

    /// Where `mine` stands among the contenders of its own lock (the queue may hold those
    /// of several locks: a batch's).
    async fn look(
        &self,
        req: &AcquireRequest<'_>,
        mine: &Contender<()>,
        role: Role,
    ) -> Result<Place, LockError> {
        let slow = self.slow_look.lock().unwrap().take();
        if let Some(slow) = slow {
            tokio::time::sleep(slow).await;
        }
        self.failing("look")?;
        let lock = format!("{}/", req.keys.lock());
        let mut queue = self.queue.lock().unwrap().clone();
        queue.retain(|e| e.0.starts_with(&lock));
        let Some(at) = queue.iter().position(|e| e.0 == mine.name) else {
            return Ok(Place::Gone);
        };
        let holds = match role {
            Role::Writer => at == 0,
            Role::Reader => !queue[..at].iter().any(|e| e.1 == Role::Writer),
            Role::Permits { .. } => unreachable!("the recipe lists a semaphore's queue"),
        };
        Ok(match (holds, role) {
            (true, Role::Reader) => Place::Holds { top: 1 },
            (true, _) => Place::Holds {
                top: writer_top(mine.order, req.fences),
            },
            (false, _) => Place::Behind,
        })
    }

    /// Takes a turn of the runtime first, as a call over the network does: a caller can stop
    /// waiting for it before it is sent.
    async fn delete(&self, mine: &Contender<()>) -> Result<bool, LockError> {
        self.deletes.lock().unwrap().push(("delete", 1));
        tokio::task::yield_now().await;
        self.failing("delete")?;
        Ok(self.remove(&mine.name))
    }

    fn delete_later(&self, mine: Contender<()>) {
        if !self.defer_later.load(Ordering::Relaxed) {
            self.remove(&mine.name);
        }
        self.later.lock().unwrap().push(mine.name);
    }

    /// As the engines did before issue 45: everything of the attempt's name goes, whatever
    /// this process knows of it (what the recipe must never ask for a contender it knows).
    async fn abandoned(&self, name: &str) -> Result<(), LockError> {
        self.abandoned.lock().unwrap().push(name.to_owned());
        self.queue
            .lock()
            .unwrap()
            .retain(|e| !e.0.starts_with(name));
        Ok(())
    }

    async fn list(&self, _keys: &LockKeys) -> Result<Vec<Queued>, LockError> {
        self.failing("list")?;
        let queue = self.queue.lock().unwrap();
        Ok(queue
            .iter()
            .map(|e| Queued {
                name: e.0.clone(),
                role: e.1,
                owner: e.2,
            })
            .collect())
    }

    async fn watcher(&self, _keys: &LockKeys) -> Result<(), LockError> {
        Ok(())
    }

    async fn watch(_watcher: &(), awaited: Awaited<'_, ()>) -> Result<Option<Wake>, String> {
        Ok(match awaited {
            Awaited::Deletions => Some(Box::pin(std::future::pending())),
            _ => None,
        })
    }
}

impl Inspection for Fake {
    /// The data's stamp; no descriptions (the fake keeps no sessions).
    async fn who(
        &self,
        _keys: &LockKeys,
        contenders: &[Queued],
    ) -> Result<Vec<Option<super::Who>>, LockError> {
        let queue = self.queue.lock().unwrap();
        Ok(contenders
            .iter()
            .map(|q| {
                let e = queue.iter().find(|e| e.0 == q.name)?;
                Some(super::Who {
                    stamp: crate::store::identity::Stamp::of_stored(&e.3),
                    order: e.2,
                    ..Default::default()
                })
            })
            .collect())
    }

    async fn remaining(&self, owners: &[i64]) -> Result<Vec<Duration>, LockError> {
        Ok(owners
            .iter()
            .map(|&o| Duration::from_secs(o as u64))
            .collect())
    }
}

impl Records for Fake {
    async fn head(&self, _keys: &LockKeys) -> Result<Option<Head>, LockError> {
        let queue = self.queue.lock().unwrap();
        Ok(queue.first().map(|e| Head {
            order: e.2,
            data: e.3.clone(),
        }))
    }

    async fn write(&self, mine: &Contender<()>, data: &[u8]) -> Result<bool, LockError> {
        let mut queue = self.queue.lock().unwrap();
        let Some(entry) = queue.iter_mut().find(|e| e.0 == mine.name) else {
            return Ok(false);
        };
        entry.3 = data.to_vec();
        Ok(true)
    }
}

/// The contender the fake made for `one` at creation order `order`.
fn made_at(one: &Creation<()>, order: i64) -> Contender<()> {
    Contender {
        name: one.name.clone(),
        order,
        session: one.session,
        via: (),
    }
}

/// The fake engine's bound of one attempt that is polled.
const PATIENCE: Duration = Duration::from_secs(10);

pub(super) fn recipe() -> Sequenced<Fake> {
    let contenders = Contenders::default();
    Sequenced::new(
        Fake::default(),
        contenders,
        Arc::new(watch::channel(0).0),
        PATIENCE,
    )
}

pub(super) fn request<'a>(
    keys: &'a LockKeys,
    token: &'a OwnerToken,
    waits: bool,
) -> AcquireRequest<'a> {
    AcquireRequest {
        keys,
        token,
        lease: Duration::from_secs(1),
        validity: Duration::from_millis(980),
        sent: Instant::now(),
        fence_ttl: Duration::from_secs(60),
        fences: 2,
        interest: if waits {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        },
        queued: false,
        contender: None,
        fenced: true,
        kind: crate::store::kind::LeaseKind::Exclusive,
        waiter: None,
    }
}

#[tokio::test]
async fn the_first_writer_holds_and_the_next_keeps_its_place_until_then() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    let first = seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    assert_eq!(first, Attempt::granted(32 + 2));
    let waits = request(&keys, &b, true);
    assert!(matches!(
        seq.acquire_once(&waits).await.unwrap(),
        Attempt::Held { .. }
    ));
    assert!(seq.contenders.waiting(keys.lock()).is_some());
    assert!(seq.release_once(&keys, &a, Role::Writer).await.unwrap());
    // Asked again, queued: the same contender, now first.
    let again = AcquireRequest {
        queued: true,
        ..request(&keys, &b, true)
    };
    assert_eq!(
        seq.acquire_once(&again).await.unwrap(),
        Attempt::granted(2 * 32 + 2)
    );
    assert_eq!(seq.driver.names().len(), 1);
    assert!(seq.contenders.waiting(keys.lock()).is_none());
}

#[tokio::test]
async fn a_writer_that_will_not_wait_leaves_the_queue_at_once() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    let tried = seq.acquire_once(&request(&keys, &b, false)).await.unwrap();
    assert!(matches!(tried, Attempt::Held { .. }));
    assert_eq!(
        seq.driver.names(),
        [seq.driver.name(&keys, &a, Role::Writer)]
    );
    assert!(seq.contenders.waiting(keys.lock()).is_none());
}

#[tokio::test]
async fn a_queued_writer_whose_contender_vanished_queues_anew() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b, c) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b, true)).await.unwrap();
    // An operator deletes the waiting contender.
    assert!(seq.driver.remove(&seq.driver.name(&keys, &b, Role::Writer)));
    let again = AcquireRequest {
        queued: true,
        ..request(&keys, &c, true)
    };
    assert!(matches!(
        seq.acquire_once(&again).await.unwrap(),
        Attempt::Held { .. }
    ));
    let mine = seq.contenders.waiting(keys.lock()).expect("queued anew");
    assert_eq!(mine.name, seq.driver.name(&keys, &c, Role::Writer));
    assert_eq!(seq.driver.names().len(), 2);
}

#[tokio::test]
async fn readers_share_and_one_behind_a_writer_leaves_the_queue() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (w, r1, r2) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &w, true)).await.unwrap();
    let blocked = seq.acquire_shared_once(&request(&keys, &r1, false)).await;
    assert!(matches!(blocked.unwrap(), Attempt::Held { .. }));
    assert_eq!(
        seq.driver.names().len(),
        1,
        "a reader never waits in the queue"
    );
    assert!(seq.contenders.held([&r1])[0].is_none());
    seq.release_once(&keys, &w, Role::Writer).await.unwrap();
    for r in [&r1, &r2] {
        let got = seq.acquire_shared_once(&request(&keys, r, false)).await;
        assert_eq!(got.unwrap(), Attempt::granted(1));
    }
    assert!(seq.release_once(&keys, &r1, Role::Reader).await.unwrap());
    assert_eq!(
        seq.driver.names(),
        [seq.driver.name(&keys, &r2, Role::Reader)]
    );
}

#[tokio::test]
async fn a_release_of_an_unknown_attempt_cleans_up_after_it_and_a_withdrawal_deletes_later() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b, lost) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    // A reader's create applied, its answer lost: the release of its token cleans up after it.
    seq.driver.fail("create", 0);
    let unanswered = seq.acquire_shared_once(&request(&keys, &lost, false)).await;
    assert!(unanswered.unwrap_err().is_unavailable());
    assert_eq!(seq.driver.names().len(), 1);
    assert!(!seq.release_once(&keys, &lost, Role::Reader).await.unwrap());
    assert_eq!(
        *seq.driver.abandoned.lock().unwrap(),
        [seq.driver.name(&keys, &lost, Role::Reader)]
    );
    assert!(seq.driver.names().is_empty());
    // Once: a second give-back of the same token has nothing left to clean up after.
    assert!(!seq.release_once(&keys, &lost, Role::Reader).await.unwrap());
    assert_eq!(seq.driver.abandoned.lock().unwrap().len(), 1);
    seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b, true)).await.unwrap();
    seq.withdraw_waiting(&keys);
    let b_name = seq.driver.name(&keys, &b, Role::Writer);
    assert_eq!(*seq.driver.later.lock().unwrap(), [b_name]);
    assert_eq!(seq.driver.names().len(), 1);
}

/// Issue 45: a waiting writer's contender, made by an attempt whose look right after its create
/// failed (here: the wait queued anew after its contender vanished, so the next attempt looks
/// at the new one), is the wait's turn. The give-back of the failed attempt's token must leave
/// it: the next attempt is granted on it. (Deleted by that give-back, the lock was held with no
/// contender in the queue, and another process was granted too.)
#[tokio::test]
async fn a_writers_turn_made_by_a_failed_attempt_is_the_waits_not_the_give_backs() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (h, b1, b2, b3) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &h, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    // An operator deletes the waiting contender; the next attempt queues anew, and the look
    // after its create fails (the look at the vanished one passes).
    assert!(seq
        .driver
        .remove(&seq.driver.name(&keys, &b1, Role::Writer)));
    seq.driver.fail("look", 1);
    let queued = |token| AcquireRequest {
        queued: true,
        ..request(&keys, token, true)
    };
    let failed = seq.acquire_once(&queued(&b2)).await.unwrap_err();
    assert!(failed.is_unavailable(), "{failed}");
    let turn = seq.driver.name(&keys, &b2, Role::Writer);
    assert_eq!(seq.contenders.waiting(keys.lock()).unwrap().name, turn);
    // The failed attempt's give-back: its create was answered, so nothing of it is its own.
    assert!(!seq.release_once(&keys, &b2, Role::Writer).await.unwrap());
    assert!(
        seq.driver.names().contains(&turn),
        "the give-back took the turn"
    );
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
    // The holder goes; the wait's next attempt is granted on its turn, which stays.
    seq.release_once(&keys, &h, Role::Writer).await.unwrap();
    let granted = seq.acquire_once(&queued(&b3)).await.unwrap();
    assert!(matches!(granted, Attempt::Granted { .. }), "{granted:?}");
    assert_eq!(seq.driver.names(), std::slice::from_ref(&turn));
    assert_eq!(seq.contenders.held([&b3])[0].as_ref().unwrap().name, turn);
}

/// Issue 45, the same with the lease check failing on the attempt whose create would hold (an
/// etcd writer whose keep-alive was not acknowledged in time): the contender stays the wait's
/// turn, and the failed attempt's give-back leaves it.
#[tokio::test]
async fn a_writers_turn_whose_grant_could_not_be_vouched_for_stays_the_waits() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (h, b1, b2, b3) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &h, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    assert!(seq
        .driver
        .remove(&seq.driver.name(&keys, &b1, Role::Writer)));
    seq.release_once(&keys, &h, Role::Writer).await.unwrap();
    // The look at the vanished one's vouch passes; the new one's, which would hold, fails.
    seq.driver.fail("vouch", 1);
    let queued = |token| AcquireRequest {
        queued: true,
        ..request(&keys, token, true)
    };
    let failed = seq.acquire_once(&queued(&b2)).await.unwrap_err();
    assert!(failed.is_unavailable(), "{failed}");
    assert!(!seq.release_once(&keys, &b2, Role::Writer).await.unwrap());
    let turn = seq.driver.name(&keys, &b2, Role::Writer);
    assert!(
        seq.driver.names().contains(&turn),
        "the give-back took the turn"
    );
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
    let granted = seq.acquire_once(&queued(&b3)).await.unwrap();
    assert!(matches!(granted, Attempt::Granted { .. }), "{granted:?}");
    assert_eq!(seq.driver.names(), [turn]);
}

/// Issue 45: a writer's create that was applied but whose answer was lost is known nowhere
/// here; the give-back of its token is the one clean-up after it, by its name.
#[tokio::test]
async fn a_writers_create_whose_answer_was_lost_is_cleaned_up_by_its_give_back() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    seq.driver.fail("create", 0);
    let failed = seq
        .acquire_once(&request(&keys, &a, true))
        .await
        .unwrap_err();
    assert!(failed.is_unavailable(), "{failed}");
    assert!(seq.contenders.waiting(keys.lock()).is_none());
    assert_eq!(seq.driver.names().len(), 1, "applied all the same");
    assert!(!seq.release_once(&keys, &a, Role::Writer).await.unwrap());
    let name = seq.driver.name(&keys, &a, Role::Writer);
    assert_eq!(*seq.driver.abandoned.lock().unwrap(), [name]);
    assert!(seq.driver.names().is_empty());
    let next = seq.acquire_once(&request(&keys, &b, true)).await.unwrap();
    assert!(matches!(next, Attempt::Granted { .. }));
}

/// Issue 45, the same for a writer whose session changed while it waited: its next attempt
/// replaces the old session's contender with one in the new session, whose look fails. That
/// contender is the wait's turn, and the failed attempt's give-back leaves it.
#[tokio::test]
async fn a_writers_turn_made_in_a_new_session_by_a_failed_attempt_stays_the_waits() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (h, b1, b2, b3) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &h, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    let old = seq.driver.name(&keys, &b1, Role::Writer);
    seq.driver.session.store(1, Ordering::Relaxed);
    seq.driver.fail("look", 0);
    let queued = |token| AcquireRequest {
        queued: true,
        ..request(&keys, token, true)
    };
    let failed = seq.acquire_once(&queued(&b2)).await.unwrap_err();
    assert!(failed.is_unavailable(), "{failed}");
    assert_eq!(*seq.driver.later.lock().unwrap(), [old], "the old one goes");
    let turn = seq.driver.name(&keys, &b2, Role::Writer);
    assert!(!seq.release_once(&keys, &b2, Role::Writer).await.unwrap());
    assert!(
        seq.driver.names().contains(&turn),
        "the give-back took the turn"
    );
    seq.release_once(&keys, &h, Role::Writer).await.unwrap();
    let granted = seq.acquire_once(&queued(&b3)).await.unwrap();
    assert!(matches!(granted, Attempt::Granted { .. }), "{granted:?}");
    assert_eq!(seq.driver.names(), std::slice::from_ref(&turn));
}

/// Risk of issue 45: a waiter whose future is no longer polled (held, never dropped) kept its
/// contender in the queue for its session's life. Now no attempt of its wait looking at it for
/// `MAX_INTEREST` withdraws it (within one check more), and the wait, polled again, queues anew.
#[tokio::test(start_paused = true)]
async fn a_waiting_contender_no_attempt_looks_at_lapses_and_its_wait_queues_anew() {
    use super::interest::{LAPSE_CHECK, MAX_INTEREST};
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (h, b1, b2) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &h, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    let turn = seq.driver.name(&keys, &b1, Role::Writer);
    // Attempts keep looking at it: it stays.
    for _ in 0..3 {
        tokio::time::sleep(MAX_INTEREST - LAPSE_CHECK).await;
        let token = OwnerToken::generate();
        let again = AcquireRequest {
            queued: true,
            ..request(&keys, &token, true)
        };
        assert!(matches!(
            seq.acquire_once(&again).await.unwrap(),
            Attempt::Held { .. }
        ));
        assert_eq!(seq.contenders.waiting(keys.lock()).unwrap().name, turn);
    }
    // Then none does.
    tokio::time::sleep(MAX_INTEREST - LAPSE_CHECK).await;
    assert!(seq.contenders.waiting(keys.lock()).is_some(), "too early");
    tokio::time::sleep(LAPSE_CHECK * 2).await;
    assert!(
        seq.contenders.waiting(keys.lock()).is_none(),
        "never lapsed"
    );
    assert_eq!(
        *seq.driver.later.lock().unwrap(),
        std::slice::from_ref(&turn)
    );
    assert!(!seq.driver.names().contains(&turn));
    // Polled again, the wait queues anew, behind whoever came meanwhile.
    let again = AcquireRequest {
        queued: true,
        ..request(&keys, &b2, true)
    };
    assert!(matches!(
        seq.acquire_once(&again).await.unwrap(),
        Attempt::Held { .. }
    ));
    let anew = seq.driver.name(&keys, &b2, Role::Writer);
    assert_eq!(seq.contenders.waiting(keys.lock()).unwrap().name, anew);
}

/// An attempt in progress keeps its wait's contender from lapsing for as long as a polled
/// attempt can run; one that was not polled for longer lapses all the same, and when it comes
/// back with the contender first in line, it is not granted on it (the contender is being
/// deleted): it reports the lock taken, and the next attempt queues anew.
#[tokio::test]
async fn an_attempt_that_stopped_midway_lets_its_turn_lapse_and_is_never_granted_on_it() {
    let contenders: Contenders<()> = Contenders::default();
    let (interest, patience) = (Duration::from_secs(2), Duration::from_secs(10));
    let mine = Contender {
        name: "q/w-1".into(),
        order: 1,
        session: 0,
        via: (),
    };
    let start = Instant::now();
    contenders.wait("q", mine.clone());
    let looking = contenders.attempt("q");
    let later = |secs| start + Duration::from_secs(secs);
    assert!(contenders.lapsed(later(11), interest, patience).is_empty());
    let gone = contenders.lapsed(later(13), interest, patience);
    assert_eq!(gone.len(), 1);
    // The attempt comes back, finds its contender first, and is refused the grant.
    let token = OwnerToken::generate();
    assert!(contenders.hold("q", &token, mine.clone()).is_err());
    assert!(contenders.held([&token])[0].is_none());
    drop(looking);
    // An attempt that ended counts as looking at its contender from its end.
    contenders.wait("q", mine.clone());
    drop(contenders.attempt("q"));
    let ended = Instant::now();
    assert!(contenders
        .lapsed(ended + Duration::from_millis(1900), interest, patience)
        .is_empty());
    assert_eq!(
        contenders
            .lapsed(ended + interest, interest, patience)
            .len(),
        1
    );
}

/// A release whose delete failed, or that its caller stopped waiting for before the answer
/// (here: before it was even sent), has its contender deleted in the background: taken out
/// of the held ones, nothing else would (a later give-back of the token finds nothing held,
/// and its create was answered). Before issue 45 that later give-back deleted it by its name.
#[tokio::test]
async fn a_release_that_failed_or_was_dropped_deletes_its_contender_later() {
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    seq.driver.fail("delete", 0);
    let failed = seq.release_once(&keys, &a, Role::Writer).await.unwrap_err();
    assert!(failed.is_unavailable(), "{failed}");
    let name_a = seq.driver.name(&keys, &a, Role::Writer);
    assert_eq!(
        *seq.driver.later.lock().unwrap(),
        std::slice::from_ref(&name_a)
    );
    // Dropped after its first poll.
    seq.acquire_once(&request(&keys, &b, true)).await.unwrap();
    let mut release = Box::pin(seq.release_once(&keys, &b, Role::Writer));
    let answered =
        std::future::poll_fn(|cx| std::task::Poll::Ready(release.as_mut().poll(cx).is_ready()))
            .await;
    assert!(!answered, "the release was answered at its first poll");
    drop(release);
    let name_b = seq.driver.name(&keys, &b, Role::Writer);
    assert_eq!(*seq.driver.later.lock().unwrap(), [name_a, name_b]);
    assert!(seq.driver.names().is_empty());
    // The give-back that follows finds nothing of the token's, and deletes nothing.
    assert!(!seq.release_once(&keys, &b, Role::Writer).await.unwrap());
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
}

/// An attempt that stopped being polled in the middle (here: its look takes longer than any
/// polled attempt runs) lets its wait's contender lapse; when it comes back and finds that
/// contender first, it is not granted on it (it is being deleted): it reports the lock taken,
/// and the wait's next attempt queues anew.
#[tokio::test(start_paused = true)]
async fn an_attempt_back_after_its_turn_lapsed_is_not_granted_on_it() {
    use super::interest::MAX_INTEREST;
    let seq = recipe();
    let keys = LockKeys::new("t", "k");
    let (h, b1, b2, b3) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &h, true)).await.unwrap();
    seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    let turn = seq.driver.name(&keys, &b1, Role::Writer);
    seq.release_once(&keys, &h, Role::Writer).await.unwrap();
    *seq.driver.slow_look.lock().unwrap() = Some(MAX_INTEREST + PATIENCE * 2);
    // The lapse's delete is still on its way when the attempt looks: its turn is first.
    seq.driver.defer_later.store(true, Ordering::Relaxed);
    let queued = |token| AcquireRequest {
        queued: true,
        ..request(&keys, token, true)
    };
    let back = seq.acquire_once(&queued(&b2)).await.unwrap();
    assert!(matches!(back, Attempt::Held { .. }), "{back:?}");
    assert!(seq.contenders.held([&b2])[0].is_none());
    assert!(seq.driver.later.lock().unwrap().contains(&turn));
    seq.driver.flush_later();
    seq.driver.defer_later.store(false, Ordering::Relaxed);
    assert!(
        !seq.driver.names().contains(&turn),
        "the lapsed turn is deleted"
    );
    let anew = seq.acquire_once(&queued(&b3)).await.unwrap();
    assert!(matches!(anew, Attempt::Granted { .. }), "{anew:?}");
    let held = seq.contenders.held([&b3])[0].clone().unwrap();
    assert_ne!(held.name, turn);
}
