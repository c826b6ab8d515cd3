//! What this process knows of its contenders: the one waiting at the front of each lock's
//! local queue, the held ones, and those in flight, so that nothing of ours goes unknown.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::token::OwnerToken;

/// One contender of this process: a waiter's or a holder's.
#[derive(Clone, Debug)]
pub(crate) struct Contender<V> {
    /// Its name in the queue: the znode's path, the etcd key.
    pub(crate) name: String,
    /// When the server created it, in the order of every write (ZooKeeper's `czxid`, etcd's
    /// create revision): its place in the queue, and the base of its fences.
    pub(crate) order: i64,
    /// The session it was created in.
    pub(crate) session: u64,
    /// How it is reached again (see [`Driver::Via`](super::Driver::Via)).
    pub(crate) via: V,
}

/// What became of the create of an attempt in flight, as far as this process knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Create {
    /// Not sent (yet): the attempt created nothing.
    Unsent,
    /// Sent, and not answered (yet): it may have been applied, now or later.
    Sent,
    /// Answered: the contender it made is known here (waiting or held), or was deleted.
    Answered,
}

/// A waiter's contender (its turn), and when an attempt of its wait last looked at it.
struct Waiting<V> {
    mine: Contender<V>,
    looked: Instant,
}

/// The attempts in progress of one wait (there is one at a time; counted all the same), and
/// since when the oldest of them runs.
struct Attempts {
    running: u32,
    since: Instant,
}

struct Book<V> {
    /// The waiters' contenders by seat: the contender at the front of a lock's local queue by
    /// lock key, a permits waiter's by its seat's name.
    waiting: HashMap<String, Waiting<V>>,
    /// The attempts in progress, by the seat they look at (see [`Looking`]).
    attempts: HashMap<String, Attempts>,
    /// The contenders of held leases, by owner token.
    held: HashMap<OwnerToken, Contender<V>>,
    /// The names of attempts in flight ([`InFlight`]): created, or about to be, and not
    /// recorded above yet, with what became of their create; and of held ones under release
    /// until their delete is answered.
    in_flight: HashMap<String, Create>,
    /// The names of attempts that ended with their create sent and never answered: what it
    /// made, if the server applied it, is known nowhere here. The give-back of the attempt's
    /// token cleans up after it by its name ([`Driver::abandoned`](super::Driver::abandoned)),
    /// and nothing else does.
    unanswered: HashSet<String>,
}

impl<V> Default for Book<V> {
    fn default() -> Self {
        Book {
            waiting: HashMap::new(),
            attempts: HashMap::new(),
            held: HashMap::new(),
            in_flight: HashMap::new(),
            unanswered: HashSet::new(),
        }
    }
}

/// The contenders of one store, shared by the recipe and its driver (which forgets a
/// session's contenders when it ends, and, on etcd, sweeps what it does not know).
pub(crate) struct Contenders<V>(Arc<Mutex<Book<V>>>);

impl<V> Clone for Contenders<V> {
    fn clone(&self) -> Self {
        Contenders(self.0.clone())
    }
}

impl<V> Default for Contenders<V> {
    fn default() -> Self {
        Contenders(Arc::default())
    }
}

/// [`Contenders`] that do not keep the store alive: for its background tasks.
pub(crate) struct WeakContenders<V>(Weak<Mutex<Book<V>>>);

impl<V> WeakContenders<V> {
    pub(crate) fn upgrade(&self) -> Option<Contenders<V>> {
        self.0.upgrade().map(Contenders)
    }
}

impl<V: Clone> Contenders<V> {
    fn book(&self) -> std::sync::MutexGuard<'_, Book<V>> {
        self.0.lock().unwrap()
    }

    pub(crate) fn downgrade(&self) -> WeakContenders<V> {
        WeakContenders(Arc::downgrade(&self.0))
    }

    /// The contender waiting at the front of `lock`'s local queue (or in a permits waiter's
    /// seat).
    pub(crate) fn waiting(&self, lock: &str) -> Option<Contender<V>> {
        self.book().waiting.get(lock).map(|w| w.mine.clone())
    }

    /// Records `mine` as the one waiting at the front of `lock`'s local queue (or in a permits
    /// waiter's seat), looked at now.
    pub(crate) fn wait(&self, lock: &str, mine: Contender<V>) {
        let looked = Instant::now();
        self.book()
            .waiting
            .insert(lock.to_owned(), Waiting { mine, looked });
    }

    /// Forgets the contender waiting for `lock`, for the caller to delete.
    pub(crate) fn forget_waiting(&self, lock: &str) -> Option<Contender<V>> {
        self.book().waiting.remove(lock).map(|w| w.mine)
    }

    /// The waiting contender of `lock` was granted: it is `token`'s held lease now. Refused,
    /// and `mine` handed back for deletion, when it is not the one waiting there any more: its
    /// wait's interest lapsed while the attempt was not polled (see [`Self::lapsed`]).
    pub(crate) fn hold(
        &self,
        lock: &str,
        token: &OwnerToken,
        mine: Contender<V>,
    ) -> Result<(), Contender<V>> {
        let mut book = self.book();
        if book
            .waiting
            .get(lock)
            .is_none_or(|w| w.mine.name != mine.name)
        {
            return Err(mine);
        }
        book.waiting.remove(lock);
        book.held.insert(token.clone(), mine);
        Ok(())
    }

    /// An attempt of the wait seated at `seat` (a lock key, a permits waiter's seat) begins:
    /// its contender counts as looked at until the returned guard drops, and then from that
    /// moment (see [`Self::lapsed`]).
    pub(crate) fn attempt(&self, seat: &str) -> Looking<V> {
        let now = Instant::now();
        let mut book = self.book();
        let attempts = book.attempts.entry(seat.to_owned()).or_insert(Attempts {
            running: 0,
            since: now,
        });
        if attempts.running == 0 {
            attempts.since = now;
        }
        attempts.running += 1;
        if let Some(w) = book.waiting.get_mut(seat) {
            w.looked = now;
        }
        Looking {
            contenders: self.clone(),
            seat: seat.to_owned(),
        }
    }

    /// Forgets, and returns for deletion, every waiting contender whose wait lost interest at
    /// `now`: none of its attempts ran for `interest`, or the one that runs began longer ago
    /// than `interest + patience` (no attempt that is polled takes `patience`: it stopped being
    /// polled midway). Such a waiter's future is no longer polled (a live process holds it
    /// and does nothing with it): its contender would stand in the queue, first in line in
    /// the end, for as long as the session lives. Polled again, its wait queues anew.
    pub(crate) fn lapsed(
        &self,
        now: Instant,
        interest: Duration,
        patience: Duration,
    ) -> Vec<Contender<V>> {
        let mut book = self.book();
        let Book {
            waiting, attempts, ..
        } = &mut *book;
        let mut gone = Vec::new();
        waiting.retain(|seat, w| {
            let lapsed = match attempts.get(seat) {
                Some(a) if a.running > 0 => {
                    now.saturating_duration_since(a.since) >= interest + patience
                }
                _ => now.saturating_duration_since(w.looked) >= interest,
            };
            if lapsed {
                gone.push(w.mine.clone());
            }
            !lapsed
        });
        gone
    }

    /// Records `mine` as `token`'s held lease (a reader's, which never waits in the queue).
    pub(crate) fn hold_alone(&self, token: &OwnerToken, mine: Contender<V>) {
        self.book().held.insert(token.clone(), mine);
    }

    /// Forgets `token`'s held lease, for the caller to delete.
    pub(crate) fn forget_held(&self, token: &OwnerToken) -> Option<Contender<V>> {
        self.book().held.remove(token)
    }

    /// The first held contender that `which` picks.
    pub(crate) fn find_held(&self, which: impl Fn(&Contender<V>) -> bool) -> Option<Contender<V>> {
        self.book().held.values().find(|c| which(c)).cloned()
    }

    /// The contenders of the held leases of `tokens`, in order.
    pub(crate) fn held<'a>(
        &self,
        tokens: impl IntoIterator<Item = &'a OwnerToken>,
    ) -> Vec<Option<Contender<V>>> {
        let book = self.book();
        tokens
            .into_iter()
            .map(|token| book.held.get(token).cloned())
            .collect()
    }

    /// Keeps the attempt named `name` known until the guard drops (see [`InFlight`]).
    pub(crate) fn in_flight(&self, name: String) -> InFlight<V> {
        self.book().in_flight.insert(name.clone(), Create::Unsent);
        InFlight {
            contenders: self.clone(),
            name,
        }
    }

    /// Takes `token`'s held lease out of the held ones for its release, and keeps it known
    /// (as in flight) until the returned guard drops, once the delete is answered: forgotten
    /// and not yet deleted, it would look like an orphan to etcd's sweep listing the lease
    /// meanwhile, whose delete could overtake the release's and make it report `Lost`. One
    /// step under the lock, so that no sweep sees the contender unknown between the two.
    pub(crate) fn take_for_release(
        &self,
        token: &OwnerToken,
    ) -> Option<(Contender<V>, InFlight<V>)> {
        let mut book = self.book();
        let mine = book.held.remove(token)?;
        book.in_flight.insert(mine.name.clone(), Create::Answered);
        drop(book);
        let releasing = InFlight {
            contenders: self.clone(),
            name: mine.name.clone(),
        };
        Some((mine, releasing))
    }

    /// Whether an attempt in flight, a waiter or a holder of this process knows `name`: what
    /// etcd's orphan sweep leaves alone.
    #[cfg(feature = "etcd")]
    pub(crate) fn knows(&self, name: &str) -> bool {
        let book = self.book();
        book.in_flight.contains_key(name) || stands(&book, name)
    }

    /// Whether `name` is the contender of a waiter (a lock's waiting one, a permits waiter's
    /// seat) or of a holder of this process: what the clean-up after an attempt whose create
    /// went unanswered must never delete, however late it runs.
    pub(crate) fn stands(&self, name: &str) -> bool {
        stands(&self.book(), name)
    }

    /// Whether the attempt named `name` ended with its create sent and never answered, and
    /// forgets it: its give-back is the one clean-up after it.
    pub(crate) fn take_unanswered(&self, name: &str) -> bool {
        self.book().unanswered.remove(name)
    }

    /// Forgets every contender of a session that ended, and returns them.
    pub(crate) fn forget_session(&self, session: u64) -> Vec<Contender<V>> {
        let mut book = self.book();
        let mut gone = Vec::new();
        let mut take = |c: &Contender<V>| {
            let ours = c.session == session;
            if ours {
                gone.push(c.clone());
            }
            !ours
        };
        book.held.retain(|_, c| take(c));
        book.waiting.retain(|_, w| take(&w.mine));
        gone
    }
}

fn stands<V>(book: &Book<V>, name: &str) -> bool {
    book.waiting.values().any(|w| w.mine.name == name) || book.held.values().any(|c| c.name == name)
}

/// One attempt of a wait, looking at its seat's contender until it drops (see
/// [`Contenders::attempt`]).
pub(crate) struct Looking<V: Clone> {
    contenders: Contenders<V>,
    seat: String,
}

impl<V: Clone> Drop for Looking<V> {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut book = self.contenders.book();
        if let Some(a) = book.attempts.get_mut(&self.seat) {
            a.running = a.running.saturating_sub(1);
            if a.running == 0 {
                book.attempts.remove(&self.seat);
            }
        }
        if let Some(w) = book.waiting.get_mut(&self.seat) {
            w.looked = now;
        }
    }
}

/// The name of one attempt's contender, known from before it is created until the attempt
/// ends (by then it is recorded as waiting or held, or deleted, or the attempt ended with its
/// create unanswered and the contender is an orphan if it lands); or of a held one under
/// release.
pub(crate) struct InFlight<V: Clone> {
    contenders: Contenders<V>,
    name: String,
}

impl<V: Clone> InFlight<V> {
    /// The attempt's create is about to be sent: from here on, it may be applied.
    pub(crate) fn sending(&self) {
        self.set(Create::Sent);
    }

    /// The attempt's create was answered: what it made is recorded as a waiter's or a
    /// holder's before anything else runs, and belongs to them, not to this attempt.
    pub(crate) fn answered(&self) {
        self.set(Create::Answered);
    }

    fn set(&self, create: Create) {
        if let Some(now) = self.contenders.book().in_flight.get_mut(&self.name) {
            *now = create;
        }
    }
}

impl<V: Clone> Drop for InFlight<V> {
    fn drop(&mut self) {
        let mut book = self.contenders.book();
        if book.in_flight.remove(&self.name) == Some(Create::Sent) {
            book.unanswered.insert(self.name.clone());
        }
    }
}
