//! Leader records: the elected leader's term and identity in `leasehold_leaders`, beside the
//! election's lock, believed only while its owner token holds that lock on the server's clock
//! (`leasehold_publish_leader` in `schema.sql`, and the read joined with `leasehold_locks`).

use mysql_async::prelude::Queryable;

use super::sql::{CLEAR_LEADER, PUBLISH_LEADER, READ_LEADER};
use super::text::token_text;
use super::MysqlStore;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{LeaderParts, LeaderRecord, StoreFuture};

impl LeaderParts for MysqlStore {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = keys.lock().to_owned();
            let record = record.to_owned();
            let wake = keys.wake().to_owned();
            let owner = token_text(token).to_owned();
            let term = i64::try_from(leader.term).unwrap_or(i64::MAX);
            let identity = leader.identity.clone();
            let row = self
                .call("refused a leader record", |conn| {
                    let params = (
                        key.clone(),
                        record.clone(),
                        owner.clone(),
                        term,
                        identity.clone(),
                        wake.clone(),
                    );
                    Box::pin(conn.exec_first::<(i64,), _, _>(PUBLISH_LEADER, params))
                })
                .await?;
            Ok(row.is_some_and(|(written,)| written == 1))
        })
    }

    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let record = record.to_owned();
            let wake = keys.wake().to_owned();
            let term = i64::try_from(term).unwrap_or(i64::MAX);
            self.call("refused to clear a leader record", |conn| {
                Box::pin(conn.exec_drop(CLEAR_LEADER, (record.clone(), term, wake.clone())))
            })
            .await
        })
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(async move {
            let key = keys.lock().to_owned();
            let record = record.to_owned();
            let row = self
                .call("refused a read of a leader record", |conn| {
                    Box::pin(conn.exec_first::<(i64, Vec<u8>), _, _>(
                        READ_LEADER,
                        (key.clone(), record.clone()),
                    ))
                })
                .await?;
            Ok(row.map(|(term, identity)| LeaderRecord {
                term: term.max(0) as u64,
                identity: String::from_utf8_lossy(&identity).into_owned(),
            }))
        })
    }
}
