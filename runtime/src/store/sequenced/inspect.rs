//! What operators see of a lock's queue, once for both engines: its holders (the first
//! writer, or every reader ahead of the first writer) and the contenders behind them, each
//! with who it is ([`Inspection::who`]).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::time::SystemTime;

use super::{slots_top, Inspection, Role, Who};
use crate::error::LockError;
use crate::inspect::MAX_LISTED_WAITERS;
use crate::store::identity::{contender_holder, contender_waiter, decode, Stamp};
use crate::store::join_all;
use crate::store::keys::LockKeys;
use crate::store::LockState;

/// What an engine read of one contender, for inspection ([`who`]).
pub(crate) struct Seen {
    /// Its data: its token, a leader record, or etcd's permits value.
    pub(crate) data: Vec<u8>,
    /// The session (ZooKeeper) or lease (etcd) it lives on: whose locker's description
    /// tells who it is.
    pub(crate) owner: i64,
    /// When the server created it, where it keeps that (ZooKeeper's `ctime`).
    pub(crate) created: Option<SystemTime>,
    /// Its creation order, the base of its fences.
    pub(crate) order: i64,
}

/// Who each of the contenders `seen` is ([`Inspection::who`]; `None` for one that was gone):
/// what its data says, and the description of the locker its owner serves, read once per
/// owner by `described` (the stored description, `None` when there is none), side by side.
pub(crate) async fn who<F, R>(
    seen: Vec<Option<Seen>>,
    described: F,
) -> Result<Vec<Option<Who>>, LockError>
where
    F: Fn(i64) -> R,
    R: Future<Output = Result<Option<String>, LockError>>,
{
    let owners: BTreeSet<i64> = seen.iter().flatten().map(|s| s.owner).collect();
    let reads = owners.iter().map(|&owner| {
        let read = described(owner);
        async move { (owner, read.await) }
    });
    let mut descriptions = HashMap::new();
    for (owner, read) in join_all(reads).await {
        if let Some(d) = read?.as_deref().and_then(decode) {
            descriptions.insert(owner, d);
        }
    }
    Ok(seen
        .into_iter()
        .map(|seen| {
            let seen = seen?;
            Some(Who {
                stamp: Stamp::of_stored(&seen.data),
                description: descriptions.get(&seen.owner).cloned(),
                created: seen.created,
                order: seen.order,
            })
        })
        .collect())
}

/// The state of the lock `keys` in `driver`'s engine: held while its queue has a contender,
/// with no TTL of its own (the session or lease of its holder's process ends it).
pub(crate) async fn inspect<D: Inspection>(
    driver: &D,
    keys: &LockKeys,
) -> Result<LockState, LockError> {
    let listed = driver.list(keys).await?;
    let Some(first) = listed.first() else {
        return Ok(LockState::default());
    };
    let holders = match first.role {
        Role::Reader => listed.iter().take_while(|q| q.role == Role::Reader).count(),
        _ => 1,
    };
    let waiting = (listed.len() - holders) as u64;
    let shown = &listed[..listed.len().min(holders + MAX_LISTED_WAITERS)];
    let who = driver.who(keys, shown).await?;
    let now = SystemTime::now();
    let mut state = LockState {
        held: true,
        remaining: None,
        waiters: waiting > 0,
        waiting_processes: waiting,
        last_fence: who
            .first()
            .and_then(|w| w.as_ref())
            .map(|w| slots_top(w.order)),
        holders: Vec::new(),
        waiting: Vec::new(),
    };
    // A contender gone since the listing is left out.
    for (i, who) in who.into_iter().enumerate() {
        let Some(w) = who else { continue };
        if i < holders {
            state
                .holders
                .push(contender_holder(w.stamp, w.description, w.created));
        } else {
            state
                .waiting
                .push(contender_waiter(w.stamp, w.description, w.created, now));
        }
    }
    Ok(state)
}
