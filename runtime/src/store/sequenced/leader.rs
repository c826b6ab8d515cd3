//! Leader records on the recipe, once for both engines: an election's leader is recorded in
//! the data of the contender that holds the election's lock, so the record counts exactly
//! as long as that contender holds, and goes with it (a release, a session that ended).

use super::{tag, Head, Records, Role, Sequenced, FENCE_SLOTS};
use crate::error::LockError;
use crate::store::heard;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{LeaderParts, LeaderRecord, StoreFuture};

/// What a leader record starts with: a contender's data is its token until one is written.
const RECORD: &str = "leader\n";

/// A leader record as a contender's data: `leader\n<term>\n<identity>` (an identity has no
/// control characters).
pub(crate) fn encode(leader: &LeaderRecord) -> Vec<u8> {
    format!("{RECORD}{}\n{}", leader.term, leader.identity).into_bytes()
}

/// The leader record in the data of the queue's first contender, if it holds one of that
/// contender's own fences.
pub(crate) fn decode(head: &Head) -> Option<LeaderRecord> {
    let text = std::str::from_utf8(&head.data).ok()?;
    let (term, identity) = text.strip_prefix(RECORD)?.split_once('\n')?;
    let term = term.parse().ok()?;
    is_fence_of(term, head.order).then(|| LeaderRecord {
        term,
        identity: identity.to_owned(),
    })
}

/// Whether `term` is one of the fences of a contender created at `order` (`order × 32 + n`,
/// `n` from 1): every later contender's fences, and so every newer term, are above them.
pub(crate) fn is_fence_of(term: u64, order: i64) -> bool {
    term / FENCE_SLOTS == order.max(0) as u64 && term % FENCE_SLOTS != 0
}

/// The record lives on the holder's contender, not under a key of its own: the `record`
/// name the store boundary passes (Redis's key of the record) is not used.
impl<D: Records> Sequenced<D> {
    /// Written on `token`'s contender, if it holds the election's lock in the current session
    /// and the term is one of its own fences (a newer term can only be a later contender's).
    /// The write replaces the contender's data, which wakes the observers' watches.
    pub(super) async fn publish_leader(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> Result<bool, LockError> {
        let Some(mine) = self.contenders.held([token]).into_iter().flatten().next() else {
            heard::answered_alone();
            return Ok(false);
        };
        // The contender may have been created by an earlier attempt of the same wait
        // (with another tag): it is the election's if it is in the election's queue.
        let name = self.driver.name(keys, token, Role::Writer);
        let queue = name.rfind(tag(token)).map_or("", |at| &name[..at]);
        if queue.is_empty()
            || !mine.name.starts_with(queue)
            || mine.session != *self.epoch.borrow()
            || !is_fence_of(leader.term, mine.order)
        {
            heard::answered_alone();
            return Ok(false);
        }
        self.driver.write(&mine, &encode(leader)).await
    }

    /// Empties the data of this process's contender whose fences `term` is of: only that
    /// contender ever holds a record of `term` (creation orders are unique across the engine,
    /// so its fences name it). A record of another process is never touched.
    pub(super) async fn clear_leader(&self, term: u64) -> Result<(), LockError> {
        match self.contenders.find_held(|c| is_fence_of(term, c.order)) {
            Some(mine) => {
                self.driver.write(&mine, b"").await?;
            }
            None => heard::answered_alone(),
        }
        Ok(())
    }

    /// The record on the queue's first contender: the one that holds the lock.
    pub(super) async fn read_leader(
        &self,
        keys: &LockKeys,
    ) -> Result<Option<LeaderRecord>, LockError> {
        let head = self.driver.head(keys).await?;
        Ok(head.as_ref().and_then(decode))
    }
}

impl<D: Records> LeaderParts for Sequenced<D> {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.publish_leader(keys, token, leader))
    }

    fn leader_clear<'a>(
        &'a self,
        _keys: &'a LockKeys,
        _record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.clear_leader(term))
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        _record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(self.read_leader(keys))
    }
}
