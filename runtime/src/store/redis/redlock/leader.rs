//! Leader records over the nodes. The election's lock is a RedLock lock, so terms (its
//! fences) increase strictly across leaders by the fence round. The record is written on
//! every node by the node's own script (leader_publish.lua: only where the leader's token
//! holds the lock and no newer term is recorded), and counts where a majority agrees:
//! - published when a majority wrote it;
//! - read as the leader only when a majority of nodes report the same record (term and
//!   identity), each while its owner token holds the lock there; otherwise nobody leads
//!   (`None`) when no record could be on a majority even counting every node that did not
//!   answer, or the failures when those nodes could make one (too few answered to tell);
//! - cleared on every node.
//!
//! A node lags or misses a record (down, restarted empty) without harm: two majorities share
//! a node, so two leaders cannot both be reported at once, and a minority's stale record is
//! never a majority. Observers listen on every node's wake channel ([`RedLock::subscribe`]),
//! where each node's script announces its writes.

use super::{no_quorum, RedLock};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{join_all, LeaderParts, LeaderRecord, StoreFuture};

impl RedLock {
    async fn publish_leader(
        &self,
        keys: &LockKeys,
        record: &str,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> Result<bool, LockError> {
        let answers = join_all(
            self.nodes
                .iter()
                .map(|n| n.publish_leader(keys, record, token, leader)),
        )
        .await;
        self.agreed("leader record", answers)
    }

    async fn clear_leader(
        &self,
        keys: &LockKeys,
        record: &str,
        term: u64,
    ) -> Result<(), LockError> {
        let answers = join_all(
            self.nodes
                .iter()
                .map(|n| n.clear_leader(keys, record, term)),
        )
        .await;
        let (mut cleared, mut failures) = (0, Vec::new());
        for answer in answers {
            match answer {
                Ok(()) => cleared += 1,
                Err(e) => failures.push(e),
            }
        }
        if cleared >= self.quorum() {
            Ok(())
        } else {
            Err(no_quorum(
                "clear leader",
                cleared,
                self.nodes.len(),
                failures,
            ))
        }
    }

    async fn read_leader(
        &self,
        keys: &LockKeys,
        record: &str,
    ) -> Result<Option<LeaderRecord>, LockError> {
        let answers = join_all(self.nodes.iter().map(|n| n.read_leader(keys, record))).await;
        let mut seen: Vec<(LeaderRecord, usize)> = Vec::new();
        let (mut answered, mut failures) = (0, Vec::new());
        for answer in answers {
            match answer {
                Ok(found) => {
                    answered += 1;
                    if let Some(found) = found {
                        match seen.iter_mut().find(|(r, _)| *r == found) {
                            Some((_, count)) => *count += 1,
                            None => seen.push((found, 1)),
                        }
                    }
                }
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        let most = seen.iter().map(|&(_, count)| count).max().unwrap_or(0);
        if let Some((leader, _)) = seen.into_iter().find(|&(_, count)| count >= quorum) {
            return Ok(Some(leader));
        }
        // Nobody leads only when no record could reach a majority even with every node that
        // did not answer: a leader on one node that answered and on one that did not (a
        // majority of three) leads all the same, and reading `None` then would be a lie.
        if answered < quorum {
            Err(no_quorum(
                "read leader",
                answered,
                self.nodes.len(),
                failures,
            ))
        } else if most + failures.len() >= quorum {
            Err(no_quorum("read leader", most, self.nodes.len(), failures))
        } else {
            Ok(None)
        }
    }
}

impl LeaderParts for RedLock {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(RedLock::publish_leader(self, keys, record, token, leader))
    }

    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(RedLock::clear_leader(self, keys, record, term))
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(RedLock::read_leader(self, keys, record))
    }
}
