//! Leader records on Redis (one server, Sentinel, Cluster): the elected leader's term and
//! identity in `P:leader:record:{K}`, beside the election's lock, written and read by one
//! script each so that a record counts only while its owner token holds the lock.

use super::conn::ScriptCall;
use super::scripts::{LEADER_CLEAR, LEADER_PUBLISH, LEADER_READ};
use super::RedisStore;
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{LeaderParts, LeaderRecord, StoreFuture};

impl RedisStore {
    /// Records the leader (leader_publish.lua).
    pub(super) async fn publish_leader(
        &self,
        keys: &LockKeys,
        record: &str,
        token: &OwnerToken,
        leader: &LeaderRecord,
    ) -> Result<bool, LockError> {
        let mut inv = ScriptCall::new(&LEADER_PUBLISH);
        inv.key(keys.lock())
            .key(record)
            .arg(token.as_bytes())
            .arg(leader.term)
            .arg(&leader.identity)
            .arg(keys.wake())
            .arg(self.core.conn.publish_command());
        let written: i64 = self.run(inv).await?;
        Ok(written == 1)
    }

    /// Deletes the record of `term` (leader_clear.lua).
    pub(super) async fn clear_leader(
        &self,
        keys: &LockKeys,
        record: &str,
        term: u64,
    ) -> Result<(), LockError> {
        let mut inv = ScriptCall::new(&LEADER_CLEAR);
        inv.key(record)
            .arg(term)
            .arg(keys.wake())
            .arg(self.core.conn.publish_command());
        let _: i64 = self.run(inv).await?;
        Ok(())
    }

    /// The current leader (leader_read.lua).
    pub(super) async fn read_leader(
        &self,
        keys: &LockKeys,
        record: &str,
    ) -> Result<Option<LeaderRecord>, LockError> {
        let mut inv = ScriptCall::new(&LEADER_READ);
        inv.key(keys.lock()).key(record);
        let found: Vec<Option<String>> = self.run(inv).await?;
        match found.as_slice() {
            [] => Ok(None),
            [Some(term), Some(identity)] => match term.parse() {
                Ok(term) => Ok(Some(LeaderRecord {
                    term,
                    identity: identity.clone(),
                })),
                Err(_) => Err(super::scripts::malformed(
                    &self.core.endpoint,
                    "leader_read",
                )),
            },
            _ => Err(super::scripts::malformed(
                &self.core.endpoint,
                "leader_read",
            )),
        }
    }
}

impl LeaderParts for RedisStore {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.publish_leader(keys, record, token, leader))
    }

    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.clear_leader(keys, record, term))
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(self.read_leader(keys, record))
    }
}
