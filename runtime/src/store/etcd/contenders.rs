//! What this process knows of its keys: waiting, held, and in flight, so that the orphan
//! sweep never takes a live one.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::store::token::OwnerToken;

/// One key of this process: a contender's or a holder's.
#[derive(Clone)]
pub(super) struct Contender {
    pub(super) key: String,
    pub(super) revision: i64,
    /// The session (lease) it is attached to.
    pub(super) session: u64,
    /// The etcd lease of that session.
    pub(super) lease: i64,
}

#[derive(Default)]
pub(super) struct Contenders {
    /// The key of the contender at the front of a lock's local queue, by lock key.
    pub(super) waiting: HashMap<String, Contender>,
    /// The keys of held leases, by owner token.
    pub(super) held: HashMap<OwnerToken, Contender>,
    /// The keys of attempts in flight ([`InFlight`]): put, or about to be, and not recorded
    /// above yet. The orphan sweep leaves them alone.
    pub(super) in_flight: HashSet<String>,
    /// The session whose lease is being swept for orphans, if any.
    pub(super) swept: Option<u64>,
}

impl Contenders {
    /// Whether an attempt in flight, a waiter or a holder of this process knows `key`.
    pub(super) fn knows(&self, key: &str) -> bool {
        self.in_flight.contains(key)
            || self.waiting.values().any(|c| c.key == key)
            || self.held.values().any(|c| c.key == key)
    }
}

/// The key of one attempt, known to the orphan sweep from before its put is sent until the
/// attempt ends (by then the key is recorded as waiting or held, or deleted, or the attempt
/// was abandoned and the key is an orphan if it lands).
pub(super) struct InFlight {
    contenders: Arc<Mutex<Contenders>>,
    key: String,
}

impl InFlight {
    pub(super) fn new(contenders: &Arc<Mutex<Contenders>>, key: String) -> Self {
        contenders.lock().unwrap().in_flight.insert(key.clone());
        InFlight {
            contenders: contenders.clone(),
            key,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.contenders.lock().unwrap().in_flight.remove(&self.key);
    }
}

/// Takes the key of `token`'s held lease out of the held ones for its release, and keeps it
/// known to the orphan sweep (as in flight) until the returned guard drops, once the delete
/// is answered: forgotten and not yet deleted, the key would look like an orphan to a sweep
/// listing the lease meanwhile, whose delete could overtake the release's and make it
/// report `Lost`. One step under the lock, so that no sweep sees the key unknown between the
/// two.
pub(super) fn take_for_release(
    contenders: &Arc<Mutex<Contenders>>,
    token: &OwnerToken,
) -> Option<(Contender, InFlight)> {
    let mut known = contenders.lock().unwrap();
    let mine = known.held.remove(token)?;
    known.in_flight.insert(mine.key.clone());
    let releasing = InFlight {
        contenders: contenders.clone(),
        key: mine.key.clone(),
    };
    Some((mine, releasing))
}
