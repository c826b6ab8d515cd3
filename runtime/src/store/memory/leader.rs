//! Leader records: an election's recorded leader counts only while its owner token holds the
//! election's lock.

use tokio::time::Instant;

use super::MemoryStore;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{LeaderParts, LeaderRecord, StoreFuture};

pub(super) struct Recorded {
    pub(super) owner: OwnerToken,
    pub(super) leader: LeaderRecord,
}

impl MemoryStore {
    pub(crate) fn publish_leader(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> bool {
        let mut state = self.state.lock().unwrap();
        if !state.owns(keys.lock(), token, Instant::now()) {
            return false;
        }
        if let Some(r) = state.leaders.get(keys.lock()) {
            if r.leader.term > leader.term {
                return false;
            }
        }
        let recorded = Recorded {
            owner: token.clone(),
            leader: leader.clone(),
        };
        state.leaders.insert(keys.lock().to_owned(), recorded);
        state.wake(keys.wake());
        true
    }

    pub(crate) fn clear_leader(&self, keys: &LockKeys, term: u64) {
        let mut state = self.state.lock().unwrap();
        if state
            .leaders
            .get(keys.lock())
            .is_some_and(|r| r.leader.term == term)
        {
            state.leaders.remove(keys.lock());
            state.wake(keys.wake());
        }
    }

    pub(crate) fn read_leader(&self, keys: &LockKeys) -> Option<LeaderRecord> {
        let state = self.state.lock().unwrap();
        let r = state.leaders.get(keys.lock())?;
        state
            .owns(keys.lock(), &r.owner, Instant::now())
            .then(|| r.leader.clone())
    }
}

/// Answered at once; the record's name is not used (the record lives with the lock).
impl LeaderParts for MemoryStore {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(
            self.publish_leader(keys, token, leader)
        )))
    }

    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        self.clear_leader(keys, term);
        Box::pin(std::future::ready(Ok(())))
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(std::future::ready(Ok(self.read_leader(keys))))
    }
}
